package queues

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/knitdev/knit/hadoopconf"
)

func noEnv(string) (string, bool) { return "", false }

// fixture loads testdata/capacity-scheduler.xml, the hierarchy drawn at its
// top.
func fixture(t *testing.T) *hadoopconf.Configuration {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	if err := c.AddFile("testdata/capacity-scheduler.xml"); err != nil {
		t.Fatal(err)
	}
	return c
}

// fixtureTree builds the fixture with the given options.
func fixtureTree(t *testing.T, opts Options) *Tree {
	t.Helper()
	tree, err := Build(fixture(t), opts)
	if err != nil {
		t.Fatalf("Build(fixture): %v", err)
	}
	return tree
}

// csConf is a configuration of the given property names and values, for
// small hierarchies written inline.
func csConf(kv ...string) *hadoopconf.Configuration {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i], kv[i+1])
	}
	return c
}

// cs prefixes a per-queue property.
func cs(s string) string { return Prefix + s }

func mustLookup(t *testing.T, tree *Tree, name string) *Queue {
	t.Helper()
	q, err := tree.Lookup(name)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", name, err)
	}
	return q
}

func TestFixtureBuildsTheHierarchyAsWritten(t *testing.T) {
	tree := fixtureTree(t, Options{DefaultNamespace: "yarn"})
	var paths []string
	for _, q := range tree.Queues() {
		paths = append(paths, q.Path)
	}
	want := []string{
		"root", "root.prod", "root.prod.etl", "root.prod.reports",
		"root.dev", "root.dev.alpha", "root.dev.reports", "root.default",
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("Queues() = %q\nwant %q", paths, want)
	}
	tests := []struct {
		path                    string
		leaf                    bool
		state                   State
		capacity, maxCapacity   float32
		absolute, absoluteMax   float32
		maxApps, maxAppsPerUser int
		amPercent               float32
		kube                    KubeMapping
	}{
		{"root", false, Running, 1, 1, 1, 1, 0, 0, 0.1, KubeMapping{Namespace: "yarn"}},
		{"root.prod", false, Running, 0.6, 1, 0.6, 1, 0, 0, 0.1,
			KubeMapping{Namespace: "prod", SchedulerName: "volcano", PriorityClass: "high-priority"}},
		// 10000 x 0.3 = 3000; per user 3000 x 25% x 2 = 1500.
		{"root.prod.etl", true, Running, 0.5, 0.8, 0.3, 0.8, 3000, 1500, 0.1,
			KubeMapping{Namespace: "prod", SchedulerName: "volcano", PriorityClass: "high-priority"}},
		{"root.prod.reports", true, Running, 0.5, 1, 0.3, 1, 20, 20, 0.1,
			KubeMapping{Namespace: "prod", SchedulerName: "volcano", PriorityClass: "high-priority"}},
		{"root.dev", false, Running, 0.3, 0.5, 0.3, 0.5, 0, 0, 0.1, KubeMapping{Namespace: "dev"}},
		// 0.7 x 0.3 is 0.21000001 in float, as in Java: 2100 applications.
		{"root.dev.alpha", true, Stopped, 0.7, 1, 0.21000001, 0.5, 2100, 2100, 0.1, KubeMapping{Namespace: "dev"}},
		{"root.dev.reports", true, Running, 0.3, 1, 0.09, 0.5, 900, 900, 0.1, KubeMapping{Namespace: "dev"}},
		{"root.default", true, Running, 0.1, 1, 0.1, 1, 1000, 1000, 0.2,
			KubeMapping{Namespace: "yarn", PodTemplate: "/etc/knit/pod-templates/default.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			q := mustLookup(t, tree, tt.path)
			got := fmt.Sprint(q.IsLeaf(), q.State, q.Capacity, q.MaximumCapacity, q.AbsoluteCapacity,
				q.AbsoluteMaximumCapacity, q.MaxApplications, q.MaxApplicationsPerUser, q.MaxAMResourcePercent, q.Kube)
			want := fmt.Sprint(tt.leaf, tt.state, tt.capacity, tt.maxCapacity, tt.absolute,
				tt.absoluteMax, tt.maxApps, tt.maxAppsPerUser, tt.amPercent, tt.kube)
			if got != want {
				t.Errorf("leaf state cap max abs absmax apps perUser am kube =\n%s\nwant\n%s", got, want)
			}
		})
	}
	etl := mustLookup(t, tree, "etl")
	if etl.UserLimitFactor != 2 || etl.MinimumUserLimitPercent != 25 || etl.DefaultApplicationPriority != 5 {
		t.Errorf("etl user limits = %v %v %v", etl.UserLimitFactor, etl.MinimumUserLimitPercent, etl.DefaultApplicationPriority)
	}
	if p := mustLookup(t, tree, "prod"); p.Priority != 10 || p.MaxParallelApps != 1<<31-1 {
		t.Errorf("prod priority %d, max parallel apps %d", p.Priority, p.MaxParallelApps)
	}
	def := mustLookup(t, tree, "default")
	if !slices.Equal(def.AccessibleNodeLabels, []string{"gpu", "ssd"}) || def.DefaultNodeLabelExpression != "gpu" {
		t.Errorf("default labels %q, expression %q", def.AccessibleNodeLabels, def.DefaultNodeLabelExpression)
	}
	if l := mustLookup(t, tree, "etl").AccessibleNodeLabels; !slices.Equal(l, []string{"*"}) {
		t.Errorf("etl inherits root's labels: got %q", l)
	}
	if got := mustLookup(t, tree, "root.dev").SubmitACL.String(); got != "alice,bob dev" {
		t.Errorf("dev submit ACL = %q: the ${team.dev.users} reference was not substituted", got)
	}
	wantWarnings := []string{
		"knit.queue.root.dev.nmespace: unknown Knit queue setting nmespace (want one of namespace, scheduler-name, priority-class, pod-template, delegate, delegate-queue); ignored",
		"yarn.scheduler.capacity.root.old.capacity: no queue root.old in the hierarchy; ignored",
	}
	if got := tree.Warnings(); !slices.Equal(got, wantWarnings) {
		t.Errorf("Warnings() =\n%q\nwant\n%q", got, wantWarnings)
	}
}

