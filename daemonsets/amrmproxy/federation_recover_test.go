package amrmproxy

import (
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// secondaryContainer is the container the fake secondary gives.
var secondaryContainer = container(testAttempt, 1<<40|2).GetId()

// federatedLife is a first life of the node, over a new state folder,
// for a federated AM under the broadcast policy: the pipeline started,
// the AM registered and its ask broadcast until both sub-clusters'
// containers reached it.
type federatedLife struct {
	e     *federationEnv
	state *FileStore
	svc   *Service
	// local is the AM's token, am its client, id its next response id.
	local token.Token
	am    *yarnrpc.ApplicationMasterProtocolClient
	id    int32
}

func newFederatedLife(t *testing.T) *federatedLife {
	t.Helper()
	l := &federatedLife{e: newSubClusters(t, func(*FederationSettings) {}, federation.UniformBroadcastPolicyManager)}
	var err error
	if l.state, err = NewFileStore(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	var proxy string
	l.svc, proxy, _ = nodeLife(t, l.state, federationPipeline, l.e.stages)
	l.local, l.am = registeredAMWithToken(t, l.svc, proxy)
	if _, err := l.am.Allocate(testCtx(t), &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}}); err != nil {
		t.Fatal(err)
	}
	l.id = 1
	heartbeatUntil(t, l.am, &l.id, func(seen map[int64]bool) bool { return seen[2] && seen[1<<40|2] })
	return l
}

// keptEntries are the stages' entries the store holds for the attempt,
// nil if it holds none.
func keptEntries(t *testing.T, fs *FileStore) map[string][]byte {
	t.Helper()
	kept, err := fs.LoadAttempts()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range kept {
		if st.Attempt == testAttempt.String() {
			return st.Entries
		}
	}
	return nil
}

// keptTokenUser is the user of the secondary's kept token, "" if none.
func keptTokenUser(t *testing.T, fs *FileStore, id string) string {
	t.Helper()
	b, ok := keptEntries(t, fs)[keptSecondary+id]
	if !ok {
		return ""
	}
	tok := &commonpb.TokenProto{}
	if err := proto.Unmarshal(b, tok); err != nil {
		t.Fatal(err)
	}
	return string(tok.GetIdentifier())
}

// hasFinished reports whether the AM unregistered.
func (f *fakeRM) hasFinished() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.finished
}

// wantSecondaryReleased checks that the secondary's container was released
// there alone.
func wantSecondaryReleased(t *testing.T, e *federationEnv) {
	t.Helper()
	_, released := e.secondary.sent()
	_, homeReleased := e.home.sent()
	if len(released) != 1 || !proto.Equal(released[0], secondaryContainer) || len(homeReleased) != 0 {
		t.Errorf("released %v in the secondary and %v at home, want the secondary's container there", released, homeReleased)
	}
}

// endLife stops a life of the node whose AM finished, and checks that
// the attempt's state went with the AM.
func endLife(t *testing.T, svc *Service, fs *FileStore) {
	t.Helper()
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, err := fs.LoadAttempts(); err != nil || len(kept) != 0 {
		t.Errorf("state left once the AM finished: %v, %v", kept, err)
	}
}

// holdRegisters makes the RM hold its registers until release (or the
// test's end).
func (f *fakeRM) holdRegisters(t *testing.T) (release func()) {
	hold := make(chan struct{})
	f.mu.Lock()
	f.holdRegister = hold
	f.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return release
}

// sent is what the RM was sent: each allocate's asks, and the releases.
func (f *fakeRM) sent() (asks [][]*yarnpb.ResourceRequestProto, releases []*yarnpb.ContainerIdProto) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asks), slices.Clone(f.releases)
}

