package admission

import (
	"cmp"
	"math"
	"slices"
)

// IntraQueueOrder is
// yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.preemption-order-policy:
// which imbalance within a leaf comes first when they disagree.
type IntraQueueOrder string

const (
	// UserLimitFirst (YARN's default) never takes a user below its user
	// limit: an application of higher priority takes only from users over
	// theirs, and what is taken leaves each application one minimum
	// allocation.
	UserLimitFirst IntraQueueOrder = "userlimit_first"
	// PriorityFirst lets an application of higher priority take from any
	// lower-priority application of the leaf, whatever its user's limit.
	PriorityFirst IntraQueueOrder = "priority_first"
)

// IntraQueuePreemption are the settings of YARN's IntraQueueCandidatesSelector
// (yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.*).
type IntraQueuePreemption struct {
	// Enabled (false): whether containers are taken back within a leaf.
	Enabled bool
	// MinimumThreshold (0.5): a leaf is looked into only while it uses at
	// least this share of its guarantee.
	MinimumThreshold float64
	// MaxAllowableLimit (0.2): the most of a leaf's guarantee one round
	// takes back within it, less what is taken from it for other queues.
	MaxAllowableLimit float64
	// Order is preemption-order-policy (userlimit_first).
	Order IntraQueueOrder
}

// DefaultIntraQueuePreemption are YARN's defaults: off.
var DefaultIntraQueuePreemption = IntraQueuePreemption{MinimumThreshold: 0.5, MaxAllowableLimit: 0.2, Order: UserLimitFirst}

// intraApp is one application of a leaf as the
// FifoIntraQueuePreemptionPlugin counts it (TempAppPerPartition), in MB.
type intraApp struct {
	*app
	user                  *intraUser
	used, amUsed, pending int64
	// selected is what the policy chose of it between queues.
	selected int64
	// fairShare caps its ideal in a fair leaf (setFairShareForApps).
	fairShare int64
	// ideal is what the leaf's use gives it in the leaf's order (its fair
	// share in a fair leaf); fromOther what it lacks of that;
	// toBePreempted what it holds over it; actually what others' demand
	// takes of it this round.
	ideal, fromOther, toBePreempted, actually int64
}

// intraUser is one user of a leaf (TempUserPerPartition), in MB.
type intraUser struct {
	used, amUsed, selected int64
	// limit is the user limit less the user's AMs.
	limit, ideal int64
	// apps counts the user's applications in the leaf, in any partition.
	apps int
	// deltaDone marks the user's excess over its limit as handed out
	// once (updatePreemptionQuotaForULDeltaAsDone).
	deltaDone bool
}

// limitReached is TempUserPerPartition.isUserLimitReached: the user's use
// without its AMs is over its limit.
func (u *intraUser) limitReached() bool { return u.used-u.amUsed > u.limit }

