package router

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// A client submits through the Router as to one RM: the application gets
// an id from a sub-cluster, lands on the home its queue's policy picks,
// and every later call about it reaches that home, as the client's user.
func TestAnApplicationSubmittedThroughTheRouterIsServedByItsHome(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1_700_000_000_001), startRM(t, "sc2", 1_700_000_000_002)
	join(t, s, rm1, rm2)
	// getNewApplication asks sc1 (draw 0); the uniform policy homes it on
	// sc2 (draw 1).
	_, c := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{0, 1}}})
	ctx := t.Context()

	newApp, err := c.GetNewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newApp.GetApplicationId().GetClusterTimestamp() != rm1.ts {
		t.Fatalf("new application %v, want one of sc1 (cluster timestamp %d)", newApp.GetApplicationId(), rm1.ts)
	}
	app := appKey(newApp.GetApplicationId())
	if err := c.SubmitApplication(ctx, submission(newApp.GetApplicationId(), "default")); err != nil {
		t.Fatal(err)
	}
	if home, err := s.GetApplicationHomeSubCluster(ctx, app); err != nil || home != "sc2" {
		t.Fatalf("home of %s = %q, %v; want sc2", app, home, err)
	}
	if !rm2.has(app) || rm1.has(app) {
		t.Fatalf("%s on sc1 %v, on sc2 %v; want sc2 only", app, rm1.has(app), rm2.has(app))
	}
	report, err := c.GetApplicationReport(ctx, newApp.GetApplicationId())
	if err != nil {
		t.Fatal(err)
	}
	if report.GetUser() != "alice" || report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Errorf("report: user %q state %v", report.GetUser(), report.GetYarnApplicationState())
	}
	if err := c.KillApplication(ctx, newApp.GetApplicationId(), "done"); err != nil {
		t.Fatal(err)
	}
	report, err = c.GetApplicationReport(ctx, newApp.GetApplicationId())
	if err != nil || report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
		t.Errorf("after kill: %v, %v", report.GetYarnApplicationState(), err)
	}
	for _, rm := range []*fakeRM{rm1, rm2} {
		rm.mu.Lock()
		for _, u := range rm.users {
			if u != "alice" {
				t.Errorf("%s was called as %q, want the client's user alice", rm.id, u)
			}
		}
		rm.mu.Unlock()
	}
}

// An application the store has no home for is answered as YARN's Router
// answers it: a YarnException naming the store, not the RM's
// ApplicationNotFoundException.
func TestACallAboutAnApplicationWithoutHomeIsAYarnExceptionNamingTheStore(t *testing.T) {
	s := store.NewMemory(nil)
	join(t, s, startRM(t, "sc1", 1))
	_, c := serveRouter(t, s, routerOptions{})
	id := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 42}
	_, err := c.GetApplicationReport(t.Context(), id.Proto())
	var ye *yarnerr.Error
	if !errors.As(err, &ye) || ye.Class != yarnerr.YarnException || ye.Message != "Application application_1_0042 does not exist in FederationStateStore." {
		t.Fatalf("err %v, want YarnException: Application application_1_0042 does not exist in FederationStateStore.", err)
	}
	if errors.Is(err, yarnerr.ApplicationNotFound) {
		t.Error("answered ApplicationNotFoundException, which YARN's Router does not")
	}
}

// A failing home is blacklisted and the application's home moves to the
// next sub-cluster the policy picks.
func TestASubmissionMovesToAnotherSubClusterWhenItsHomeFails(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	rm1.failSubmit = true
	join(t, s, rm1, rm2)
	_, c := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{0, 0}}})
	id := yarnid.ApplicationID{ClusterTimestamp: 2, ID: 1}
	if err := c.SubmitApplication(t.Context(), submission(id.Proto(), "default")); err != nil {
		t.Fatal(err)
	}
	if home, _ := s.GetApplicationHomeSubCluster(t.Context(), id.String()); home != "sc2" || !rm2.has(id.String()) {
		t.Errorf("home %q, on sc2 %v; want sc2", home, rm2.has(id.String()))
	}
}

