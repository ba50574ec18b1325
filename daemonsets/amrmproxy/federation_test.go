package amrmproxy

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// fakeSubCluster is a secondary sub-cluster's RM: the scheduler of
// fakeRM, and the client protocol an unmanaged AM is submitted on, whose
// report carries the sub-cluster's AMRMToken.
type fakeSubCluster struct {
	fakeRM
	smu       sync.Mutex
	submitted []*yarnpb.ApplicationSubmissionContextProto
	submitter []string
	killed    []*yarnpb.ApplicationIdProto
	// hold, if set, holds each submission until it is closed.
	hold chan struct{}
}

func (f *fakeSubCluster) serve(t *testing.T, token string) string {
	t.Helper()
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Tokens: ipctest.TokenLookup, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(yarnrpc.ApplicationMasterProtocolName, f.methods()...); err != nil {
		t.Fatal(err)
	}
	err = yarnrpc.ApplicationClientProtocolFuncs{
		SubmitApplication: func(ctx context.Context, req *yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
			f.smu.Lock()
			hold := f.hold
			f.smu.Unlock()
			if err := waitFor(ctx, hold); err != nil {
				return nil, err
			}
			f.smu.Lock()
			defer f.smu.Unlock()
			c, _ := ipc.CallerFrom(ctx)
			f.submitted = append(f.submitted, req.GetApplicationSubmissionContext())
			f.submitter = append(f.submitter, c.User)
			return &yarnpb.SubmitApplicationResponseProto{}, nil
		},
		ForceKillApplication: func(_ context.Context, req *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			f.smu.Lock()
			defer f.smu.Unlock()
			f.killed = append(f.killed, req.GetApplicationId())
			return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
		},
		GetApplicationReport: func(_ context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
				ApplicationId: req.GetApplicationId(), YarnApplicationState: yarnpb.YarnApplicationStateProto_ACCEPTED.Enum(),
				AmRmToken:                   rmToken(token).Proto(),
				CurrentApplicationAttemptId: yarnid.AttemptID{App: testAttempt.App, ID: 1}.Proto(),
			}}, nil
		},
		// The unmanaged AM's running containers: those it was given and
		// did not release.
		GetContainers: func(_ context.Context, req *yarnpb.GetContainersRequestProto) (*yarnpb.GetContainersResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			resp := &yarnpb.GetContainersResponseProto{}
			for _, c := range f.allocated {
				released := slices.ContainsFunc(f.releases, func(id *yarnpb.ContainerIdProto) bool { return proto.Equal(id, c.GetId()) })
				if !released && proto.Equal(c.GetId().GetAppAttemptId(), req.GetApplicationAttemptId()) {
					resp.Containers = append(resp.Containers, &yarnpb.ContainerReportProto{ContainerId: c.GetId()})
				}
			}
			return resp, nil
		},
	}.Register(srv)
	if err != nil {
		t.Fatal(err)
	}
	return ipctest.Run(t, srv)
}

// container is a container of attempt whose wire id is protoID (epoch<<40
// | sequence).
func container(attempt yarnid.AttemptID, protoID int64) *yarnpb.ContainerProto {
	return &yarnpb.ContainerProto{Id: yarnid.ContainerID{Attempt: attempt, Epoch: protoID >> 40, Sequence: protoID & (1<<40 - 1)}.Proto(),
		Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}, Resource: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)}}
}

// federation is a home and a secondary sub-cluster in a store, the
// application homed in the first, and a proxy whose pipeline is the
// federation interceptor in front of the default one.
type federationEnv struct {
	home      *fakeRM
	secondary *fakeSubCluster
	svc       *Service
	proxy     string
	store     *store.Memory
	// stages are the proxy's, the federation interceptor's and the
	// default one's.
	stages map[string]Stage
}

// federationPipeline is the pipeline of the federation tests' proxies.
var federationPipeline = []string{FederationInterceptorName, DefaultInterceptorName}

func newFederation(t *testing.T, manager string, params ...byte) *federationEnv {
	t.Helper()
	return newFederationWith(t, func(*FederationSettings) {}, manager, params...)
}

// newFederationWith is newFederation with the interceptor's settings
// changed by set.
func newFederationWith(t *testing.T, set func(*FederationSettings), manager string, params ...byte) *federationEnv {
	t.Helper()
	e := newSubClusters(t, set, manager, params...)
	e.svc, e.proxy = serveProxy(t, testSecrets(t), federationPipeline, e.stages)
	return e
}

