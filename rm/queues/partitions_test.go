package queues

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// twoTeams is root.a (30%, under it a1 and a2, half each) and root.b (70%)
// sharing the gpu partition 40/60, a's share in it capped at 50%.
func twoTeams(extra ...string) []string {
	return append([]string{
		cs("root.queues"), "a,b",
		cs("root.a.capacity"), "30", cs("root.b.capacity"), "70",
		cs("root.a.queues"), "a1,a2",
		cs("root.a.a1.capacity"), "50", cs("root.a.a2.capacity"), "50",
		cs("root.a.accessible-node-labels"), "gpu",
		cs("root.a.accessible-node-labels.gpu.capacity"), "40",
		cs("root.a.accessible-node-labels.gpu.maximum-capacity"), "50",
		cs("root.a.a1.accessible-node-labels.gpu.capacity"), "100",
		cs("root.b.accessible-node-labels"), "gpu",
		cs("root.b.accessible-node-labels.gpu.capacity"), "60",
		cs("root.b.accessible-node-labels.gpu.maximum-am-resource-percent"), "0.5",
	}, extra...)
}

func TestPartitionCapacitiesFollowTheCapacityScheduler(t *testing.T) {
	tree, err := Build(csConf(twoTeams()...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		queue, partition string
		want             PartitionCapacity
		accessible       bool
	}{
		// Root holds every partition whole, whatever its configuration.
		{"root", "gpu", PartitionCapacity{1, 1, 1, 1, 0.1}, true},
		{"root", "ssd", PartitionCapacity{1, 1, 1, 1, 0.1}, true},
		// a: 40% of gpu, at most 50%.
		{"root.a", "gpu", PartitionCapacity{0.4, 0.5, 0.4, 0.5, 0.1}, true},
		// a1: 100% of a's 40% = 40%; its maximum 100% of a's 50% = 50%.
		{"root.a.a1", "gpu", PartitionCapacity{1, 1, 0.4, 0.5, 0.1}, true},
		// a2 names no gpu capacity: 0 (YARN's default), maximum 100% of
		// a's 50%; it inherits a's accessible labels.
		{"root.a.a2", "gpu", PartitionCapacity{0, 1, 0, 0.5, 0.1}, true},
		// b: 60%, maximum defaults to 100%; its own AM share there.
		{"root.b", "gpu", PartitionCapacity{0.6, 1, 0.6, 1, 0.5}, true},
		// A partition b may not use.
		{"root.b", "ssd", PartitionCapacity{0, 1, 0, 1, 0.1}, false},
		// The default partition is the queue's own capacities: a1 is 50%
		// of a's 30% = 15%.
		{"root.a.a1", "", PartitionCapacity{0.5, 1, 0.15, 1, 0.1}, true},
	}
	for _, tt := range tests {
		q := mustLookup(t, tree, tt.queue)
		got, ok := q.Partition(tt.partition)
		if got != tt.want || ok != tt.accessible {
			t.Errorf("%s.Partition(%q) = %+v, %v; want %+v, %v", tt.queue, tt.partition, got, ok, tt.want, tt.accessible)
		}
	}
}

func TestInvalidPartitionConfigurationsAreRefusedWithSchedulerMessages(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
		want string
	}{
		{
			name: "label capacity above 100",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.capacity"), "120"),
			want: "Illegal capacity of 120.0 for node-label=gpu in queue=root.b, valid capacity should in range of [0, 100].",
		},
		{
			name: "negative label maximum capacity",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.maximum-capacity"), "-1"),
			want: "Illegal capacity of -1.0 for node-label=gpu in queue=root.b, valid capacity should in range of [0, 100].",
		},
		{
			name: "label capacity above its maximum",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.maximum-capacity"), "50"),
			want: "Illegal queue capacity setting (abs-capacity=0.6) > (abs-maximum-capacity=0.5) for queue=[root.b],label=[gpu]",
		},
		{
			// Root holds every partition any queue names: its children's
			// shares of gpu must add up to 100%.
			name: "children of root short of 100% of a partition",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.capacity"), "50"),
			want: "Illegal capacity sum of 0.9 for children of queue root for label=gpu. It should be either 0 or 1.0",
		},
		{
			name: "a parent's partition share left to no child",
			kv:   twoTeams(cs("root.a.a1.accessible-node-labels.gpu.capacity"), "0"),
			want: "Illegal capacity sum of 0.0 for children of queue a for label=gpu. It is set to 0, but parent percent != 0, and doesn't allow children capacity to set to 0",
		},
		{
			name: "children sharing a partition their parent has none of",
			kv: twoTeams(cs("root.a.accessible-node-labels.gpu.capacity"), "0",
				cs("root.b.accessible-node-labels.gpu.capacity"), "100"),
			want: "Illegal capacity sum of 1.0 for children of queue a for label=gpu. queue=a has zero capacity, but childqueues have positive capacities",
		},
		{
			name: "a child of a labelled parent may use every partition",
			kv:   twoTeams(cs("root.a.a2.accessible-node-labels"), "*"),
			want: "Parent's accessible queue is not ANY(*), but child's accessible queue is *",
		},
		{
			name: "a child may use a partition its parent may not",
			kv:   twoTeams(cs("root.a.a2.accessible-node-labels"), "gpu,ssd"),
			want: "Some labels of child queue is not a subset of parent queue, these labels=[ssd]",
		},
		{
			name: "a label capacity that is not a number",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.capacity"), "most"),
			want: `yarn.scheduler.capacity.root.b.accessible-node-labels.gpu.capacity: invalid value: For input string: "most"`,
		},
		{
			name: "a label capacity as a weight",
			kv:   twoTeams(cs("root.b.accessible-node-labels.gpu.capacity"), "2w"),
			want: "yarn.scheduler.capacity.root.b.accessible-node-labels.gpu.capacity=2w: absolute resource and weight capacities are not supported; use a percentage",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantConfigError(t, tt.kv, tt.want) })
	}
}

