package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

const classInvalidContainer = string(yarnerr.InvalidContainer)

// fakeNM plays a NodeManager: it reads the container id from the
// ContainerToken's identifier and refuses the containers in refuse.
type fakeNM struct {
	mu      sync.Mutex
	users   []string
	started []*yarnpb.StartContainerRequestProto
	stopped []int64
	refuse  map[int64]bool
}

func (f *fakeNM) methods() []ipc.Method {
	failure := func(id *yarnpb.ContainerIdProto) *yarnpb.ContainerExceptionMapProto {
		return &yarnpb.ContainerExceptionMapProto{ContainerId: id, Exception: &yarnpb.SerializedExceptionProto{
			ClassName: proto.String(classInvalidContainer),
			Message:   proto.String("container token expired"),
		}}
	}
	return yarnrpc.ContainerManagementProtocolFuncs{
		StartContainers: func(ctx context.Context, req *yarnpb.StartContainersRequestProto) (*yarnpb.StartContainersResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.users = append(f.users, callerUser(ctx))
			resp := &yarnpb.StartContainersResponseProto{ServicesMetaData: []*yarnpb.StringBytesMapProto{
				{Key: proto.String("mapreduce_shuffle"), Value: []byte{0, 0, 0x34, 0xba}},
			}}
			for _, r := range req.GetStartContainerRequest() {
				var ident yarnpb.ContainerTokenIdentifierProto
				if err := proto.Unmarshal(r.GetContainerToken().GetIdentifier(), &ident); err != nil {
					return nil, err
				}
				id := ident.GetContainerId()
				if f.refuse[id.GetId()] {
					resp.FailedRequests = append(resp.FailedRequests, failure(id))
					continue
				}
				f.started = append(f.started, r)
				resp.SucceededRequests = append(resp.SucceededRequests, id)
			}
			return resp, nil
		},
		StopContainers: func(ctx context.Context, req *yarnpb.StopContainersRequestProto) (*yarnpb.StopContainersResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.users = append(f.users, callerUser(ctx))
			resp := &yarnpb.StopContainersResponseProto{}
			for _, id := range req.GetContainerId() {
				if f.refuse[id.GetId()] {
					resp.FailedRequests = append(resp.FailedRequests, failure(id))
					continue
				}
				f.stopped = append(f.stopped, id.GetId())
				resp.SucceededRequests = append(resp.SucceededRequests, id)
			}
			return resp, nil
		},
		GetContainerStatuses: func(ctx context.Context, req *yarnpb.GetContainerStatusesRequestProto) (*yarnpb.GetContainerStatusesResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.users = append(f.users, callerUser(ctx))
			resp := &yarnpb.GetContainerStatusesResponseProto{}
			for _, id := range req.GetContainerId() {
				if f.refuse[id.GetId()] {
					resp.FailedRequests = append(resp.FailedRequests, failure(id))
					continue
				}
				resp.Status = append(resp.Status, &yarnpb.ContainerStatusProto{
					ContainerId: id, State: yarnpb.ContainerStateProto_C_RUNNING.Enum(),
				})
			}
			return resp, nil
		},
	}.Methods()
}

// testNode serves a fake NM and returns its NodeId.
func testNode(t *testing.T, f *fakeNM) *yarnpb.NodeIdProto {
	t.Helper()
	addr := ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ContainerManagementProtocolName, f.methods()...)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(int32(p))}
}