// preemptWithinLeaves returns the containers of one partition to take back
// within its leaves, as YARN's IntraQueueCandidatesSelector with the
// FifoIntraQueuePreemptionPlugin (Hadoop 3.4) chooses them, after the
// containers chosen between queues there (chosen) and within what is left
// of the round's budget, which it returns less what it takes. YARN
// computes the demand and chooses the containers per partition
// (computeIntraQueuePreemptionDemand and selectCandidates loop over
// getAllPartitions), each leaf's use, users, user limit and guarantee
// being those of the partition:
//
//   - Only leaves the ideal shares leave wanting (the policy's
//     under-served queues), using at least MinimumThreshold of their
//     guarantee, with more than one application (in any partition,
//     getAllApplications), are looked into, those with the least ideal
//     share of their guarantee first.
//   - The leaf's use, less what is taken from it between queues and less
//     its AMs, is handed out again in the leaf's order (priority, then
//     submission), each application up to its use and pending demand and
//     each user up to its user limit (computeUserLimit over all the
//     leaf's users); what an application is given over what it holds is
//     what it needs from others. A fair leaf is handed out by fair shares
//     instead (fairIdeals).
//   - From the last application up, each gives what it holds over what it
//     was given (less its AM, and less one minimum allocation under
//     userlimit_first), all together at most MaxAllowableLimit of the
//     leaf's guarantee and the round's budget.
//   - From the first application down, each one in need takes that from
//     the last ones: never from its own user's applications of its
//     priority or higher; from another user only if that user is over its
//     limit (userlimit_first), and at the same priority no more than that
//     user's excess over its limit. In a fair leaf any application over
//     its share gives to any under it.
//   - The containers: the last applications first, each its newest
//     containers, never an AM, never one chosen already; under
//     userlimit_first an application stops giving once the next container
//     would take its user to its limit or below; in a fair leaf once the
//     next container is more than what is left of what it gives.
func (st *state) preemptWithinLeaves(leaves []*node, ideal map[*node]float64, underServed map[*node]bool, chosen []*Pod, budget float64, p Preemption) ([]*Pod, float64) {
	selected := map[*Pod]bool{}
	between := map[*node][]*Pod{}
	for _, v := range chosen {
		selected[v] = true
		l := st.byPath[v.Queue]
		between[l] = append(between[l], v)
	}
	var order []*node
	for _, l := range leaves {
		// A leaf whose preemption is disabled, or only within it, is
		// passed over (getIntraQueuePreemptionDisabled).
		if underServed[l] && !l.IntraQueuePreemptionDisabled && !l.PreemptionDisabled {
			order = append(order, l)
		}
	}
	// The under-served queues come out of the policy's TQComparator:
	// least ideal share of guarantee first, a leaf without a guarantee
	// last.
	idealOfGuarantee := func(l *node) float64 {
		if g := st.guaranteed(l).MemoryMB; g > 0 {
			return ideal[l] / float64(g)
		}
		return math.Inf(1)
	}
	slices.SortStableFunc(order, func(a, b *node) int { return cmp.Compare(idealOfGuarantee(a), idealOfGuarantee(b)) })

	// computeIntraQueuePreemptionDemand: every leaf's demand first, with
	// the budget as the selection between queues left it.
	apps := map[*node][]*intraApp{}
	for _, l := range order {
		apps[l] = st.intraQueueDemand(l, between[l], selected, budget, p)
	}
	// deductPreemptableResourcesBasedSelectedCandidates: each container
	// chosen between queues is taken off what each application of its leaf
	// gives, but only off one giving more than it. YARN does it per
	// application, not once per leaf; Knit follows.
	for _, l := range order {
		for _, c := range between[l] {
			for _, a := range apps[l] {
				if a.actually > c.Resource.MemoryMB {
					a.actually -= c.Resource.MemoryMB
				}
			}
		}
	}

	var out []*Pod
	for _, l := range order {
		as := apps[l]
		var toObtain int64
		for _, a := range as {
			toObtain += a.actually
		}
		// The users' use as containers go (rollingResourceUsagePerUser).
		rolling := map[*intraUser]int64{}
		for _, a := range as {
			rolling[a.user] = a.user.used
		}
		// From the last application up (getPreemptableApps).
		for i := len(as) - 1; i >= 0 && toObtain > 0; i-- {
			a := as[i]
			if a.actually == 0 {
				continue
			}
			running := slices.Clone(a.running)
			slices.SortFunc(running, func(x, y *Pod) int { return cmp.Compare(y.Seq, x.Seq) })
			for _, c := range running {
				if toObtain <= 0 {
					break
				}
				mem := c.Resource.MemoryMB
				if selected[c] || c.AM {
					continue
				}
				// skipContainerBasedOnIntraQueuePolicy. A fair leaf: the
				// container is more than what is left of what the
				// application gives. Otherwise, under userlimit_first: the
				// user would go to its limit or below. Either way the
				// application gives no more.
				if l.Fair {
					if mem > a.actually {
						break
					}
				} else if p.IntraQueue.Order == UserLimitFirst && rolling[a.user]-mem <= a.user.limit+a.user.amUsed {
					break
				}
				// tryPreemptContainerAndDeductResToObtain: a container
				// larger than what is left of the round's budget stays; the
				// last one taken may go past what the leaf needs.
				if float64(mem) > budget {
					continue
				}
				selected[c] = true
				out = append(out, c)
				toObtain -= mem
				budget -= float64(mem)
				if p.IntraQueue.Order == UserLimitFirst {
					rolling[a.user] -= mem
				}
				// deductActuallyToBePreemptedFromApp: what the application
				// still gives.
				a.actually = max(a.actually-mem, 0)
			}
		}
	}
	return out, budget
}

