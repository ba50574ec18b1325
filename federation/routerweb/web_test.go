package routerweb

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
)

const (
	ts1 = "1795333013199"
	ts2 = "1795333099999"
)

// appsOf reads the merged list's applications by id.
func appsOf(t *testing.T, b []byte) map[string]map[string]any {
	t.Helper()
	var body struct {
		Apps struct {
			App []map[string]any `json:"app"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	out := map[string]map[string]any{}
	for _, a := range body.Apps.App {
		out[a["id"].(string)] = a
	}
	return out
}

func recordedApps(t *testing.T, rm *fakeRM) map[string]map[string]any {
	return appsOf(t, rm.own(readRecorded(t, "cluster_apps.json")))
}

// Cluster-wide reads are fanned out to every sub-cluster and merged as
// YARN's Router merges them; what a sub-cluster refuses is refused.
func TestFannedOutReadsMergeTheSubClustersAnswers(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	// SC-2 runs a UAM of SC-1's running application 0003, and reports
	// the node both share later than SC-1.
	uam := `{"id":"application_` + ts1 + `_0003","name":"UnmanagedAM application_` + ts1 + `_0003","state":"RUNNING",` +
		`"allocatedMB":1024,"allocatedVCores":1,"runningContainers":1,"preemptedResourceMB":5}`
	apps2 := strings.Replace(string(sc2.own(readRecorded(t, "cluster_apps.json"))), `"app": [`, `"app": [`+uam+`,`, 1)
	sc2.set("/ws/v1/cluster/apps", []byte(apps2))
	sc2.set("/ws/v1/cluster/nodes", []byte(strings.Replace(string(readRecorded(t, "cluster_nodes.json")),
		`"lastHealthUpdate": 1795333008583`, `"lastHealthUpdate": 1795333099999`, 1)))
	f := federationOf(t, uniform(), sc1, sc2)

	for _, tc := range []struct {
		name, path string
		status     int
		check      func(t *testing.T, b []byte)
	}{
		{"applications of both sub-clusters, UAM shares added to their AM's report", "/ws/v1/cluster/apps", http.StatusOK, func(t *testing.T, b []byte) {
			got, want1, want2 := appsOf(t, b), recordedApps(t, sc1), recordedApps(t, sc2)
			if len(got) != len(want1)+len(want2) {
				t.Fatalf("got %d applications, want %d: %s", len(got), len(want1)+len(want2), b)
			}
			for id, w := range want2 {
				if !reflect.DeepEqual(got[id], w) {
					t.Errorf("%s = %v, want the sub-cluster's report %v", id, got[id], w)
				}
			}
			home := want1["application_"+ts1+"_0003"]
			merged := got["application_"+ts1+"_0003"]
			for k, add := range map[string]float64{"allocatedMB": 1024, "allocatedVCores": 1, "runningContainers": 1, "preemptedResourceMB": 5} {
				if merged[k] != home[k].(float64)+add {
					t.Errorf("%s = %v, want the AM's %v plus the UAM's %v", k, merged[k], home[k], add)
				}
			}
			if merged["name"] != home["name"] || merged["amHostHttpAddress"] != home["amHostHttpAddress"] {
				t.Errorf("the merged report is not the AM's: %v", merged)
			}
		}},
		{"the query reaches every sub-cluster and a refusal is the RM's own", "/ws/v1/cluster/apps?states=BOGUS", http.StatusBadRequest, func(t *testing.T, b []byte) {
			if !reflect.DeepEqual(jsonOf(t, b), jsonOf(t, readRecorded(t, "cluster_apps@states=BOGUS.400.json"))) {
				t.Errorf("got %s, want the recorded 400", b)
			}
		}},
		{"metrics summed", "/ws/v1/cluster/metrics", http.StatusOK, func(t *testing.T, b []byte) {
			got, err := metricsOf(b)
			if err != nil {
				t.Fatal(err)
			}
			one, err := metricsOf(readRecorded(t, "cluster_metrics.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got.AppsSubmitted != 2*one.AppsSubmitted || got.TotalMB != 2*one.TotalMB || got.ActiveNodes != 2*one.ActiveNodes ||
				got.AllocatedVirtualCores != 2*one.AllocatedVirtualCores {
				t.Errorf("got %+v, want twice %+v", got, one)
			}
		}},
		{"a node both report is the newer report", "/ws/v1/cluster/nodes", http.StatusOK, func(t *testing.T, b []byte) {
			var body struct {
				Nodes struct {
					Node []map[string]any `json:"node"`
				} `json:"nodes"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Nodes.Node) != 1 || body.Nodes.Node[0]["lastHealthUpdate"] != float64(1795333099999) {
				t.Errorf("got %s, want SC-2's report of the one node", b)
			}
		}},
		{"one node asked of every sub-cluster", "/ws/v1/cluster/nodes/localhost:8141", http.StatusOK, func(t *testing.T, b []byte) {
			if !reflect.DeepEqual(jsonOf(t, b), jsonOf(t, readRecorded(t, "cluster_nodes_localhost_8141.json"))) {
				t.Errorf("got %s, want the recorded node", b)
			}
		}},
		{"a node no sub-cluster knows is not found", "/ws/v1/cluster/nodes/nowhere:1", http.StatusNotFound, func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), `"exception":"NotFoundException","message":"java.lang.Exception: nodeId, nowhere:1, is not found"`) {
				t.Errorf("got %s", b)
			}
		}},
		{"cluster info per sub-cluster", "/ws/v1/cluster/info", http.StatusOK, func(t *testing.T, b []byte) {
			checkPerSubCluster(t, b, "federationClusterInfo", "cluster_info.json", "clusterInfo")
		}},
		{"scheduler per sub-cluster", "/ws/v1/cluster/scheduler", http.StatusOK, func(t *testing.T, b []byte) {
			checkPerSubCluster(t, b, "federationSchedulerTypeInfo", "cluster_scheduler.json", "scheduler")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := do(t, http.MethodGet, f.web.URL+tc.path, "")
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			tc.check(t, b)
		})
	}
}

