package rm

import (
	"maps"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/admission"
)

func TestAdmissionSeesEachPartitionsNodesAndTheQueuesSharesOfThem(t *testing.T) {
	running, unhealthy := yarnpb.NodeStateProto_NS_RUNNING, yarnpb.NodeStateProto_NS_UNHEALTHY
	e := newEnv(t, envOptions{
		queues: gpuQueues(),
		nodes: gpuNodes(
			NodeInfo{Name: "g2", State: unhealthy, CapabilityMB: 16384, CapabilityVcores: 16, Partition: "gpu"},
			NodeInfo{Name: "s1", State: running, CapabilityMB: 4096, CapabilityVcores: 4, Partition: "ssd"},
		),
	})
	// The default partition is the running nodes without a label.
	if got, want := e.rm.ClusterResource(), (admission.Resource{MemoryMB: 8192, Vcores: 8}); got != want {
		t.Errorf("ClusterResource() = %+v, want %+v", got, want)
	}
	if got, want := e.rm.PartitionResources(), map[string]admission.Resource{"gpu": {MemoryMB: 16384, Vcores: 16}, "ssd": {MemoryMB: 4096, Vcores: 4}}; !maps.Equal(got, want) {
		t.Errorf("PartitionResources() = %+v, want %+v", got, want)
	}
	am := float64(float32(0.1))
	whole := admission.Capacity{AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1, MaxAMResourcePercent: am}
	// default inherits root's "*": it may use gpu and ssd, with YARN's
	// defaults (capacity 0, maximum 100%); b has all of gpu and no ssd.
	none := admission.Capacity{AbsoluteMaximumCapacity: 1, MaxAMResourcePercent: am}
	want := map[string]map[string]admission.Capacity{
		"root":         {"gpu": whole, "ssd": whole},
		"root.default": {"gpu": none, "ssd": none},
		"root.b":       {"gpu": whole},
	}
	for _, q := range e.rm.AdmissionQueues() {
		if !maps.Equal(q.Partitions, want[q.Path]) {
			t.Errorf("%s's partitions %+v, want %+v", q.Path, q.Partitions, want[q.Path])
		}
	}
}
