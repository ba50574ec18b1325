package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// fakeScheduler plays the RM's ApplicationMasterService with the response
// id rules of ApplicationMasterService.allocate.
type fakeScheduler struct {
	mu         sync.Mutex
	registered bool
	registers  int
	last       *yarnpb.AllocateResponseProto
	allocates  []*yarnpb.AllocateRequestProto // as received, duplicates too
	users      []string                       // caller of each allocate
	finishes   int
	// finishFalse answers that many finish calls with isUnregistered=false.
	finishFalse int
	// allocateErr, if set, fails the next allocate with it.
	allocateErr error
	// answer, if set, fills each new allocate answer.
	answer func(req *yarnpb.AllocateRequestProto, resp *yarnpb.AllocateResponseProto)
}

// forget drops the registration, as an RM that restarted has.
func (f *fakeScheduler) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = false
}

func (f *fakeScheduler) methods() []ipc.Method {
	return yarnrpc.ApplicationMasterProtocolFuncs{
		RegisterApplicationMaster: func(ctx context.Context, _ *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.registered {
				return nil, yarnerr.InvalidApplicationMasterRequest.Errorf("Application Master is already registered : %s", callerUser(ctx))
			}
			f.registered = true
			f.registers++
			f.last = &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(0)}
			return &yarnpb.RegisterApplicationMasterResponseProto{
				Queue: proto.String("root.default"),
				NmTokensFromPreviousAttempts: []*yarnpb.NMTokenProto{{
					NodeId: &yarnpb.NodeIdProto{Host: proto.String("old-node"), Port: proto.Int32(8041)},
					Token:  testToken(KindNMToken, "nm-old").Proto(),
				}},
			}, nil
		},
		Allocate: func(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.allocates = append(f.allocates, proto.Clone(req).(*yarnpb.AllocateRequestProto))
			f.users = append(f.users, callerUser(ctx))
			if !f.registered {
				return nil, yarnerr.ApplicationMasterNotRegistered.Errorf("AM is not registered for known application attempt")
			}
			if err := f.allocateErr; err != nil {
				f.allocateErr = nil
				return nil, err
			}
			last := f.last.GetResponseId()
			switch {
			case req.GetResponseId()+1 == last:
				return f.last, nil
			case req.GetResponseId() != last:
				return nil, yarnerr.InvalidResponseID("appattempt_1700000000000_0001_000001", last, req.GetResponseId())
			}
			resp := &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(last + 1)}
			if f.answer != nil {
				f.answer(req, resp)
			}
			f.last = resp
			return resp, nil
		},
		FinishApplicationMaster: func(_ context.Context, _ *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.finishes++
			if !f.registered {
				return nil, yarnerr.ApplicationMasterNotRegistered.Errorf("Application Master is trying to unregister before registering")
			}
			if f.finishFalse > 0 {
				f.finishFalse--
				return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(false)}, nil
			}
			return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
		},
	}.Methods()
}

// received returns what the scheduler has seen so far.
func (f *fakeScheduler) received() (reqs []*yarnpb.AllocateRequestProto, users []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.allocates), slices.Clone(f.users)
}

func responseIDs(reqs []*yarnpb.AllocateRequestProto) []int32 {
	var ids []int32
	for _, r := range reqs {
		ids = append(ids, r.GetResponseId())
	}
	return ids
}

// dropFirstAnswer is a connection that loses the answer of the first
// allocate after the server has processed it, as a broken connection does.
type dropFirstAnswer struct {
	caller
	mu      sync.Mutex
	dropped bool
}

func (d *dropFirstAnswer) Call(ctx context.Context, method string, req, resp proto.Message) error {
	err := d.caller.Call(ctx, method, req, resp)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && method == "allocate" && !d.dropped {
		d.dropped = true
		return errors.New("connection reset by peer")
	}
	return err
}

func newTestAMRM(t *testing.T, f *fakeScheduler) *AMRMClient {
	t.Helper()
	addr := ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ApplicationMasterProtocolName, f.methods()...)
	c, err := NewAMRMClient(addr, AMRMConfig{
		Token:          testToken(KindAMRMToken, "appattempt_1700000000000_0001_000001"),
		FinishInterval: 5 * time.Millisecond,
		NewBackOff:     func() backoff.BackOff { return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 3) },
		Logger:         quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ask(priority int32, memory int64, n int32) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ResourceName:        proto.String("*"),
		Capability:          yarnpb.NewResource(memory, 1),
		NumContainers:       proto.Int32(n),
		RelaxLocality:       proto.Bool(true),
		AllocationRequestId: proto.Int64(0),
	}
}

// askTotals maps priority to the total stated in reqs' asks.
func askTotals(reqs ...*yarnpb.AllocateRequestProto) map[int32]int32 {
	m := map[int32]int32{}
	for _, r := range reqs {
		for _, a := range r.GetAsk() {
			m[a.GetPriority().GetPriority()] = a.GetNumContainers()
		}
	}
	return m
}

func releases(r *yarnpb.AllocateRequestProto) []int64 {
	var ids []int64
	for _, id := range r.GetRelease() {
		ids = append(ids, id.GetId())
	}
	return ids
}

