package amrmproxy

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestRequestsQueuedTogetherFoldAsTheRelayerFoldsThem(t *testing.T) {
	c1, c2 := container(testAttempt, 5).GetId(), container(testAttempt, 6).GetId()
	tests := []struct {
		name        string
		first, then *yarnpb.AllocateRequestProto
		want        *yarnpb.AllocateRequestProto
	}{
		{"a later total of an ask replaces the earlier one, a new ask is added",
			&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(1, 3), askAt(2, 1)}},
			&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(1, 0), askAt(3, 2)}},
			&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(1, 0), askAt(2, 1), askAt(3, 2)}}},
		{"releases add up, each once",
			&yarnpb.AllocateRequestProto{Release: []*yarnpb.ContainerIdProto{c1}},
			&yarnpb.AllocateRequestProto{Release: []*yarnpb.ContainerIdProto{c1, c2}},
			&yarnpb.AllocateRequestProto{Release: []*yarnpb.ContainerIdProto{c1, c2}}},
		{"a blacklist addition cancels a queued removal of the node and the reverse",
			&yarnpb.AllocateRequestProto{BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{BlacklistAdditions: []string{"n1"}, BlacklistRemovals: []string{"n2"}}},
			&yarnpb.AllocateRequestProto{BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{BlacklistAdditions: []string{"n2"}, BlacklistRemovals: []string{"n1"}}},
			&yarnpb.AllocateRequestProto{BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{BlacklistAdditions: []string{"n2"}, BlacklistRemovals: []string{"n1"}}}},
		{"an update of a container replaces the earlier one",
			&yarnpb.AllocateRequestProto{UpdateRequests: []*yarnpb.UpdateContainerRequestProto{{ContainerId: c1, ContainerVersion: proto.Int32(1)}}},
			&yarnpb.AllocateRequestProto{UpdateRequests: []*yarnpb.UpdateContainerRequestProto{{ContainerId: c1, ContainerVersion: proto.Int32(2)}}},
			&yarnpb.AllocateRequestProto{UpdateRequests: []*yarnpb.UpdateContainerRequestProto{{ContainerId: c1, ContainerVersion: proto.Int32(2)}}}},
		{"progress and tracking URL are the latest",
			&yarnpb.AllocateRequestProto{Progress: proto.Float32(0.1), TrackingUrl: proto.String("a")},
			&yarnpb.AllocateRequestProto{Progress: proto.Float32(0.5)},
			&yarnpb.AllocateRequestProto{Progress: proto.Float32(0.5), TrackingUrl: proto.String("a")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := &yarnpb.AllocateRequestProto{}
			foldRequest(got, tt.first)
			foldRequest(got, tt.then)
			if !proto.Equal(got, tt.want) {
				t.Fatalf("folded %v, want %v", got, tt.want)
			}
		})
	}
}

// gatedSend is a send whose first call waits until open is closed; it
// records every request.
type gatedSend struct {
	open     chan struct{}
	inFlight chan struct{}
	mu       sync.Mutex
	sent     []*yarnpb.AllocateRequestProto
}

func (g *gatedSend) send(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	g.mu.Lock()
	g.sent = append(g.sent, proto.Clone(req).(*yarnpb.AllocateRequestProto))
	first := len(g.sent) == 1
	g.mu.Unlock()
	if first {
		close(g.inFlight)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &yarnpb.AllocateResponseProto{AllocatedContainers: []*yarnpb.ContainerProto{container(testAttempt, int64(len(req.GetAsk())))}}, nil
}

func TestAHeartbeaterSendsInOrderAndFoldsWhatQueuedWhileOneWasInFlight(t *testing.T) {
	ctx := testCtx(t)
	g := &gatedSend{open: make(chan struct{}), inFlight: make(chan struct{})}
	s := newSink(time.Now)
	hb := startHeartbeater(ctx, &heartbeater{id: "sc-1", sink: s, log: quiet, send: g.send})
	defer hb.stop()
	hb.enqueue(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(1, 1)}})
	<-g.inFlight
	hb.enqueue(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(2, 4)}})
	mark := hb.enqueue(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{askAt(2, 3), askAt(3, 1)}})
	if hb.answered(mark) {
		t.Fatal("answered before the first send ended")
	}
	close(g.open)
	if err := hb.drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !hb.answered(mark) {
		t.Fatal("drained, yet the last part is not answered")
	}
	g.mu.Lock()
	sent := g.sent
	g.mu.Unlock()
	want := []*yarnpb.AllocateRequestProto{
		{Ask: []*yarnpb.ResourceRequestProto{askAt(1, 1)}},
		{Ask: []*yarnpb.ResourceRequestProto{askAt(2, 3), askAt(3, 1)}},
	}
	if !slices.EqualFunc(sent, want, func(a, b *yarnpb.AllocateRequestProto) bool { return proto.Equal(a, b) }) {
		t.Fatalf("sent %v, want the first part, then the two queued behind it folded into one", sent)
	}
	_, arrived := s.take(time.Minute)
	if got := containerSeqs(arrived["sc-1"][0]); len(arrived["sc-1"]) != 2 || got[0] != 1 {
		t.Fatalf("sink holds %v, want both answers in the order sent", arrived)
	}
}

