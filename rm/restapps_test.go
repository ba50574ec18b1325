package rm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// TestRESTUpdatesAreTheRPCs changes an application over REST and reads
// it back over RPC, and the other way round: both reach one application
// through one implementation.
func TestRESTUpdatesAreTheRPCs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.rm.live.maxPriority.Store(5)
	srv := restServer(t, e)
	c := e.client("alice")
	pid := e.mustSubmit(c, subOpts{})
	id := appIDOf(t, pid).String()
	app := srv.URL + "/ws/v1/cluster/apps/" + id
	expiry := e.clock.Now().Add(time.Hour).UTC().Format(iso8601Layout)

	tests := []struct {
		name, method, path, body string
		want                     string
		// rpc checks the report the RPC gives afterwards.
		rpc func(r *yarnpb.ApplicationReportProto) bool
	}{
		{name: "priority", method: http.MethodPut, path: "/priority", body: `{"priority":3}`, want: `{"priority":3}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetPriority().GetPriority() == 3 }},
		{name: "priority above the maximum", method: http.MethodPut, path: "/priority", body: `{"priority":9}`, want: `{"priority":5}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetPriority().GetPriority() == 5 }},
		{name: "read priority", method: http.MethodGet, path: "/priority", want: `{"priority":5}`},
		{name: "move", method: http.MethodPut, path: "/queue", body: `{"queue":"b"}`, want: `{"queue":"root.b"}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetQueue() == "root.b" }},
		{name: "read queue", method: http.MethodGet, path: "/queue", want: `{"queue":"root.b"}`},
		{name: "timeout", method: http.MethodPut, path: "/timeout", body: `{"timeout":{"type":"LIFETIME","expiryTime":"` + expiry + `"}}`,
			want: `{"timeout":{"type":"LIFETIME","expiryTime":"` + expiry + `","remainingTimeInSeconds":3600}}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool {
				return r.GetAppTimeouts()[0].GetApplicationTimeout().GetExpireTime() == expiry
			}},
		{name: "read timeouts", method: http.MethodGet, path: "/timeouts",
			want: `{"timeouts":{"timeout":[{"type":"LIFETIME","expiryTime":"` + expiry + `","remainingTimeInSeconds":3600}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := doREST(t, tt.method, app+tt.path+"?user.name=alice", tt.body)
			if code != http.StatusOK || string(b) != tt.want {
				t.Fatalf("%d %s, want %s", code, b, tt.want)
			}
			if tt.rpc != nil && !tt.rpc(e.report(c, pid)) {
				t.Errorf("RPC report after REST: %v", e.report(c, pid))
			}
		})
	}
}

func TestRESTAttemptAndContainersAreTheRPCsReports(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	c := e.client("alice")
	pid := e.mustSubmit(c, subOpts{})
	id := appIDOf(t, pid)
	attempt := srv.URL + "/ws/v1/cluster/apps/" + id.String() + "/appattempts/appattempt_" + strings.TrimPrefix(id.String(), "application_") + "_000001"

	code, b := doREST(t, http.MethodGet, attempt+"?user.name=alice", "")
	if code != http.StatusOK {
		t.Fatalf("attempt: %d %s", code, b)
	}
	var got struct {
		AppAttempt struct {
			AppAttemptID, AppAttemptState string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	rpc := mustCall(t, c, "getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: pid},
		&yarnpb.GetApplicationAttemptsResponseProto{}).GetApplicationAttempts()
	if len(rpc) != 1 || got.AppAttempt.AppAttemptState != strings.TrimPrefix(rpc[0].GetYarnApplicationAttemptState().String(), "APP_ATTEMPT_") ||
		!strings.HasSuffix(got.AppAttempt.AppAttemptID, "_000001") {
		t.Errorf("REST attempt %+v, RPC %v", got.AppAttempt, rpc)
	}
	// No pod was bound: the attempt has no containers yet.
	if code, b := doREST(t, http.MethodGet, attempt+"/containers?user.name=alice", ""); code != http.StatusOK || string(b) != `{"containers":{}}` {
		t.Errorf("containers: %d %s", code, b)
	}
	code, b = doREST(t, http.MethodGet, attempt+"/containers/container_"+strings.TrimPrefix(id.String(), "application_")+"_01_000001?user.name=alice", "")
	if code != http.StatusNotFound || !strings.Contains(string(b), "ContainerNotFoundException") {
		t.Errorf("absent container: %d %s", code, b)
	}
}

func TestRESTAppStatisticsCountTheRMsApplications(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	c := e.client("alice")
	e.mustSubmit(c, subOpts{})
	killed := e.mustSubmit(c, subOpts{})
	mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: killed}, &yarnpb.KillApplicationResponseProto{})

	code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/appstatistics?states=accepted,killed,running", "")
	want := `{"appStatInfo":{"statItem":[{"state":"ACCEPTED","type":"*","count":1},{"state":"RUNNING","type":"*","count":0},{"state":"KILLED","type":"*","count":1}]}}`
	if code != http.StatusOK || string(b) != want {
		t.Errorf("%d %s\nwant %s", code, b, want)
	}
}

// TestNodeLabelQueriesAnswerThePartitions reads Knit's node-label
// partitions over RPC and REST: the labels nodes carry or queues may use,
// each node's, each label's nodes.
func TestNodeLabelQueriesAnswerThePartitions(t *testing.T) {
	running := yarnpb.NodeStateProto_NS_RUNNING
	node := func(host, partition string) NodeInfo {
		return NodeInfo{Name: host, Host: host, NMPort: 8041, State: running, CapabilityMB: 8192, CapabilityVcores: 8, Partition: partition}
	}
	e := newEnv(t, envOptions{
		queues: baseQueues(map[string]string{
			"yarn.scheduler.capacity.root.b.accessible-node-labels":              "gpu,fpga",
			"yarn.scheduler.capacity.root.b.accessible-node-labels.gpu.capacity": "100",
		}),
		nodes: fixedNodes{node("n1", ""), node("g2", "gpu"), node("g1", "gpu"), node("s1", "ssd")},
	})
	srv := restServer(t, e)
	c := e.client("alice")

	labels := mustCall(t, c, "getClusterNodeLabels", &yarnpb.GetClusterNodeLabelsRequestProto{}, &yarnpb.GetClusterNodeLabelsResponseProto{})
	var names []string
	for _, l := range labels.GetNodeLabels() {
		names = append(names, l.GetName())
		if !l.GetIsExclusive() {
			t.Errorf("label %s not exclusive", l.GetName())
		}
	}
	if strings.Join(names, ",") != "fpga,gpu,ssd" {
		t.Errorf("cluster node labels %v", names)
	}
	toLabels := mustCall(t, c, "getNodeToLabels", &yarnpb.GetNodesToLabelsRequestProto{}, &yarnpb.GetNodesToLabelsResponseProto{})
	var pairs []string
	for _, m := range toLabels.GetNodeToLabels() {
		pairs = append(pairs, yarnid.NodeString(m.GetNodeId())+"="+strings.Join(m.GetNodeLabels(), "+"))
	}
	if strings.Join(pairs, ",") != "g1:8041=gpu,g2:8041=gpu,s1:8041=ssd" {
		t.Errorf("node to labels %v", pairs)
	}
	toNodes := mustCall(t, c, "getLabelsToNodes", &yarnpb.GetLabelsToNodesRequestProto{NodeLabels: []string{"gpu", "fpga"}}, &yarnpb.GetLabelsToNodesResponseProto{})
	if m := toNodes.GetLabelsToNodes(); len(m) != 1 || m[0].GetNodeLabels() != "gpu" || len(m[0].GetNodeId()) != 2 {
		t.Errorf("labels to nodes %v", m)
	}

	// A node's report names its partition as its label.
	nodes := mustCall(t, c, "getClusterNodes", &yarnpb.GetClusterNodesRequestProto{}, &yarnpb.GetClusterNodesResponseProto{})
	for _, n := range nodes.GetNodeReports() {
		want := map[string]string{"n1": "", "g1": "gpu", "g2": "gpu", "s1": "ssd"}[n.GetNodeId().GetHost()]
		if got := strings.Join(n.GetNodeLabels(), ","); got != want {
			t.Errorf("node %s labels %q, want %q", n.GetNodeId().GetHost(), got, want)
		}
	}
	if code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/nodes/g1:8041", ""); code != http.StatusOK || !strings.Contains(string(b), `"nodeLabels":["gpu"]`) {
		t.Errorf("REST node g1: %d %s", code, b)
	}
	for path, want := range map[string]string{
		"/get-node-labels": `{"nodeLabelsInfo":{"nodeLabelInfo":[{"name":"fpga","exclusivity":true},{"name":"gpu","exclusivity":true},{"name":"ssd","exclusivity":true}]}}`,
		"/get-node-to-labels": `{"nodeToLabelsInfo":{"nodeToLabels":{"entry":{"key":"g1:8041","value":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}},` +
			`"entry":{"key":"g2:8041","value":{"nodeLabelInfo":[{"name":"gpu","exclusivity":true}]}},"entry":{"key":"s1:8041","value":{"nodeLabelInfo":[{"name":"ssd","exclusivity":true}]}}}}}`,
		"/label-mappings?labels=gpu": `{"labelsToNodesInfo":{"labelsToNodes":{"entry":{"key":{"name":"gpu","exclusivity":true},"value":{"nodes":["g1:8041","g2:8041"]}}}}}`,
		"/nodes/s1:8041/get-labels":  `{"nodeLabelsInfo":{"nodeLabelInfo":[{"name":"ssd","exclusivity":true}]}}`,
		"/nodes/n1:8041/get-labels":  `{"nodeLabelsInfo":{}}`,
	} {
		if code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster"+path, ""); code != http.StatusOK || string(b) != want {
			t.Errorf("%s: %d %s\nwant %s", path, code, b, want)
		}
	}
}

// TestRESTContainersAreTheRPCs lists a running attempt's containers over
// REST and over RPC.
func TestRESTContainersAreTheRPCs(t *testing.T) {
	e := labelledEnv(t, "")
	srv := restServer(t, e)
	c := e.client("alice")
	apps := mustCall(t, c, "getApplications", &yarnpb.GetApplicationsRequestProto{}, &yarnpb.GetApplicationsResponseProto{}).GetApplications()
	if len(apps) != 1 {
		t.Fatalf("%d applications", len(apps))
	}
	aid, err := yarnid.AttemptIDFromProto(apps[0].GetCurrentApplicationAttemptId())
	if err != nil {
		t.Fatal(err)
	}
	rpc := mustCall(t, c, "getContainers", &yarnpb.GetContainersRequestProto{ApplicationAttemptId: aid.Proto()}, &yarnpb.GetContainersResponseProto{}).GetContainers()
	var want []string
	for _, r := range rpc {
		id, _ := yarnid.ContainerIDFromProto(r.GetContainerId())
		want = append(want, id.String())
	}
	base := srv.URL + "/ws/v1/cluster/apps/" + aid.App.String() + "/appattempts/" + aid.String() + "/containers"
	code, b := doREST(t, http.MethodGet, base+"?user.name=alice", "")
	var got struct {
		Containers struct {
			Container []struct {
				ContainerID, ContainerState, AssignedNodeID string
				AllocatedMB                                 int64
			}
		}
	}
	if err := json.Unmarshal(b, &got); code != http.StatusOK || err != nil {
		t.Fatalf("%d %s %v", code, b, err)
	}
	var ids []string
	for _, ct := range got.Containers.Container {
		ids = append(ids, ct.ContainerID)
		if ct.AssignedNodeID != "g1:8041" || ct.AllocatedMB == 0 {
			t.Errorf("container %+v", ct)
		}
	}
	if len(want) != 3 || strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("REST containers %v, RPC %v", ids, want)
	}
	code, b = doREST(t, http.MethodGet, base+"/"+want[1]+"?user.name=alice", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"containerId":"`+want[1]+`"`) {
		t.Errorf("one container: %d %s", code, b)
	}
}