// newSubClusters is newFederationWith's sub-clusters, store and stages,
// with no proxy yet.
func newSubClusters(t *testing.T, set func(*FederationSettings), manager string, params ...byte) *federationEnv {
	t.Helper()
	ctx := testCtx(t)
	e := &federationEnv{home: &fakeRM{allocated: []*yarnpb.ContainerProto{container(testAttempt, 2)}}, secondary: &fakeSubCluster{}}
	// The secondary numbers its containers in its own epoch.
	e.secondary.allocated = []*yarnpb.ContainerProto{container(testAttempt, 1<<40|2)}
	homeAddr := e.home.serve(t)
	secAddr := e.secondary.serve(t, "uam-sc-2")
	fed := store.NewMemory(nil)
	for _, sc := range []store.SubClusterInfo{
		{ID: "sc-1", AMRMServiceAddress: homeAddr, ClientRMServiceAddress: homeAddr, RMAdminServiceAddress: homeAddr, RMWebServiceAddress: homeAddr, State: store.StateRunning},
		{ID: "sc-2", AMRMServiceAddress: secAddr, ClientRMServiceAddress: secAddr, RMAdminServiceAddress: secAddr, RMWebServiceAddress: secAddr, State: store.StateRunning},
	} {
		if err := fed.RegisterSubCluster(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fed.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: testAttempt.App.String(), Home: "sc-1"}); err != nil {
		t.Fatal(err)
	}
	if err := fed.SetPolicyConfiguration(ctx, store.PolicyConfiguration{Queue: "root.default", Type: manager, Params: params}); err != nil {
		t.Fatal(err)
	}
	stages := defaultStages(homeAddr)
	settings := FederationSettings{Store: fed, DefaultPolicy: federation.HomePolicyManager,
		NewBackOff: func() backoff.BackOff {
			return backoff.WithMaxRetries(backoff.NewConstantBackOff(10*time.Millisecond), 100)
		},
		LaunchTimeout: time.Second}
	set(&settings)
	stages[FederationInterceptorName] = FederationStage(settings)
	e.store, e.stages = fed, stages
	return e
}

// holdSecondarySubmissions makes the secondary hold each unmanaged AM's
// submission until the returned channel is closed.
func (e *federationEnv) holdSecondarySubmissions() chan struct{} {
	hold := make(chan struct{})
	e.secondary.smu.Lock()
	defer e.secondary.smu.Unlock()
	e.secondary.hold = hold
	return hold
}

func TestFederationInterceptor(t *testing.T) {
	tests := []struct {
		name    string
		manager string
		params  []byte
		// wantSecondary is whether a UAM goes to the secondary and gets its asks.
		wantSecondary bool
		wantAllocated int
	}{
		{"the broadcast policy asks both sub-clusters and merges their containers", federation.UniformBroadcastPolicyManager, nil, true, 2},
		{"the home policy asks the home alone", federation.HomePolicyManager, nil, false, 1},
		{"the locality policy splits a free ask by the weights", federation.WeightedLocalityPolicyManager,
			weightsJSON("0.0", map[string]string{"sc-1": "1", "sc-2": "1"}), true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			e := newFederation(t, tt.manager, tt.params...)
			am := registeredAM(t, e.svc, e.proxy)
			resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}})
			if err != nil {
				t.Fatal(err)
			}
			// The first answer waits for the first sub-cluster's, the home's
			// here; a secondary's follow in later answers, as from YARN's.
			if got := containerSeqs(resp); len(got) == 0 || got[0] != 2 {
				t.Fatalf("first answer's containers %v, want the home's", got)
			}
			if resp.GetAmRmToken() != nil {
				t.Fatal("a sub-cluster's AMRMToken reached the AM")
			}
			id := int32(1)
			seen := heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return len(seen) == tt.wantAllocated })
			e.secondary.smu.Lock()
			submitted := len(e.secondary.submitted)
			e.secondary.smu.Unlock()
			if (submitted == 1) != tt.wantSecondary {
				t.Fatalf("%d unmanaged AMs submitted to the secondary, want one: %v", submitted, tt.wantSecondary)
			}
			if tt.wantSecondary {
				asc := e.secondary.submitted[0]
				if !asc.GetUnmanagedAm() || asc.GetApplicationName() != federation.UnmanagedAMName || e.secondary.submitter[0] != "alice" || !proto.Equal(asc.GetApplicationId(), testAttempt.App.Proto()) {
					t.Fatalf("secondary got %v from %s, want the application unmanaged from its user", asc, e.secondary.submitter[0])
				}
				if users := e.secondary.seenUsers(); len(users) == 0 || users[0] != "uam-sc-2" {
					t.Fatalf("the secondary's scheduler saw %v, want the unmanaged AM's token", users)
				}
				if !seen[1<<40|2] {
					t.Fatalf("containers %v, want the secondary's", seen)
				}
				// A release of the secondary's container goes there; the
				// finish below sends it before unregistering.
				secondaryContainer := container(testAttempt, 1<<40|2).GetId()
				if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Release: []*yarnpb.ContainerIdProto{secondaryContainer}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := am.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
				t.Fatal(err)
			}
			e.secondary.mu.Lock()
			finished := e.secondary.finished
			released := len(e.secondary.releases)
			e.secondary.mu.Unlock()
			e.home.mu.Lock()
			homeReleased := len(e.home.releases)
			e.home.mu.Unlock()
			if tt.wantSecondary && (released != 1 || homeReleased != 0) {
				t.Fatalf("released %d in the secondary and %d at home, want the secondary's container released there", released, homeReleased)
			}
			if finished != tt.wantSecondary || !e.home.finished {
				t.Fatalf("finished: secondary %v, home %v; want the unmanaged AM finished too: %v", finished, e.home.finished, tt.wantSecondary)
			}
		})
	}
}