func TestStoppingAHeartbeaterCancelsTheSendInFlight(t *testing.T) {
	ctx := testCtx(t)
	g := &gatedSend{open: make(chan struct{}), inFlight: make(chan struct{})}
	hb := startHeartbeater(ctx, &heartbeater{id: "sc-1", sink: newSink(time.Now), log: quiet, send: g.send})
	hb.enqueue(&yarnpb.AllocateRequestProto{})
	<-g.inFlight
	// Never opened: stop must not wait on the RM (goleak checks the
	// goroutine is gone).
	hb.stop()
	hb.stop()
}

func TestTheSinkBaseCountsTheLastHeadroomOfTheSubClustersNotTimedOut(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSink(func() time.Time { return now })
	headroom := func(mem int64, nodes int32) *yarnpb.AllocateResponseProto {
		return &yarnpb.AllocateResponseProto{Limit: &yarnpb.ResourceProto{Memory: proto.Int64(mem), VirtualCores: proto.Int32(1)}, NumClusterNodes: proto.Int32(nodes)}
	}
	s.add("sc-1", headroom(100, 1))
	s.add("sc-2", headroom(200, 2))
	now = now.Add(30 * time.Second)
	s.add("sc-1", headroom(300, 3))
	base, arrived := s.take(time.Minute)
	if base.GetLimit().GetMemory() != 500 || base.GetNumClusterNodes() != 5 || len(arrived["sc-1"]) != 2 || len(arrived["sc-2"]) != 1 {
		t.Fatalf("base %v with %v, want the last headroom of each summed and every answer", base, arrived)
	}
	now = now.Add(45 * time.Second)
	base, arrived = s.take(time.Minute)
	if base.GetLimit().GetMemory() != 300 || len(arrived) != 0 {
		t.Fatalf("base %v with %v, want sc-2 timed out and nothing new", base, arrived)
	}
	if got := s.timedOut(time.Minute); !got["sc-2"] || got["sc-1"] {
		t.Fatalf("timed out %v, want sc-2", got)
	}
}

func TestAHomeThatFailsAHeartbeatCostsTheAMThatAnswerNotAnError(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.HomePolicyManager)
	am := registeredAM(t, e.svc, e.proxy)
	e.home.mu.Lock()
	e.home.fail = yarnerr.YarnException.New("the scheduler is busy")
	e.home.mu.Unlock()
	resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}})
	if err != nil {
		t.Fatalf("the home's failure reached the AM: %v", err)
	}
	if len(resp.GetAllocatedContainers()) != 0 {
		t.Fatalf("answer %v, want none of the failed heartbeat's", resp)
	}
	id := resp.GetResponseId()
	heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return seen[2] })
	e.home.mu.Lock()
	defer e.home.mu.Unlock()
	if len(e.home.asks) == 0 || !slices.EqualFunc(e.home.asks[0], []*yarnpb.ResourceRequestProto{askAt(1, 2)}, func(a, b *yarnpb.ResourceRequestProto) bool { return proto.Equal(a, b) }) {
		t.Fatalf("the home took %v, want the failed heartbeat's ask sent again", e.home.asks)
	}
}

func TestTheHomesResponseIDOutOfSyncIsResyncedWithoutTheAM(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.HomePolicyManager)
	am := registeredAM(t, e.svc, e.proxy)
	// As after an AMRMProxy restart: the RM's count is ahead of ours.
	e.home.mu.Lock()
	e.home.lastID = 5
	e.home.mu.Unlock()
	resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}})
	if err != nil {
		t.Fatalf("the home's response id refusal reached the AM: %v", err)
	}
	if got := containerSeqs(resp); len(got) != 1 || resp.GetResponseId() != 1 {
		t.Fatalf("answer %v, want the home's container under the AM's own count", resp)
	}
}