// checkPerSubCluster checks a list of each sub-cluster's recorded answer
// marked with its id.
func checkPerSubCluster(t *testing.T, b []byte, root, file, key string) {
	t.Helper()
	var body map[string]struct {
		SubCluster []map[string]any `json:"subCluster"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	list := body[root].SubCluster
	if len(list) != 2 || list[0]["subClusterId"] != "SC-1" || list[1]["subClusterId"] != "SC-2" {
		t.Fatalf("got %s, want SC-1 and SC-2", b)
	}
	var rec map[string]map[string]any
	if err := json.Unmarshal(readRecorded(t, file), &rec); err != nil {
		t.Fatal(err)
	}
	want := rec[key]
	if key == "scheduler" {
		want = map[string]any{"schedulerInfo": want["schedulerInfo"]}
	}
	delete(list[0], "subClusterId")
	if !reflect.DeepEqual(list[0], want) {
		t.Errorf("got %v, want the recorded %v", list[0], want)
	}
}

// A call about one application reaches its home only, and the home's
// answer is the answer.
func TestCallsAboutAnApplicationGoToItsHome(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationOf(t, uniform(), sc1, sc2)
	app := "application_" + ts2 + "_0002"
	if _, err := f.store.AddApplicationHomeSubCluster(context.Background(), store.ApplicationHome{Application: app, Home: "SC-2"}); err != nil {
		t.Fatal(err)
	}
	// What the home serves of the resources the recorded RM was not asked
	// about; the Router passes it on unread.
	served := []byte(`{"served":"by SC-2"}`)
	for _, path := range []string{"/appattempts/appattempt_" + ts2 + "_0002_000001", "/appattempts/appattempt_" + ts2 + "_0002_000001/containers",
		"/appattempts/appattempt_" + ts2 + "_0002_000001/containers/container_" + ts2 + "_0002_01_000001", "/priority", "/priority?user.name=root",
		"/queue", "/queue?user.name=root", "/timeouts", "/timeouts/LIFETIME", "/timeout?user.name=root"} {
		sc2.set("/ws/v1/cluster/apps/"+app+path, served)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     []byte
		contains                 string
	}{
		{"the report", http.MethodGet, "/ws/v1/cluster/apps/" + app, "", http.StatusOK, sc2.own(readRecorded(t, "cluster_apps_application_1795333013199_0002.json")), ""},
		{"the state", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/state", "", http.StatusOK, sc2.own(readRecorded(t, "cluster_apps_application_1795333013199_0002_state.json")), ""},
		{"the attempts", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/appattempts", "", http.StatusOK, sc2.own(readRecorded(t, "cluster_apps_application_1795333013199_0002_appattempts.json")), ""},
		{"a kill is the home's answer", http.MethodPut, "/ws/v1/cluster/apps/" + app + "/state?user.name=root", `{"state":"KILLED"}`, http.StatusNotFound, nil, "not recorded: /ws/v1/cluster/apps/" + app + "/state?user.name=root"},
		{"an application without home is the RM's not found", http.MethodGet, "/ws/v1/cluster/apps/application_" + ts1 + "_9999", "", http.StatusNotFound,
			readRecorded(t, "cluster_apps_application_1795333013199_9999.404.json"), ""},
		{"an id that is no id is a bad request", http.MethodGet, "/ws/v1/cluster/apps/job_1", "", http.StatusBadRequest, nil, `"exception":"BadRequestException","message":"Invalid ApplicationId prefix: job_1.`},
		{"an attempt", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/appattempts/appattempt_" + ts2 + "_0002_000001", "", http.StatusOK, served, ""},
		{"an attempt's containers", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/appattempts/appattempt_" + ts2 + "_0002_000001/containers", "", http.StatusOK, served, ""},
		{"a container", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/appattempts/appattempt_" + ts2 + "_0002_000001/containers/container_" + ts2 + "_0002_01_000001", "", http.StatusOK, served, ""},
		{"the priority", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/priority", "", http.StatusOK, served, ""},
		{"a new priority", http.MethodPut, "/ws/v1/cluster/apps/" + app + "/priority?user.name=root", `{"priority":3}`, http.StatusOK, served, ""},
		{"the queue", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/queue", "", http.StatusOK, served, ""},
		{"a move", http.MethodPut, "/ws/v1/cluster/apps/" + app + "/queue?user.name=root", `{"queue":"b"}`, http.StatusOK, served, ""},
		{"the timeouts", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/timeouts", "", http.StatusOK, served, ""},
		{"one timeout", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/timeouts/LIFETIME", "", http.StatusOK, served, ""},
		{"a new timeout", http.MethodPut, "/ws/v1/cluster/apps/" + app + "/timeout?user.name=root", `{"timeout":{"type":"LIFETIME"}}`, http.StatusOK, served, ""},
		{"a resource the home does not serve is the home's not found", http.MethodGet, "/ws/v1/cluster/apps/" + app + "/timeouts/NONE", "", http.StatusNotFound, nil,
			"not recorded: /ws/v1/cluster/apps/" + app + "/timeouts/NONE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sc1.calls())
			status, _, b := do(t, tc.method, f.web.URL+tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if tc.want != nil && !reflect.DeepEqual(jsonOf(t, b), jsonOf(t, tc.want)) {
				t.Errorf("got %s, want the home's recorded answer", b)
			}
			if !strings.Contains(string(b), tc.contains) {
				t.Errorf("got %s, want it to hold %s", b, tc.contains)
			}
			if after := sc1.calls(); len(after) != before {
				t.Errorf("SC-1, not the home, was called: %v", after[before:])
			}
		})
	}
}

// A call about an application follows its home's RM to the web address
// it registered after a failover, past the Router's cache.
func TestACallFollowsAHomeWhoseRMMovedBehindTheCache(t *testing.T) {
	ctx := context.Background()
	sc1, old := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationCached(t, uniform(), time.Hour, sc1, old)
	app := "application_" + ts2 + "_0002"
	if _, err := f.store.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: "SC-2"}); err != nil {
		t.Fatal(err)
	}
	// The cache reads SC-2's old address, then its RM fails over.
	if status, _, b := do(t, http.MethodGet, f.web.URL+"/ws/v1/cluster/apps/"+app+"/state", ""); status != http.StatusOK {
		t.Fatalf("before the failover: %d %s", status, b)
	}
	moved := startRM(t, "SC-2", ts2)
	old.srv.Close()
	info, err := f.store.GetSubCluster(ctx, "SC-2")
	if err != nil {
		t.Fatal(err)
	}
	info.RMWebServiceAddress = moved.addr()
	if err := f.store.RegisterSubCluster(ctx, info); err != nil {
		t.Fatal(err)
	}
	status, _, b := do(t, http.MethodGet, f.web.URL+"/ws/v1/cluster/apps/"+app+"/state", "")
	if status != http.StatusOK || len(moved.calls()) != 1 {
		t.Errorf("after the failover: %d %s; the moved RM got %v", status, b, moved.calls())
	}
}

func TestAKillCarriesItsBodyToTheHome(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationOf(t, uniform(), sc1, sc2)
	app := "application_" + ts2 + "_0002"
	if _, err := f.store.AddApplicationHomeSubCluster(context.Background(), store.ApplicationHome{Application: app, Home: "SC-2"}); err != nil {
		t.Fatal(err)
	}
	path := "/ws/v1/cluster/apps/" + app + "/state"
	state := readRecorded(t, "cluster_apps_application_1795333013199_0002_state.json")
	sc2.set(path+"?user.name=root", state)
	status, _, b := do(t, http.MethodPut, f.web.URL+path+"?user.name=root", `{"state":"KILLED"}`)
	if status != http.StatusOK || !reflect.DeepEqual(jsonOf(t, b), jsonOf(t, state)) {
		t.Fatalf("got %d %s, want the home's answer", status, b)
	}
	sc2.mu.Lock()
	defer sc2.mu.Unlock()
	if last := sc2.bodies[len(sc2.bodies)-1]; string(last) != `{"state":"KILLED"}` {
		t.Errorf("the home got %q", last)
	}
}

// New applications and submissions go where the RPC Router's policy
// sends them, and the store records the home.
func TestNewApplicationAndSubmissionFollowTheRoutersPolicy(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	params, err := router.MarshalWeightedPolicyInfo(router.WeightedPolicyInfo{RouterWeights: map[string]float64{"SC-1": 0, "SC-2": 1}})
	if err != nil {
		t.Fatal(err)
	}
	f := federationOf(t, store.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.WeightedHomePolicyManager, Params: params}, sc1, sc2)

	status, _, b := do(t, http.MethodPost, f.web.URL+"/ws/v1/cluster/apps/new-application?user.name=root", "")
	if status != http.StatusOK || !strings.Contains(string(b), `"application-id"`) {
		t.Fatalf("new-application: %d %s", status, b)
	}
	app := "application_" + ts2 + "_0007"
	for _, tc := range []struct {
		name, body string
		status     int
		home       string
	}{
		{"a submission lands on the policy's pick", `{"application-id":"` + app + `","application-name":"sleep","queue":"default"}`, http.StatusAccepted, "SC-2"},
		{"a submission without id is refused before it is placed", `{"application-name":"sleep"}`, http.StatusBadRequest, ""},
		{"a body that is no JSON is refused", `<application-submission-context/>`, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := do(t, http.MethodPost, f.web.URL+"/ws/v1/cluster/apps?user.name=root", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if tc.home == "" {
				return
			}
			if loc := h.Get("Location"); loc != f.web.URL+"/ws/v1/cluster/apps/"+app {
				t.Errorf("Location %q, want the Router's", loc)
			}
			home, err := f.store.GetApplicationHomeSubCluster(context.Background(), app)
			if err != nil || home != tc.home {
				t.Errorf("home %q, %v; want %s", home, err, tc.home)
			}
		})
	}
	for _, c := range sc1.calls() {
		if strings.HasPrefix(c, "POST /ws/v1/cluster/apps?") {
			t.Errorf("SC-1, weighted 0, was submitted to: %v", c)
		}
	}
}

// The federation page lists every sub-cluster with its heartbeat's
// figures, and escapes what the store holds.
func TestTheFederationPageListsTheSubClusters(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationOf(t, uniform(), sc1, sc2)
	ctx := context.Background()
	if err := f.store.SubClusterHeartbeat(ctx, "SC-2", store.StateRunning, `<script>alert(1)</script>`); err != nil {
		t.Fatal(err)
	}
	if err := f.store.RegisterSubCluster(ctx, store.SubClusterInfo{ID: "SC-<script>3", AMRMServiceAddress: "a:1", ClientRMServiceAddress: "c:1",
		RMAdminServiceAddress: "r:1", RMWebServiceAddress: "w:1", State: store.StateNew}); err != nil {
		t.Fatal(err)
	}
	status, h, _ := do(t, http.MethodGet, f.web.URL+"/", "")
	if status != http.StatusFound || h.Get("Location") != "/cluster/federation" {
		t.Fatalf("/ answered %d to %q, want a redirect to the federation page", status, h.Get("Location"))
	}
	status, _, b := do(t, http.MethodGet, f.web.URL+"/cluster/federation", "")
	page := string(b)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	one, err := metricsOf(readRecorded(t, "cluster_metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<a href="http://` + sc1.addr() + `/cluster">SC-1</a>`, "SC_RUNNING",
		`<td class="n">` + itoa(int64(one.AppsSubmitted)) + `</td>`,
		"capability unreadable", "SC-&lt;script&gt;3", "no heartbeat yet", "3 sub-cluster(s), 2 active",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Errorf("page holds the store's markup unescaped")
	}
}

// A sub-cluster whose RM cannot be reached costs a merged answer its
// share only, as YARN's Router leaves out a sub-cluster it cannot read.
func TestASubClusterThatCannotBeReachedIsLeftOutOfMergedAnswers(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationOf(t, uniform(), sc1, sc2)
	sc2.srv.Close()
	for _, tc := range []struct {
		name, path string
		check      func(t *testing.T, b []byte)
	}{
		{"applications", "/ws/v1/cluster/apps", func(t *testing.T, b []byte) {
			if got, want := appsOf(t, b), recordedApps(t, sc1); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want SC-1's alone", got)
			}
		}},
		{"metrics", "/ws/v1/cluster/metrics", func(t *testing.T, b []byte) {
			got, err := metricsOf(b)
			if err != nil {
				t.Fatal(err)
			}
			if one, _ := metricsOf(readRecorded(t, "cluster_metrics.json")); got.AppsSubmitted != one.AppsSubmitted {
				t.Errorf("appsSubmitted %d, want SC-1's %d", got.AppsSubmitted, one.AppsSubmitted)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := do(t, http.MethodGet, f.web.URL+tc.path, "")
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			tc.check(t, b)
		})
	}
}

// Paths and methods the Router does not serve are answered as the RM
// answers them.
func TestUnservedPathsAreTheRMsAnswers(t *testing.T) {
	f := federationOf(t, uniform(), startRM(t, "SC-1", ts1))
	for _, tc := range []struct {
		name, method, path string
		status             int
		exception          string
	}{
		{"a resource the Router lacks", http.MethodGet, "/ws/v1/cluster/reservation/list", http.StatusNotFound, "NotFoundException"},
		{"a method a resource lacks", http.MethodDelete, "/ws/v1/cluster/metrics", http.StatusMethodNotAllowed, "WebApplicationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := do(t, tc.method, f.web.URL+tc.path, "")
			if status != tc.status || !strings.Contains(string(b), `"exception":"`+tc.exception+`"`) {
				t.Errorf("got %d %s, want %d %s", status, b, tc.status, tc.exception)
			}
		})
	}
}

// A merged view is answered as XML to a caller that prefers it, as a
// single RM answers, the sub-clusters asked in JSON as always.
func TestAMergedViewIsXMLToACallerThatPrefersIt(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	f := federationOf(t, uniform(), sc1, sc2)
	req, err := http.NewRequest(http.MethodGet, f.web.URL+"/ws/v1/cluster/apps", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var apps struct {
		XMLName xml.Name `xml:"apps"`
		App     []struct {
			ID string `xml:"id"`
		} `xml:"app"`
	}
	if err := xml.NewDecoder(resp.Body).Decode(&apps); err != nil || resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") {
		t.Fatalf("status %d, %s: %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if want := len(recordedApps(t, sc1)) + len(recordedApps(t, sc2)); len(apps.App) != want {
		t.Errorf("%d applications as XML, want both sub-clusters' %d", len(apps.App), want)
	}
}