func TestARestartedNodeReattachesAFederatedAMsUnmanagedAMs(t *testing.T) {
	tests := []struct {
		name string
		// reregister is whether the secondary takes the second register
		// (Knit's RM, of an unmanaged AM keeping its containers) or
		// refuses it as already registered, which is as good.
		reregister bool
	}{
		{"the secondary refuses the register as already registered", false},
		{"the secondary takes the register again", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			l := newFederatedLife(t)
			e, fs, first, local, am, id := l.e, l.state, l.svc, l.local, l.am, l.id
			if _, ok := keptEntries(t, fs)[keptRegistration]; !ok {
				t.Fatal("the home's registration is not kept")
			}
			if u := keptTokenUser(t, fs, "sc-2"); u != "uam-sc-2" {
				t.Fatalf("kept token of the secondary's unmanaged AM is %q's, want uam-sc-2's", u)
			}
			// The secondary renews its token; the node keeps the new one.
			renewed := rmToken("uam-sc-2-renewed")
			e.secondary.mu.Lock()
			e.secondary.renew = &renewed
			e.secondary.mu.Unlock()
			for keptTokenUser(t, fs, "sc-2") != "uam-sc-2-renewed" {
				if ctx.Err() != nil {
					t.Fatalf("the renewed token was never kept: %q", keptTokenUser(t, fs, "sc-2"))
				}
				heartbeatUntil(t, am, &id, func(map[int64]bool) bool { return true })
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			e.secondary.mu.Lock()
			e.secondary.reregister = tt.reregister
			e.secondary.mu.Unlock()

			secondUsers := len(e.secondary.seenUsers())
			secondaryAsks, _ := e.secondary.sent()
			second, proxy2, n := nodeLife(t, fs, federationPipeline, e.stages)
			if n != 1 {
				t.Fatalf("recovered %d pipelines, want the federated AM's", n)
			}

			// The AM heartbeats on with the ids it counts, an ask in the first:
			// the secondary counts as timed out until it answers, so the ask
			// goes to the home alone.
			am2 := rawAM(t, proxy2, local)
			ask := []*yarnpb.ResourceRequestProto{askAt(2, 3)}
			resp, err := am2.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Ask: ask, Release: []*yarnpb.ContainerIdProto{secondaryContainer}})
			if err != nil {
				t.Fatalf("heartbeat %d after the restart: %v", id, err)
			}
			if resp.GetResponseId() != id+1 {
				t.Fatalf("heartbeat %d answered %d, want %d", id, resp.GetResponseId(), id+1)
			}
			id = resp.GetResponseId()
			// The release waited for the unmanaged AM's re-attach, a
			// register with the renewed token.
			if users := e.secondary.seenUsers()[secondUsers:]; len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u != "uam-sc-2-renewed" }) {
				t.Fatalf("the secondary saw %v after the restart, want a register with the renewed token", users)
			}
			asks, _ := e.secondary.sent()
			if slices.ContainsFunc(asks[len(secondaryAsks):], func(a []*yarnpb.ResourceRequestProto) bool { return len(a) > 0 }) {
				t.Fatalf("the secondary was sent asks before it answered the recovered proxy: %v", asks[len(secondaryAsks):])
			}
			// Once it answered, the ask is split again and reaches it.
			for {
				asks, _ := e.secondary.sent()
				if slices.ContainsFunc(asks[len(secondaryAsks):], func(a []*yarnpb.ResourceRequestProto) bool { return len(a) > 0 }) {
					break
				}
				resp, err := am2.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Ask: ask})
				if err != nil {
					t.Fatalf("heartbeat %d after the restart: %v", id, err)
				}
				id = resp.GetResponseId()
			}

			if _, err := am2.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
				t.Fatal(err)
			}
			// The release of the secondary's container went there, by the map
			// the recovery rebuilt, and the unmanaged AM finished.
			wantSecondaryReleased(t, e)
			if users := e.secondary.seenUsers()[secondUsers:]; slices.ContainsFunc(users, func(u string) bool { return u != "uam-sc-2-renewed" }) {
				t.Errorf("the secondary saw the calls of %v after the restart, want the renewed token's alone", users)
			}
			if !e.secondary.hasFinished() {
				t.Error("the re-attached unmanaged AM did not finish")
			}
			endLife(t, second, fs)
		})
	}
}