// intraQueueDemand sets, for each application of leaf l, what it gives
// this round (actually), as computeAppsIdealAllocation does; nil when the
// leaf is not looked into. between are its containers chosen between
// queues. The applications come back in the leaf's order, first to last.
func (st *state) intraQueueDemand(l *node, between []*Pod, selected map[*Pod]bool, budget float64, p Preemption) []*intraApp {
	q, minAlloc := p.IntraQueue, max(p.MinimumAllocation.MemoryMB, 0)
	guaranteed := st.guaranteed(l).MemoryMB
	// The leaf's used capacity, its use over its guarantee (never less than
	// a minimum allocation, as CSQueueUtils divides).
	if used, of := float64(l.used.MemoryMB), float64(max(guaranteed, minAlloc)); of <= 0 || used/of < q.MinimumThreshold {
		return nil
	}
	if len(l.everyApp) < 2 {
		// "We do not need preemption for a single app": the leaf's
		// applications in any partition.
		return nil
	}
	var takenBetween int64
	for _, c := range between {
		takenBetween += c.Resource.MemoryMB
	}
	// Every user of the leaf, with its applications in any partition; its
	// use and AMs are those in this partition.
	users := map[string]*intraUser{}
	for _, user := range l.everyApp {
		u := users[user]
		if u == nil {
			u = &intraUser{used: l.users[user].MemoryMB}
			users[user] = u
		}
		u.apps++
	}
	as := make([]*intraApp, 0, len(l.apps))
	var amUsed int64
	for _, a := range l.apps {
		ia := &intraApp{app: a, used: a.used.MemoryMB, amUsed: a.amUsed.MemoryMB}
		for _, pod := range a.pending {
			ia.pending += pod.Resource.MemoryMB
		}
		ia.user = users[a.user]
		ia.user.amUsed += ia.amUsed
		amUsed += ia.amUsed
		as = append(as, ia)
	}
	// "AM used resource can be considered as a frozen resource."
	reassignable := l.used.MemoryMB - takenBetween - amUsed
	limit := st.userLimitForAllUsers(l, len(users), minAlloc)
	for _, u := range users {
		u.limit = limit - u.amUsed
	}
	if l.Fair && q.Order == UserLimitFirst {
		// TAFairOrderingComparator: the applications of the user using
		// least (less its AMs) first; a user's own in the leaf's fair
		// order; between users of equal use, the earlier submitted.
		slices.SortFunc(as, func(x, y *intraApp) int {
			if x.user == y.user {
				return st.fairOrder(x.app, y.app)
			}
			if c := cmp.Compare(x.user.used-x.user.amUsed, y.user.used-y.user.amUsed); c != 0 {
				return c
			}
			return bySubmission(x.app, y.app)
		})
	} else {
		// TAPriorityComparator: higher priority first, then the earlier
		// submitted; priority_first keeps it in a fair leaf too.
		slices.SortFunc(as, func(x, y *intraApp) int { return byPriorityThenAge(x.app, y.app) })
	}
	for _, a := range as {
		for _, c := range a.running {
			if selected[c] {
				a.selected += c.Resource.MemoryMB
			}
		}
	}
	if l.Fair {
		fairIdeals(as, l, reassignable+amUsed)
	} else {
		fifoIdeals(as, reassignable)
	}

	// At most MaxAllowableLimit of the guarantee, less what goes between
	// queues, and the round's budget.
	maxWithin := int64(float64(guaranteed) * q.MaxAllowableLimit)
	if maxWithin > takenBetween {
		maxWithin -= takenBetween
	} else {
		maxWithin = 0
	}
	left := min(maxWithin, int64(math.Floor(budget)))

	// calculateToBePreemptedResourcePerApp, from the last application up.
	for i := len(as) - 1; i >= 0; i-- {
		a := as[i]
		if left <= 0 || a.used <= 0 {
			continue
		}
		give := max(a.used-a.ideal-a.selected, 0)
		if !l.Fair {
			// A fair share counts the AMs already.
			give = max(give-a.amUsed, 0)
		}
		if q.Order == UserLimitFirst {
			give = max(give-minAlloc, 0)
		}
		// Less than a minimum allocation to give is nothing to give.
		if minAlloc <= give {
			a.toBePreempted = min(give, left)
		}
		left = max(left-a.toBePreempted, 0)
	}

	if l.Fair {
		fairDemand(as)
	} else {
		fifoDemand(as, q.Order)
	}
	return as
}

// fifoIdeals is calculateIdealAssignedResourcePerApp in a FIFO leaf: the
// reassignable use goes in order, each application up to its use and
// pending demand, its user up to the user's limit. An application reached
// once it is all handed out keeps an ideal of 0 and, as in YARN, is not
// counted as having containers chosen between queues.
func fifoIdeals(as []*intraApp, reassignable int64) {
	for _, a := range as {
		if reassignable <= 0 {
			a.selected = 0
			continue
		}
		u := a.user
		u.selected += a.selected
		if u.ideal >= u.limit {
			continue
		}
		a.ideal = min(reassignable, a.used-a.amUsed+a.pending-a.selected, u.limit-u.ideal)
		u.ideal += a.ideal
		if own := a.used - a.amUsed - a.selected; a.ideal > own {
			a.fromOther = a.ideal - own
		}
		reassignable = max(reassignable-a.ideal, 0)
	}
}