func TestConfiguredLabelsAreReadOncePerQueue(t *testing.T) {
	got := configuredLabels([]string{
		cs("root.a.accessible-node-labels"),
		cs("root.a.accessible-node-labels.gpu.capacity"),
		cs("root.a.accessible-node-labels.gpu.maximum-capacity"),
		cs("root.a.b.accessible-node-labels.ssd.capacity"),
		cs("root.a.accessible-node-labels.fpga"),
		"yarn.other.accessible-node-labels.x.capacity",
	})
	want := map[string][]string{"root.a": {"gpu"}, "root.a.b": {"ssd"}, "": {"gpu", "ssd"}}
	if len(got) != len(want) {
		t.Fatalf("configuredLabels = %q, want %q", got, want)
	}
	for k, w := range want {
		if g := got[k]; len(g) != len(w) || g[0] != w[0] || g[len(g)-1] != w[len(w)-1] {
			t.Errorf("configuredLabels[%q] = %q, want %q", k, g, w)
		}
	}
}

func TestNodeLabelsAreThePartitionsAQueueReportsIn(t *testing.T) {
	tree, err := Build(csConf(twoTeams()...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, queue string
		used        []string
		want        []string
	}{
		{"a queue that may use a partition reports it after the default", "root.b", nil, []string{"", "gpu"}},
		{"one that may use a partition reports it though it holds nothing there", "root.a.a2", nil, []string{"", "gpu"}},
		{"what a queue that may use only some holds elsewhere is not reported", "root.b", []string{"ssd"}, []string{"", "gpu"}},
		{"a queue that may use any reports those its configuration names", "root", nil, []string{"", "gpu"}},
		{"and those it holds resources in, by name", "root", []string{"ssd", "gpu", "fpga"}, []string{"", "fpga", "gpu", "ssd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLookup(t, tree, tt.queue).NodeLabels(tt.used)
			if !slices.Equal(got, tt.want) {
				t.Errorf("NodeLabels(%q) = %q, want %q", tt.used, got, tt.want)
			}
		})
	}
}

func TestQueueInfoGivesTheConfigurationsOfEachPartition(t *testing.T) {
	tree, err := Build(csConf(twoTeams()...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The default partition's nodes hold 100 GiB and 100 vcores, gpu's
	// 10 GiB and 10.
	stats := func(*Queue) Stats {
		return Stats{ClusterMemoryMB: 102400, ClusterVCores: 100, Partitions: map[string]PartitionResource{"gpu": {10240, 10}}}
	}
	conf := func(capacity, abs, maxCapacity, absMax, am float32, minMB int64, minV int32, maxMB int64, maxV int32) *yarnpb.QueueConfigurationsProto {
		return &yarnpb.QueueConfigurationsProto{Capacity: proto.Float32(capacity), AbsoluteCapacity: proto.Float32(abs),
			MaxCapacity: proto.Float32(maxCapacity), AbsoluteMaxCapacity: proto.Float32(absMax), MaxAMPercentage: proto.Float32(am),
			ConfiguredMinCapacity: resource(0, 0), ConfiguredMaxCapacity: resource(0, 0),
			EffectiveMinCapacity: resource(minMB, minV), EffectiveMaxCapacity: resource(maxMB, maxV)}
	}
	entry := func(label string, c *yarnpb.QueueConfigurationsProto) *yarnpb.QueueConfigurationsMapProto {
		return &yarnpb.QueueConfigurationsMapProto{PartitionName: proto.String(label), QueueConfigurations: c}
	}
	tests := []struct {
		name, queue string
		want        []*yarnpb.QueueConfigurationsMapProto
	}{
		{"a leaf: its share of each partition and of that partition's nodes", "root.a.a1", []*yarnpb.QueueConfigurationsMapProto{
			entry("", conf(0.5, 0.15, 1, 1, 0.1, 15360, 15, 102400, 100)),
			entry("gpu", conf(1, 0.4, 1, 0.5, 0.1, 4096, 4, 5120, 5)),
		}},
		{"a queue with its own AM share in a partition", "root.b", []*yarnpb.QueueConfigurationsMapProto{
			entry("", conf(0.7, 0.7, 1, 1, 0.1, 71680, 70, 102400, 100)),
			entry("gpu", conf(0.6, 0.6, 1, 1, 0.5, 6144, 6, 10240, 10)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := tree.QueueInfo(tt.queue, false, false, stats)
			if err != nil {
				t.Fatal(err)
			}
			got := info.GetQueueConfigurationsMap()
			if len(got) != len(tt.want) {
				t.Fatalf("%d partitions, want %d: %v", len(got), len(tt.want), got)
			}
			for i := range got {
				if diff := protoDiff(tt.want[i], got[i]); diff != "" {
					t.Errorf("partition %d differs:\n%s", i, diff)
				}
			}
		})
	}
}