// A resubmission (a client retrying, maybe through another Router) goes
// to the home recorded first, whatever the policy draws now.
func TestAResubmissionGoesToTheFirstRecordedHome(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	id := yarnid.ApplicationID{ClusterTimestamp: 2, ID: 7}
	if _, err := s.AddApplicationHomeSubCluster(t.Context(), store.ApplicationHome{Application: id.String(), Home: "sc2"}); err != nil {
		t.Fatal(err)
	}
	_, c := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{0}}}) // the policy draws sc1
	if err := c.SubmitApplication(t.Context(), submission(id.Proto(), "default")); err != nil {
		t.Fatal(err)
	}
	if rm1.has(id.String()) || !rm2.has(id.String()) {
		t.Errorf("on sc1 %v, on sc2 %v; want sc2 only", rm1.has(id.String()), rm2.has(id.String()))
	}
}

func TestSubmissionsFollowTheQueuesPolicyThenStarThenTheDefault(t *testing.T) {
	tests := []struct {
		name     string
		policies []store.PolicyConfiguration
		queue    string
		want     string
	}{
		{"the queue's own policy", []store.PolicyConfiguration{withQueue(weighted(map[string]string{"sc2": "1"}), "a"), weighted(map[string]string{"sc1": "1"})}, "a", "sc2"},
		{"the * policy for a queue without one", []store.PolicyConfiguration{weighted(map[string]string{"sc2": "1"})}, "b", "sc2"},
		{"the configured default without either", nil, "b", "sc1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := store.NewMemory(nil)
			rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
			join(t, s, rm1, rm2)
			for _, p := range tt.policies {
				if err := s.SetPolicyConfiguration(t.Context(), p); err != nil {
					t.Fatal(err)
				}
			}
			_, c := serveRouter(t, s, routerOptions{policy: weighted(map[string]string{"sc1": "1", "sc2": "0"})})
			id := yarnid.ApplicationID{ClusterTimestamp: 9, ID: 1}
			if err := c.SubmitApplication(t.Context(), submission(id.Proto(), tt.queue)); err != nil {
				t.Fatal(err)
			}
			if home, _ := s.GetApplicationHomeSubCluster(t.Context(), id.String()); home != tt.want {
				t.Errorf("home %q, want %q", home, tt.want)
			}
		})
	}
}

func TestASubmissionWhoseAMAsksForANodeGoesToTheSubClusterOfTheNode(t *testing.T) {
	machines, err := federation.ReadMachineList(strings.NewReader("node-1, sc1, rack-1\nnode-2, sc2, rack-2\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	// By weight alone every application would go to sc1.
	locality := weighted(map[string]string{"sc1": "0.99", "sc2": "0.01"})
	locality.Type = federation.WeightedLocalityPolicyManager
	_, c := serveRouter(t, s, routerOptions{policy: locality, machines: machines})
	ask := func(name string) *yarnpb.ResourceRequestProto {
		return &yarnpb.ResourceRequestProto{ResourceName: proto.String(name), NumContainers: proto.Int32(1), Capability: yarnpb.NewResource(1024, 1)}
	}
	tests := []struct {
		name string
		asks []*yarnpb.ResourceRequestProto
		want string
	}{
		{"an AM on node-2 goes to sc2", []*yarnpb.ResourceRequestProto{ask("node-2"), ask("rack-2"), ask("*")}, "sc2"},
		{"an AM anywhere goes by weight", []*yarnpb.ResourceRequestProto{ask("*")}, "sc1"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := yarnid.ApplicationID{ClusterTimestamp: 9, ID: int32(i + 1)}
			sub := submission(id.Proto(), "default")
			sub.AmContainerResourceRequest = tt.asks
			if err := c.SubmitApplication(t.Context(), sub); err != nil {
				t.Fatal(err)
			}
			if home, _ := s.GetApplicationHomeSubCluster(t.Context(), id.String()); home != tt.want {
				t.Errorf("home %q, want %q", home, tt.want)
			}
		})
	}
}

func withQueue(p store.PolicyConfiguration, q string) store.PolicyConfiguration {
	p.Queue = q
	return p
}

func TestANewApplicationIDComesFromAnotherSubClusterWhenOneIsDown(t *testing.T) {
	s := store.NewMemory(nil)
	rm2 := startRM(t, "sc2", 2)
	down := &fakeRM{id: "sc1", ts: 1, addr: "127.0.0.1:1"} // nothing listens
	join(t, s, down, rm2)
	_, c := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{0, 0}}}) // sc1 first
	resp, err := c.GetNewApplication(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetApplicationId().GetClusterTimestamp() != rm2.ts {
		t.Errorf("id %v, want one of sc2", resp.GetApplicationId())
	}
}