// fairIdeals is setFairShareForApps and calculateIdealAssignedResourcePerApp
// in a fair leaf (YARN-10559): each application's fair share is the
// leaf's use less what is taken from it between queues (AMs included)
// divided among all the leaf's applications, rounded up; when
// minimum-user-limit-percent is below 100, its user's limit (AMs
// included) divided among the user's applications instead. Its ideal is
// its use (less its AM) and pending demand up to that share, less what is
// chosen of it between queues; every application gets one, neither the
// leaf's use nor the user's limit is run down as in a FIFO leaf.
func fairIdeals(as []*intraApp, l *node, reassignable int64) {
	ceilDiv := func(x, y int64) int64 {
		if y <= 0 {
			return 0
		}
		if x <= 0 {
			return x / y
		}
		return (x + y - 1) / y
	}
	acrossApps := ceilDiv(reassignable, int64(len(l.everyApp)))
	for _, a := range as {
		a.fairShare = acrossApps
		if l.MinimumUserLimitPercent != 100 {
			a.fairShare = ceilDiv(a.user.limit+a.user.amUsed, int64(a.user.apps))
		}
		a.fairShare = max(a.fairShare, 0)
		a.user.selected += a.selected
		a.ideal = max(min(a.fairShare, a.used-a.amUsed+a.pending), 0) - a.selected
		a.user.ideal += a.ideal
		if own := a.used - a.amUsed - a.selected; a.ideal > own {
			a.fromOther = a.ideal - own
		}
	}
}

// fifoDemand is validateOutSameAppPriorityFromDemand: the first
// applications in need take from the last ones.
func fifoDemand(as []*intraApp, order IntraQueueOrder) {
	for h := 0; h < len(as); h++ {
		hi := as[h]
		if hi.fromOther <= 0 {
			continue
		}
		for lo := len(as) - 1; lo >= 0; lo-- {
			from := as[lo]
			if from.toBePreempted <= 0 {
				continue
			}
			sameUser := from.user == hi.user
			if sameUser && from.priority >= hi.priority {
				continue
			}
			if from.toBePreempted <= from.actually || hi.fromOther <= 0 {
				continue
			}
			if !sameUser && !from.user.limitReached() && order == UserLimitFirst {
				continue
			}
			avail := from.toBePreempted - from.actually
			if !sameUser && from.priority == hi.priority && from.user.limitReached() {
				// At the same priority another user gives no more than its
				// excess over its limit, once.
				delta := from.user.used - from.user.amUsed - from.user.selected - from.user.limit
				if from.user.deltaDone {
					delta = 0
				}
				if delta < avail {
					from.user.deltaDone = true
					avail = delta
				}
			}
			if avail > 0 {
				take := min(hi.fromOther, avail)
				hi.fromOther -= take
				from.actually += take
			}
		}
	}
}

// fairDemand is calcActuallyToBePreemptedBasedOnFS: from the first
// application down, each one under its share takes what it lacks from
// those over theirs, the last first, whatever their users and priorities.
func fairDemand(as []*intraApp) {
	if len(as) < 2 {
		return
	}
	for _, starved := range as {
		for i := len(as) - 1; i >= 0; i-- {
			overfed := as[i]
			if overfed == starved {
				continue
			}
			if starved.fromOther <= 0 {
				break
			}
			avail := max(overfed.toBePreempted-overfed.actually, 0)
			if avail <= 0 {
				continue
			}
			take := min(avail, starved.fromOther)
			starved.fromOther = max(starved.fromOther-take, 0)
			overfed.actually += take
		}
	}
}

// userLimitForAllUsers is the user limit the policy reads
// (LeafQueue.getResourceLimitForAllUsers: UsersManager.computeUserLimit
// counting every user of the leaf, not only the active ones), in MB: the
// queue's capacity, or its use and a minimum allocation once it is at or
// over it, divided among the users but no less than
// minimum-user-limit-percent of it, at most user-limit-factor times the
// capacity, rounded up to the minimum allocation.
func (st *state) userLimitForAllUsers(l *node, users int, minAlloc int64) int64 {
	roundUp := func(x int64) int64 {
		if minAlloc <= 0 {
			return x
		}
		return (x + minAlloc - 1) / minAlloc * minAlloc
	}
	ceilDiv := func(x, y int64) int64 { return (x + y - 1) / y }
	capacity := max(st.guaranteed(l).MemoryMB, minAlloc)
	current := capacity
	if consumed := roundUp(l.used.MemoryMB); consumed >= capacity {
		current = consumed + minAlloc
	}
	limit := max(ceilDiv(current, int64(max(users, 1))), ceilDiv(int64(float64(current)*l.MinimumUserLimitPercent), 100))
	most := st.maximum(l).MemoryMB
	if l.UserLimitFactor >= 0 {
		most = int64(float64(capacity) * l.UserLimitFactor)
	}
	return roundUp(min(limit, most))
}