// testContainer is an allocated container on node with a ContainerToken
// naming it.
func testContainer(t *testing.T, seq int64, node *yarnpb.NodeIdProto) *yarnpb.ContainerProto {
	t.Helper()
	id := testContainerID(seq)
	ident, err := proto.Marshal(&yarnpb.ContainerTokenIdentifierProto{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	return &yarnpb.ContainerProto{
		Id:     id,
		NodeId: node,
		ContainerToken: &commonpb.TokenProto{
			Identifier: ident, Password: []byte("container-pw"),
			Kind: proto.String("ContainerToken"), Service: proto.String(NodeAddress(node)),
		},
	}
}

func TestNMClient(t *testing.T) {
	clc := &yarnpb.ContainerLaunchContextProto{Command: []string{"echo hi 1><LOG_DIR>/stdout"}}
	tests := []struct {
		name string
		run  func(t *testing.T, cache *NMTokenCache, nm *NMClient)
	}{
		{"starts a container with its ContainerToken over its node's NMToken", func(t *testing.T, cache *NMTokenCache, nm *NMClient) {
			f := &fakeNM{}
			node := testNode(t, f)
			cache.Set(NodeAddress(node), testToken(KindNMToken, "appattempt_1700000000000_0001_000001").Proto())
			c := testContainer(t, 2, node)
			meta, err := nm.StartContainer(testCtx(t), c, clc)
			if err != nil {
				t.Fatal(err)
			}
			if got := meta["mapreduce_shuffle"]; len(got) != 4 {
				t.Errorf("service metadata %v, want the shuffle port", meta)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.started) != 1 || !proto.Equal(f.started[0].GetContainerToken(), c.GetContainerToken()) ||
				!proto.Equal(f.started[0].GetContainerLaunchContext(), clc) {
				t.Errorf("node started %v", f.started)
			}
			if f.users[0] != "appattempt_1700000000000_0001_000001" {
				t.Errorf("node called by %q, want the NMToken's attempt", f.users[0])
			}
		}},
		{"a refused start is a SerializedError of the node's class", func(t *testing.T, cache *NMTokenCache, nm *NMClient) {
			f := &fakeNM{refuse: map[int64]bool{3: true}}
			node := testNode(t, f)
			cache.Set(NodeAddress(node), testToken(KindNMToken, "attempt").Proto())
			_, err := nm.StartContainer(testCtx(t), testContainer(t, 3, node), clc)
			var se *SerializedError
			if !errors.As(err, &se) || se.ClassName != classInvalidContainer || se.Message != "container token expired" {
				t.Fatalf("start: %v, want the node's InvalidContainerException", err)
			}
			if !errors.Is(err, &SerializedError{ClassName: classInvalidContainer}) {
				t.Error("errors.Is does not match the class")
			}
		}},
		{"a node without an NMToken fails with No NMToken sent for host:port", func(t *testing.T, cache *NMTokenCache, nm *NMClient) {
			f := &fakeNM{}
			node := testNode(t, f)
			_, err := nm.StartContainer(testCtx(t), testContainer(t, 2, node), clc)
			if !errors.Is(err, ErrNoNMToken) {
				t.Fatalf("start: %v, want ErrNoNMToken", err)
			}
			if want := "No NMToken sent for " + NodeAddress(node); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.users) != 0 {
				t.Errorf("node was called %d times", len(f.users))
			}
		}},
		{"stop and status go to the container's node", func(t *testing.T, cache *NMTokenCache, nm *NMClient) {
			f := &fakeNM{refuse: map[int64]bool{9: true}}
			node := testNode(t, f)
			cache.Set(NodeAddress(node), testToken(KindNMToken, "attempt").Proto())
			ctx := testCtx(t)
			if err := nm.StopContainer(ctx, testContainerID(2), node); err != nil {
				t.Fatal(err)
			}
			st, err := nm.GetContainerStatus(ctx, testContainerID(2), node)
			if err != nil {
				t.Fatal(err)
			}
			if st.GetState() != yarnpb.ContainerStateProto_C_RUNNING {
				t.Errorf("status %v", st)
			}
			if err := nm.StopContainer(ctx, testContainerID(9), node); !errors.Is(err, &SerializedError{ClassName: classInvalidContainer}) {
				t.Errorf("stop of a refused container: %v", err)
			}
			if _, err := nm.GetContainerStatus(ctx, testContainerID(9), node); !errors.Is(err, &SerializedError{ClassName: classInvalidContainer}) {
				t.Errorf("status of a refused container: %v", err)
			}
		}},
		{"each node is called with its own NMToken, and a new token makes a new connection", func(t *testing.T, cache *NMTokenCache, nm *NMClient) {
			fa, fb := &fakeNM{}, &fakeNM{}
			a, b := testNode(t, fa), testNode(t, fb)
			cache.Set(NodeAddress(a), testToken(KindNMToken, "token-a").Proto())
			cache.Set(NodeAddress(b), testToken(KindNMToken, "token-b").Proto())
			ctx := testCtx(t)
			for i, node := range []*yarnpb.NodeIdProto{a, b, a} {
				if _, err := nm.StartContainer(ctx, testContainer(t, int64(i+2), node), clc); err != nil {
					t.Fatal(err)
				}
			}
			cache.Set(NodeAddress(a), testToken(KindNMToken, "token-a2").Proto())
			if _, err := nm.StartContainer(ctx, testContainer(t, 5, a), clc); err != nil {
				t.Fatal(err)
			}
			fa.mu.Lock()
			defer fa.mu.Unlock()
			fb.mu.Lock()
			defer fb.mu.Unlock()
			if want := []string{"token-a", "token-a", "token-a2"}; !slices.Equal(fa.users, want) {
				t.Errorf("node a called by %v, want %v", fa.users, want)
			}
			if want := []string{"token-b"}; !slices.Equal(fb.users, want) {
				t.Errorf("node b called by %v, want %v", fb.users, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := NewNMTokenCache()
			nm := NewNMClient(cache, NMConfig{Logger: quiet})
			t.Cleanup(func() { nm.Close() })
			tt.run(t, cache, nm)
		})
	}
}

func TestNodeAddress(t *testing.T) {
	tests := []struct {
		name string
		node *yarnpb.NodeIdProto
		want string
	}{
		{"host and port as Java prints a NodeId", &yarnpb.NodeIdProto{Host: proto.String("node-1.example"), Port: proto.Int32(8041)}, "node-1.example:8041"},
		{"loopback node of the local cluster", &yarnpb.NodeIdProto{Host: proto.String("127.0.1.2"), Port: proto.Int32(8041)}, "127.0.1.2:8041"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeAddress(tt.node); got != tt.want {
				t.Errorf("NodeAddress = %q, want %q", got, tt.want)
			}
		})
	}
}

// scriptedNode answers each startContainers with the next of its answers:
// an error is a call the node did not answer (or refused, when remote).
type scriptedNode struct {
	mu      sync.Mutex
	answers []any // error or *yarnpb.StartContainersResponseProto
	calls   int
}

func (s *scriptedNode) Call(_ context.Context, _ string, _, resp proto.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.answers[min(s.calls, len(s.answers)-1)]
	s.calls++
	if err, ok := a.(error); ok {
		return err
	}
	proto.Merge(resp, a.(proto.Message))
	return nil
}

func (s *scriptedNode) Close() error { return nil }

func TestAStartTheNodeDidNotAnswerIsSentAgainAsNMProxyDoes(t *testing.T) {
	node := &yarnpb.NodeIdProto{Host: proto.String("10.0.0.1"), Port: proto.Int32(8041)}
	c := testContainer(t, 2, node)
	shuffle := []*yarnpb.StringBytesMapProto{{Key: proto.String("mapreduce_shuffle"), Value: []byte{0, 0, 0x34, 0xba}}}
	started := &yarnpb.StartContainersResponseProto{SucceededRequests: []*yarnpb.ContainerIdProto{c.GetId()}, ServicesMetaData: shuffle}
	refused := func(msg string) *yarnpb.StartContainersResponseProto {
		return &yarnpb.StartContainersResponseProto{FailedRequests: []*yarnpb.ContainerExceptionMapProto{{
			ContainerId: c.GetId(), Exception: &yarnpb.SerializedExceptionProto{ClassName: proto.String(string(yarnerr.YarnException)), Message: proto.String(msg)}}}}
	}
	relaunch := refused("Unauthorized request to start container. \n " + yarnerr.RelaunchMessage + containerString(c.GetId()) + ".")
	lost := errors.New("ipc: call startContainers: ipc: read response: EOF")
	tests := []struct {
		name string
		// before is what an earlier start on the node answered, if any.
		before    *yarnpb.StartContainersResponseProto
		answers   []any
		wantCalls int
		wantErr   string
		wantMeta  bool
	}{
		{"an answer lost, then the start", nil, []any{lost, started}, 2, "", true},
		{"an answer lost, then a relaunch refusal: the lost attempt started it", started, []any{lost, relaunch}, 2, "", true},
		{"a relaunch refusal at the first attempt stays a refusal", nil, []any{relaunch}, 1, "relaunch the same container", false},
		{"the node's refusal is not sent again", nil, []any{refused("container token expired")}, 1, "container token expired", false},
		{"a remote exception is not sent again", nil, []any{yarnerr.InvalidContainer.Errorf("bad token"), started}, 1, "bad token", false},
		{"a RetriableException is", nil, []any{yarnerr.Retriable.Errorf("busy"), started}, 2, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := NewNMTokenCache()
			cache.Set(NodeAddress(node), &commonpb.TokenProto{Identifier: []byte("nm"), Password: []byte("pw"), Kind: proto.String("NMToken")})
			nm := NewNMClient(cache, NMConfig{Logger: quiet})
			script := &scriptedNode{}
			nm.dial = func(string, *commonpb.TokenProto) (caller, error) { return script, nil }
			if tt.before != nil {
				script.answers = []any{tt.before}
				if _, err := nm.StartContainer(t.Context(), testContainer(t, 1, node), nil); err != nil {
					t.Fatal(err)
				}
				script.calls = 0
			}
			script.answers = tt.answers
			meta, err := nm.StartContainer(t.Context(), c, nil)
			if script.calls != tt.wantCalls {
				t.Errorf("%d calls, want %d", script.calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("StartContainer: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("StartContainer = %v, want an error with %q", err, tt.wantErr)
			}
			if got := string(meta["mapreduce_shuffle"]); tt.wantMeta != (got == "\x00\x004\xba") {
				t.Errorf("metadata %q, want the node's: %v", meta, tt.wantMeta)
			}
		})
	}
}