func TestASecondaryStillLaunchingDoesNotHoldTheAMsHeartbeats(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.UniformBroadcastPolicyManager)
	hold := e.holdSecondarySubmissions()
	am := registeredAM(t, e.svc, e.proxy)
	id := int32(0)
	for range 3 {
		resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := containerSeqs(resp); len(got) != 1 || got[0] != 2 {
			t.Fatalf("answer %d's containers %v, want the home's while the secondary launches", id, got)
		}
		id = resp.GetResponseId()
	}
	close(hold)
	heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return seen[1<<40|2] })
}

func TestFinishSendsWhatIsQueuedBeforeItUnregisters(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.UniformBroadcastPolicyManager)
	hold := e.holdSecondarySubmissions()
	am := registeredAM(t, e.svc, e.proxy)
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}}); err != nil {
		t.Fatal(err)
	}
	// The secondary's part waits on its launch; the finish waits on both.
	finished := make(chan error, 1)
	go func() {
		_, err := am.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()})
		finished <- err
	}()
	close(hold)
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	e.secondary.mu.Lock()
	defer e.secondary.mu.Unlock()
	if len(e.secondary.asks) == 0 || len(e.secondary.asks[0]) != 1 || !e.secondary.finished {
		t.Fatalf("the secondary took asks %v and finished %v, want the queued ask sent before the unmanaged AM finished", e.secondary.asks, e.secondary.finished)
	}
	if got := e.svc.Attempts(); len(got) != 0 {
		t.Fatalf("pipelines %v left after the finish", got)
	}
}

func TestASecondarySilentPastTheTimeoutGetsNoNewAsks(t *testing.T) {
	ctx := testCtx(t)
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	e := newFederationWith(t, func(s *FederationSettings) { s.Now, s.SubClusterTimeout = clock.Now, time.Minute }, federation.UniformBroadcastPolicyManager)
	am := registeredAM(t, e.svc, e.proxy)
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}}); err != nil {
		t.Fatal(err)
	}
	id := int32(1)
	heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return seen[1<<40|2] })
	// The secondary falls silent: once it holds back an answer, none sent
	// before can still arrive and count as heard after the clock moves.
	held, release := e.secondary.holdAnswers(t)
	resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)})
	if err != nil {
		t.Fatal(err)
	}
	id = resp.GetResponseId()
	<-held
	// Nothing heard of it for longer than the timeout: the next ask goes
	// to the home alone, though the secondary still heartbeats.
	clock.Step(2 * time.Minute)
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Ask: []*yarnpb.ResourceRequestProto{askAt(2, 1)}}); err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := am.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
		t.Fatal(err)
	}
	asked := func(f *fakeRM, priority int32) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, asks := range f.asks {
			for _, a := range asks {
				if a.GetPriority().GetPriority() == priority {
					return true
				}
			}
		}
		return false
	}
	if !asked(e.home, 2) || asked(&e.secondary.fakeRM, 2) || !asked(&e.secondary.fakeRM, 1) {
		t.Fatalf("the second ask reached home %v, secondary %v; want the home alone, the silent secondary left out", asked(e.home, 2), asked(&e.secondary.fakeRM, 2))
	}
}

func TestMergeIntoTakesTheTokenAndCommandFromTheHomeAlone(t *testing.T) {
	tok := rmToken("renewed").Proto()
	resync := yarnpb.AMCommandProto_AM_RESYNC.Enum()
	answer := func() *yarnpb.AllocateResponseProto {
		return &yarnpb.AllocateResponseProto{AmRmToken: tok, AMCommand: resync,
			AllocatedContainers: []*yarnpb.ContainerProto{container(testAttempt, 3)},
			Preempt:             &yarnpb.PreemptionMessageProto{StrictContract: &yarnpb.StrictPreemptionContractProto{Container: []*yarnpb.PreemptionContainerProto{{Id: container(testAttempt, 3).GetId()}}}}}
	}
	tests := []struct {
		name      string
		home      bool
		wantToken bool
	}{
		{"the home's token and command reach the AM", true, true},
		{"a secondary's token and command stay behind", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &yarnpb.AllocateResponseProto{}
			mergeInto(out, answer(), tt.home)
			mergeInto(out, answer(), false)
			if (out.GetAmRmToken() != nil) != tt.wantToken || (out.AMCommand != nil) != tt.wantToken {
				t.Fatalf("token %v, command %v; want them: %v", out.GetAmRmToken(), out.AMCommand, tt.wantToken)
			}
			if len(out.GetAllocatedContainers()) != 2 || len(out.GetPreempt().GetStrictContract().GetContainer()) != 2 {
				t.Fatalf("merged %v, want both answers' containers and preemptions", out)
			}
		})
	}
}
