package webui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/rest"
)

const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>`

// fakeCluster holds three applications; "mallory" may view none of them.
type fakeCluster struct {
	apps []*yarnpb.ApplicationReportProto
	// queues, when set, are the scheduler page's queues.
	queues []Queue
}

func report(id int32, user, name, queue string, state yarnpb.YarnApplicationStateProto, start int64) *yarnpb.ApplicationReportProto {
	return &yarnpb.ApplicationReportProto{
		ApplicationId:        &yarnpb.ApplicationIdProto{ClusterTimestamp: proto.Int64(1700000000000), Id: proto.Int32(id)},
		User:                 proto.String(user),
		Name:                 proto.String(name),
		Queue:                proto.String(queue),
		YarnApplicationState: state.Enum(),
		StartTime:            proto.Int64(start),
		ApplicationType:      proto.String("YARN"),
		TrackingUrl:          proto.String("http://rm.example:8088/proxy/application_1700000000000_000" + string(rune('0'+id)) + "/"),
		Diagnostics:          proto.String("diag " + evil),
		Progress:             proto.Float32(0.5),
	}
}

func newFake() *fakeCluster {
	return &fakeCluster{apps: []*yarnpb.ApplicationReportProto{
		report(1, "alice", "wordcount", "root.default", yarnpb.YarnApplicationStateProto_FINISHED, 1000),
		report(2, "bob", evil, "root.batch", yarnpb.YarnApplicationStateProto_RUNNING, 3000),
		report(3, "alice", "sleep", "root.batch", yarnpb.YarnApplicationStateProto_KILLED, 2000),
	}}
}

func (f *fakeCluster) Info(context.Context) (rest.ClusterInfo, error) {
	return rest.ClusterInfo{ID: 1700000000000, StartedOn: 1700000000000, State: "STARTED", HAState: "ACTIVE", ResourceManagerVersion: "knit-devel", HadoopBuildVersion: "3.4.1 (knit-devel)"}, nil
}
func (f *fakeCluster) Metrics(context.Context) (rest.ClusterMetrics, error) {
	return rest.ClusterMetrics{AppsSubmitted: 3, AppsRunning: 1, ActiveNodes: 2, TotalMB: 8192, AllocatedMB: 1024}, nil
}

func (f *fakeCluster) Applications(_ context.Context, _ string, fl apps.Filter) ([]rest.App, error) {
	var out []rest.App
	for _, a := range f.apps {
		if len(fl.States) > 0 && !slices.Contains(fl.States, a.GetYarnApplicationState().String()) ||
			len(fl.Queues) > 0 && !slices.Contains(fl.Queues, a.GetQueue()) ||
			len(fl.Users) > 0 && !slices.Contains(fl.Users, a.GetUser()) {
			continue
		}
		out = append(out, rest.App{Report: a})
	}
	return out, nil
}

func (f *fakeCluster) Application(_ context.Context, _, id string) (rest.App, error) {
	for _, a := range f.apps {
		if strings.HasSuffix(id, "_000"+string(rune('0'+a.GetApplicationId().GetId()))) {
			return rest.App{Report: a}, nil
		}
	}
	return rest.App{}, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
}

func (f *fakeCluster) Attempts(_ context.Context, user, id string) ([]rest.Attempt, error) {
	if user == "mallory" {
		return nil, yarnerr.YarnException.Errorf("User mallory does not have privilage to see this application %s", id)
	}
	return []rest.Attempt{{
		Report: &yarnpb.ApplicationAttemptReportProto{
			ApplicationAttemptId:        &yarnpb.ApplicationAttemptIdProto{ApplicationId: &yarnpb.ApplicationIdProto{ClusterTimestamp: proto.Int64(1700000000000), Id: proto.Int32(2)}, AttemptId: proto.Int32(1)},
			YarnApplicationAttemptState: yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_RUNNING.Enum(),
			Diagnostics:                 proto.String(evil),
		},
		AMContainer: &yarnpb.ContainerProto{
			Id:              containerID(1),
			NodeId:          &yarnpb.NodeIdProto{Host: proto.String("node-1"), Port: proto.Int32(8041)},
			NodeHttpAddress: proto.String("node-1:8042"),
		},
	}}, nil
}

func containerID(n int64) *yarnpb.ContainerIdProto {
	return &yarnpb.ContainerIdProto{
		AppId:        &yarnpb.ApplicationIdProto{ClusterTimestamp: proto.Int64(1700000000000), Id: proto.Int32(2)},
		AppAttemptId: &yarnpb.ApplicationAttemptIdProto{ApplicationId: &yarnpb.ApplicationIdProto{ClusterTimestamp: proto.Int64(1700000000000), Id: proto.Int32(2)}, AttemptId: proto.Int32(1)},
		Id:           proto.Int64(n),
	}
}

func (f *fakeCluster) Containers(context.Context, string, string) ([]Container, error) {
	return []Container{{
		Report: &yarnpb.ContainerReportProto{
			ContainerId:     containerID(1),
			NodeId:          &yarnpb.NodeIdProto{Host: proto.String("node-1"), Port: proto.Int32(8041)},
			NodeHttpAddress: proto.String("http://node-1:8042"),
			LogUrl:          proto.String("http://node-1:8042/node/containerlogs/container_1700000000000_0002_01_000001/bob"),
			ContainerState:  yarnpb.ContainerStateProto_C_RUNNING.Enum(),
			Resource:        yarnpb.NewResource(1024, 1),
		},
		AM: true, Namespace: "knit", Pod: "app-1700000000000-0002-01-am-abcdefgh",
	}, {
		Report: &yarnpb.ContainerReportProto{
			ContainerId:     containerID(2),
			NodeId:          &yarnpb.NodeIdProto{Host: proto.String("node-2"), Port: proto.Int32(8041)},
			NodeHttpAddress: proto.String("javascript:alert(3)"),
			LogUrl:          proto.String("javascript:alert(4)"),
			ContainerState:  yarnpb.ContainerStateProto_C_COMPLETE.Enum(),
			DiagnosticsInfo: proto.String(evil),
		},
	}}, nil
}

func (f *fakeCluster) Nodes(context.Context) ([]Node, error) {
	return []Node{{
		Report: &yarnpb.NodeReportProto{
			NodeId:       &yarnpb.NodeIdProto{Host: proto.String("127.0.1.1"), Port: proto.Int32(8041)},
			HttpAddress:  proto.String("127.0.1.1:8042"),
			RackName:     proto.String("/default-rack"),
			NodeState:    yarnpb.NodeStateProto_NS_RUNNING.Enum(),
			Capability:   yarnpb.NewResource(4096, 4),
			Used:         yarnpb.NewResource(1024, 1),
			HealthReport: proto.String(evil),
		},
		KubeNode: "knit-node-1",
	}}, nil
}

func (f *fakeCluster) Queues(context.Context) ([]Queue, error) {
	if f.queues != nil {
		return f.queues, nil
	}
	return []Queue{
		{Path: "root", Name: "root", State: "RUNNING", Capacity: 100, MaxCapacity: 100, AbsoluteCapacity: 100, AbsoluteMaxCapacity: 100, Used: 25, AbsoluteUsed: 25},
		{Path: "root.batch", Name: "batch", Depth: 1, Leaf: true, State: "RUNNING", Capacity: 40, MaxCapacity: 80, AbsoluteCapacity: 40, AbsoluteMaxCapacity: 80, Used: 50, AbsoluteUsed: 20, AllocatedMB: 1024, AllocatedVcores: 1, AppsRunning: 1},
	}, nil
}

func serve(t *testing.T) *httptest.Server {
	t.Helper()
	return serveCluster(t, newFake())
}

func serveCluster(t *testing.T, f *fakeCluster) *httptest.Server {
	t.Helper()
	u, err := New(Config{Cluster: f, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.UnixMilli(10000) }})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	u.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string) (int, http.Header, string) {
	t.Helper()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// inert checks that nothing of evil reached the page as markup.
func inert(t *testing.T, page, body string) {
	t.Helper()
	for _, bad := range []string{"<script", "<img", "javascript:"} {
		if strings.Contains(strings.ToLower(body), bad) {
			t.Errorf("%s: the page holds %q", page, bad)
		}
	}
}

func wantAll(t *testing.T, page, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", page, w)
		}
	}
}

func TestRootRedirectsToCluster(t *testing.T) {
	srv := serve(t)
	if code, h, _ := get(t, srv, "/"); code != http.StatusFound || h.Get("Location") != "/cluster" {
		t.Errorf("/: %d %q", code, h.Get("Location"))
	}
	if code, h, _ := get(t, srv, "/?user.name=alice"); code != http.StatusFound || h.Get("Location") != "/cluster?user.name=alice" {
		t.Errorf("/ as alice: %d %q", code, h.Get("Location"))
	}
}

func TestApplicationsPageListsFiltersAndSorts(t *testing.T) {
	srv := serve(t)
	code, h, body := get(t, srv, "/cluster?user.name=alice")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("/cluster: %d %s", code, h.Get("Content-Type"))
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'none'") {
		t.Errorf("no CSP forbidding scripts: %q", h.Get("Content-Security-Policy"))
	}
	wantAll(t, "/cluster", body, "Cluster Metrics", "Logged in as: alice",
		`href="/cluster/app/application_1700000000000_0001?user.name=alice"`,
		"wordcount", "KILLED", "FINISHED", "RUNNING", "root.batch",
		"&lt;script&gt;alert(1)&lt;/script&gt;")
	inert(t, "/cluster", body)
	// Newest first by default.
	if i, j := strings.Index(body, "_0003"), strings.Index(body, "_0001"); i < 0 || j < 0 || i > j {
		t.Errorf("default order is not newest first")
	}

	_, _, body = get(t, srv, "/cluster/apps/KILLED")
	if !strings.Contains(body, "application_1700000000000_0003") || strings.Contains(body, "application_1700000000000_0001\"") {
		t.Errorf("KILLED filter: %s", body)
	}
	// root.batch holds alice's sleep and bob's application; root.default
	// alice's wordcount.
	_, _, body = get(t, srv, "/cluster/apps?queue=root.batch&user=alice")
	if !strings.Contains(body, ">sleep<") || strings.Contains(body, ">wordcount<") ||
		strings.Contains(body, ">application_1700000000000_0002<") {
		t.Errorf("queue and user filter")
	}
	_, _, body = get(t, srv, "/cluster/apps?sort=start&order=asc")
	i1, i3, i2 := strings.Index(body, ">application_1700000000000_0001<"), strings.Index(body, ">application_1700000000000_0003<"), strings.Index(body, ">application_1700000000000_0002<")
	if i1 >= i3 || i3 >= i2 {
		t.Errorf("sort by start time ascending: %d %d %d", i1, i3, i2)
	}
	wantAll(t, "sorted", body, "order=desc&amp;sort=start")
	if code, _, body := get(t, srv, "/cluster/apps/BOGUS"); code != http.StatusBadRequest ||
		!strings.Contains(body, "Invalid application-state BOGUS specified") {
		t.Errorf("unknown state: %d %s", code, body)
	}
}

func TestApplicationPageShowsAttemptsContainersAndDiagnostics(t *testing.T) {
	srv := serve(t)
	code, _, body := get(t, srv, "/cluster/app/application_1700000000000_0002?user.name=bob")
	if code != http.StatusOK {
		t.Fatalf("app page: %d", code)
	}
	wantAll(t, "app", body, "Application Overview", "appattempt_1700000000000_0002_000001",
		"container_1700000000000_0002_01_000001", "knit/app-1700000000000-0002-01-am-abcdefgh",
		`href="http://node-1:8042/node/containerlogs/container_1700000000000_0002_01_000001/bob"`,
		`href="http://rm.example:8088/proxy/application_1700000000000_0002/"`,
		"diag &lt;script&gt;", "RUNNING", "COMPLETE")
	inert(t, "app", body)

	code, _, body = get(t, srv, "/cluster/app/application_1700000000000_0003")
	if code != http.StatusOK || !strings.Contains(body, `id="app-state" class="state killed">KILLED<`) {
		t.Errorf("killed app: %d", code)
	}
	code, _, body = get(t, srv, "/cluster/app/application_1700000000000_0002?user.name=mallory")
	if code != http.StatusOK || !strings.Contains(body, "not authorized") || strings.Contains(body, "container_1700000000000_0002_01_000001") {
		t.Errorf("a user without VIEW_APP: %d", code)
	}
	if code, _, _ := get(t, srv, "/cluster/app/application_1700000000000_0009"); code != http.StatusNotFound {
		t.Errorf("unknown application: %d", code)
	}
	code, _, body = get(t, srv, "/cluster/app/"+"%3Cb%3E")
	if code != http.StatusBadRequest {
		t.Errorf("bad id: %d", code)
	}
	inert(t, "bad id", body)
}

func TestNodesSchedulerAndAboutPages(t *testing.T) {
	srv := serve(t)
	code, _, body := get(t, srv, "/cluster/nodes")
	if code != http.StatusOK {
		t.Fatalf("nodes: %d", code)
	}
	wantAll(t, "nodes", body, "127.0.1.1:8041", `href="http://127.0.1.1:8042/ws/v1/node/info"`, "knit-node-1", "RUNNING", "1.0 GB", "3.0 GB", `width="25"`)
	inert(t, "nodes", body)

	code, _, body = get(t, srv, "/cluster/scheduler")
	if code != http.StatusOK {
		t.Fatalf("scheduler: %d", code)
	}
	wantAll(t, "scheduler", body, "batch", `href="/cluster/apps?queue=root.batch"`,
		`class="max" width="80"`, `class="capacity" width="40"`, `class="used" y="3" width="20"`, "50.0%")
	code, _, body = get(t, srv, "/cluster/cluster")
	if code != http.StatusOK {
		t.Fatalf("about: %d", code)
	}
	wantAll(t, "about", body, "Cluster overview", "1700000000000", "ACTIVE", "knit-devel", "3.4.1 (knit-devel)")
	code, _, body = get(t, srv, "/static/knit/knit.css")
	if code != http.StatusOK || !strings.Contains(body, "svg .used") {
		t.Errorf("stylesheet: %d", code)
	}
}

func TestApplicationsAreListedByPages(t *testing.T) {
	f := &fakeCluster{}
	for i := range PageSize + 3 {
		f.apps = append(f.apps, report(int32(i+1), "alice", "app", "root.default", yarnpb.YarnApplicationStateProto_FINISHED, int64(i)))
	}
	u, err := New(Config{Cluster: f, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	u.Register(e)
	srv := httptest.NewServer(e)
	defer srv.Close()
	_, _, body := get(t, srv, "/cluster/apps?sort=id&order=asc&user.name=alice")
	if n := strings.Count(body, `class="appid"`); n != PageSize {
		t.Errorf("first page: %d rows", n)
	}
	wantAll(t, "first page", body, "503 applications, page 1 of 2", `rel="next" href="/cluster/apps?order=asc&amp;page=2&amp;sort=id&amp;user.name=alice"`)
	_, _, body = get(t, srv, "/cluster/apps?sort=id&order=asc&page=2")
	if n := strings.Count(body, `class="appid"`); n != 3 || !strings.Contains(body, `rel="prev"`) || strings.Contains(body, `rel="next"`) {
		t.Errorf("second page: %d rows", n)
	}
	_, _, body = get(t, srv, "/cluster/apps?page=99")
	wantAll(t, "past the end", body, "page 2 of 2")
}

// bobsShells lets bob alone open shells, and notes whom it was asked about.
type bobsShells struct{ asked []string }

func (s *bobsShells) Link(_ context.Context, user, container string) string {
	s.asked = append(s.asked, user+" "+container)
	if user != "bob" {
		return ""
	}
	return "/shell/" + container + "?user.name=" + user
}

func TestShellLinksShowOnlyOnRunningContainersTheUserMayOpen(t *testing.T) {
	shells := &bobsShells{}
	u, err := New(Config{Cluster: newFake(), Logger: slog.New(slog.DiscardHandler), Shells: shells})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	u.Register(e)
	srv := httptest.NewServer(e)
	defer srv.Close()

	_, _, body := get(t, srv, "/cluster/app/application_1700000000000_0002?user.name=bob")
	wantAll(t, "bob's page", body, `<a class="shell" href="/shell/container_1700000000000_0002_01_000001?user.name=bob">shell</a>`)
	if n := strings.Count(body, `class="shell"`); n != 1 {
		t.Errorf("bob's page has %d shell links, want the running container's only", n)
	}
	for _, path := range []string{"/cluster/app/application_1700000000000_0002?user.name=alice", "/cluster/app/application_1700000000000_0002"} {
		if _, _, body := get(t, srv, path); strings.Contains(body, `class="shell"`) {
			t.Errorf("%s shows a shell link", path)
		}
	}
	if want := []string{"bob container_1700000000000_0002_01_000001", "alice container_1700000000000_0002_01_000001"}; !slices.Equal(shells.asked, want) {
		t.Errorf("asked about %q, want %q (running containers of named users only)", shells.asked, want)
	}
}

func TestTheSchedulerPageShowsEachLabelledPartition(t *testing.T) {
	gpu := func(abs, absMax, absUsed float64, mb, amMB int64) QueuePartition {
		return QueuePartition{Name: "gpu", TotalMB: 16384, TotalVcores: 16, Capacity: abs, MaxCapacity: absMax,
			AbsoluteCapacity: abs, AbsoluteMaxCapacity: absMax, Used: absUsed, AbsoluteUsed: absUsed, UsedMB: mb, UsedVcores: mb / 1024, AMUsedMB: amMB}
	}
	root := Queue{Path: "root", Name: "root", State: "RUNNING", Capacity: 100, MaxCapacity: 100, AbsoluteCapacity: 100, AbsoluteMaxCapacity: 100}
	tests := []struct {
		name   string
		queues []Queue
		want   []string
		absent []string
	}{
		{
			name:   "without labelled partitions the page has no partition sections",
			queues: []Queue{root, {Path: "root.a", Name: "a", Depth: 1, Leaf: true, State: "RUNNING", Capacity: 100, AbsoluteCapacity: 100}},
			absent: []string{"Partition:", `data-partition=`},
		},
		{
			name: "a labelled partition gets a section with its resource and each queue's figures there",
			queues: []Queue{
				func() Queue { q := root; q.Partitions = []QueuePartition{gpu(100, 100, 25, 4096, 0)}; return q }(),
				{Path: "root.a", Name: "a", Depth: 1, Leaf: true, State: "RUNNING", Capacity: 50, AbsoluteCapacity: 50,
					Partitions: []QueuePartition{gpu(40, 60, 25, 4096, 1024)}},
				{Path: "root.b", Name: "b", Depth: 1, Leaf: true, State: "RUNNING", Capacity: 50, AbsoluteCapacity: 50},
			},
			want: []string{"Partition: &lt;DEFAULT_PARTITION&gt;", "Partition: gpu &lt;memory:16.0 GB, vCores:16&gt;",
				`data-partition="gpu"`, `class="capacity" width="40"`, `class="max" width="60"`, "&lt;memory:4.0 GB, vCores:4&gt;", "1.0 GB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.queues = tt.queues
			code, _, body := get(t, serveCluster(t, f), "/cluster/scheduler")
			if code != http.StatusOK {
				t.Fatalf("scheduler: %d", code)
			}
			wantAll(t, "scheduler", body, tt.want...)
			for _, a := range tt.absent {
				if strings.Contains(body, a) {
					t.Errorf("scheduler shows %q", a)
				}
			}
			if tt.want != nil {
				// Only queues that report the partition have a row in its
				// section: root and a, not b.
				section := body[strings.Index(body, `data-partition="gpu"`):]
				if strings.Contains(section, ">b</td>") || !strings.Contains(section, ">a</td>") {
					t.Errorf("gpu section rows: %s", section)
				}
			}
		})
	}
}
