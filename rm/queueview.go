package rm

import (
	"context"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
)

// queueView is what getQueueInfo, the REST scheduler and the web UI's
// queue page show of the queues' use, read once per answer so that the
// three figures of one answer agree: the queue usage index and what the
// running nodes of each node-label partition hold.
type queueView struct {
	figs map[string]*queueTotals
	// whole is what the nodes of each partition hold, the default ("")
	// included: the base of used and effective capacities.
	whole map[string]queues.PartitionResource
	// minAllocationMB is the least a queue's guarantee counts for in its
	// used capacity (yarn.scheduler.minimum-allocation-mb).
	minAllocationMB int64
	// pending is what waits in each queue and below it, in each
	// partition: the pods RGS created for asks and not yet bound into
	// containers.
	pending map[queuePartition]*pendingDemand
	// activeUsers counts each leaf's users with pods waiting, in any
	// partition: YARN's active users, among whom a user's limits divide.
	activeUsers map[string]int
	// minAllocationVcores is yarn.scheduler.minimum-allocation-vcores,
	// which AM limits are rounded up to with minAllocationMB.
	minAllocationVcores int64
}

// queuePartition is a queue's path and a node-label partition.
type queuePartition struct{ path, label string }

// pendingDemand is what waits in a queue: containers, and the resources
// they ask for.
type pendingDemand struct {
	containers, memoryMB, vcores int64
}

// pendingLister is a Scheduler that tells what waits for the Kubernetes
// scheduler (rgs.Controller): the queue figures show it as their pending
// demand.
type pendingLister interface {
	Pending() []rgs.Pending
}

// pendingByQueue sums what waits per queue and partition, each into every
// queue above its own too, and counts each leaf's users with pods
// waiting; empty without a pendingLister.
func pendingByQueue(s Scheduler) (_ map[queuePartition]*pendingDemand, activeUsers map[string]int) {
	out := map[queuePartition]*pendingDemand{}
	activeUsers = map[string]int{}
	pl, ok := s.(pendingLister)
	if !ok {
		return out, activeUsers
	}
	seen := map[[2]string]bool{}
	for _, p := range pl.Pending() {
		if k := [2]string{p.Queue, p.User}; !seen[k] {
			seen[k] = true
			activeUsers[p.Queue]++
		}
		for path := range selfAndParents(p.Queue) {
			k := queuePartition{path: path, label: p.Partition}
			d := out[k]
			if d == nil {
				d = &pendingDemand{}
				out[k] = d
			}
			d.containers += int64(p.Pods)
			d.memoryMB += p.MemoryMB
			d.vcores += p.VCores
		}
	}
	return out, activeUsers
}

// selfAndParents yields a queue's path, then each of its parents' up to
// the root: root.a.b, root.a, root.
func selfAndParents(path string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for {
			if !yield(path) {
				return
			}
			i := strings.LastIndexByte(path, '.')
			if i <= 0 {
				return
			}
			path = path[:i]
		}
	}
}

// queueView reads the queues' use and the partitions' resources now.
func (rm *ResourceManager) queueView(ctx context.Context) *queueView {
	v := &queueView{figs: rm.usage.byQueue(), whole: map[string]queues.PartitionResource{},
		minAllocationMB: int64(rm.cfg.Settings.MinAllocationMB), minAllocationVcores: int64(rm.cfg.Settings.MinAllocationVcores)}
	v.pending, v.activeUsers = pendingByQueue(rm.cfg.Scheduler)
	census, err := rm.census(ctx)
	if err != nil {
		rm.log.WarnContext(ctx, "queue figures without the nodes' resources", "err", err)
		return v
	}
	def := queues.PartitionResource{MemoryMB: census.RunningCapabilityMB, VCores: int32(census.RunningCapabilityVcores)}
	if rm.cfg.Nodes != nil {
		for label, c := range rm.partitions() {
			v.whole[label] = queues.PartitionResource{MemoryMB: c.MB, VCores: int32(c.Vcores)}
			def.MemoryMB -= c.MB
			def.VCores -= int32(c.Vcores)
		}
	}
	v.whole[""] = def
	return v
}

// usedPartitions are the labelled partitions q's applications hold
// resources in, by name.
func (v *queueView) usedPartitions(q *queues.Queue) []string {
	f := v.figs[q.Path]
	if f == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(f.partitions))
}

// inPartition is what q's applications hold in one partition.
func (v *queueView) inPartition(q *queues.Queue, label string) partitionFigures {
	if f := v.figs[q.Path]; f != nil {
		return f.inPartition(label)
	}
	return partitionFigures{}
}