func TestWithNoActiveSubClusterTheRouterRefusesNewApplications(t *testing.T) {
	s := store.NewMemory(nil)
	rm := startRM(t, "sc1", 1)
	join(t, s, rm)
	if err := s.DeregisterSubCluster(t.Context(), "sc1", store.StateLost); err != nil {
		t.Fatal(err)
	}
	_, c := serveRouter(t, s, routerOptions{})
	_, err := c.GetNewApplication(t.Context())
	if !errors.Is(err, yarnerr.YarnException) || !strings.Contains(err.Error(), NoActiveSubCluster) {
		t.Errorf("err %v, want YarnException: %s", err, NoActiveSubCluster)
	}
	id := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1}
	err = c.SubmitApplication(t.Context(), submission(id.Proto(), "default"))
	if !errors.Is(err, yarnerr.FederationPolicy) {
		t.Errorf("submit: %v, want FederationPolicyException", err)
	}
}

// Lists and cluster views are every active sub-cluster's, merged.
func TestListsAndClusterViewsMergeEverySubCluster(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	addr, c := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{0, 1}}})
	ctx := t.Context()
	for i, id := range []yarnid.ApplicationID{{ClusterTimestamp: 1, ID: 1}, {ClusterTimestamp: 2, ID: 1}} {
		if _, err := s.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: id.String(), Home: []string{"sc1", "sc2"}[i]}); err != nil {
			t.Fatal(err)
		}
		if err := c.SubmitApplication(ctx, submission(id.Proto(), "default")); err != nil {
			t.Fatal(err)
		}
	}
	call := func(method string, req, resp proto.Message) {
		t.Helper()
		if err := rawCall(t, addr, method, req, resp); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	var apps yarnpb.GetApplicationsResponseProto
	call("getApplications", &yarnpb.GetApplicationsRequestProto{}, &apps)
	var got []string
	for _, a := range apps.GetApplications() {
		got = append(got, appKey(a.GetApplicationId()))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"application_1_0001", "application_2_0001"}) {
		t.Errorf("applications %v", got)
	}
	var metrics yarnpb.GetClusterMetricsResponseProto
	call("getClusterMetrics", &yarnpb.GetClusterMetricsRequestProto{}, &metrics)
	if m := metrics.GetClusterMetrics(); m.GetNumNodeManagers() != 4 || m.GetNumActiveNms() != 4 || m.GetNumLostNms() != 2 {
		t.Errorf("metrics %v", m)
	}
	var nodes yarnpb.GetClusterNodesResponseProto
	call("getClusterNodes", &yarnpb.GetClusterNodesRequestProto{}, &nodes)
	if len(nodes.GetNodeReports()) != 2 {
		t.Errorf("nodes %v", nodes.GetNodeReports())
	}
	var queue yarnpb.GetQueueInfoResponseProto
	call("getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("default")}, &queue)
	if q := queue.GetQueueInfo(); q.GetCapacity() != 1 || q.GetMaximumCapacity() != 2 || len(q.GetChildQueues()) != 2 {
		t.Errorf("queue %v", q)
	}
	var labels yarnpb.GetClusterNodeLabelsResponseProto
	call("getClusterNodeLabels", &yarnpb.GetClusterNodeLabelsRequestProto{}, &labels)
	if len(labels.GetNodeLabels()) != 3 {
		t.Errorf("node labels %v, want gpu, sc1, sc2", labels.GetNodeLabels())
	}
	var byLabel yarnpb.GetLabelsToNodesResponseProto
	call("getLabelsToNodes", &yarnpb.GetLabelsToNodesRequestProto{}, &byLabel)
	if l := byLabel.GetLabelsToNodes(); len(l) != 1 || len(l[0].GetNodeId()) != 2 {
		t.Errorf("labels to nodes %v, want gpu on both sub-clusters' nodes", l)
	}
	var byNode yarnpb.GetNodesToLabelsResponseProto
	call("getNodeToLabels", &yarnpb.GetNodesToLabelsRequestProto{}, &byNode)
	if len(byNode.GetNodeToLabels()) != 2 {
		t.Errorf("nodes to labels %v", byNode.GetNodeToLabels())
	}
	var attrs yarnpb.GetClusterNodeAttributesResponseProto
	call("getClusterNodeAttributes", &yarnpb.GetClusterNodeAttributesRequestProto{}, &attrs)
	if len(attrs.GetNodeAttributes()) != 1 {
		t.Errorf("node attributes %v, want the one both share", attrs.GetNodeAttributes())
	}
	var byAttr yarnpb.GetAttributesToNodesResponseProto
	call("getAttributesToNodes", &yarnpb.GetAttributesToNodesRequestProto{}, &byAttr)
	if a := byAttr.GetAttributesToNodes(); len(a) != 1 || len(a[0].GetNodeValueMap()) != 2 {
		t.Errorf("attributes to nodes %v, want zone on both sub-clusters' nodes", a)
	}
	var nodeAttrs yarnpb.GetNodesToAttributesResponseProto
	call("getNodesToAttributes", &yarnpb.GetNodesToAttributesRequestProto{}, &nodeAttrs)
	if len(nodeAttrs.GetNodesToAttributes()) != 2 {
		t.Errorf("nodes to attributes %v", nodeAttrs.GetNodesToAttributes())
	}
	var types yarnpb.GetAllResourceTypeInfoResponseProto
	call("getResourceTypeInfo", &yarnpb.GetAllResourceTypeInfoRequestProto{}, &types)
	if len(types.GetResourceTypeInfo()) != 2 {
		t.Errorf("resource types %v, want the 2 distinct", types.GetResourceTypeInfo())
	}
}

