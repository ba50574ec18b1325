package routerweb

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/rest"
	"github.com/knitdev/knit/rm/rmtest"
)

// knitRM is a real knit-rm's REST API, in memory, as a sub-cluster.
type knitRM struct {
	id, url string
}

// startKnitRM runs a ResourceManager with queues default and b open to
// every submitter and administered by none, ACLs on, two running nodes
// (one in partition, when it is not empty), and its REST API.
func startKnitRM(t *testing.T, id string, clusterTimestamp int64, partition string) knitRM {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range map[string]string{
		"yarn.scheduler.capacity.root.queues":                          "default,b",
		"yarn.scheduler.capacity.root.default.capacity":                "50",
		"yarn.scheduler.capacity.root.b.capacity":                      "50",
		"yarn.scheduler.capacity.root.acl_submit_applications":         " ",
		"yarn.scheduler.capacity.root.acl_administer_queue":            " ",
		"yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
		"yarn.scheduler.capacity.root.b.acl_submit_applications":       "*",
	} {
		c.Set(k, v)
	}
	// ACLs on, as YARN checks MODIFY_APP only with yarn.acl.enable.
	tree, err := queues.Build(c, queues.Options{ACLsEnabled: true, AdminACL: acl.Parse(" ")})
	if err != nil {
		t.Fatal(err)
	}
	settings := conf.DefaultRMSettings()
	settings.ACLEnable = true
	running := yarnpb.NodeStateProto_NS_RUNNING
	nodes := rmtest.NodeList{
		{Name: "n1", Host: id + "-n1", NMPort: 8041, State: running, CapabilityMB: 8192, CapabilityVcores: 8},
		{Name: "n2", Host: id + "-n2", NMPort: 8041, State: running, CapabilityMB: 8192, CapabilityVcores: 8, Partition: partition},
	}
	r, err := rm.New(rm.Config{
		Settings: settings, Queues: tree, Store: rmtest.NewMemoryStore(), IDs: &rmtest.MemoryIDs{ClusterTimestamp: clusterTimestamp},
		Nodes: nodes, MaxApplicationPriority: 10, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Cluster: r.REST(), Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return knitRM{id: id, url: srv.URL}
}

// submit submits an application of the type over the RM's own REST API
// as alice and returns its id.
func (k knitRM) submit(t *testing.T, appType string) string {
	t.Helper()
	status, _, b := do(t, http.MethodPost, k.url+"/ws/v1/cluster/apps/new-application?user.name=alice", "")
	var newApp struct {
		ID string `json:"application-id"`
	}
	if err := json.Unmarshal(b, &newApp); status != http.StatusOK || err != nil {
		t.Fatalf("new-application: %d %s", status, b)
	}
	body := fmt.Sprintf(`{"application-id":%q,"application-name":"job","queue":"default","am-container-spec":{"commands":{"command":"sleep 100"}},`+
		`"resource":{"memory":1024,"vCores":1},"application-type":%q}`, newApp.ID, appType)
	if status, _, b := do(t, http.MethodPost, k.url+"/ws/v1/cluster/apps?user.name=alice", body); status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", status, b)
	}
	return newApp.ID
}

// routerOver is the Router's web API over the sub-clusters.
func routerOver(t *testing.T, rms ...knitRM) (*store.Memory, string) {
	t.Helper()
	ctx := context.Background()
	s := store.NewMemory(nil)
	for _, k := range rms {
		if err := s.RegisterSubCluster(ctx, store.SubClusterInfo{ID: k.id, AMRMServiceAddress: "amrm:8030", ClientRMServiceAddress: "client:8032",
			RMAdminServiceAddress: "admin:8033", RMWebServiceAddress: strings.TrimPrefix(k.url, "http://"), State: store.StateRunning,
			LastStartTime: time.UnixMilli(1795333013199)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SubClusterHeartbeat(ctx, k.id, store.StateRunning, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	cache := store.NewCache(s, 0, nil)
	r, err := router.New(router.Config{Store: cache, DefaultPolicy: uniform(), SubmitRetry: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	w, err := New(Config{Store: cache, Placer: r, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// TestRoutedCallsReachAKnitRMsResources sends the calls about one
// application that FederationInterceptorREST routes to its home through
// the Router to real knit-rm REST APIs: the home answers, the other
// sub-cluster is not asked.
func TestRoutedCallsReachAKnitRMsResources(t *testing.T) {
	sc1, sc2 := startKnitRM(t, "SC-1", 1700000000001, ""), startKnitRM(t, "SC-2", 1700000000002, "")
	s, router := routerOver(t, sc1, sc2)
	app := sc2.submit(t, "YARN")
	if _, err := s.AddApplicationHomeSubCluster(context.Background(), store.ApplicationHome{Application: app, Home: "SC-2"}); err != nil {
		t.Fatal(err)
	}
	attempt := "appattempt_" + strings.TrimPrefix(app, "application_") + "_000001"
	base := router + "/ws/v1/cluster/apps/" + app
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string // the body, or a part of it when prefixed with ~
	}{
		{"set the priority", http.MethodPut, "/priority?user.name=alice", `{"priority":4}`, http.StatusOK, `{"priority":4}`},
		{"read the priority", http.MethodGet, "/priority", "", http.StatusOK, `{"priority":4}`},
		{"refuse another user's priority", http.MethodPut, "/priority?user.name=mallory", `{"priority":5}`, http.StatusForbidden,
			"~Unauthorized attempt to change priority of appid " + app + " by remote user mallory"},
		{"move", http.MethodPut, "/queue?user.name=alice", `{"queue":"b"}`, http.StatusOK, `{"queue":"root.b"}`},
		{"read the queue", http.MethodGet, "/queue", "", http.StatusOK, `{"queue":"root.b"}`},
		{"read the timeouts", http.MethodGet, "/timeouts", "", http.StatusOK,
			`{"timeouts":{"timeout":[{"type":"LIFETIME","expiryTime":"UNLIMITED","remainingTimeInSeconds":-1}]}}`},
		{"read one timeout", http.MethodGet, "/timeouts/LIFETIME", "", http.StatusOK,
			`{"timeout":{"type":"LIFETIME","expiryTime":"UNLIMITED","remainingTimeInSeconds":-1}}`},
		{"set a timeout in another format", http.MethodPut, "/timeout?user.name=alice", `{"timeout":{"type":"LIFETIME","expiryTime":"soon"}}`,
			http.StatusBadRequest, "~Expire time is not in ISO8601 format"},
		{"read an attempt", http.MethodGet, "/appattempts/" + attempt + "?user.name=alice", "", http.StatusOK, `~"appAttemptId":"` + attempt + `"`},
		{"read its containers", http.MethodGet, "/appattempts/" + attempt + "/containers?user.name=alice", "", http.StatusOK, `{"containers":{}}`},
		{"read a container it lacks", http.MethodGet, "/appattempts/" + attempt + "/containers/container_" + strings.TrimPrefix(app, "application_") + "_01_000001?user.name=alice",
			"", http.StatusNotFound, "~ContainerNotFoundException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := do(t, tc.method, base+tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if want, part := strings.CutPrefix(tc.want, "~"); (part && !strings.Contains(string(b), want)) || (!part && string(b) != want) {
				t.Errorf("got %s, want %s", b, tc.want)
			}
		})
	}
}

// TestStatisticsAndNodeLabelsAreTheKnitRMsMerged fans the application
// statistics and the node-label resources out to real knit-rm REST APIs
// and merges them as FederationInterceptorREST does.
func TestStatisticsAndNodeLabelsAreTheKnitRMsMerged(t *testing.T) {
	sc1, sc2 := startKnitRM(t, "SC-1", 1700000000001, "gpu"), startKnitRM(t, "SC-2", 1700000000002, "gpu")
	_, router := routerOver(t, sc1, sc2)
	sc1.submit(t, "YARN")
	sc1.submit(t, "MAPREDUCE")
	sc2.submit(t, "YARN")
	for path, want := range map[string]string{
		"/appstatistics?states=accepted,running":               `{"appStatInfo":{"statItem":[{"state":"ACCEPTED","type":"*","count":3},{"state":"RUNNING","type":"*","count":0}]}}`,
		"/appstatistics?states=accepted&applicationTypes=yarn": `{"appStatInfo":{"statItem":[{"state":"ACCEPTED","type":"yarn","count":2}]}}`,
		"/get-node-labels": `{"nodeLabelsInfo":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}}`,
		"/get-node-to-labels": `{"nodeToLabelsInfo":{"nodeToLabels":{"entry":{"key":"SC-1-n2:8041","value":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}},` +
			`"entry":{"key":"SC-2-n2:8041","value":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}}}}}`,
		"/label-mappings?labels=gpu":     `{"labelsToNodesInfo":{"labelsToNodes":{"entry":{"key":{"name":"gpu","exclusivity":true},"value":{"nodes":["SC-1-n2:8041","SC-2-n2:8041"]}}}}}`,
		"/nodes/SC-2-n2:8041/get-labels": `{"nodeLabelsInfo":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}}`,
		"/nodes/SC-2-n1:8041/get-labels": `{"nodeLabelsInfo":{}}`,
	} {
		status, _, b := do(t, http.MethodGet, router+"/ws/v1/cluster"+path, "")
		if status != http.StatusOK || string(b) != want {
			t.Errorf("%s: %d %s\nwant %s", path, status, b, want)
		}
	}
	// A query every sub-cluster refuses is their refusal.
	status, _, b := do(t, http.MethodGet, router+"/ws/v1/cluster/appstatistics?states=BOGUS", "")
	if status != http.StatusBadRequest || !strings.Contains(string(b), "Invalid application-state BOGUS specified") {
		t.Errorf("bad state: %d %s", status, b)
	}
}
