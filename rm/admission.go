package rm

import (
	"context"
	"math"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rm/queues"
)

// AdmissionQueues are the CapacityScheduler limits RGS admits pods by
// (rgs.Policy), from the queue tree in force.
func (rm *ResourceManager) AdmissionQueues() []admission.Queue {
	qs := rm.queueTree().Queues()
	out := make([]admission.Queue, 0, len(qs))
	for _, q := range qs {
		out = append(out, admissionQueue(q))
	}
	return out
}

func admissionQueue(q *queues.Queue) admission.Queue {
	parallel := q.MaxParallelApps
	if parallel == math.MaxInt32 {
		parallel = 0
	}
	return admission.Queue{
		Path:                    q.Path,
		AbsoluteCapacity:        float64(q.AbsoluteCapacity),
		AbsoluteMaximumCapacity: float64(q.AbsoluteMaximumCapacity),
		Priority:                q.Priority,
		UserLimitFactor:         float64(q.UserLimitFactor),
		MinimumUserLimitPercent: float64(q.MinimumUserLimitPercent),
		MaxAMResourcePercent:    float64(q.MaxAMResourcePercent),
		MaxParallelApps:         parallel,
		Fair:                    q.FairOrdering,
	}
}

// ClusterResource is what the RUNNING nodes hold, as the cluster metrics
// count it.
func (rm *ResourceManager) ClusterResource() admission.Resource {
	c, err := rm.cfg.Nodes.Census(context.Background())
	if err != nil {
		rm.log.Warn("cluster resource for admission", "err", err)
		return admission.Resource{}
	}
	return admission.Resource{MemoryMB: c.RunningCapabilityMB, Vcores: c.RunningCapabilityVcores}
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
			MinimumAllocation: admission.Resource{MemoryMB: int64(s.MinAllocationMB), Vcores: int64(s.MinAllocationVcores)},
			IntraQueue: admission.IntraQueuePreemption{Enabled: p.IntraQueue, MinimumThreshold: p.IntraQueueMinimumThreshold,
				MaxAllowableLimit: p.IntraQueueMaxAllowableLimit, Order: admission.IntraQueueOrder(p.IntraQueueOrderPolicy)}},
		Interval: p.Interval, MaxWaitBeforeKill: p.MaxWaitBeforeKill,
	}
}
