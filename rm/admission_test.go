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

// TestAdmissionOrdersQueuesByPriorityOnlyUnderPriorityUtilization: a
// queue's priority orders it among its siblings only when its parent's
// ordering-policy is priority-utilization; under YARN's default,
// utilization, it is not read. Each queue's preemption settings go with it.
func TestAdmissionOrdersQueuesByPriorityOnlyUnderPriorityUtilization(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string
		want   int
	}{
		{"utilization by default", "", 0},
		{"priority-utilization", "priority-utilization", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{"yarn.scheduler.capacity.root.b.priority": "5"}
			if tc.policy != "" {
				props["yarn.scheduler.capacity.root.ordering-policy"] = tc.policy
			}
			e := newEnv(t, envOptions{queues: baseQueues(props)})
			for _, q := range e.rm.AdmissionQueues() {
				if q.Path != "root.b" {
					continue
				}
				if q.Priority != tc.want {
					t.Errorf("root.b's priority %d, want %d", q.Priority, tc.want)
				}
				// The harness runs no scheduler monitor: the queue's
				// containers are never taken back.
				if !q.PreemptionDisabled || !q.IntraQueuePreemptionDisabled {
					t.Errorf("root.b's preemption disabled %v, within it %v; want both", q.PreemptionDisabled, q.IntraQueuePreemptionDisabled)
				}
				return
			}
			t.Error("no root.b among the admission queues")
		})
	}
}

// TestAdmissionTakesMaxParallelAppsAsYARNCountsThem: no setting is no
// limit (0 to admission), YARN's 0 lets nothing run (-1), others are as
// set, for queues and users alike.
func TestAdmissionTakesMaxParallelAppsAsYARNCountsThem(t *testing.T) {
	e := newEnv(t, envOptions{queues: baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.b.max-parallel-apps":       "0",
		"yarn.scheduler.capacity.root.default.max-parallel-apps": "4",
		"yarn.scheduler.capacity.user.alice.max-parallel-apps":   "3",
		"yarn.scheduler.capacity.user.carol.max-parallel-apps":   "0",
	})})
	got := map[string]int{}
	for _, q := range e.rm.AdmissionQueues() {
		got[q.Path] = q.MaxParallelApps
	}
	for _, user := range []string{"alice", "bob", "carol"} {
		got[user] = e.rm.MaxParallelAppsOfUser(user)
	}
	want := map[string]int{"root": 0, "root.default": 4, "root.b": -1, "alice": 3, "bob": 0, "carol": -1}
	if !maps.Equal(got, want) {
		t.Errorf("max-parallel-apps %v, want %v", got, want)
	}
}