// The root namespace falls back to "default" when the caller gives none,
// and a queue's own setting wins over its parent's.
func TestKubeMappingInheritance(t *testing.T) {
	tree, err := Build(csConf(
		cs("root.queues"), "a",
		cs("root.a.capacity"), "100",
		cs("root.a.queues"), "b",
		cs("root.a.b.capacity"), "100",
		"knit.queue.root.scheduler-name", "yunikorn",
		"knit.queue.root.a.b.namespace", "team-b",
		"knit.queue.root.nowhere.namespace", "x",
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]KubeMapping{
		"root":     {Namespace: "default", SchedulerName: "yunikorn"},
		"root.a":   {Namespace: "default", SchedulerName: "yunikorn"},
		"root.a.b": {Namespace: "team-b", SchedulerName: "yunikorn"},
	}
	for path, k := range want {
		if got := mustLookup(t, tree, path).Kube; got != k {
			t.Errorf("%s: Kube = %+v, want %+v", path, got, k)
		}
	}
	if w := tree.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "knit.queue.root.nowhere.namespace: no queue root.nowhere") {
		t.Errorf("Warnings() = %q", w)
	}
}

// Application limits follow AbstractLeafQueue.updateMaximumApplications.
func TestMaximumApplications(t *testing.T) {
	two := func(extra ...string) *hadoopconf.Configuration {
		return csConf(append([]string{
			cs("root.queues"), "a,b",
			cs("root.a.capacity"), "25",
			cs("root.b.capacity"), "75",
		}, extra...)...)
	}
	tests := []struct {
		name           string
		c              *hadoopconf.Configuration
		apps, appsUser int
	}{
		{"system maximum split by absolute capacity", two(cs("maximum-applications"), "400"), 100, 100},
		{"a queue's own maximum wins", two(cs("root.a.maximum-applications"), "7"), 7, 7},
		{"global-queue-max-application replaces the split", two(cs("global-queue-max-application"), "50"), 50, 50},
		{"global-queue-max-application is capped by the system maximum",
			two(cs("global-queue-max-application"), "50", cs("maximum-applications"), "30"), 30, 30},
		{"per user: minimum-user-limit-percent times user-limit-factor",
			two(cs("minimum-user-limit-percent"), "10", cs("root.a.user-limit-factor"), "3"), 2500, 750},
		{"per user never above the queue's maximum", two(cs("root.a.user-limit-factor"), "4"), 2500, 2500},
		{"user-limit-factor -1 lifts the per-user limit",
			two(cs("root.a.minimum-user-limit-percent"), "1", cs("root.a.user-limit-factor"), "-1"), 2500, 2500},
		{"a queue with no capacity takes no applications",
			csConf(cs("root.queues"), "a,b", cs("root.a.capacity"), "0", cs("root.b.capacity"), "100"), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := Build(tt.c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			a := mustLookup(t, tree, "a")
			if a.MaxApplications != tt.apps || a.MaxApplicationsPerUser != tt.appsUser {
				t.Errorf("a: max applications %d, per user %d; want %d, %d",
					a.MaxApplications, a.MaxApplicationsPerUser, tt.apps, tt.appsUser)
			}
		})
	}
}

