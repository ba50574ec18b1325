package admission

import (
	"cmp"
	"math"
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
// Each node-label partition is reckoned apart, as the policy clones the
// queues once per partition (cloneQueues with the partition's resource):
// a leaf's guarantee, maximum, use and pending demand there, its ideal
// share of the partition's resource, and candidates only among its
// containers there. MaxIgnoredOverCapacity and NaturalTerminationFactor
// apply to each leaf in each partition. TotalPreemptionPerRound is of the
// whole cluster (scheduler.getClusterResource, every node whatever its
// label): in each partition the leaves' excess is scaled down to it, and
// the round's budget is one for all partitions, every container chosen,
// in any partition, taken off it.
//
// With IntraQueue enabled, the containers taken within leaves for their
// applications of higher priority, their users below their limit, or, in
// fair leaves, their applications below their fair share follow
// (preemptWithinLeaves), after those taken between queues in every
// partition, as YARN runs its IntraQueueCandidatesSelector after the
// FifoCandidatesSelector.
//
// Amounts are memory, as the DefaultResourceCalculator counts them.
func Preempt(s Snapshot, p Preemption) []string {
	whole := s.Cluster
	for _, r := range s.Partitions {
		whole = whole.add(r)
	}
	allowed := p.TotalPreemptionPerRound * float64(whole.MemoryMB)
	budget := allowed
	var rounds []*preemptionRound
	var chosen []*Pod
	for _, partition := range podPartitions(s.Pods) {
		if r, ok := s.Partitions[partition]; partition != "" && (!ok || r.MemoryMB <= 0) {
			// A partition no node carries runs no container in YARN; here
			// its pods' nodes are gone or not told, and an ideal share of
			// nothing would take every one of them back.
			continue
		}
		r := newPreemptionRound(newState(s, partition))
		var taken []*Pod
		taken, budget = r.betweenQueues(allowed, budget, p)
		chosen = append(chosen, taken...)
		rounds = append(rounds, r)
	}
	if p.IntraQueue.Enabled {
		for _, r := range rounds {
			var taken []*Pod
			taken, budget = r.st.preemptWithinLeaves(r.leaves, r.ideal, r.underServed, r.chosen, budget, p)
			chosen = append(chosen, taken...)
		}
	}
	var out []string
	for _, v := range chosen {
		out = append(out, v.Key)
	}
	return out
}

// podPartitions are the partitions of the pods, gated or admitted, the
// default first and the others by name: a partition without pods has
// nothing to take back nor to take back for.
func podPartitions(pods []Pod) []string {
	var out []string
	for i := range pods {
		if !slices.Contains(out, pods[i].Partition) {
			out = append(out, pods[i].Partition)
		}
	}
	slices.Sort(out)
	return out
}

// preemptionRound is one partition's part of a round: its leaves with
// pods there, their ideal shares of it, and the containers taken there
// between queues.
type preemptionRound struct {
	st          *state
	leaves      []*node
	ideal       map[*node]float64
	underServed map[*node]bool
	chosen      []*Pod
}

func newPreemptionRound(st *state) *preemptionRound {
	r := &preemptionRound{st: st}
	for _, n := range st.byPath {
		if len(n.children) == 0 && n.apps != nil {
			r.leaves = append(r.leaves, n)
		}
	}
	slices.SortFunc(r.leaves, func(a, b *node) int { return cmp.Compare(a.Path, b.Path) })
	demand, wanted := map[*node]float64{}, map[*node]float64{}
	for _, l := range r.leaves {
		var pending float64
		for _, a := range l.apps {
			for _, pod := range a.pending {
				pending += float64(pod.Resource.MemoryMB)
			}
		}
		demand[l] = float64(l.used.MemoryMB) + pending
		wanted[l] = min(demand[l], float64(st.maximum(l).MemoryMB))
	}
	r.ideal, r.underServed = idealShares(r.leaves, demand, wanted, float64(st.cluster.MemoryMB))
	return r
}

// betweenQueues chooses the partition's containers taken back from leaves
// over their ideal share there, within budget, and returns them and what
// is left of the budget.
//
// allowed is TotalPreemptionPerRound of the whole cluster. As
// computeIdealResourceDistribution does in each partition, when the
// leaves there are over their ideal shares by more than allowed in all,
// each gives back only its part of allowed (its excess times
// allowed/needed) before the natural termination factor.
func (r *preemptionRound) betweenQueues(allowed, budget float64, p Preemption) ([]*Pod, float64) {
	// A leaf whose preemption is disabled keeps what it holds over its
	// ideal share (its untouchable extra): the policy's ideal for it is its
	// use, so it needs nothing taken and gives nothing
	// (FifoCandidatesSelector skips it).
	var needed float64
	for _, l := range r.leaves {
		if !l.PreemptionDisabled {
			needed += max(float64(l.used.MemoryMB)-r.ideal[l], 0)
		}
	}
	scale := 1.0
	if needed > allowed {
		scale = allowed / needed
	}
	for _, l := range r.leaves {
		used := float64(l.used.MemoryMB)
		if l.PreemptionDisabled || used <= r.ideal[l]*(1+p.MaxIgnoredOverCapacity) {
			// Back within its share, or kept whatever it holds: what
			// earlier rounds chose is let go.
			continue
		}
		excess := used - r.ideal[l]
		order := victims(l)
		// Containers chosen before stay chosen while the excess lasts;
		// they are still running until their wait is over.
		for _, v := range order {
			if v.Preempting && excess > 0 {
				r.chosen = append(r.chosen, v)
				excess -= float64(v.Resource.MemoryMB)
			}
		}
		take := excess * scale * p.NaturalTerminationFactor
		for _, v := range order {
			if take <= 0 {
				break
			}
			mem := float64(v.Resource.MemoryMB)
			if v.Preempting || mem > budget {
				// A container larger than what is left of the round's
				// budget stays, and a smaller one after it may still go,
				// as tryPreemptContainerAndDeductResToObtain decides
				// (fitsIn the total preemption allowed).
				continue
			}
			// The last container may take the leaf past its amount, as
			// in the policy: what it frees goes to the queues that wait.
			r.chosen = append(r.chosen, v)
			take -= mem
			budget -= mem
		}
	}
	return r.chosen, budget
}

// idealShares divides the cluster among the leaves as
// computeFixpointAllocation does: each leaf starts from its use, or from
// its guarantee when it uses more (and from its whole use when its
// preemption is disabled: the untouchable extra stays its own); what is
// left goes to the leaves that want more, the most underserved first
// (the least given for their guarantee), none above what it wants, until
// all is given. underServed are the leaves the policy leaves wanting: when
// the cluster is all given, those offered a share last (YARN keeps
// offering a leaf until it takes nothing more, so one whose want the last
// offer met is still among them) and those still wanting that no offer
// reached, a leaf whose demand (its use and pending asks) passes its
// maximum among them until an offer finds it full; when room is left
// over, none. wanted is each leaf's demand within its maximum.
func idealShares(leaves []*node, demand, wanted map[*node]float64, cluster float64) (ideal map[*node]float64, underServed map[*node]bool) {
	ideal = map[*node]float64{}
	remaining := cluster
	var wanting, inNeed []*node
	for _, l := range leaves {
		used, guaranteed := float64(l.used.MemoryMB), l.AbsoluteCapacity*cluster
		start := used
		if used > guaranteed && !l.PreemptionDisabled {
			start = guaranteed
		}
		ideal[l] = start
		remaining -= start
		if start < demand[l]-0.5 {
			inNeed = append(inNeed, l)
		}
		if start < wanted[l]-0.5 {
			wanting = append(wanting, l)
		}
	}
	// Nothing left to offer: every leaf in need stays under-served, full
	// or not, since no offer found it so.
	offered := remaining > 0.5
	var last []*node
	for remaining > 0.5 && len(wanting) > 0 {
		// As resetCapacity: the guarantees normalised over the leaves
		// still wanting, shared equally when none has any.
		weight := func(l *node) float64 { return l.AbsoluteCapacity }
		var total float64
		for _, l := range wanting {
			total += l.AbsoluteCapacity
		}
		if total == 0 {
			weight = func(*node) float64 { return 1 }
		}
		ratio := func(l *node) float64 {
			if w := weight(l); w > 0 {
				return ideal[l] / w
			}
			return math.Inf(1)
		}
		slices.SortStableFunc(wanting, func(x, y *node) int { return cmp.Compare(ratio(x), ratio(y)) })
		low := ratio(wanting[0])
		if math.IsInf(low, 1) {
			break
		}
		// The most underserved are raised together to the next leaf's
		// level or to the first of their wants, whichever comes first.
		n := 1
		for n < len(wanting) && ratio(wanting[n]) <= low+1e-12 {
			n++
		}
		group := wanting[:n]
		level := math.Inf(1)
		if n < len(wanting) {
			level = ratio(wanting[n])
		}
		var need, groupWeight float64
		for _, l := range group {
			level = min(level, wanted[l]/weight(l))
			groupWeight += weight(l)
		}
		for _, l := range group {
			need += level*weight(l) - ideal[l]
		}
		if need <= remaining {
			for _, l := range group {
				ideal[l] = max(ideal[l], level*weight(l))
			}
			remaining -= need
		} else {
			for _, l := range group {
				ideal[l] += remaining * weight(l) / groupWeight
			}
			remaining = 0
		}
		last = slices.Clone(group)
		wanting = slices.DeleteFunc(wanting, func(l *node) bool { return ideal[l] >= wanted[l]-0.5 })
	}
	underServed = map[*node]bool{}
	if remaining <= 0.5 {
		if !offered {
			wanting = inNeed
		}
		for _, l := range slices.Concat(wanting, last) {
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
	return bySubmission(x, y)
}
