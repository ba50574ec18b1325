package router

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

func newAdmin(t *testing.T, s store.StateStore, now func() time.Time) *Admin {
	t.Helper()
	a, err := NewAdmin(AdminConfig{Store: store.NewCache(s, 0, nil), AdminACL: acl.Parse("admin"), Expiration: 5 * time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// adminCall calls the admin protocol served by a as user.
func adminCall(t *testing.T, a *Admin, user, method string, req, resp proto.Message) error {
	t.Helper()
	addr := ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ResourceManagerAdministrationProtocolName, a.Methods()...)
	c, err := ipc.Dial(t.Context(), addr, ipc.ClientConfig{Protocol: yarnrpc.ResourceManagerAdministrationProtocolName, User: user, Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Call(t.Context(), method, req, resp)
}

// A policy saved through the admin protocol routes the next submissions.
func TestAQueuePolicySavedByAnAdminRoutesSubmissions(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	a := newAdmin(t, s, nil)
	var resp yarnpb.SaveFederationQueuePolicyResponseProto
	err := adminCall(t, a, "admin", "saveFederationQueuePolicy", &yarnpb.SaveFederationQueuePolicyRequestProto{
		Queue: proto.String("root.a"), PolicyManagerClassName: proto.String(federation.WeightedHomePolicyManager),
		FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String("sc1:0,sc2:1.0"), AmrmWeight: proto.String("sc1:0.5,sc2:0.5"), HeadRoomAlpha: proto.String("1.0")},
	}, &resp)
	if err != nil || resp.GetMessage() != "save policy success." {
		t.Fatalf("save: %q, %v", resp.GetMessage(), err)
	}
	p, err := s.GetPolicyConfiguration(t.Context(), "root.a")
	if err != nil {
		t.Fatal(err)
	}
	info, err := ParseWeightedPolicyInfo(p.Params)
	if err != nil || info.RouterWeights["sc2"] != 1 || info.AMRMWeights["sc1"] != 0.5 || info.HeadroomAlpha != 1 {
		t.Fatalf("stored %s: %+v, %v", p.Params, info, err)
	}
	r, err := New(Config{Store: store.NewCache(s, 0, nil), Rand: &seqRand{floats: []float64{0}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := r.policyFor(t.Context(), "root.a")
	if err != nil {
		t.Fatal(err)
	}
	active, _ := s.GetSubClusters(t.Context(), true)
	if home, err := pol.home(active, nil, &seqRand{}); err != nil || home != "sc2" {
		t.Errorf("home %q, %v; want sc2", home, err)
	}
}

func TestQueueWeightsAreCheckedAsYARNChecksThem(t *testing.T) {
	tests := []struct {
		name, router, alpha, want string
	}{
		{"weights that do not add up to 1", "sc1:0.5,sc2:0.4", "1", "The sum of ratios for all subClusters must be equal to 1."},
		{"an item without its weight", "sc1", "1", "the subClusterWeight size must be 2"},
		{"no weights", " ", "1", "subClusterWeight can't be empty!"},
		{"an alpha over 1", "sc1:1", "1.5", "HeadRoomAlpha must be between 0-1."},
		{"an alpha that is no number", "sc1:1", "x", "HeadRoomAlpha must be a number."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdmin(t, store.NewMemory(nil), nil)
			_, err := a.SaveFederationQueuePolicy(t.Context(), &yarnpb.SaveFederationQueuePolicyRequestProto{
				Queue: proto.String("q"), PolicyManagerClassName: proto.String(federation.WeightedHomePolicyManager),
				FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String(tt.router), AmrmWeight: proto.String("sc1:1"), HeadRoomAlpha: proto.String(tt.alpha)},
			})
			if !errors.Is(err, yarnerr.YarnException) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want YarnException: %s", err, tt.want)
			}
		})
	}
}

func TestOnlyAdminsMayCallTheRouterAdminProtocol(t *testing.T) {
	a := newAdmin(t, store.NewMemory(nil), nil)
	var resp yarnpb.GetSubClustersResponseProto
	err := adminCall(t, a, "mallory", "getFederationSubClusters", &yarnpb.GetSubClustersRequestProto{}, &resp)
	if !errors.Is(err, yarnerr.YarnException) || !strings.Contains(err.Error(), "doesn't have permission") {
		t.Errorf("mallory: %v", err)
	}
}

func TestDeregistrationByAnAdminLosesOnlySilentUsableSubClusters(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	s := store.NewMemory(clock)
	ctx := t.Context()
	for _, id := range []string{"silent", "lost", "recent"} {
		if err := s.RegisterSubCluster(ctx, store.SubClusterInfo{ID: id, AMRMServiceAddress: "a:1", ClientRMServiceAddress: "a:2", RMAdminServiceAddress: "a:3", RMWebServiceAddress: "a:4", State: store.StateNew}); err != nil {
			t.Fatal(err)
		}
		if err := s.SubClusterHeartbeat(ctx, id, store.StateRunning, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeregisterSubCluster(ctx, "lost", store.StateLost); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if err := s.SubClusterHeartbeat(ctx, "recent", store.StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, s, clock)
	tests := []struct{ id, deregistered, state string }{
		{"silent", "SUCCESS", "SC_LOST"},
		{"recent", "NONE", "SC_RUNNING"},
		{"lost", "FAILED", "SC_LOST"},
		{"unknown", "FAILED", "UNKNOWN"},
	}
	for _, tt := range tests {
		resp, err := a.DeregisterSubCluster(ctx, &yarnpb.DeregisterSubClusterRequestProto{SubClusterId: proto.String(tt.id)})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetDeregisterSubClusters()[0]
		if got.GetDeregisterState() != tt.deregistered || got.GetSubClusterState() != tt.state {
			t.Errorf("%s: %v %v, want %s %s (%s)", tt.id, got.GetDeregisterState(), got.GetSubClusterState(), tt.deregistered, tt.state, got.GetInformation())
		}
	}
	if sc, _ := s.GetSubCluster(ctx, "recent"); sc.State != store.StateRunning {
		t.Errorf("recent: %v", sc.State)
	}
	list, err := a.GetFederationSubClusters(ctx, &yarnpb.GetSubClustersRequestProto{})
	if err != nil || len(list.GetSubClusters()) != 3 {
		t.Errorf("sub-clusters %v, %v", list.GetSubClusters(), err)
	}
}

func TestAnAdminDeletesAnApplicationsHome(t *testing.T) {
	s := store.NewMemory(nil)
	ctx := context.Background()
	if _, err := s.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: "application_1_0001", Home: "sc1"}); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, s, nil)
	if _, err := a.DeleteFederationApplication(ctx, &yarnpb.DeleteFederationApplicationRequestProto{Application: proto.String("application_1_0001")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetApplicationHomeSubCluster(ctx, "application_1_0001"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("home after the delete: %v", err)
	}
	if _, err := a.DeleteFederationApplication(ctx, &yarnpb.DeleteFederationApplicationRequestProto{Application: proto.String("nonsense")}); !errors.Is(err, yarnerr.IllegalArgument) {
		t.Errorf("a bad id: %v", err)
	}
}

func TestWeightedPolicyInfoReadsWhatItWrites(t *testing.T) {
	in := WeightedPolicyInfo{RouterWeights: map[string]float64{"sc1": 0.25, "sc2": 0.75}, AMRMWeights: map[string]float64{"sc1": 1}, HeadroomAlpha: 0.5}
	b, err := MarshalWeightedPolicyInfo(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseWeightedPolicyInfo(b)
	if err != nil || out.RouterWeights["sc2"] != 0.75 || out.AMRMWeights["sc1"] != 1 || out.HeadroomAlpha != 0.5 || len(out.RouterWeights) != 2 {
		t.Errorf("%s read back as %+v, %v", b, out, err)
	}
}

func TestQueuePoliciesAreListedByPageAndDeletedByQueue(t *testing.T) {
	s := store.NewMemory(nil)
	a := newAdmin(t, s, nil)
	ctx := t.Context()
	for _, q := range []string{"root.a", "root.b", "root.c"} {
		if _, err := a.SaveFederationQueuePolicy(ctx, &yarnpb.SaveFederationQueuePolicyRequestProto{
			Queue: proto.String(q), PolicyManagerClassName: proto.String(federation.WeightedHomePolicyManager),
			FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String("sc1:0.7,sc2:0.3"), AmrmWeight: proto.String("sc1:1"), HeadRoomAlpha: proto.String("1")},
		}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name                  string
		req                   *yarnpb.QueryFederationQueuePoliciesRequestProto
		total, pages, entries int32
		first                 string
	}{
		{"the first page of all", &yarnpb.QueryFederationQueuePoliciesRequestProto{PageSize: proto.Int32(2), CurrentPage: proto.Int32(1)}, 3, 2, 2, "root.a"},
		{"the last page of all", &yarnpb.QueryFederationQueuePoliciesRequestProto{PageSize: proto.Int32(2), CurrentPage: proto.Int32(2)}, 3, 2, 1, "root.c"},
		{"one queue", &yarnpb.QueryFederationQueuePoliciesRequestProto{PageSize: proto.Int32(10), CurrentPage: proto.Int32(1), Queue: proto.String("root.b")}, 1, 1, 1, "root.b"},
		{"some queues", &yarnpb.QueryFederationQueuePoliciesRequestProto{PageSize: proto.Int32(10), CurrentPage: proto.Int32(1), Queues: []string{"root.c", "root.x"}}, 1, 1, 1, "root.c"},
		{"a queue without a policy", &yarnpb.QueryFederationQueuePoliciesRequestProto{PageSize: proto.Int32(10), CurrentPage: proto.Int32(1), Queue: proto.String("root.x")}, 0, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := a.ListFederationQueuePolicies(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			ws := resp.GetFederationQueueWeights()
			if resp.GetTotalSize() != tt.total || resp.GetTotalPage() != tt.pages || int32(len(ws)) != tt.entries {
				t.Fatalf("total %d pages %d entries %d; want %d %d %d", resp.GetTotalSize(), resp.GetTotalPage(), len(ws), tt.total, tt.pages, tt.entries)
			}
			if len(ws) > 0 {
				w := ws[0]
				if w.GetQueue() != tt.first || w.GetRouterWeight() != "sc1:0.7,sc2:0.3" || w.GetAmrmWeight() != "sc1:1.0" || w.GetHeadRoomAlpha() != "1.0" ||
					w.GetPolicyManagerClassName() != federation.WeightedHomePolicyManager {
					t.Errorf("first %v", w)
				}
			}
		})
	}
	for _, bad := range []*yarnpb.QueryFederationQueuePoliciesRequestProto{
		{PageSize: proto.Int32(0), CurrentPage: proto.Int32(1)},
		{PageSize: proto.Int32(1), CurrentPage: proto.Int32(0)},
		{PageSize: proto.Int32(2), CurrentPage: proto.Int32(3)},
	} {
		if _, err := a.ListFederationQueuePolicies(ctx, bad); !errors.Is(err, yarnerr.YarnException) {
			t.Errorf("page %d of size %d: %v", bad.GetCurrentPage(), bad.GetPageSize(), err)
		}
	}
	resp, err := a.DeleteFederationPoliciesByQueues(ctx, &yarnpb.DeleteFederationQueuePoliciesRequestProto{Queues: []string{"root.a", "root.b"}})
	if err != nil || resp.GetMessage() != "queues = root.a,root.b delete success." {
		t.Fatalf("delete: %q, %v", resp.GetMessage(), err)
	}
	if left, _ := s.GetPoliciesConfigurations(ctx); len(left) != 1 || left[0].Queue != "root.c" {
		t.Errorf("left %+v", left)
	}
}

// The admin writes through the Router's cache: a policy saved on this
// Router routes its next submission at once, whatever the TTL.
func TestAPolicySavedOnARouterRoutesItsNextSubmissionAtOnce(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	cache := store.NewCache(s, time.Hour, nil)
	r, err := New(Config{Store: cache})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.policyFor(t.Context(), "default"); err != nil { // the cache now holds no policy
		t.Fatal(err)
	}
	a, err := NewAdmin(AdminConfig{Store: cache, AdminACL: acl.AllowAll(), Expiration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SaveFederationQueuePolicy(t.Context(), &yarnpb.SaveFederationQueuePolicyRequestProto{
		Queue: proto.String("*"), PolicyManagerClassName: proto.String(federation.WeightedHomePolicyManager),
		FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String("sc2:1"), AmrmWeight: proto.String("sc2:1"), HeadRoomAlpha: proto.String("0")},
	}); err != nil {
		t.Fatal(err)
	}
	pol, err := r.policyFor(t.Context(), "default")
	if err != nil {
		t.Fatal(err)
	}
	active, _ := cache.GetSubClusters(t.Context(), true)
	if home, err := pol.home(active, nil, &seqRand{floats: []float64{0}}); err != nil || home != "sc2" {
		t.Errorf("home %q, %v; want sc2 by the saved policy", home, err)
	}
}