func TestFederationInterceptorRefusesAQueueWithAPolicyItCannotServe(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, "org.apache.hadoop.yarn.server.federation.policies.manager.PriorityBroadcastPolicyManager")
	local, err := e.svc.StartApplicationMaster(ctx, testAttempt, "alice", rmToken("real-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawAM(t, e.proxy, local).RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{}); err == nil {
		t.Fatal("registered under a policy without an AMRMProxy policy")
	}
}

func TestFederationStageNeedsANextStageAndAStore(t *testing.T) {
	tests := []struct {
		name string
		s    FederationSettings
		next Interceptor
	}{
		{"last in the pipeline", FederationSettings{Store: store.NewMemory(nil)}, nil},
		{"without a store", FederationSettings{}, &ThrottleInterceptor{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := FederationStage(tt.s)(App{Logger: quiet}, tt.next); err == nil {
				t.Fatal("built")
			}
		})
	}
}

func TestFederationInterceptorGoesOnWithoutASecondaryThatCannotBeReached(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.UniformBroadcastPolicyManager)
	const dead = "127.0.0.1:1"
	if err := e.store.RegisterSubCluster(ctx, store.SubClusterInfo{ID: "sc-3", AMRMServiceAddress: dead, ClientRMServiceAddress: dead,
		RMAdminServiceAddress: dead, RMWebServiceAddress: dead, State: store.StateRunning}); err != nil {
		t.Fatal(err)
	}
	am := registeredAM(t, e.svc, e.proxy)
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 2)}}); err != nil {
		t.Fatalf("allocate with a sub-cluster down: %v", err)
	}
	id := int32(1)
	heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return seen[2] && seen[1<<40|2] })
}

func TestAnApplicationThatEndsUnfinishedHasItsUnmanagedAMsKilled(t *testing.T) {
	ctx := testCtx(t)
	e := newFederation(t, federation.UniformBroadcastPolicyManager)
	am := registeredAM(t, e.svc, e.proxy)
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), Ask: []*yarnpb.ResourceRequestProto{askAt(1, 1)}}); err != nil {
		t.Fatal(err)
	}
	id := int32(1)
	heartbeatUntil(t, am, &id, func(seen map[int64]bool) bool { return seen[1<<40|2] })
	e.svc.EndApplication(ctx, testAttempt.App)
	e.secondary.smu.Lock()
	defer e.secondary.smu.Unlock()
	if len(e.secondary.killed) != 1 || !proto.Equal(e.secondary.killed[0], testAttempt.App.Proto()) {
		t.Fatalf("killed %v in the secondary, want the application", e.secondary.killed)
	}
	if got := e.svc.Attempts(); len(got) != 0 {
		t.Fatalf("pipelines %v left", got)
	}
}

// containerSeqs lists the sequence numbers of an answer's containers.
func containerSeqs(resp *yarnpb.AllocateResponseProto) []int64 {
	var out []int64
	for _, c := range resp.GetAllocatedContainers() {
		out = append(out, c.GetId().GetId())
	}
	return out
}

// heartbeatUntil sends empty heartbeats, numbered from *id on, until the
// containers answered (by sequence number) satisfy done, or the test's
// time is up; the sub-clusters' answers reach the AM as they arrive.
func heartbeatUntil(t *testing.T, am *yarnrpc.ApplicationMasterProtocolClient, id *int32, done func(map[int64]bool) bool) map[int64]bool {
	t.Helper()
	ctx := testCtx(t)
	seen := map[int64]bool{}
	for ctx.Err() == nil {
		resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(*id)})
		if err != nil {
			t.Fatalf("heartbeat %d: %v", *id, err)
		}
		*id = resp.GetResponseId()
		for _, seq := range containerSeqs(resp) {
			seen[seq] = true
		}
		if done(seen) {
			return seen
		}
	}
	t.Fatalf("containers %v after %d heartbeats", seen, *id)
	return nil
}