func TestMergedApplicationsAddUnmanagedSharesToTheirApplication(t *testing.T) {
	id := func(n int32) *yarnpb.ApplicationIdProto {
		return yarnid.ApplicationID{ClusterTimestamp: 1, ID: n}.Proto()
	}
	usage := func(n int32) *yarnpb.ApplicationResourceUsageReportProto {
		return &yarnpb.ApplicationResourceUsageReportProto{NumUsedContainers: proto.Int32(n), UsedResources: yarnpb.NewResource(int64(n)*1024, n), MemorySeconds: proto.Int64(int64(n))}
	}
	home := &yarnpb.GetApplicationsResponseProto{Applications: []*yarnpb.ApplicationReportProto{
		{ApplicationId: id(1), Name: proto.String("job"), AppResource_Usage: usage(2)},
	}}
	secondary := &yarnpb.GetApplicationsResponseProto{Applications: []*yarnpb.ApplicationReportProto{
		{ApplicationId: id(1), Name: proto.String(uamAppName), UnmanagedApplication: proto.Bool(true), AppResource_Usage: usage(3)},
		{ApplicationId: id(2), Name: proto.String(uamAppName), UnmanagedApplication: proto.Bool(true), AppResource_Usage: usage(1)},
		{ApplicationId: id(3), Name: proto.String("my unmanaged AM"), UnmanagedApplication: proto.Bool(true)},
	}}
	got := mergeApplications([]*yarnpb.GetApplicationsResponseProto{secondary, home}).GetApplications()
	if len(got) != 2 {
		t.Fatalf("merged %d reports, want 2 (the AMRMProxy's orphan share dropped): %v", len(got), got)
	}
	byID := map[string]*yarnpb.ApplicationReportProto{}
	for _, r := range got {
		byID[appKey(r.GetApplicationId())] = r
	}
	u := byID["application_1_0001"].GetAppResource_Usage()
	if u.GetNumUsedContainers() != 5 || u.GetMemorySeconds() != 5 || u.GetUsedResources().GetMemory() != 5*1024 {
		t.Errorf("merged usage %v, want the sums", u)
	}
	if byID["application_1_0003"] == nil {
		t.Error("a user's own unmanaged application was dropped")
	}
}

