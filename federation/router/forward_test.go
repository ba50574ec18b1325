package router

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// bytesRM is a sub-cluster RM that keeps the encoded requests of the
// calls it gets and answers each with the encoded answer it was given.
type bytesRM struct {
	addr string

	mu     sync.Mutex
	got    map[string][]byte // method: the request's bytes
	users  []string
	answer []byte
}

func startBytesRM(t *testing.T, answer []byte, methods ...string) *bytesRM {
	t.Helper()
	rm := &bytesRM{got: map[string][]byte{}, answer: answer}
	var handlers []ipc.Method
	for _, m := range methods {
		handlers = append(handlers, ipc.HandleRaw(m, func(ctx context.Context, _ *anyRequest, encoded []byte) ([]byte, error) {
			c, _ := ipc.CallerFrom(ctx)
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.got[m], rm.users = encoded, append(rm.users, c.User)
			return rm.answer, nil
		}))
	}
	rm.addr = ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, handlers...)
	return rm
}

// anyRequest reads any request: every field is unknown to it.
type anyRequest = yarnpb.GetClusterMetricsRequestProto

// unknownFirst is m's encoding after a field no YARN message has: a decode
// and re-encode would move it to the end.
func unknownFirst(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("as the client wrote it"))
	enc, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, enc...)
}

// routerOver serves a Router over one sub-cluster, sc1 at addr, home of
// app, and returns a client of it calling as alice.
func routerOver(t *testing.T, addr string, app yarnid.ApplicationID) *ipc.Client {
	t.Helper()
	s := store.NewMemory(nil)
	if err := s.RegisterSubCluster(t.Context(), store.SubClusterInfo{ID: "sc1", ClientRMServiceAddress: addr, AMRMServiceAddress: addr,
		RMAdminServiceAddress: addr, RMWebServiceAddress: addr, State: store.StateNew, LastStartTime: time.UnixMilli(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SubClusterHeartbeat(t.Context(), "sc1", store.StateRunning, "{}"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddApplicationHomeSubCluster(t.Context(), store.ApplicationHome{Application: app.String(), Home: "sc1"}); err != nil {
		t.Fatal(err)
	}
	routerAddr, _ := serveRouter(t, s, routerOptions{})
	c, err := ipc.NewClient(routerAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCallsAboutAnApplicationCrossTheRouterAsEncoded(t *testing.T) {
	app := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 3}
	attempt := yarnid.AttemptID{App: app, ID: 1}
	container := &yarnpb.ContainerIdProto{AppAttemptId: attempt.Proto(), Id: proto.Int64(2)}
	answer := unknownFirst(t, &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
		ApplicationId: app.Proto(), User: proto.String("alice"), Queue: proto.String("root.default"),
	}})
	for _, tt := range []struct {
		method string
		req    proto.Message
	}{
		{"getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: app.Proto()}},
		{"forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: app.Proto(), Diagnostics: proto.String("no longer needed")}},
		{"getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: app.Proto()}},
		{"getApplicationAttemptReport", &yarnpb.GetApplicationAttemptReportRequestProto{ApplicationAttemptId: attempt.Proto()}},
		{"getContainers", &yarnpb.GetContainersRequestProto{ApplicationAttemptId: attempt.Proto()}},
		{"getContainerReport", &yarnpb.GetContainerReportRequestProto{ContainerId: container}},
		{"failApplicationAttempt", &yarnpb.FailApplicationAttemptRequestProto{ApplicationAttemptId: attempt.Proto()}},
		{"signalToContainer", &yarnpb.SignalContainerRequestProto{ContainerId: container, Command: yarnpb.SignalContainerCommandProto_GRACEFUL_SHUTDOWN.Enum()}},
		{"moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: app.Proto(), TargetQueue: proto.String("b")}},
		{"updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: app.Proto(), ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(3)}}},
		{"updateApplicationTimeouts", &yarnpb.UpdateApplicationTimeoutsRequestProto{ApplicationId: app.Proto()}},
	} {
		t.Run(tt.method, func(t *testing.T) {
			rm := startBytesRM(t, answer, tt.method)
			c := routerOver(t, rm.addr, app)
			req := unknownFirst(t, tt.req)
			got, err := c.CallRaw(t.Context(), tt.method, req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, answer) {
				t.Errorf("client got %x, want the RM's answer %x", got, answer)
			}
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if !bytes.Equal(rm.got[tt.method], req) {
				t.Errorf("RM got %x, want the client's request %x", rm.got[tt.method], req)
			}
			if len(rm.users) != 1 || rm.users[0] != "alice" {
				t.Errorf("RM's callers %v, want alice", rm.users)
			}
		})
	}
}

func TestACallAboutNoApplicationIsRefusedAsYARNsRouterRefusesIt(t *testing.T) {
	rm := startBytesRM(t, nil, "getApplicationReport", "forceKillApplication", "getContainerReport")
	c := routerOver(t, rm.addr, yarnid.ApplicationID{ClusterTimestamp: 1, ID: 3})
	for _, tt := range []struct {
		method, what string
		req          proto.Message
	}{
		{"getApplicationReport", "get the application report", &yarnpb.GetApplicationReportRequestProto{}},
		{"forceKillApplication", "kill the application", &yarnpb.KillApplicationRequestProto{Diagnostics: proto.String("x")}},
		{"getContainerReport", "get the container report", &yarnpb.GetContainerReportRequestProto{ContainerId: &yarnpb.ContainerIdProto{Id: proto.Int64(1)}}},
	} {
		t.Run(tt.method, func(t *testing.T) {
			err := c.Call(t.Context(), tt.method, tt.req, &yarnpb.GetApplicationReportResponseProto{})
			want := "Missing request to " + tt.what + " or applicationId information."
			if !errors.Is(err, yarnerr.YarnException) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want a YarnException %q", err, want)
			}
		})
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if len(rm.got) != 0 {
		t.Errorf("the RM got %d calls, want none", len(rm.got))
	}
}

// Request bytes the Router cannot read never reach the RM: the engine
// refuses them as Hadoop's server does, and the Router goes on serving.
func TestARequestTheRouterCannotDecodeIsRefusedBeforeTheRM(t *testing.T) {
	app := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 3}
	rm := startBytesRM(t, []byte{}, "getApplicationReport")
	c := routerOver(t, rm.addr, app)
	for _, garbage := range [][]byte{
		{0x0a, 0x05, 0x08},       // a field longer than the message
		{0x0a, 0x02, 0x10, 0xff}, // an application id with a cut varint
		{0x0f},                   // an invalid wire type
	} {
		_, err := c.CallRaw(t.Context(), "getApplicationReport", garbage)
		var re *ipc.RemoteError
		if !errors.As(err, &re) || re.Code != commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST {
			t.Errorf("%x: error %v, want FATAL_DESERIALIZING_REQUEST", garbage, err)
		}
	}
	rm.mu.Lock()
	if len(rm.got) != 0 {
		t.Errorf("the RM got %d calls, want none", len(rm.got))
	}
	rm.mu.Unlock()
	if err := c.Call(t.Context(), "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: app.Proto()},
		&yarnpb.GetApplicationReportResponseProto{}); err != nil {
		t.Errorf("a good call after them: %v", err)
	}
}
