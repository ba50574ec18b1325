package rm

import (
	"context"
	"math"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rm/queues"
)

// AdmissionQueues are the CapacityScheduler limits RGS admits pods by
// (rgs.Policy), from the queue tree in force, with each queue's share of
// every labelled partition some running node is in and the queue may use.
func (rm *ResourceManager) AdmissionQueues() []admission.Queue {
	qs := rm.queueTree().Queues()
	partitions := rm.partitions()
	out := make([]admission.Queue, 0, len(qs))
	for _, q := range qs {
		aq := admissionQueue(q)
		for label := range partitions {
			c, ok := q.Partition(label)
			if !ok {
				continue
			}
			if aq.Partitions == nil {
				aq.Partitions = map[string]admission.Capacity{}
			}
			aq.Partitions[label] = admission.Capacity{AbsoluteCapacity: float64(c.AbsoluteCapacity),
				AbsoluteMaximumCapacity: float64(c.AbsoluteMaximumCapacity), MaxAMResourcePercent: float64(c.MaxAMResourcePercent)}
		}
		out = append(out, aq)
	}
	return out
}

// parallelLimit is a max-parallel-apps as admission takes it: YARN's
// default (no limit) is 0, and YARN's 0 or less, which lets no
// application run, is -1.
func parallelLimit(n int) int {
	switch {
	case n == math.MaxInt32:
		return 0
	case n <= 0:
		return -1
	}
	return n
}

func admissionQueue(q *queues.Queue) admission.Queue {
	parallel := parallelLimit(q.MaxParallelApps)
	// A queue's priority orders it among its siblings only under a parent
	// ordering them by priority-utilization.
	priority := 0
	if q.Parent != nil && q.Parent.PriorityOrdering() {
		priority = q.Priority
	}
	return admission.Queue{
		Path:                         q.Path,
		AbsoluteCapacity:             float64(q.AbsoluteCapacity),
		AbsoluteMaximumCapacity:      float64(q.AbsoluteMaximumCapacity),
		Priority:                     priority,
		PreemptionDisabled:           q.PreemptionDisabled,
		IntraQueuePreemptionDisabled: q.IntraQueuePreemptionDisabled,
		UserLimitFactor:              float64(q.UserLimitFactor),
		MinimumUserLimitPercent:      float64(q.MinimumUserLimitPercent),
		MaxAMResourcePercent:         float64(q.MaxAMResourcePercent),
		MaxParallelApps:              parallel,
		Fair:                         q.FairOrdering(),
	}
}

// MaxParallelAppsOfUser is the user's max-parallel-apps in the queue
// tree in force (rgs.UserPolicy), as admission takes it.
func (rm *ResourceManager) MaxParallelAppsOfUser(user string) int {
	return parallelLimit(rm.queueTree().MaxParallelAppsOfUser(user))
}

// ClusterResource is what the RUNNING nodes of the default partition hold:
// the cluster metrics' count less the labelled partitions' nodes.
func (rm *ResourceManager) ClusterResource() admission.Resource {
	c, err := rm.cfg.Nodes.Census(context.Background())
	if err != nil {
		rm.log.Warn("cluster resource for admission", "err", err)
		return admission.Resource{}
	}
	r := admission.Resource{MemoryMB: c.RunningCapabilityMB, Vcores: c.RunningCapabilityVcores}
	for _, p := range rm.partitions() {
		r.MemoryMB -= p.MB
		r.Vcores -= p.Vcores
	}
	return r
}

// PartitionResources are what the RUNNING nodes of each labelled partition
// hold (rgs.PartitionPolicy).
func (rm *ResourceManager) PartitionResources() map[string]admission.Resource {
	partitions := rm.partitions()
	out := make(map[string]admission.Resource, len(partitions))
	for label, c := range partitions {
		out[label] = admission.Resource{MemoryMB: c.MB, Vcores: c.Vcores}
	}
	return out
}

var (
	_ rgs.PartitionPolicy = (*ResourceManager)(nil)
	_ rgs.UserPolicy      = (*ResourceManager)(nil)
)

// partitionCounter is a NodeLister that keeps its running nodes' sums per
// labelled partition (nodes.Lister); others are summed from their list.
type partitionCounter interface {
	Partitions(context.Context) (map[string]nodes.Capability, error)
}

// partitions sums the running nodes of each labelled partition; none when
// the nodes cannot be read, so that no pod of a partition is admitted on
// a guess.
func (rm *ResourceManager) partitions() map[string]nodes.Capability {
	ctx := context.Background()
	if pc, ok := rm.cfg.Nodes.(partitionCounter); ok {
		p, err := pc.Partitions(ctx)
		if err != nil {
			rm.log.Warn("partitions for admission", "err", err)
			return nil
		}
		return p
	}
	list, err := rm.cfg.Nodes.Nodes(ctx)
	if err != nil {
		rm.log.Warn("partitions for admission", "err", err)
		return nil
	}
	return nodes.PartitionsOf(list)
}

// MinimumAllocation is yarn.scheduler.minimum-allocation-mb and -vcores.
func (rm *ResourceManager) MinimumAllocation() admission.Resource {
	s := rm.cfg.Settings
	return admission.Resource{MemoryMB: int64(s.MinAllocationMB), Vcores: int64(s.MinAllocationVcores)}
}

// AppPriority is the application's priority now; 0 for one the RM does
// not know.
func (rm *ResourceManager) AppPriority(app yarnid.ApplicationID) int32 {
	e := rm.lookup(app)
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.app.Priority()
}

// Preemption is the scheduler monitor's preemption policy (rgs.Policy).
func (rm *ResourceManager) Preemption() rgs.Preemption {
	s := rm.cfg.Settings
	p := s.Preemption
	return rgs.Preemption{
		Enabled: p.Enabled,
		Policy: admission.Preemption{MaxIgnoredOverCapacity: p.MaxIgnoredOverCapacity,
			NaturalTerminationFactor: p.NaturalTerminationFactor, TotalPreemptionPerRound: p.PerRound,
			MinimumAllocation: rm.MinimumAllocation(),
			IntraQueue: admission.IntraQueuePreemption{Enabled: p.IntraQueue, MinimumThreshold: p.IntraQueueMinimumThreshold,
				MaxAllowableLimit: p.IntraQueueMaxAllowableLimit, Order: admission.IntraQueueOrder(p.IntraQueueOrderPolicy)}},
		Interval: p.Interval, MaxWaitBeforeKill: p.MaxWaitBeforeKill, ObserveOnly: p.ObserveOnly,
	}
}