// stats are getQueueInfo's figures of q: its applications, and its
// containers and reservations in the default partition, the only one
// QueueMetrics count.
func (v *queueView) stats(q *queues.Queue) queues.Stats {
	var st queues.Stats
	if f := v.figs[q.Path]; f != nil {
		st = f.queueStats()
	}
	d := v.inPartition(q, "")
	st.AllocatedMemoryMB, st.AllocatedVCores, st.AllocatedContainers = d.current.MemoryMB, int64(d.current.VCores), int64(d.current.Containers)
	st.ReservedMemoryMB, st.ReservedVCores, st.ReservedContainers = d.reserved.MemoryMB, int64(d.reserved.VCores), int64(d.reserved.Containers)
	st.UsedCapacity, _ = v.usedCapacity(q, "", d.current)
	// The default partition's, as QueueMetrics count pending resources.
	if p := v.pending[queuePartition{path: q.Path}]; p != nil {
		st.PendingContainers, st.PendingMemoryMB, st.PendingVCores = p.containers, p.memoryMB, p.vcores
	}
	def := v.whole[""]
	st.ClusterMemoryMB, st.ClusterVCores = def.MemoryMB, def.VCores
	st.Partitions = v.whole
	st.UsedPartitions = v.usedPartitions(q)
	return st
}

// usedCapacity is the share of q's guarantee in a partition that used
// holds, and the share of the partition, as CSQueueUtils.
// updateUsedCapacity reckons them in memory (the default resource
// calculator): the guarantee never less than one minimum allocation, both
// zero in a partition without resources.
func (v *queueView) usedCapacity(q *queues.Queue, label string, used apps.Holding) (share, absolute float32) {
	whole := v.whole[label].MemoryMB
	if whole <= 0 {
		return 0, 0
	}
	c, _ := q.Partition(label)
	absolute = float32(float64(used.MemoryMB) / float64(whole))
	guaranteed := max(int64(float64(whole)*float64(c.AbsoluteCapacity)), v.minAllocationMB)
	if guaranteed <= 0 {
		return 0, absolute
	}
	return float32(float64(used.MemoryMB) / float64(guaranteed)), absolute
}

// partitionFigure is one queue's figures in one partition, as the REST
// scheduler's capacities and resources and the web UI show them.
type partitionFigure struct {
	label    string
	capacity queues.PartitionCapacity
	// whole is what the partition's nodes hold.
	whole                      queues.PartitionResource
	used, reserved, am         apps.Holding
	pending                    pendingDemand
	usedCapacity, absoluteUsed float32
	// amLimit is the AM share of the queue's guarantee there, userAMLimit
	// one user's part of it; effectiveMin and effectiveMax its guarantee
	// and maximum as resources.
	amLimit, userAMLimit, effectiveMin, effectiveMax queues.PartitionResource
}

// partitions are q's figures in each partition it reports
// (Queue.NodeLabels), the default first.
func (v *queueView) partitions(q *queues.Queue) []partitionFigure {
	labels := q.NodeLabels(v.usedPartitions(q))
	out := make([]partitionFigure, 0, len(labels))
	for _, label := range labels {
		c, _ := q.Partition(label)
		f := v.inPartition(q, label)
		whole := v.whole[label]
		share, abs := v.usedCapacity(q, label, f.current)
		scaled := func(x float32) queues.PartitionResource {
			return queues.PartitionResource{MemoryMB: int64(float32(whole.MemoryMB) * x), VCores: int32(float32(whole.VCores) * x)}
		}
		var pending pendingDemand
		if p := v.pending[queuePartition{path: q.Path, label: label}]; p != nil {
			pending = *p
		}
		amLimit := scaled(c.AbsoluteCapacity * c.MaxAMResourcePercent)
		out = append(out, partitionFigure{label: label, capacity: c, whole: whole,
			used: f.current, reserved: f.reserved, am: f.am, pending: pending, usedCapacity: share, absoluteUsed: abs,
			amLimit: amLimit, userAMLimit: v.userAMLimit(q, c, scaled(c.AbsoluteCapacity), amLimit),
			effectiveMin: scaled(c.AbsoluteCapacity), effectiveMax: scaled(c.AbsoluteMaximumCapacity)})
	}
	return out
}

// userAMLimit is one user's share of q's AM limit in a partition whose
// guarantee is guaranteed, as LeafQueue.getUserAMResourceLimitPerPartition
// reckons it: the AM share of the guarantee times the larger of
// minimum-user-limit-percent and an even share among the leaf's active
// users, times user-limit-factor (-1: no user limit; admission.UserAMShare,
// the share admission holds each user's AMs to), rounded up to the
// minimum allocation, never over the queue's AM limit.
func (v *queueView) userAMLimit(q *queues.Queue, c queues.PartitionCapacity, guaranteed, queueLimit queues.PartitionResource) queues.PartitionResource {
	share := admission.UserAMShare(float64(c.MaxAMResourcePercent), float64(q.MinimumUserLimitPercent),
		float64(q.UserLimitFactor), v.activeUsers[q.Path])
	up := func(x float64, step int64) int64 {
		n := int64(math.Ceil(x))
		if step > 0 && n%step != 0 {
			n += step - n%step
		}
		return n
	}
	return queues.PartitionResource{
		MemoryMB: min(up(float64(guaranteed.MemoryMB)*share, v.minAllocationMB), queueLimit.MemoryMB),
		VCores:   min(int32(up(float64(guaranteed.VCores)*share, v.minAllocationVcores)), queueLimit.VCores),
	}
}