// Every refusal carries the CapacityScheduler's message, so an admin can
// search for it as they would on YARN.
func TestInvalidConfigurationsAreRefusedWithSchedulerMessages(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
		want string
	}{
		{
			name: "no root queues",
			kv:   []string{cs("root.capacity"), "100"},
			want: "Queue configuration missing child queue names for root",
		},
		{
			name: "capacity above 100",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "120"},
			want: "Illegal capacity of 120.0 for queue root.a",
		},
		{
			name: "negative capacity",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "-5"},
			want: "Illegal capacity of -5.0 for queue root.a",
		},
		{
			name: "NaN capacity",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "NaN"},
			want: "Illegal capacity of NaN for queue root.a",
		},
		{
			name: "capacity that is not a number",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "half"},
			want: `yarn.scheduler.capacity.root.a.capacity: invalid value: For input string: "half"`,
		},
		{
			name: "maximum capacity above 100",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.maximum-capacity"), "150"},
			want: "Illegal maximum-capacity of 150.0 for queue root.a",
		},
		{
			name: "capacity above maximum capacity",
			kv: []string{cs("root.queues"), "a,b", cs("root.a.capacity"), "60", cs("root.a.maximum-capacity"), "50",
				cs("root.b.capacity"), "40"},
			want: "Illegal queue capacity setting (abs-capacity=0.6) > (abs-maximum-capacity=0.5) for queue=[root.a],label=[]",
		},
		{
			name: "children short of 100",
			kv:   []string{cs("root.queues"), "a,b", cs("root.a.capacity"), "30", cs("root.b.capacity"), "60"},
			want: "Illegal capacity sum of 0.90000004 for children of queue root for label=. It should be either 0 or 1.0",
		},
		{
			name: "children over 100 deeper down",
			kv: []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.queues"), "x,y",
				cs("root.a.x.capacity"), "60", cs("root.a.y.capacity"), "60"},
			want: "Illegal capacity sum of 1.2 for children of queue a for label=. It should be either 0 or 1.0",
		},
		{
			name: "children at zero under a parent with capacity",
			kv:   []string{cs("root.queues"), "a,b"},
			want: "Illegal capacity sum of 0.0 for children of queue root for label=. It is set to 0, but parent percent != 0, and doesn't allow children capacity to set to 0",
		},
		{
			name: "children with capacity under a parent without",
			kv: []string{cs("root.queues"), "a,b", cs("root.a.capacity"), "0", cs("root.b.capacity"), "100",
				cs("root.a.queues"), "x", cs("root.a.x.capacity"), "100"},
			want: "Illegal capacity sum of 1.0 for children of queue a for label=. queue=a has zero capacity, but childqueues have positive capacities",
		},
		{
			name: "a state that does not exist",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.state"), "paused"},
			want: "No enum constant org.apache.hadoop.yarn.api.records.QueueState.PAUSED",
		},
		{
			name: "DRAINING cannot be configured",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.state"), "draining"},
			want: "Invalid queue state configuration. We can only use RUNNING or STOPPED.",
		},
		{
			name: "a running queue under a stopped one",
			kv: []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.state"), "STOPPED",
				cs("root.a.queues"), "x", cs("root.a.x.capacity"), "100", cs("root.a.x.state"), "RUNNING"},
			want: "The parent queue:root.a cannot be STOPPED as the child queue:root.a.x is in RUNNING state.",
		},
		{
			name: "a dot in a queue name",
			kv:   []string{cs("root.queues"), "a.b"},
			want: "Illegal queue name a.b in yarn.scheduler.capacity.root.queues: queue names cannot contain '.'",
		},
		{
			name: "a child listed twice",
			kv:   []string{cs("root.queues"), "a, b, a"},
			want: "Queue a is listed twice in yarn.scheduler.capacity.root.queues",
		},
		{
			name: "weights",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "2w"},
			want: "yarn.scheduler.capacity.root.a.capacity=2w: absolute resource and weight capacities are not supported; use a percentage",
		},
		{
			name: "absolute resources",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.maximum-capacity"), "[memory=1024,vcores=1]"},
			want: "yarn.scheduler.capacity.root.a.maximum-capacity=[memory=1024,vcores=1]: absolute resource and weight capacities are not supported; use a percentage",
		},
		{
			name: "a namespace Kubernetes would refuse",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", "knit.queue.root.a.namespace", "Team_A"},
			want: `knit.queue.root.a.namespace="Team_A" is not a Kubernetes namespace name (RFC 1123 label)`,
		},
		{
			name: "a priority class Kubernetes would refuse",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", "knit.queue.root.priority-class", "-high"},
			want: `knit.queue.root.priority-class="-high" is not a Kubernetes priority class name (RFC 1123 subdomain)`,
		},
		{
			name: "a limit that is not a number",
			kv:   []string{cs("root.queues"), "a", cs("root.a.capacity"), "100", cs("root.a.maximum-applications"), "many"},
			want: `yarn.scheduler.capacity.root.a.maximum-applications: invalid value: For input string: "many"`,
		},
		{
			name: "a global setting that is not a number",
			kv:   []string{cs("maximum-am-resource-percent"), "ten", cs("root.queues"), "a"},
			want: `yarn.scheduler.capacity.maximum-am-resource-percent: invalid value: For input string: "ten"`,
		},
		{
			name: "a substitution that never ends",
			kv:   []string{cs("root.queues"), "${x}", "x", "${y}", "y", "${x}"},
			want: "variable substitution failed: Variable substitution depth too large: 20 ${x}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantConfigError(t, tt.kv, tt.want) })
	}
}