func TestARecoveredFederatedAMGoesOnWithTheHomeWhenASecondaryCannotBeReattached(t *testing.T) {
	ctx := testCtx(t)
	l := newFederatedLife(t)
	e, fs, first, local, id := l.e, l.state, l.svc, l.local, l.id
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// The secondary lost the unmanaged AM while the node was down.
	e.secondary.mu.Lock()
	e.secondary.refuse = yarnerr.ApplicationAttemptNotFound.New("Application attempt doesn't exist in ApplicationMasterService cache.")
	e.secondary.mu.Unlock()
	second, proxy2, n := nodeLife(t, fs, federationPipeline, e.stages)
	if n != 1 {
		t.Fatalf("recovered %d pipelines, want the AM's with its home", n)
	}

	// The AM heartbeats on; the release of the dropped secondary's
	// container is the home's to answer, as of any container the proxy
	// does not know.
	am2 := rawAM(t, proxy2, local)
	for i := range 2 {
		req := &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)}
		if i == 0 {
			req.Release = []*yarnpb.ContainerIdProto{secondaryContainer}
		}
		resp, err := am2.Allocate(ctx, req)
		if err != nil {
			t.Fatalf("heartbeat %d after the restart: %v", id, err)
		}
		if resp.GetResponseId() != id+1 {
			t.Fatalf("heartbeat %d answered %d, want %d", id, resp.GetResponseId(), id+1)
		}
		id = resp.GetResponseId()
	}
	// The release waited for the re-attach, which failed.
	if _, ok := keptEntries(t, fs)[keptSecondary+"sc-2"]; ok {
		t.Error("the dropped secondary's token is still kept")
	}
	if _, err := am2.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
		t.Fatal(err)
	}
	_, homeReleased := e.home.sent()
	if len(homeReleased) != 1 || !proto.Equal(homeReleased[0], secondaryContainer) {
		t.Errorf("the home was sent releases %v, want the dropped secondary's container", homeReleased)
	}
	if home, secondary := e.home.hasFinished(), e.secondary.hasFinished(); !home || secondary {
		t.Errorf("finished at home %v and in the dropped secondary %v, want at home alone", home, secondary)
	}
	endLife(t, second, fs)
}

func TestASecondaryThatHoldsItsReattachHoldsNeitherTheRecoveryNorTheAMsHeartbeats(t *testing.T) {
	ctx := testCtx(t)
	l := newFederatedLife(t)
	e, fs, local, id := l.e, l.state, l.local, l.id
	if err := l.svc.Close(); err != nil {
		t.Fatal(err)
	}
	release := e.secondary.holdRegisters(t)

	// The node recovers and the AM heartbeats on while the secondary
	// holds the unmanaged AM's register.
	second, proxy2, n := nodeLife(t, fs, federationPipeline, e.stages)
	if n != 1 {
		t.Fatalf("recovered %d pipelines, want the federated AM's", n)
	}
	am2 := rawAM(t, proxy2, local)
	for range 2 {
		resp, err := am2.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)})
		if err != nil {
			t.Fatalf("heartbeat %d with the re-attach held: %v", id, err)
		}
		id = resp.GetResponseId()
	}
	// Once the secondary answers, the release of its container waits for
	// the re-attach and goes there.
	release()
	if _, err := am2.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Release: []*yarnpb.ContainerIdProto{secondaryContainer}}); err != nil {
		t.Fatal(err)
	}
	if _, err := am2.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
		t.Fatal(err)
	}
	wantSecondaryReleased(t, e)
	endLife(t, second, fs)
}

func TestAnAMFinishingWhileItsUnmanagedAMIsReattachedFinishesItToo(t *testing.T) {
	ctx := testCtx(t)
	l := newFederatedLife(t)
	e, fs, local := l.e, l.state, l.local
	if err := l.svc.Close(); err != nil {
		t.Fatal(err)
	}
	release := e.secondary.holdRegisters(t)
	second, proxy2, _ := nodeLife(t, fs, federationPipeline, e.stages)

	am2 := rawAM(t, proxy2, local)
	finished := make(chan error, 1)
	go func() {
		_, err := am2.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()})
		finished <- err
	}()
	release()
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	if home, secondary := e.home.hasFinished(), e.secondary.hasFinished(); !home || !secondary {
		t.Errorf("finished at home %v and in the secondary %v, want both", home, secondary)
	}
	endLife(t, second, fs)
}
