package metrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/test/recordings"
)

// recordedFamilies reads a /prom answer: family name → type.
func recordedFamilies(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(recordings.Path(t, "hadoop-metrics"), name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 4 && fields[0] == "#" && fields[1] == "TYPE" {
			out[fields[2]] = fields[3]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHadoopNameDerivesTheRecordedNames: every numeric attribute of the
// real RM's ClusterMetrics and QueueMetrics MBeans, named by HadoopName,
// is a family of the same RM's /prom.
func TestHadoopNameDerivesTheRecordedNames(t *testing.T) {
	families := recordedFamilies(t, "rm-prom-after.txt")
	raw, err := os.ReadFile(filepath.Join(recordings.Path(t, "hadoop-metrics"), "rm-jmx-after.json"))
	if err != nil {
		t.Fatal(err)
	}
	var jmx struct {
		Beans []map[string]any `json:"beans"`
	}
	if err := json.Unmarshal(raw, &jmx); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, b := range jmx.Beans {
		name, _ := b["name"].(string)
		var record string
		switch {
		case name == "Hadoop:service=ResourceManager,name=ClusterMetrics":
			record = recordCluster
		case strings.HasPrefix(name, "Hadoop:service=ResourceManager,name=QueueMetrics,"):
			record = recordQueue
		default:
			continue
		}
		for attr, v := range b {
			if _, ok := v.(float64); !ok || strings.HasPrefix(attr, "tag.") {
				continue
			}
			checked++
			if got := HadoopName(record, attr); families[got] == "" {
				t.Errorf("HadoopName(%q, %q) = %q, not a family of the recorded /prom", record, attr, got)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d attributes checked", checked)
	}
}

// snapshot is a small cluster: two running nodes and one lost, root with
// default and b, alice running in default, bob's job pending in b.
func snapshot() Snapshot {
	return Snapshot{
		Nodes: []Node{
			{State: yarnpb.NodeStateProto_NS_RUNNING, CapabilityMB: 8192, CapabilityVCores: 8, UsedMB: 3072, UsedVCores: 2},
			{State: yarnpb.NodeStateProto_NS_RUNNING, CapabilityMB: 8192, CapabilityVCores: 8},
			{State: yarnpb.NodeStateProto_NS_LOST, CapabilityMB: 8192, CapabilityVCores: 8},
		},
		Queues: []Queue{
			{Path: "root", Capacity: 1, MaximumCapacity: 1, AbsoluteCapacity: 1, AbsoluteMaxCapacity: 1, MaxAMResourcePercent: 0.1},
			{Path: "root.default", Capacity: 0.75, MaximumCapacity: 1, AbsoluteCapacity: 0.75, AbsoluteMaxCapacity: 1, MaxAMResourcePercent: 0.1},
			{Path: "root.b", Capacity: 0.25, MaximumCapacity: 0.5, AbsoluteCapacity: 0.25, AbsoluteMaxCapacity: 0.5, MaxAMResourcePercent: 0.1},
		},
		Sums: sums([]app{
			{Queue: "root.default", User: "alice", State: yarnpb.YarnApplicationStateProto_RUNNING, UsedContainers: 2, UsedMB: 3072, UsedVCores: 2, AMUsedMB: 1024, AMUsedVCores: 1},
			{Queue: "root.default", User: "alice", State: yarnpb.YarnApplicationStateProto_FINISHED},
			{Queue: "root.default", User: "carol", State: yarnpb.YarnApplicationStateProto_KILLED, Unmanaged: true},
			{Queue: "root.b", User: "bob", State: yarnpb.YarnApplicationStateProto_ACCEPTED},
		}),
		Pending: []Pending{{Queue: "root.b", User: "bob", Containers: 1, MB: 2048, VCores: 1}},
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the value of family name's series with the given labels.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("%s has no series %v", name, labels)
	return 0
}

func TestHadoopFiguresPerQueueAndUser(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewHadoopCollector(SourceFunc(func(context.Context) (Snapshot, error) { return snapshot(), nil }), 0, nil))
	mfs := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cluster_metrics_num_active_n_ms", nil, 2},
		{"cluster_metrics_num_lost_n_ms", nil, 1},
		{"cluster_metrics_capability_mb", nil, 16384},
		{"cluster_metrics_utilized_virtual_cores", nil, 2},
		{"queue_metrics_apps_submitted", []string{"queue", "root", "user", ""}, 4},
		{"queue_metrics_apps_submitted", []string{"queue", "root.default", "user", ""}, 3},
		{"queue_metrics_apps_submitted", []string{"queue", "root.default", "user", "alice"}, 2},
		{"queue_metrics_apps_running", []string{"queue", "root.default", "user", ""}, 1},
		{"queue_metrics_apps_completed", []string{"queue", "root.default", "user", ""}, 1},
		{"queue_metrics_apps_killed", []string{"queue", "root", "user", ""}, 1},
		{"queue_metrics_unmanaged_apps_killed", []string{"queue", "root.default", "user", "carol"}, 1},
		{"queue_metrics_apps_pending", []string{"queue", "root.b", "user", ""}, 1},
		{"queue_metrics_allocated_mb", []string{"queue", "root", "user", ""}, 3072},
		{"queue_metrics_allocated_mb", []string{"queue", "root.default", "user", "alice"}, 3072},
		{"queue_metrics_allocated_v_cores", []string{"queue", "root.b", "user", ""}, 0},
		{"queue_metrics_allocated_containers", []string{"queue", "root.default", "user", ""}, 2},
		{"queue_metrics_pending_mb", []string{"queue", "root", "user", ""}, 2048},
		{"queue_metrics_pending_containers", []string{"queue", "root.b", "user", "bob"}, 1},
		{"queue_metrics_active_users", []string{"queue", "root", "user", ""}, 2},
		{"queue_metrics_active_applications", []string{"queue", "root.b", "user", ""}, 1},
		{"queue_metrics_used_am_resource_mb", []string{"queue", "root.default", "user", ""}, 1024},
		{"queue_metrics_guaranteed_mb", []string{"queue", "root.default", "user", ""}, 12288},
		{"queue_metrics_max_capacity_mb", []string{"queue", "root.b", "user", ""}, 8192},
		// Room to the maximum, within the cluster's free 13312 MB.
		{"queue_metrics_available_mb", []string{"queue", "root.default", "user", ""}, 13312},
		{"queue_metrics_available_mb", []string{"queue", "root.b", "user", ""}, 8192},
		{"queue_metrics_am_resource_limit_mb", []string{"queue", "root.default", "user", ""}, 1228},
		{"queue_metrics_guaranteed_capacity", []string{"queue", "root.b", "user", ""}, 0.25},
		{"queue_metrics_used_capacity", []string{"queue", "root.default", "user", ""}, 0.25},
		{"knit_rm_metrics_source_up", nil, 1},
	} {
		if got := value(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestASourceFailureIsReportedNotFatal(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewHadoopCollector(SourceFunc(func(context.Context) (Snapshot, error) { return Snapshot{}, errors.New("api server down") }), 0, nil))
	if got := value(t, gather(t, reg), "knit_rm_metrics_source_up"); got != 0 {
		t.Errorf("up = %v after a failure", got)
	}
}

// fullRegistry is every family knit-rm registers, with some samples.
func fullRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewHadoopCollector(SourceFunc(func(context.Context) (Snapshot, error) { return snapshot(), nil }), 0, nil))
	c, err := NewContainers(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.add(c.allocated, "root.default", "alice")
	c.add(c.released, "root.default", "alice")
	r, err := NewRPC(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveCall("org.apache.hadoop.yarn.api.ApplicationClientProtocolPB", "getApplicationReport", time.Millisecond, 2*time.Millisecond, nil)
	r.ObserveCall("org.apache.hadoop.yarn.api.ApplicationClientProtocolPB", "getApplicationReport", 0, time.Millisecond, yarnerr.ApplicationNotFound.New("gone"))
	g, err := NewRGS(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterPending(reg, func() []rgs.Pending { return []rgs.Pending{{Queue: "root.b", User: "bob", Pods: 3}} }); err != nil {
		t.Fatal(err)
	}
	g.PodCreated("root.b")
	g.PodCreateFailed("root.b")
	g.ContainerAllocated("root.default", 1500*time.Millisecond)
	if err := Runtime(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestFamiliesHaveHadoopsNamesAndTypes: each cluster_metrics_ and
// queue_metrics_ family Knit exposes is one the real RM's /prom has, with
// the same type.
func TestFamiliesHaveHadoopsNamesAndTypes(t *testing.T) {
	recorded := recordedFamilies(t, "rm-prom-after.txt")
	mfs := gather(t, fullRegistry(t))
	implemented := 0
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "cluster_metrics_") && !strings.HasPrefix(name, "queue_metrics_") {
			continue
		}
		implemented++
		want, ok := recorded[name]
		if !ok {
			t.Errorf("%s: not a family of Hadoop's /prom", name)
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != want {
			t.Errorf("%s: type %s, Hadoop's is %s", name, got, want)
		}
	}
	var missing []string
	for name := range recorded {
		if (strings.HasPrefix(name, "cluster_metrics_") || strings.HasPrefix(name, "queue_metrics_")) && mfs[name] == nil {
			missing = append(missing, name)
		}
	}
	t.Logf("%d Hadoop families implemented; not implemented: %v", implemented, missing)
	if implemented < 45 {
		t.Errorf("only %d Hadoop families", implemented)
	}
	for name, labels := range map[string][]string{
		"knit_rpc_calls_total":               {"protocol", "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB", "method", "getApplicationReport", "outcome", string(yarnerr.ApplicationNotFound)},
		"knit_rpc_processing_time_seconds":   {"method", "getApplicationReport"},
		"knit_rpc_queue_time_seconds":        {"method", "getApplicationReport"},
		"knit_rgs_pods_created_total":        {"queue", "root.b"},
		"knit_rgs_pod_create_errors_total":   {"queue", "root.b"},
		"knit_rgs_pods_bound_total":          {"queue", "root.default"},
		"knit_rgs_bind_to_container_seconds": {"queue", "root.default"},
		"knit_rgs_pods_pending":              {"queue", "root.b"},
	} {
		want := 1.0
		switch name {
		case "knit_rpc_processing_time_seconds", "knit_rpc_queue_time_seconds":
			want = 2
		case "knit_rgs_pods_pending":
			want = 3
		}
		if got := value(t, mfs, name, labels...); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	if value(t, mfs, "queue_metrics_aggregate_containers_allocated", "queue", "root", "user", "") != 1 {
		t.Error("an allocation in root.default is not counted in root")
	}
	if mfs["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}
}

// TestPromtoolAcceptsTheOutput runs `promtool check metrics` over what
// /metrics serves.
func TestPromtoolAcceptsTheOutput(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (Debian's prometheus package)")
		}
		t.Skip("promtool is not installed (Debian's prometheus package)")
	}
	reg := fullRegistry(t)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if ct := expfmt.ResponseFormat(resp.Header); ct.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("format %v, want the text format", ct)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = &body
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	// Exit status 3 is lint findings only. Hadoop's names, kept as its
	// sink derives them, have abbreviated units (mb, n_ms) and counters
	// without _total; nothing else may be found.
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, finding, _ := strings.Cut(line, " ")
		hadoop := strings.HasPrefix(name, "cluster_metrics_") || strings.HasPrefix(name, "queue_metrics_")
		switch {
		case line == "":
		case hadoop && (finding == "metric names should not contain abbreviated units" ||
			finding == `counter metrics should have "_total" suffix`):
		default:
			t.Errorf("promtool: %s", line)
		}
	}
	if err != nil && exit.ExitCode() != 3 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestRPCOutcomeIsTheClassTheClientIsAnswered: a failed call counts under
// the Java class the engine answers with: that of a wrapped error's cause,
// and java.io.IOException for an error that names no class.
func TestRPCOutcomeIsTheClassTheClientIsAnswered(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := NewRPC(reg)
	if err != nil {
		t.Fatal(err)
	}
	const proto, method = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB", "getApplicationReport"
	r.ObserveCall(proto, method, 0, 0, fmt.Errorf("report: %w", yarnerr.ApplicationNotFound.New("gone")))
	r.ObserveCall(proto, method, 0, 0, errors.New("store unreachable"))
	r.ObserveCall(proto, method, 0, 0, nil)
	r.ObserveCall(proto, method, 0, 0, nil) // its series found, not looked up again
	got := map[string]float64{}
	for _, m := range gather(t, reg)["knit_rpc_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				got[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{string(yarnerr.ApplicationNotFound): 1, string(yarnerr.IOException): 1, "ok": 2}
	if !maps.Equal(got, want) {
		t.Errorf("calls by outcome: %v, want %v", got, want)
	}
	for _, name := range []string{"knit_rpc_queue_time_seconds", "knit_rpc_processing_time_seconds"} {
		if n := gather(t, reg)[name].GetMetric()[0].GetHistogram().GetSampleCount(); n != 4 {
			t.Errorf("%s counted %d calls, want 4", name, n)
		}
	}
}

// app is one application of a test's cluster, with the live resources of
// its current attempt.
type app struct {
	Queue, User                                    string
	State                                          yarnpb.YarnApplicationStateProto
	Unmanaged                                      bool
	UsedContainers, UsedMB, UsedVCores             int64
	ReservedContainers, ReservedMB, ReservedVCores int64
	AMUsedMB, AMUsedVCores                         int64
}

// sums adds apps up per queue and user, as the RM's index keeps them.
func sums(apps []app) []AppSums {
	type key struct{ queue, user string }
	by := map[key]*AppSums{}
	var out []*AppSums
	for _, a := range apps {
		s := by[key{a.Queue, a.User}]
		if s == nil {
			s = &AppSums{Queue: a.Queue, User: a.User, States: map[yarnpb.YarnApplicationStateProto]int64{},
				Unmanaged: map[yarnpb.YarnApplicationStateProto]int64{}}
			by[key{a.Queue, a.User}] = s
			out = append(out, s)
		}
		s.States[a.State]++
		if a.Unmanaged {
			s.Unmanaged[a.State]++
		}
		s.UsedContainers += a.UsedContainers
		s.UsedMB += a.UsedMB
		s.UsedVCores += a.UsedVCores
		s.ReservedContainers += a.ReservedContainers
		s.ReservedMB += a.ReservedMB
		s.ReservedVCores += a.ReservedVCores
		s.AMUsedMB += a.AMUsedMB
		s.AMUsedVCores += a.AMUsedVCores
	}
	res := make([]AppSums, 0, len(out))
	for _, s := range out {
		res = append(res, *s)
	}
	return res
}
