package admission

import (
	"cmp"
	"slices"
)

// Preemption are the settings of YARN's ProportionalCapacityPreemptionPolicy
// that Preempt follows (yarn.resourcemanager.monitor.capacity.preemption.*).
type Preemption struct {
	// MaxIgnoredOverCapacity (0.1): a queue is left alone while its use is
	// within this fraction above its ideal share.
	MaxIgnoredOverCapacity float64
	// NaturalTerminationFactor (0.2): the fraction of a queue's excess
	// taken back in one round, letting containers that end by themselves
	// do the rest.
	NaturalTerminationFactor float64
	// TotalPreemptionPerRound (0.1): the most of the cluster one round
	// takes back, between and within queues together.
	TotalPreemptionPerRound float64
	// MinimumAllocation is yarn.scheduler.minimum-allocation-mb and -vcores
	// (1024 MB, 1), the leaf's minimum allocation to the policy: the step
	// a user limit is rounded up to, and what intra-queue preemption
	// leaves an application under userlimit_first.
	MinimumAllocation Resource
	// IntraQueue is preemption within a leaf, off by default as in YARN.
	IntraQueue IntraQueuePreemption
}

// DefaultPreemption are YARN's defaults.
var DefaultPreemption = Preemption{MaxIgnoredOverCapacity: 0.1, NaturalTerminationFactor: 0.2, TotalPreemptionPerRound: 0.1,
	MinimumAllocation: Resource{MemoryMB: 1024, Vcores: 1}, IntraQueue: DefaultIntraQueuePreemption}

// Preempt returns the keys of the running containers (admitted pods with
// Running set) to take back now so that leaves below their guarantee with
// pending demand get it, as the ProportionalCapacityPreemptionPolicy
// chooses them: each leaf's ideal share is the cluster divided in
// proportion to guarantees among the leaves that want resources (their use
// and pending demand, up to their maximum), given round by round until
// nothing is left; a leaf over its ideal share by more than
// MaxIgnoredOverCapacity gives back NaturalTerminationFactor of the excess,
// all leaves together at most TotalPreemptionPerRound of the cluster. In a
// leaf, the last applications (lowest priority, last submitted) give
// first, each its newest containers, and AM containers only after every
// other.
//
// With IntraQueue enabled, the containers taken within leaves for their
// applications of higher priority and their users below their limit
// follow (preemptWithinLeaves), after those taken between queues, as YARN
// runs its IntraQueueCandidatesSelector after the FifoCandidatesSelector.
//
// Amounts are memory, as the DefaultResourceCalculator counts them.
//
// Preempt looks at the default partition only: containers of labelled
// partitions are never taken back, nor taken back for.
func Preempt(s Snapshot, p Preemption) []string {
	st := newState(s, "")
	var leaves []*node
	for _, n := range st.byPath {
		if len(n.children) == 0 && n.apps != nil {
			leaves = append(leaves, n)
		}
	}
	slices.SortFunc(leaves, func(a, b *node) int { return cmp.Compare(a.Path, b.Path) })
	cluster := float64(st.cluster.MemoryMB)
	wanted := map[*node]float64{}
	for _, l := range leaves {
		var pending float64
		for _, a := range l.apps {
			for _, pod := range a.pending {
				pending += float64(pod.Resource.MemoryMB)
			}
		}
		wanted[l] = min(float64(l.used.MemoryMB)+pending, float64(st.maximum(l).MemoryMB))
	}
	ideal, underServed := idealShares(leaves, wanted, cluster)
	budget := p.TotalPreemptionPerRound * cluster
	var chosen []*Pod
	for _, l := range leaves {
		used := float64(l.used.MemoryMB)
		if used <= ideal[l]*(1+p.MaxIgnoredOverCapacity) {
			// Back within its share: what earlier rounds chose is let go.
			continue
		}
		excess := used - ideal[l]
		order := victims(l)
		// Containers chosen before stay chosen while the excess lasts;
		// they are still running until their wait is over.
		for _, v := range order {
			if v.Preempting && excess > 0 {
				chosen = append(chosen, v)
				excess -= float64(v.Resource.MemoryMB)
			}
		}
		take := min(excess*p.NaturalTerminationFactor, budget)
		for _, v := range order {
			if take <= 0 {
				break
			}
			if v.Preempting {
				continue
			}
			// Like the policy, the last container may take it past the
			// amount: what it frees goes to the queues that wait.
			chosen = append(chosen, v)
			take -= float64(v.Resource.MemoryMB)
			budget -= float64(v.Resource.MemoryMB)
		}
	}
	if p.IntraQueue.Enabled {
		chosen = append(chosen, st.preemptWithinLeaves(leaves, ideal, underServed, chosen, budget, p)...)
	}
	var out []string
	for _, v := range chosen {
		out = append(out, v.Key)
	}
	return out
}

// idealShares divides the cluster among the leaves in proportion to their
// guarantees, none above what it wants, round by round as
// computeFixpointAllocation does. underServed are the leaves the policy
// leaves wanting: when the cluster is all given, those that took a share
// in the last round (YARN keeps offering a leaf until it takes nothing
// more, so one whose want the last round met is still among them); when
// room is left over, none.
func idealShares(leaves []*node, wanted map[*node]float64, cluster float64) (ideal map[*node]float64, underServed map[*node]bool) {
	ideal = map[*node]float64{}
	remaining := cluster
	active := slices.Clone(leaves)
	var took []*node
	for remaining > 0.5 && len(active) > 0 {
		var guaranteed float64
		for _, l := range active {
			guaranteed += l.AbsoluteCapacity
		}
		var given float64
		var next, taking []*node
		for _, l := range active {
			share := remaining / float64(len(active))
			if guaranteed > 0 {
				share = remaining * l.AbsoluteCapacity / guaranteed
			}
			give := min(share, wanted[l]-ideal[l])
			ideal[l] += give
			given += give
			if give > 0 {
				taking = append(taking, l)
			}
			if ideal[l] < wanted[l]-0.5 {
				next = append(next, l)
			}
		}
		remaining -= given
		if given < 0.5 {
			break
		}
		active, took = next, taking
	}
	underServed = map[*node]bool{}
	if remaining <= 0.5 {
		for _, l := range took {
			underServed[l] = true
		}
	}
	return ideal, underServed
}

// victims are a leaf's running containers in the order the policy takes
// them: applications last in the ordering first, newest containers first,
// AMs after all others.
func victims(l *node) []*Pod {
	apps := make([]*app, 0, len(l.apps))
	for _, a := range l.apps {
		apps = append(apps, a)
	}
	slices.SortFunc(apps, func(x, y *app) int { return byPriorityThenAge(y, x) })
	var tasks, ams []*Pod
	for _, a := range apps {
		running := slices.Clone(a.running)
		slices.SortFunc(running, func(x, y *Pod) int { return cmp.Compare(y.Seq, x.Seq) })
		for _, p := range running {
			if p.AM {
				ams = append(ams, p)
			} else {
				tasks = append(tasks, p)
			}
		}
	}
	return append(tasks, ams...)
}

// byPriorityThenAge orders applications as YARN's TAPriorityComparator
// does: higher priority first, then the earlier submitted. Preemption takes
// from the other end.
func byPriorityThenAge(x, y *app) int {
	if c := cmp.Compare(y.priority, x.priority); c != 0 {
		return c
	}
	if c := cmp.Compare(x.id.ClusterTimestamp, y.id.ClusterTimestamp); c != 0 {
		return c
	}
	return cmp.Compare(x.id.ID, y.id.ID)
}