// The Router's own default policy must route.
func TestNewRefusesADefaultPolicyItCannotRoute(t *testing.T) {
	_, err := New(Config{Store: store.NewCache(store.NewMemory(nil), 0, nil), DefaultPolicy: store.PolicyConfiguration{Queue: "*", Type: "org.example.LoadBasedPolicyManager"}})
	if !errors.Is(err, yarnerr.FederationPolicyInitialization) {
		t.Errorf("err %v, want FederationPolicyInitializationException", err)
	}
	_, err = New(Config{Store: store.NewCache(store.NewMemory(nil), 0, nil), DefaultPolicy: store.PolicyConfiguration{Queue: "*", Type: federation.WeightedHomePolicyManager}})
	if err == nil {
		t.Error("a weighted default without weights was accepted")
	}
}

// An RM failover moves a sub-cluster's address while the Router's cache
// still holds the old one: a call that cannot reach it reads the store
// past the cache and goes to the new address.
func TestACallFollowsASubClusterWhoseRMMovedBehindTheCache(t *testing.T) {
	s := store.NewMemory(nil)
	moved := startRM(t, "sc1", 5)
	old := &fakeRM{id: "sc1", ts: 1, addr: "127.0.0.1:1"} // the RM that was active, gone
	join(t, s, old)
	cache := store.NewCache(s, time.Hour, nil)
	if active, err := cache.GetSubClusters(t.Context(), true); err != nil || len(active) != 1 {
		t.Fatalf("cached %v, %v", active, err)
	}
	_, c := serveRouter(t, s, routerOptions{cache: cache})
	join(t, s, moved) // the new active RM registers, behind the cache's back
	resp, err := c.GetNewApplication(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetApplicationId().GetClusterTimestamp() != moved.ts {
		t.Errorf("id %v, want one of the moved RM", resp.GetApplicationId())
	}
}

// When every sub-cluster refuses a fanned-out call with one exception,
// the client gets that exception; otherwise YARN's Router's YarnException.
func TestAFannedOutRefusalIsTheSubClustersOwnOnlyWhenAllAgree(t *testing.T) {
	tests := []struct {
		name      string
		withDown  bool
		wantClass yarnerr.Class
	}{
		{"every sub-cluster has profiles off", false, yarnerr.YARNFeatureNotEnabled},
		{"one sub-cluster cannot be reached", true, yarnerr.YarnException},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := store.NewMemory(nil)
			join(t, s, startRM(t, "sc1", 1))
			if tt.withDown {
				join(t, s, &fakeRM{id: "sc2", ts: 2, addr: "127.0.0.1:1"})
			}
			addr, _ := serveRouter(t, s, routerOptions{})
			err := rawCall(t, addr, "getResourceProfiles", &yarnpb.GetAllResourceProfilesRequestProto{}, &yarnpb.GetAllResourceProfilesResponseProto{})
			e, ok := yarnerr.Find(err)
			if !ok || e.Class != tt.wantClass {
				t.Errorf("err %v, want %s", err, tt.wantClass)
			}
		})
	}
}