func TestAMRMClient(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fakeScheduler, c *AMRMClient)
	}{
		{"allocate before register fails without calling", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			_, err := c.Allocate(testCtx(t), &yarnpb.AllocateRequestProto{})
			if !errors.Is(err, ErrNotRegistered) {
				t.Fatalf("allocate: %v, want ErrNotRegistered", err)
			}
			if reqs, _ := f.received(); len(reqs) != 0 {
				t.Errorf("scheduler got %d allocates", len(reqs))
			}
		}},
		{"first allocate after register sends 0, then the last answer's id", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			mustRegister(t, c)
			for range 3 {
				if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
					t.Fatal(err)
				}
			}
			reqs, users := f.received()
			if got, want := responseIDs(reqs), []int32{0, 1, 2}; !slices.Equal(got, want) {
				t.Errorf("response ids %v, want %v", got, want)
			}
			for _, u := range users {
				if u != "appattempt_1700000000000_0001_000001" {
					t.Errorf("allocate by %q, want the AMRMToken's attempt", u)
				}
			}
			if reqs[0].GetBlacklistRequest() == nil {
				t.Error("allocate without a blacklist request; Java always sends one")
			}
		}},
		{"a resumed client registers no more and takes the RM's response id from its refusal", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			// The attempt registered and heartbeat five times through an
			// earlier client, gone with its process.
			f.mu.Lock()
			f.registered = true
			f.last = &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(5)}
			f.mu.Unlock()
			c.Resume(&yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am-host"), RpcPort: proto.Int32(-1), TrackingUrl: proto.String("")})
			for range 2 {
				if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, 1024, 2)}}); err != nil {
					t.Fatal(err)
				}
			}
			reqs, _ := f.received()
			if got, want := responseIDs(reqs), []int32{0, 5, 6}; !slices.Equal(got, want) {
				t.Errorf("response ids %v, want %v (the refused 0, then the RM's)", got, want)
			}
			if totals := askTotals(reqs[1]); totals[1] != 2 {
				t.Errorf("the retried heartbeat asks %v, want the refused one's 2 at priority 1", totals)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.registers != 0 {
				t.Errorf("%d registers, want none", f.registers)
			}
		}},
		{"a lost answer is asked for again with the same response id", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			dial := c.dial
			c.dial = func(tok *commonpb.TokenProto) (caller, error) {
				rpc, err := dial(tok)
				return &dropFirstAnswer{caller: rpc}, err
			}
			mustRegister(t, c)
			first, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, 1024, 2)}})
			if err != nil {
				t.Fatal(err)
			}
			if first.GetResponseId() != 1 {
				t.Errorf("answer id %d, want the duplicate's 1", first.GetResponseId())
			}
			if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
				t.Fatal(err)
			}
			reqs, _ := f.received()
			if got, want := responseIDs(reqs), []int32{0, 0, 1}; !slices.Equal(got, want) {
				t.Errorf("response ids %v, want %v", got, want)
			}
			if !proto.Equal(reqs[0], reqs[1]) {
				t.Errorf("resent request differs:\n%v\n%v", reqs[0], reqs[1])
			}
		}},
		{"asks the RM did not take go again with the next allocate", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			mustRegister(t, c)
			f.mu.Lock()
			f.allocateErr = yarnerr.InvalidResourceRequest.New("no")
			f.mu.Unlock()
			_, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, 1024, 2)}})
			var ye *yarnerr.Error
			if !errors.Is(err, yarnerr.InvalidResourceRequest) || !errors.As(err, &ye) || ye.Message != "no" {
				t.Fatalf("allocate: %v, want the RM's exception as a *yarnerr.Error", err)
			}
			if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
				t.Fatal(err)
			}
			reqs, _ := f.received()
			if got := askTotals(reqs[1]); got[1] != 2 {
				t.Errorf("second allocate asks %v, want the failed ask again", got)
			}
			if n := len(reqs[2].GetAsk()); n != 0 {
				t.Errorf("third allocate repeats %d acknowledged asks", n)
			}
		}},
		{"re-registers and resends what is outstanding when the RM forgot the attempt", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			f.answer = func(req *yarnpb.AllocateRequestProto, resp *yarnpb.AllocateResponseProto) {
				// Container 3's release completes at once; container 2's never.
				for _, id := range req.GetRelease() {
					if id.GetId() == 3 {
						resp.CompletedContainerStatuses = append(resp.CompletedContainerStatuses, &yarnpb.ContainerStatusProto{
							ContainerId: id, State: yarnpb.ContainerStateProto_C_COMPLETE.Enum(), ExitStatus: proto.Int32(-100),
						})
					}
				}
			}
			mustRegister(t, c)
			steps := []*yarnpb.AllocateRequestProto{
				{Ask: []*yarnpb.ResourceRequestProto{ask(1, 1024, 3), ask(2, 2048, 2)}},
				{Ask: []*yarnpb.ResourceRequestProto{ask(2, 2048, 0)}, Release: []*yarnpb.ContainerIdProto{testContainerID(2), testContainerID(3)},
					BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{BlacklistAdditions: []string{"bad-node"}}},
			}
			for _, s := range steps {
				if _, err := c.Allocate(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			f.forget()
			resp, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{Progress: proto.Float32(0.5)})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetResponseId() != 1 {
				t.Errorf("answer id %d, want 1 after re-registering", resp.GetResponseId())
			}
			f.mu.Lock()
			registers := f.registers
			f.mu.Unlock()
			if registers != 2 {
				t.Errorf("registered %d times, want 2", registers)
			}
			reqs, _ := f.received()
			resent := reqs[len(reqs)-1]
			if resent.GetResponseId() != 0 {
				t.Errorf("resent allocate has response id %d, want 0", resent.GetResponseId())
			}
			if got, want := askTotals(resent), map[int32]int32{1: 3}; len(got) != 1 || got[1] != want[1] {
				t.Errorf("resent asks %v, want %v (the finished ask left out)", got, want)
			}
			if got := releases(resent); !slices.Equal(got, []int64{2}) {
				t.Errorf("resent releases %v, want the one not yet complete [2]", got)
			}
			if got := resent.GetBlacklistRequest().GetBlacklistAdditions(); !slices.Equal(got, []string{"bad-node"}) {
				t.Errorf("resent blacklist %v, want [bad-node]", got)
			}
			if resent.GetProgress() != 0.5 {
				t.Errorf("resent progress %v, want 0.5", resent.GetProgress())
			}
		}},
		{"NMTokens of every answer go into the cache by host:port", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			round := 0
			f.answer = func(_ *yarnpb.AllocateRequestProto, resp *yarnpb.AllocateResponseProto) {
				round++
				node := func(host string, port int32, user string) *yarnpb.NMTokenProto {
					return &yarnpb.NMTokenProto{
						NodeId: &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(port)},
						Token:  testToken(KindNMToken, user).Proto(),
					}
				}
				switch round {
				case 1:
					resp.NmTokens = []*yarnpb.NMTokenProto{node("node-a", 8041, "a1"), node("node-b", 8042, "b1")}
				case 2:
					resp.NmTokens = []*yarnpb.NMTokenProto{node("node-a", 8041, "a2")}
				}
			}
			mustRegister(t, c)
			for range 3 {
				if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{"node-a:8041": "a2", "node-b:8042": "b1", "old-node:8041": "nm-old"}
			for node, user := range want {
				tok, ok := c.NMTokens().Get(node)
				if !ok || string(tok.GetIdentifier()) != user {
					t.Errorf("token of %s = %v, want %s's", node, tok, user)
				}
			}
			if n := c.NMTokens().Len(); n != len(want) {
				t.Errorf("cache holds %d tokens, want %d", n, len(want))
			}
		}},
		{"a renewed AMRMToken authenticates the next connection", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			ctx := testCtx(t)
			renewed := testToken(KindAMRMToken, "appattempt_1700000000000_0001_000001-key2").Proto()
			f.answer = func(req *yarnpb.AllocateRequestProto, resp *yarnpb.AllocateResponseProto) {
				if req.GetResponseId() == 0 {
					resp.AmRmToken = renewed
				}
			}
			mustRegister(t, c)
			for range 2 {
				if _, err := c.Allocate(ctx, &yarnpb.AllocateRequestProto{}); err != nil {
					t.Fatal(err)
				}
			}
			_, users := f.received()
			if want := []string{"appattempt_1700000000000_0001_000001", "appattempt_1700000000000_0001_000001-key2"}; !slices.Equal(users, want) {
				t.Errorf("callers %v, want %v", users, want)
			}
		}},
		{"finish repeats until the RM unregisters", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			f.finishFalse = 2
			mustRegister(t, c)
			if err := c.Finish(testCtx(t), StatusSucceeded, "", ""); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.finishes != 3 {
				t.Errorf("finish called %d times, want 3", f.finishes)
			}
		}},
		{"finish re-registers when the RM forgot the attempt", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			mustRegister(t, c)
			f.forget()
			if err := c.Finish(testCtx(t), StatusFailed, "it broke", ""); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.registers != 2 || f.finishes != 2 {
				t.Errorf("registers %d, finishes %d; want 2 and 2", f.registers, f.finishes)
			}
		}},
		{"finish stops when the context ends", func(t *testing.T, f *fakeScheduler, c *AMRMClient) {
			f.finishFalse = 1 << 30
			mustRegister(t, c)
			ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
			defer cancel()
			if err := c.Finish(ctx, StatusSucceeded, "", ""); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("finish: %v, want the deadline", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeScheduler{}
			tt.run(t, f, newTestAMRM(t, f))
		})
	}
}

func mustRegister(t *testing.T, c *AMRMClient) {
	t.Helper()
	if _, err := c.Register(testCtx(t), "am-host", -1, ""); err != nil {
		t.Fatal(err)
	}
}

func TestNewAMRMClientRefusesOtherTokens(t *testing.T) {
	if _, err := NewAMRMClient("127.0.0.1:1", AMRMConfig{Token: testToken(KindNMToken, "x")}); err == nil {
		t.Error("NewAMRMClient took an NMToken")
	}
}