// Children's capacities may miss 100% by 0.05%, as they do when a user
// writes thirds.
func TestCapacitySumAllowsFloatRounding(t *testing.T) {
	tests := []struct {
		name   string
		caps   []string
		extra  []string
		wantOK bool
	}{
		{"thirds written to one decimal", []string{"33.3", "33.3", "33.4"}, nil, true},
		{"thirds written to two decimals", []string{"33.33", "33.33", "33.33"}, nil, true},
		{"0.1% short is too far", []string{"33.3", "33.3", "33.3"}, nil, false},
		{"all zero with allow-zero-capacity-sum", []string{"0", "0", "0"}, []string{cs("root.allow-zero-capacity-sum"), "true"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := append([]string{cs("root.queues"), "a,b,c"}, tt.extra...)
			for i, c := range tt.caps {
				kv = append(kv, cs("root."+string(rune('a'+i))+".capacity"), c)
			}
			_, err := Build(csConf(kv...), Options{})
			if (err == nil) != tt.wantOK {
				t.Fatalf("Build = %v, want ok=%v", err, tt.wantOK)
			}
		})
	}
}

// A stopped parent stops the children that do not say otherwise, and
// -1 as maximum-capacity means 100%.
func TestStateInheritanceAndDefaults(t *testing.T) {
	tree, err := Build(csConf(
		cs("root.queues"), "a,b",
		cs("root.a.capacity"), "50",
		cs("root.a.state"), "stopped",
		cs("root.a.queues"), "x",
		cs("root.a.x.capacity"), "100",
		cs("root.b.capacity"), "50",
		cs("root.b.maximum-capacity"), "-1",
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := mustLookup(t, tree, "x").State; s != Stopped {
		t.Errorf("x inherits %v, want STOPPED", s)
	}
	if m := mustLookup(t, tree, "b").MaximumCapacity; m != 1 {
		t.Errorf("b maximum capacity %v, want 1", m)
	}
}

// A hostile configuration cannot make Build recurse or allocate without
// bound.
func TestHierarchySizeIsBounded(t *testing.T) {
	var kv []string
	path := "root"
	for i := 0; i <= MaxDepth+1; i++ {
		kv = append(kv, cs(path+".queues"), "q", cs(path+".q.capacity"), "100")
		path += ".q"
	}
	_, err := Build(csConf(kv...), Options{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("deep hierarchy: %v", err)
	}

	names := make([]string, MaxQueues+1)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	_, err = Build(csConf(cs("root.queues"), strings.Join(names, ",")), Options{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "more than 10000 queues") {
		t.Errorf("wide hierarchy: %v", err)
	}
}

func TestJavaFloatFormatting(t *testing.T) {
	tests := []struct {
		f    float32
		want string
	}{
		{120, "120.0"},
		{0.6, "0.6"},
		{0.90000004, "0.90000004"},
		{1, "1.0"},
		{0, "0.0"},
		{-5, "-5.0"},
		{1e-4, "1.0E-4"},
		{12345678, "1.2345678E7"},
		{1e7, "1.0E7"},
	}
	for _, tt := range tests {
		if got := javaFloat(tt.f); got != tt.want {
			t.Errorf("javaFloat(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

// Java's (int) cast saturates where Go's conversion is undefined, and the
// application limits rely on it for huge maximum-applications values.
func TestJavaIntCastSaturates(t *testing.T) {
	tests := []struct {
		f    float32
		want int
	}{
		{2999.9, 2999},
		{-2.5, -2},
		{float32(math.NaN()), 0},
		{1e20, math.MaxInt32},
		{-1e20, math.MinInt32},
	}
	for _, tt := range tests {
		if got := javaInt(tt.f); got != tt.want {
			t.Errorf("javaInt(%v) = %d, want %d", tt.f, got, tt.want)
		}
	}
}

func TestOrderingPolicyAndDelegationAreReadPerQueue(t *testing.T) {
	tree, err := Build(csConf(
		cs("root.queues"), "a,b",
		cs("root.a.capacity"), "50", cs("root.b.capacity"), "50",
		cs("root.a.ordering-policy"), "fair",
		cs("root.b.ordering-policy"), "fifo",
		KnitPrefix+"root.b.delegate", "kueue",
		KnitPrefix+"root.b.delegate-queue", "team-b",
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustLookup(t, tree, "root.a"), mustLookup(t, tree, "root.b")
	if !a.FairOrdering() || b.FairOrdering() {
		t.Errorf("fair ordering: a %v, b %v", a.FairOrdering(), b.FairOrdering())
	}
	if a.Kube.Delegate != "" || b.Kube.Delegate != DelegateKueue || b.Kube.DelegateQueue != "team-b" {
		t.Errorf("delegation: a %+v, b %+v", a.Kube, b.Kube)
	}
	if _, err := Build(csConf(cs("root.queues"), "a", cs("root.a.capacity"), "100", KnitPrefix+"root.a.delegate", "slurm"), Options{}); err == nil {
		t.Error("an unknown delegate was accepted")
	}
}

func TestOrderingPoliciesAreReadAsTheCapacitySchedulerReadsThem(t *testing.T) {
	// root (parent) > p (parent) > a, b (leaves); c a leaf of root.
	hierarchy := []string{
		cs("root.queues"), "p,c", cs("root.p.queues"), "a,b",
		cs("root.p.capacity"), "50", cs("root.c.capacity"), "50",
		cs("root.p.a.capacity"), "50", cs("root.p.b.capacity"), "50",
	}
	tests := []struct {
		name string
		kv   []string
		// want are root's, p's and a's.
		want [3]string
	}{
		{name: "utilization and fifo by default", want: [3]string{"utilization", "utilization", "fifo"}},
		{name: "priority-utilization at root reaches p, which sets none",
			kv: []string{cs("root.ordering-policy"), "priority-utilization"}, want: [3]string{"priority-utilization", "priority-utilization", "fifo"}},
		{name: "a parent's own policy overrides its parent's",
			kv:   []string{cs("root.ordering-policy"), "priority-utilization", cs("root.p.ordering-policy"), " utilization "},
			want: [3]string{"priority-utilization", "utilization", "fifo"}},
		{name: "a leaf's fair by name", kv: []string{cs("root.p.a.ordering-policy"), " fair"}, want: [3]string{"utilization", "utilization", "fair"}},
		{name: "a leaf's fair by class",
			kv:   []string{cs("root.p.a.ordering-policy"), "org.apache.hadoop.yarn.server.resourcemanager.scheduler.policy.FairOrderingPolicy"},
			want: [3]string{"utilization", "utilization", "fair"}},
		{name: "a leaf's FIFO with exclusive partitions",
			kv: []string{cs("root.p.a.ordering-policy"), "fifo-with-partitions"}, want: [3]string{"utilization", "utilization", "fifo-with-partitions"}},
		{name: "a leaf does not inherit its parent's",
			kv: []string{cs("root.p.ordering-policy"), "priority-utilization"}, want: [3]string{"utilization", "priority-utilization", "fifo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := Build(csConf(append(slices.Clone(hierarchy), tt.kv...)...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			root, p, a := mustLookup(t, tree, "root"), mustLookup(t, tree, "root.p"), mustLookup(t, tree, "root.p.a")
			if got := [3]string{root.OrderingPolicy, p.OrderingPolicy, a.OrderingPolicy}; got != tt.want {
				t.Errorf("ordering policies of root, p, a: %q, want %q", got, tt.want)
			}
			if got, want := p.PriorityOrdering(), tt.want[1] == "priority-utilization"; got != want {
				t.Errorf("p orders its children by priority: %v, want %v", got, want)
			}
			if got, want := a.FairOrdering(), tt.want[2] == "fair"; got != want {
				t.Errorf("a orders its applications fairly: %v, want %v", got, want)
			}
		})
	}
	refused := []struct{ name, key, value, message string }{
		{"a leaf's unknown policy", "root.p.a.ordering-policy", "lifo", "Unable to construct ordering policy for: lifo, lifo"},
		{"a leaf's policy in the wrong case", "root.p.a.ordering-policy", "FAIR", "Unable to construct ordering policy for: FAIR, FAIR"},
		{"a parent's application policy", "root.p.ordering-policy", "fair", "Unable to construct queue ordering policy=fair queue=root.p"},
	}
	for _, tt := range refused {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			wantConfigError(t, append(slices.Clone(hierarchy), cs(tt.key), tt.value), tt.message)
		})
	}
}

func TestPreemptionIsDisabledPerQueueAndInheritedAsTheCapacitySchedulerDoes(t *testing.T) {
	hierarchy := []string{
		cs("root.queues"), "p,c", cs("root.p.queues"), "a,b",
		cs("root.p.capacity"), "50", cs("root.c.capacity"), "50",
		cs("root.p.a.capacity"), "50", cs("root.p.b.capacity"), "50",
	}
	on := Options{Preemption: true, IntraQueuePreemption: true}
	type flags struct{ disabled, intraDisabled bool }
	tests := []struct {
		name string
		opts Options
		kv   []string
		// want are root.p.a's, root.p.b's and root.c's.
		want [3]flags
	}{
		{name: "the monitor off disables every queue's",
			kv:   []string{cs("root.p.disable_preemption"), "false"},
			want: [3]flags{{true, true}, {true, true}, {true, true}}},
		{name: "intra-queue preemption off disables it within every leaf",
			opts: Options{Preemption: true},
			want: [3]flags{{false, true}, {false, true}, {false, true}}},
		{name: "nothing disabled by default", opts: on},
		{name: "a parent's disable_preemption reaches its leaves, whose intra-queue preemption goes with it",
			opts: on, kv: []string{cs("root.p.disable_preemption"), "true"},
			want: [3]flags{{true, true}, {true, true}, {false, false}}},
		{name: "a leaf's own setting overrides its parent's",
			opts: on, kv: []string{cs("root.p.disable_preemption"), "true", cs("root.p.b.disable_preemption"), "false"},
			want: [3]flags{{true, true}, {false, false}, {false, false}}},
		{name: "intra-queue-preemption.disable_preemption is inherited apart",
			opts: on, kv: []string{cs("root.p.intra-queue-preemption.disable_preemption"), "true"},
			want: [3]flags{{false, true}, {false, true}, {false, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := Build(csConf(append(slices.Clone(hierarchy), tt.kv...)...), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if w := tree.Warnings(); len(w) != 0 {
				t.Errorf("warnings %q", w)
			}
			for i, path := range []string{"root.p.a", "root.p.b", "root.c"} {
				q := mustLookup(t, tree, path)
				if got := (flags{q.PreemptionDisabled, q.IntraQueuePreemptionDisabled}); got != tt.want[i] {
					t.Errorf("%s: preemption disabled %v, within the queue %v; want %v", path, got.disabled, got.intraDisabled, tt.want[i])
				}
				info, err := tree.QueueInfo(path, false, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if info.GetPreemptionDisabled() != q.PreemptionDisabled || info.GetIntraQueuePreemptionDisabled() != q.IntraQueuePreemptionDisabled {
					t.Errorf("%s: queue info reports %v, %v", path, info.GetPreemptionDisabled(), info.GetIntraQueuePreemptionDisabled())
				}
			}
		})
	}
}

func TestAVolcanoQueueWithoutItsSchedulerIsWarnedOf(t *testing.T) {
	tree, err := Build(csConf(
		cs("root.queues"), "a,b", cs("root.a.capacity"), "50", cs("root.b.capacity"), "50",
		KnitPrefix+"root.a.delegate", "volcano",
		KnitPrefix+"root.b.delegate", "volcano", KnitPrefix+"root.b.scheduler-name", "volcano",
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"knit.queue.root.a.delegate=volcano with no scheduler-name: its pods go to the default scheduler, which reads no Volcano queue, and Knit holds none back"}
	if got := tree.Warnings(); !slices.Equal(got, want) {
		t.Errorf("Warnings() =\n%q\nwant\n%q", got, want)
	}
}

// wantConfigError builds the queues of kv and wants them refused with
// message, as the CapacityScheduler words the refusal.
func wantConfigError(t *testing.T, kv []string, message string) {
	t.Helper()
	_, err := Build(csConf(kv...), Options{})
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Build = %v, want a *ConfigError", err)
	}
	if ce.Message != message {
		t.Errorf("message\n%s\nwant\n%s", ce.Message, message)
	}
}

func TestUsersMaxParallelAppsAreTheirOwnElseEveryUsers(t *testing.T) {
	hierarchy := []string{cs("root.queues"), "a", cs("root.a.capacity"), "100"}
	tests := []struct {
		name string
		kv   []string
		want map[string]int
	}{
		{"no limit by default", nil, map[string]int{"alice": math.MaxInt32, "bob": math.MaxInt32}},
		{"one user's own", []string{cs("user.alice.max-parallel-apps"), "2"}, map[string]int{"alice": 2, "bob": math.MaxInt32}},
		{"every user's, and one user's own over it",
			[]string{cs("user.max-parallel-apps"), "3", cs("user.alice.max-parallel-apps"), "5"}, map[string]int{"alice": 5, "bob": 3}},
		{"a user name with dots", []string{cs("user.first.last.max-parallel-apps"), "1"}, map[string]int{"first.last": 1, "bob": math.MaxInt32}},
		{"a user's 0 lets none of its applications run", []string{cs("user.alice.max-parallel-apps"), "0"}, map[string]int{"alice": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := Build(csConf(append(slices.Clone(hierarchy), tt.kv...)...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for user, want := range tt.want {
				if got := tree.MaxParallelAppsOfUser(user); got != want {
					t.Errorf("MaxParallelAppsOfUser(%s) = %d, want %d", user, got, want)
				}
			}
			if w := tree.Warnings(); len(w) != 0 {
				t.Errorf("warnings %q", w)
			}
		})
	}
	wantConfigError(t, append(slices.Clone(hierarchy), cs("user.alice.max-parallel-apps"), "two"),
		`yarn.scheduler.capacity.user.alice.max-parallel-apps: invalid value: For input string: "two"`)
}
