package rm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/rest"
	"github.com/knitdev/knit/scheduling"
	"github.com/knitdev/knit/test/recordings"
)

// restServer mounts the REST API on the env's RM, as the RM binary does, so
// REST and RPC calls reach the same applications.
func restServer(t *testing.T, e *env) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(rest.New(rest.Config{Cluster: e.rm.REST(), Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return srv
}

func doREST(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// restNewApp reserves an id over REST, as a REST client must before it
// submits.
func restNewApp(t *testing.T, base, user string) string {
	t.Helper()
	code, b := doREST(t, http.MethodPost, base+"/ws/v1/cluster/apps/new-application?user.name="+user, "")
	if code != http.StatusOK {
		t.Fatalf("new-application: %d %s", code, b)
	}
	var out struct {
		ID string `json:"application-id"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

func submission(id, queue string) string {
	return `{"application-id":"` + id + `","application-name":"rest-job","queue":"` + queue + `",` +
		`"am-container-spec":{"commands":{"command":"sleep 100"}},"resource":{"memory":1024,"vCores":1},` +
		`"application-type":"YARN"}`
}

type restApp struct {
	App struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Queue string `json:"queue"`
		User  string `json:"user"`
	} `json:"app"`
}

func getApp(t *testing.T, base, id, user string) restApp {
	t.Helper()
	code, b := doREST(t, http.MethodGet, base+"/ws/v1/cluster/apps/"+id+"?user.name="+user, "")
	if code != http.StatusOK {
		t.Fatalf("GET app: %d %s", code, b)
	}
	var a restApp
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRESTSubmissionAndKillAreTheRPCs(t *testing.T) {
	tests := []struct {
		name, queue, wantQueue string
	}{
		{name: "named queue", queue: "b", wantQueue: "root.b"},
		{name: "default queue", queue: "default", wantQueue: "root.default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			srv := restServer(t, e)
			id := restNewApp(t, srv.URL, "alice")
			code, b := doREST(t, http.MethodPost, srv.URL+"/ws/v1/cluster/apps?user.name=alice", submission(id, tt.queue))
			if code != http.StatusAccepted {
				t.Fatalf("submit: %d %s", code, b)
			}
			a := getApp(t, srv.URL, id, "alice")
			if a.App.State != "ACCEPTED" || a.App.Queue != tt.wantQueue || a.App.User != "alice" {
				t.Errorf("app = %+v, want ACCEPTED in %s by alice", a.App, tt.wantQueue)
			}
			// The application REST submitted is the RPC's: a YarnClient
			// sees it too.
			c := e.client("alice")
			pid := appIDOf(t, mustParseID(t, id)).Proto()
			if r := e.report(c, pid); r.GetQueue() != tt.wantQueue || r.GetName() != "rest-job" {
				t.Errorf("RPC report queue/name = %q/%q", r.GetQueue(), r.GetName())
			}

			code, b = doREST(t, http.MethodPut, srv.URL+"/ws/v1/cluster/apps/"+id+"/state?user.name=alice", `{"state":"KILLED"}`)
			if code != http.StatusOK && code != http.StatusAccepted {
				t.Fatalf("kill: %d %s", code, b)
			}
			if got := e.report(c, pid).GetYarnApplicationState(); got != yarnpb.YarnApplicationStateProto_KILLED {
				t.Errorf("RPC state after REST kill = %v, want KILLED", got)
			}
			if a := getApp(t, srv.URL, id, "alice"); a.App.State != "KILLED" {
				t.Errorf("REST state after kill = %s", a.App.State)
			}
		})
	}
}

func mustParseID(t *testing.T, s string) *yarnpb.ApplicationIdProto {
	t.Helper()
	p, err := parseAppID(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRESTRefusesWhatRPCRefusesWith403(t *testing.T) {
	queues := baseQueues(map[string]string{"yarn.scheduler.capacity.root.b.acl_submit_applications": "alice"})
	tests := []struct {
		name string
		// rpc makes the RPC call as mallory and returns its error.
		rpc func(t *testing.T, e *env, appID *yarnpb.ApplicationIdProto) error
		// method, path and body are the REST request of the same call.
		method, path, body func(id string) string
	}{
		{
			name: "kill another user's application",
			rpc: func(t *testing.T, e *env, appID *yarnpb.ApplicationIdProto) error {
				_, err := call(t, e.client("mallory"), "forceKillApplication",
					&yarnpb.KillApplicationRequestProto{ApplicationId: appID}, &yarnpb.KillApplicationResponseProto{})
				return err
			},
			method: func(string) string { return http.MethodPut },
			path:   func(id string) string { return "/ws/v1/cluster/apps/" + id + "/state" },
			body:   func(string) string { return `{"state":"KILLED"}` },
		},
		{
			name: "change another user's application's priority",
			rpc: func(t *testing.T, e *env, appID *yarnpb.ApplicationIdProto) error {
				_, err := call(t, e.client("mallory"), "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{
					ApplicationId: appID, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(3)}}, &yarnpb.UpdateApplicationPriorityResponseProto{})
				return err
			},
			method: func(string) string { return http.MethodPut },
			path:   func(id string) string { return "/ws/v1/cluster/apps/" + id + "/priority" },
			body:   func(string) string { return `{"priority":3}` },
		},
		{
			name: "move another user's application",
			rpc: func(t *testing.T, e *env, appID *yarnpb.ApplicationIdProto) error {
				_, err := call(t, e.client("mallory"), "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{
					ApplicationId: appID, TargetQueue: proto.String("b")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
				return err
			},
			method: func(string) string { return http.MethodPut },
			path:   func(id string) string { return "/ws/v1/cluster/apps/" + id + "/queue" },
			body:   func(string) string { return `{"queue":"b"}` },
		},
		{
			name: "change another user's application's timeout",
			rpc: func(t *testing.T, e *env, appID *yarnpb.ApplicationIdProto) error {
				_, err := call(t, e.client("mallory"), "updateApplicationTimeouts", &yarnpb.UpdateApplicationTimeoutsRequestProto{
					ApplicationId: appID, ApplicationTimeouts: []*yarnpb.ApplicationUpdateTimeoutMapProto{{
						ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(), ExpireTime: proto.String("2030-01-01T00:00:00.000+0000")}}},
					&yarnpb.UpdateApplicationTimeoutsResponseProto{})
				return err
			},
			method: func(string) string { return http.MethodPut },
			path:   func(id string) string { return "/ws/v1/cluster/apps/" + id + "/timeout" },
			body: func(string) string {
				return `{"timeout":{"type":"LIFETIME","expiryTime":"2030-01-01T00:00:00.000+0000"}}`
			},
		},
		{
			name: "submit to a queue the ACL closes",
			rpc: func(t *testing.T, e *env, _ *yarnpb.ApplicationIdProto) error {
				_, err := e.submit(e.client("mallory"), subOpts{queue: "b"})
				return err
			},
			method: func(string) string { return http.MethodPost },
			path:   func(string) string { return "/ws/v1/cluster/apps" },
			body:   func(string) string { return "" }, // filled with a fresh id below
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{queues: queues, aclEnable: true})
			srv := restServer(t, e)
			victim := e.mustSubmit(e.client("alice"), subOpts{})
			wantRemote(t, tt.rpc(t, e, victim), yarnerr.YarnException, "")

			id := appIDOf(t, victim).String()
			body := tt.body(id)
			if tt.method(id) == http.MethodPost {
				body = submission(restNewApp(t, srv.URL, "mallory"), "b")
			}
			code, b := doREST(t, tt.method(id), srv.URL+tt.path(id)+"?user.name=mallory", body)
			if code != http.StatusForbidden {
				t.Fatalf("REST status = %d (%s), want 403", code, b)
			}
			if !bytes.Contains(b, []byte("ForbiddenException")) {
				t.Errorf("body = %s, want a ForbiddenException", b)
			}
			// The refusal changed nothing.
			if got := e.report(e.client("alice"), victim).GetYarnApplicationState(); got != yarnpb.YarnApplicationStateProto_ACCEPTED {
				t.Errorf("victim state = %v, want ACCEPTED", got)
			}
		})
	}
}

// objectKeys returns the keys of the JSON object b in document order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

type schedulerDoc struct {
	Scheduler struct {
		SchedulerInfo json.RawMessage `json:"schedulerInfo"`
	} `json:"scheduler"`
}

// firstLeaf returns the first leaf queue object under a scheduler info.
func firstLeaf(t *testing.T, info json.RawMessage) json.RawMessage {
	t.Helper()
	var q struct {
		Type   string `json:"type"`
		Queues struct {
			Queue []json.RawMessage `json:"queue"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(info, &q); err != nil {
		t.Fatal(err)
	}
	if q.Type == "capacitySchedulerLeafQueueInfo" {
		return info
	}
	for _, c := range q.Queues.Queue {
		if l := firstLeaf(t, c); l != nil {
			return l
		}
	}
	return nil
}

func TestRESTSchedulerHasHadoopsShape(t *testing.T) {
	fixture, err := os.ReadFile(recordings.Path(t, "hadoop-rest", "cluster_scheduler.json"))
	if err != nil {
		t.Fatalf("Hadoop fixture: %v", err)
	}
	var want schedulerDoc
	if err := json.Unmarshal(fixture, &want); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	e.mustSubmit(e.client("alice"), subOpts{queue: "b"})
	code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/scheduler", "")
	if code != http.StatusOK {
		t.Fatalf("GET scheduler: %d %s", code, b)
	}
	var got schedulerDoc
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	tests := []struct {
		name      string
		got, want json.RawMessage
	}{
		{"root object", got.Scheduler.SchedulerInfo, want.Scheduler.SchedulerInfo},
		{"leaf queue object", firstLeaf(t, got.Scheduler.SchedulerInfo), firstLeaf(t, want.Scheduler.SchedulerInfo)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Clients decode by key and some (the YARN UI) by position:
			// same keys, same order as Hadoop 3.4.1.
			g, w := objectKeys(t, tt.got), objectKeys(t, tt.want)
			if !slices.Equal(g, w) {
				t.Errorf("keys\n got %v\nwant %v", g, w)
			}
		})
	}
	// The figures are the RM's: two leaves, b holding alice's application.
	var root struct {
		QueueName string `json:"queueName"`
		Queues    struct {
			Queue []struct {
				QueueName             string  `json:"queueName"`
				Capacity              float64 `json:"capacity"`
				NumApplications       int     `json:"numApplications"`
				NumActiveApplications int     `json:"numActiveApplications"`
				Users                 struct {
					User []struct {
						Username string `json:"username"`
					} `json:"user"`
				} `json:"users"`
			} `json:"queue"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(got.Scheduler.SchedulerInfo, &root); err != nil {
		t.Fatal(err)
	}
	if root.QueueName != "root" || len(root.Queues.Queue) != 2 {
		t.Fatalf("root = %+v", root)
	}
	for _, q := range root.Queues.Queue {
		wantApps := 0
		if q.QueueName == "b" {
			wantApps = 1
			if len(q.Users.User) != 1 || q.Users.User[0].Username != "alice" {
				t.Errorf("b users = %+v", q.Users.User)
			}
		}
		if q.Capacity != 50 || q.NumApplications != wantApps || q.NumActiveApplications != wantApps {
			t.Errorf("queue %s = %+v, want capacity 50, %d applications", q.QueueName, q, wantApps)
		}
	}
	// Java floats keep their fraction.
	if !bytes.Contains(b, []byte(`"capacity":50.0`)) {
		t.Errorf("capacity not written as a Java float: %s", b[:min(len(b), 300)])
	}
}

// The scheduler answer names each queue's ordering policy as YARN's
// getConfigName does: a parent's of its children, a leaf's of its
// applications.
func TestRESTSchedulerReportsEachQueuesOrderingPolicy(t *testing.T) {
	e := newEnv(t, envOptions{queues: baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.ordering-policy":   "priority-utilization",
		"yarn.scheduler.capacity.root.b.ordering-policy": "fair",
	})})
	code, b := doREST(t, http.MethodGet, restServer(t, e).URL+"/ws/v1/cluster/scheduler", "")
	if code != http.StatusOK {
		t.Fatalf("GET scheduler: %d %s", code, b)
	}
	type queue struct {
		QueueName      string `json:"queueName"`
		OrderingPolicy string `json:"orderingPolicyInfo"`
	}
	var doc struct {
		Scheduler struct {
			Info struct {
				queue
				Queues struct {
					Queue []queue `json:"queue"`
				} `json:"queues"`
			} `json:"schedulerInfo"`
		} `json:"scheduler"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{doc.Scheduler.Info.QueueName: doc.Scheduler.Info.OrderingPolicy}
	for _, q := range doc.Scheduler.Info.Queues.Queue {
		got[q.QueueName] = q.OrderingPolicy
	}
	if want := map[string]string{"root": "priority-utilization", "default": "fifo", "b": "fair"}; !maps.Equal(got, want) {
		t.Errorf("ordering policies %v, want %v", got, want)
	}
}

func TestRESTMetricsAndNodesReflectTheNodeLister(t *testing.T) {
	e := newEnv(t, envOptions{}) // n1 RUNNING 8192 MB/1024 used, n2 UNHEALTHY
	srv := restServer(t, e)
	e.mustSubmit(e.client("alice"), subOpts{})
	tests := []struct {
		name, path string
		check      func(t *testing.T, b []byte)
	}{
		{"metrics count nodes and running capacity", "/ws/v1/cluster/metrics", func(t *testing.T, b []byte) {
			var m struct {
				M rest.ClusterMetrics `json:"clusterMetrics"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			want := struct{ total, active, unhealthy, apps, pending int32 }{2, 1, 1, 1, 1}
			got := struct{ total, active, unhealthy, apps, pending int32 }{m.M.TotalNodes, m.M.ActiveNodes, m.M.UnhealthyNodes, m.M.AppsSubmitted, m.M.AppsPending}
			if got != want {
				t.Errorf("counts = %+v, want %+v", got, want)
			}
			if m.M.TotalMB != 8192 || m.M.AllocatedMB != 1024 || m.M.AvailableMB != 7168 {
				t.Errorf("MB total/allocated/available = %d/%d/%d", m.M.TotalMB, m.M.AllocatedMB, m.M.AvailableMB)
			}
		}},
		{"all nodes", "/ws/v1/cluster/nodes", func(t *testing.T, b []byte) {
			if n := strings.Count(string(b), `"nodeHostName"`); n != 2 {
				t.Errorf("%d nodes in %s", n, b)
			}
		}},
		{"nodes by state", "/ws/v1/cluster/nodes?states=UNHEALTHY", func(t *testing.T, b []byte) {
			if !bytes.Contains(b, []byte(`"node2"`)) || bytes.Contains(b, []byte(`"node1"`)) {
				t.Errorf("want only node2: %s", b)
			}
		}},
		{"one node by id", "/ws/v1/cluster/nodes/node1:8041", func(t *testing.T, b []byte) {
			if !bytes.Contains(b, []byte(`"node1:8041"`)) {
				t.Errorf("want node1: %s", b)
			}
		}},
		{"cluster info", "/ws/v1/cluster/info", func(t *testing.T, b []byte) {
			var ci struct {
				I rest.ClusterInfo `json:"clusterInfo"`
			}
			if err := json.Unmarshal(b, &ci); err != nil {
				t.Fatal(err)
			}
			if ci.I.State != "STARTED" || ci.I.HAState != "ACTIVE" || ci.I.ID != 1700000100000 ||
				!strings.HasPrefix(ci.I.ResourceManagerVersion, "knit-") {
				t.Errorf("info = %+v", ci.I)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := doREST(t, http.MethodGet, srv.URL+tt.path, "")
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, b)
			}
			tt.check(t, b)
		})
	}
	code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/nodes/nosuch:1", "")
	if code != http.StatusNotFound {
		t.Errorf("unknown node: %d %s", code, b)
	}
}

// labelledEnv is root.default and root.b, b with all of the gpu partition,
// over a default node of 8 GiB and a gpu node of 16 GiB; alice's
// application in b runs its AM (1 GiB) in amPartition, a 2 GiB task on gpu
// and a 1 GiB task on the default partition.
func labelledEnv(t *testing.T, amPartition string) *env {
	t.Helper()
	return labelledEnvWith(t, amPartition, nil)
}

// labelledEnvWith is labelledEnv with its RM's Scheduler.
func labelledEnvWith(t *testing.T, amPartition string, sched Scheduler) *env {
	t.Helper()
	e := newEnv(t, envOptions{queues: gpuQueues(), nodes: gpuNodes(), scheduler: sched})
	ctx := t.Context()
	pid := e.mustSubmit(e.client("alice"), subOpts{queue: "b"})
	app, err := yarnid.ApplicationIDFromProto(pid)
	if err != nil {
		t.Fatal(err)
	}
	attempt := yarnid.AttemptID{App: app, ID: 1}
	container := func(seq int64, mb int64) *yarnpb.ContainerProto {
		return &yarnpb.ContainerProto{Id: yarnid.ContainerID{Attempt: attempt, Sequence: seq}.Proto(),
			NodeId:   &yarnpb.NodeIdProto{Host: proto.String("g1"), Port: proto.Int32(8041)},
			Resource: yarnpb.NewResource(mb, int32(mb/1024)), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	}
	if err := e.rm.SchedulerSink().Allocated(ctx, scheduling.Allocation{Role: launch.RoleAM, Container: container(1, 1024), Partition: amPartition}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []apps.Event{
		apps.AttemptLaunched{Attempt: attempt},
		apps.ContainerLaunched{Container: yarnid.ContainerID{Attempt: attempt, Sequence: 1}},
		apps.AttemptRegistered{Attempt: attempt, Host: "am", RPCPort: 1},
		apps.ContainerAllocated{Container: container(2, 2048), Partition: "gpu"},
		apps.ContainerAllocated{Container: container(3, 1024)},
	} {
		if err := e.rm.Handle(ctx, app, ev); err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
	}
	return e
}

// queueObject finds a queue's object by name under a scheduler info.
func queueObject(t *testing.T, info json.RawMessage, name string) map[string]any {
	t.Helper()
	var q map[string]any
	if err := json.Unmarshal(info, &q); err != nil {
		t.Fatal(err)
	}
	var find func(q map[string]any) map[string]any
	find = func(q map[string]any) map[string]any {
		if q["queueName"] == name {
			return q
		}
		qs, _ := q["queues"].(map[string]any)
		list, _ := qs["queue"].([]any)
		for _, c := range list {
			if f := find(c.(map[string]any)); f != nil {
				return f
			}
		}
		return nil
	}
	return find(q)
}

// byPartition indexes a queue's capacities or resources list by partition
// name.
func byPartition(t *testing.T, q map[string]any, key, list string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	obj, _ := q[key].(map[string]any)
	items, _ := obj[list].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		name, _ := m["partitionName"].(string) // Hadoop writes "" as {}
		out[name] = m
	}
	return out
}

// schedulerInfo is the REST scheduler's schedulerInfo object on e's RM.
func schedulerInfo(t *testing.T, e *env) json.RawMessage {
	t.Helper()
	code, b := doREST(t, http.MethodGet, restServer(t, e).URL+"/ws/v1/cluster/scheduler", "")
	if code != http.StatusOK {
		t.Fatalf("GET scheduler: %d %s", code, b)
	}
	var doc schedulerDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Scheduler.SchedulerInfo
}

func TestRESTSchedulerShowsEachPartitionsCapacitiesAndUse(t *testing.T) {
	info := schedulerInfo(t, labelledEnv(t, "gpu"))
	mem := func(v any) any {
		r, _ := v.(map[string]any)
		return r["memory"]
	}
	tests := []struct {
		name, queue, partition string
		// list is "capacities" or "resources"; field a key of its entry,
		// read as a memory figure when it is a resource.
		list, field string
		want        any
	}{
		{"b's guarantee in the default partition", "b", "", "capacities", "absoluteCapacity", 50.0},
		{"its use there: 1 GiB of its 4 GiB guarantee", "b", "", "capacities", "usedCapacity", 25.0},
		{"its use of the default partition's 8 GiB", "b", "", "capacities", "absoluteUsedCapacity", 12.5},
		{"b's share of gpu", "b", "gpu", "capacities", "capacity", 100.0},
		{"its use of gpu: the AM and the task, 3 of 16 GiB", "b", "gpu", "capacities", "usedCapacity", 18.75},
		{"its guarantee in gpu as a resource", "b", "gpu", "capacities", "effectiveMinResource", 16384.0},
		{"a leaf's AM share", "b", "gpu", "capacities", "maxAMLimitPercentage", 10.0},
		{"a parent has none", "root", "gpu", "capacities", "maxAMLimitPercentage", 0.0},
		{"root reports gpu, which its configuration names", "root", "gpu", "capacities", "absoluteCapacity", 100.0},
		{"b uses 1 GiB in the default partition", "b", "", "resources", "used", 1024.0},
		{"and 3 GiB in gpu", "b", "gpu", "resources", "used", 3072.0},
		{"its AM runs in gpu", "b", "gpu", "resources", "amUsed", 1024.0},
		{"and none in the default partition", "b", "", "resources", "amUsed", 0.0},
		{"the AM limit in gpu is 10% of b's 16 GiB there", "b", "gpu", "resources", "amLimit", 1638.0},
		{"default, which holds nothing in gpu nor names it, reports only the default partition", "default", "gpu", "capacities", "capacity", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := queueObject(t, info, tt.queue)
			if q == nil {
				t.Fatalf("no queue %s", tt.queue)
			}
			key := "queueCapacitiesByPartition"
			if tt.list == "resources" {
				key = "resourceUsagesByPartition"
			}
			entry := byPartition(t, q, tt.list, key)[tt.partition]
			var got any
			if entry != nil {
				got = entry[tt.field]
				if _, ok := got.(map[string]any); ok {
					got = mem(got)
				}
			}
			if got != tt.want {
				t.Errorf("%s's %s %s in partition %q = %v, want %v", tt.queue, tt.list, tt.field, tt.partition, got, tt.want)
			}
		})
	}
}

// TestRESTLeafsUsedAMResourceIsTheDefaultPartitions: a leaf's
// usedAMResource is its AMs' use in the default partition (ResourceUsage.
// getAMUsed()), an AM on gpu counted only in gpu's row.
func TestRESTLeafsUsedAMResourceIsTheDefaultPartitions(t *testing.T) {
	tests := []struct {
		name, amPartition string
		wantDefault       float64
	}{
		{"an AM on the default partition", "", 1024},
		{"an AM on gpu", "gpu", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := queueObject(t, schedulerInfo(t, labelledEnv(t, tt.amPartition)), "b")
			used, _ := q["usedAMResource"].(map[string]any)
			if used["memory"] != tt.wantDefault {
				t.Errorf("b's usedAMResource %v MB, want %v", used["memory"], tt.wantDefault)
			}
		})
	}
}

// waitingPods is a Scheduler whose pods wait for the Kubernetes scheduler
// (pendingLister), as RGS reports them.
type waitingPods struct {
	recordingScheduler
	pending []rgs.Pending
}

func (w *waitingPods) Pending() []rgs.Pending { return w.pending }

// TestPendingDemandShowsWhereYARNShowsIt: what waits in a queue appears in
// getQueueInfo's statistics (the default partition's, as QueueMetrics
// count it, summed into the parents), in the REST scheduler's resources of
// each partition, and on the web UI's scheduler page.
func TestPendingDemandShowsWhereYARNShowsIt(t *testing.T) {
	sched := &waitingPods{pending: []rgs.Pending{
		{Queue: "root.b", User: "alice", Pods: 3, MemoryMB: 3072, VCores: 3},
		{Queue: "root.b", User: "bob", Pods: 1, MemoryMB: 2048, VCores: 1},
		{Queue: "root.b", User: "alice", Partition: "gpu", Pods: 2, MemoryMB: 8192, VCores: 2},
		{Queue: "root.default", User: "carol", Pods: 1, MemoryMB: 1024, VCores: 1},
	}}
	e := labelledEnvWith(t, "gpu", sched)
	ctx := ipc.WithCaller(t.Context(), ipc.Caller{User: "alice", Auth: ipc.AuthSimple})

	stats := func(queue string) *yarnpb.QueueStatisticsProto {
		resp, err := e.rm.GetQueueInfo(ctx, &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String(queue)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetQueueInfo().GetQueueStatistics()
	}
	for _, tt := range []struct {
		queue                 string
		containers, mb, cores int64
	}{
		{"b", 4, 5120, 4},
		{"default", 1, 1024, 1},
		{"root", 5, 6144, 5},
	} {
		st := stats(tt.queue)
		if st.GetPendingContainers() != tt.containers || st.GetPendingMemoryMB() != tt.mb || st.GetPendingVCores() != tt.cores {
			t.Errorf("%s's getQueueInfo pending: %d containers, %d MB, %d vcores; want %d, %d, %d", tt.queue,
				st.GetPendingContainers(), st.GetPendingMemoryMB(), st.GetPendingVCores(), tt.containers, tt.mb, tt.cores)
		}
	}

	info := schedulerInfo(t, e)
	for _, tt := range []struct {
		queue, partition string
		mb               float64
	}{
		{"b", "", 5120},
		{"b", "gpu", 8192},
		{"default", "", 1024},
	} {
		entry := byPartition(t, queueObject(t, info, tt.queue), "resources", "resourceUsagesByPartition")[tt.partition]
		pending, _ := entry["pending"].(map[string]any)
		if pending["memory"] != tt.mb {
			t.Errorf("REST %s's pending in partition %q: %v, want %v MB", tt.queue, tt.partition, entry["pending"], tt.mb)
		}
	}

	qs, err := e.rm.WebUI(fixedPods{}).Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Path != "root.b" {
			continue
		}
		if q.PendingMB != 5120 || q.PendingVcores != 4 || q.PendingContainers != 4 {
			t.Errorf("web UI b's pending: %d MB, %d vcores, %d containers; want 5120, 4, 4", q.PendingMB, q.PendingVcores, q.PendingContainers)
		}
		if len(q.Partitions) != 1 || q.Partitions[0].PendingMB != 8192 || q.Partitions[0].PendingContainers != 2 {
			t.Errorf("web UI b's partitions %+v, want gpu with 8192 MB in 2 containers pending", q.Partitions)
		}
	}
}

// TestUserAMLimitIsEachActiveUsersPartOfTheAMLimit: root.b holds 8 GiB and
// 8 vcores of the 16 GiB node, half of it for AMs (4 GiB, 4 vcores), with
// minimum-user-limit-percent 25. A user's part is the AM share of the
// guarantee times the larger of 25% and an even share among the users with
// pods waiting, rounded up to the 1 GiB, 1 vcore minimum allocation, as
// LeafQueue.getUserAMResourceLimitPerPartition reckons it.
func TestUserAMLimitIsEachActiveUsersPartOfTheAMLimit(t *testing.T) {
	users := func(n int) []rgs.Pending {
		var out []rgs.Pending
		for i := range n {
			out = append(out, rgs.Pending{Queue: "root.b", User: fmt.Sprintf("u%d", i), Pods: 1, MemoryMB: 1024, VCores: 1})
		}
		return out
	}
	tests := []struct {
		name       string
		active     int
		factor     string
		mb, vcores float64
	}{
		{"one user has the whole AM limit", 1, "1", 4096, 4},
		{"two users have half each", 2, "1", 2048, 2},
		{"three users' third is rounded up to the minimum allocation", 3, "1", 2048, 2},
		{"eight users stop at minimum-user-limit-percent", 8, "1", 1024, 1},
		{"no one waiting counts as one user", 0, "1", 4096, 4},
		{"user-limit-factor -1 leaves the queue's AM limit", 4, "-1", 4096, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{
				queues: baseQueues(map[string]string{
					"yarn.scheduler.capacity.root.b.maximum-am-resource-percent": "0.5",
					"yarn.scheduler.capacity.root.b.minimum-user-limit-percent":  "25",
					"yarn.scheduler.capacity.root.b.user-limit-factor":           tt.factor,
				}),
				nodes:     fixedNodes{{Name: "n1", State: yarnpb.NodeStateProto_NS_RUNNING, CapabilityMB: 16384, CapabilityVcores: 16}},
				scheduler: &waitingPods{pending: users(tt.active)},
			})
			q := queueObject(t, schedulerInfo(t, e), "b")
			got := []map[string]any{q["userAMResourceLimit"].(map[string]any)}
			row := byPartition(t, q, "resources", "resourceUsagesByPartition")[""]
			got = append(got, row["userAmLimit"].(map[string]any))
			for _, r := range got {
				if r["memory"] != tt.mb || r["vCores"] != tt.vcores {
					t.Errorf("user AM limit %v, want %v MB and %v vcores", r, tt.mb, tt.vcores)
				}
			}
		})
	}
}
