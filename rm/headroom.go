package rm

import (
	"math"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
)

// headroom is the allocate answer's limit, as the CapacityScheduler
// computes it (LeafQueue.getHeadroom through CapacityHeadroomProvider):
// the least of what the cluster has free, what the queue may still take
// within its current limit, and what the user may still take up to the
// user limit.
//
// The queue's current limit is the one its parents hand down
// (ParentQueue.getResourceLimitsOfChild): root's is the cluster, and a
// child's is its parent's limit, capped by the parent's maximum capacity,
// less what the parent's children use, plus what the child itself uses,
// capped by the child's maximum capacity. Unrolled from the leaf up, what
// that leaves the leaf is the least over the leaf and each of its parents
// of that queue's maximum capacity less its use: a parent whose other
// children took its room leaves the leaf none, whatever the leaf's own
// maximum.
//
// The user limit is UsersManager.computeUserLimit's (headroomIn). The leaf's, its
// parents' and the user's use are read from the queue usage index, and
// the pods admitted but not yet bound from the scheduler's admitted
// index (admittedCounter): O(depth) at any number of applications and
// pods, and nothing allocated.
func (s *amService) headroom(v clusterView, queue, user string) (memoryMB int64, vcores int32) {
	q, err := s.rm.queueTree().Lookup(queue)
	if err != nil {
		return max(v.freeMB, 0), max(v.freeVC, 0)
	}
	ac, _ := s.scheduler.(admittedCounter)
	up := unlimited()
	r := s.rm.usage.room(q, user, func(p *queues.Queue, used apps.Holding) {
		if ac != nil {
			used = used.Add(holding(ac.AdmittedUnbound(p.Path)))
		}
		up = up.within(v, p, used)
	})
	if ac != nil {
		r.used = r.used.Add(holding(ac.AdmittedUnbound(q.Path)))
		r.user = r.user.Add(holding(ac.AdmittedUnboundOf(q.Path, user)))
		// The nodes' free room counts the pods bound to them, containers
		// or not yet.
		unplaced := ac.AdmittedUnplaced()
		v.freeMB -= unplaced.MemoryMB
		v.freeVC -= int32(unplaced.Vcores)
	}
	return headroomIn(v, q, r, up, s.rm.MinimumAllocation())
}

// admittedCounter is a Scheduler whose admission lets pods go to the
// Kubernetes scheduler before they are containers (rgs.Controller). YARN
// counts a container as used from the moment it allocates it, and
// admission counts those pods as used: the headroom does too, so that an
// AM is not told of room its queue's admitted pods already took.
type admittedCounter interface {
	// AdmittedUnbound is what those pods ask for in the queue at path and
	// below it; AdmittedUnboundOf what one user's ask for in a leaf.
	AdmittedUnbound(path string) admission.Resource
	AdmittedUnboundOf(leaf, user string) admission.Resource
	// AdmittedUnplaced is what those of them on no node yet ask for.
	AdmittedUnplaced() admission.Resource
}

var _ admittedCounter = (*rgs.Controller)(nil)

// holding is r as the usage index holds resources.
func holding(r admission.Resource) apps.Holding {
	return apps.Holding{MemoryMB: r.MemoryMB, VCores: int32(r.Vcores)}
}

// queueLeft is room in memory (MB) and vcores, fractional as the
// capacities that bound it.
type queueLeft struct{ memoryMB, vcores float64 }

// unlimited is no bound yet.
func unlimited() queueLeft { return queueLeft{math.Inf(1), math.Inf(1)} }

// within is l bounded by what queue q, holding used, leaves below it: its
// maximum capacity of the cluster less its use.
func (l queueLeft) within(v clusterView, q *queues.Queue, used apps.Holding) queueLeft {
	f := float64(q.AbsoluteMaximumCapacity)
	return queueLeft{
		memoryMB: min(l.memoryMB, float64(v.totalMB)*f-float64(used.MemoryMB)),
		vcores:   min(l.vcores, float64(v.totalVCs)*f-float64(used.VCores)),
	}
}

// limitProto is a headroom as the ResourceProto allocate answers, prev
// itself when it says the same: most heartbeats carry the last one's
// headroom, and a new message with its resource map was half of what an
// unchanged heartbeat allocated. Answers are not changed once made, so
// they may share it.
func limitProto(prev *yarnpb.ResourceProto, memoryMB int64, vcores int32) *yarnpb.ResourceProto {
	if prev != nil && prev.GetMemory() == memoryMB && prev.GetVirtualCores() == vcores {
		return prev
	}
	return yarnpb.NewResource(memoryMB, vcores)
}

// headroomIn is the headroom of a user in leaf q with r its use and up
// what q's parents leave it: the least of the user limit less the user's
// use and the queue's current limit less its use, rounded down to the
// minimum allocation, then the least of that and the cluster's free room,
// as LeafQueue.getHeadroom makes it. The user limit is UsersManager's
// (admission.UserLimit), the queue's unfinished applications' users its
// active users.
func headroomIn(v clusterView, q *queues.Queue, r queueRoom, up queueLeft, minAlloc admission.Resource) (memoryMB int64, vcores int32) {
	of := func(f float32) admission.Resource {
		return admission.Resource{MemoryMB: int64(float64(v.totalMB) * float64(f)), Vcores: int64(float64(v.totalVCs) * float64(f))}
	}
	used := admission.Resource{MemoryMB: r.used.MemoryMB, Vcores: int64(r.used.VCores)}
	limit := admission.UserLimit(admission.UserLimitOf{
		Guaranteed: of(q.AbsoluteCapacity), Maximum: of(q.AbsoluteMaximumCapacity), Used: used, ActiveUsed: used, ActiveUsers: r.users,
		MinimumUserLimitPercent: float64(q.MinimumUserLimitPercent), UserLimitFactor: float64(q.UserLimitFactor), MinimumAllocation: minAlloc,
	})
	room := func(total, used, userUsed, parentsLeave, userLimit float64, step int64) float64 {
		left := min(total*float64(q.AbsoluteMaximumCapacity)-used, parentsLeave, userLimit-userUsed)
		if step > 0 {
			left = math.Floor(left/float64(step)) * float64(step)
		}
		return left
	}
	mem := min(v.freeMB, int64(room(float64(v.totalMB), float64(r.used.MemoryMB), float64(r.user.MemoryMB), up.memoryMB, float64(limit.MemoryMB), minAlloc.MemoryMB)))
	vc := min(v.freeVC, int32(room(float64(v.totalVCs), float64(r.used.VCores), float64(r.user.VCores), up.vcores, float64(limit.Vcores), minAlloc.Vcores)))
	return max(mem, 0), max(vc, 0)
}
