// Package admission decides which of Knit's gated pods may go to the
// Kubernetes scheduler, in the order and to the limits YARN's
// CapacityScheduler would allocate containers: each leaf queue's
// guaranteed capacity first, elastic use up to its maximum capacity of
// what others leave idle, user limits, the AM resource limit, the
// maximum of parallel applications (of the leaf, its parents and the
// user), application priorities and the
// leaf's ordering policy (FIFO or fair). Pods it admits are counted as
// used whether the Kubernetes scheduler has bound them or not.
//
// Admit is a pure function of a snapshot: no clock, no I/O. RGS builds
// the snapshot from its informer and the RM's queues, lifts the gates of
// what Admit returns, and runs it again when pods or queues change.
//
// Resources are memory and vcores; a limit holds when it holds for both
// (Kubernetes places pods by both), and a queue's use is its dominant
// share of its guarantee, as YARN's DominantResourceCalculator sees it.
//
// Node-label partitions are admitted apart, as the CapacityScheduler
// allocates a container asked with a node label expression only on the
// nodes carrying the label: each partition has its own resource (its
// nodes'), each queue its own capacity, maximum capacity and AM share in
// it, and guarantees, elastic limits, user limits and AM limits are
// reckoned within it. What spans partitions is the leaf's: its running
// applications (max-parallel-apps) and its active users. A queue that
// may not use a partition has none of its pods there admitted.
package admission

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/knitdev/knit/protocols/yarnid"
)

// Resource is an amount of memory (MB) and vcores.
type Resource struct {
	MemoryMB, Vcores int64
}

func (r Resource) add(o Resource) Resource {
	return Resource{r.MemoryMB + o.MemoryMB, r.Vcores + o.Vcores}
}

func (r Resource) sub(o Resource) Resource {
	return Resource{r.MemoryMB - o.MemoryMB, r.Vcores - o.Vcores}
}

// fitsIn reports whether r is within limit in both dimensions.
func (r Resource) fitsIn(limit Resource) bool {
	return r.MemoryMB <= limit.MemoryMB && r.Vcores <= limit.Vcores
}

// greaterThan reports whether r exceeds limit in some dimension.
func (r Resource) greaterThan(limit Resource) bool { return !r.fitsIn(limit) }

// scale is r times f, rounded down, as a limit.
func (r Resource) scale(f float64) Resource {
	return Resource{int64(math.Floor(float64(r.MemoryMB) * f)), int64(math.Floor(float64(r.Vcores) * f))}
}

func maxOf(a, b Resource) Resource {
	return Resource{max(a.MemoryMB, b.MemoryMB), max(a.Vcores, b.Vcores)}
}

func minOf(a, b Resource) Resource {
	return Resource{min(a.MemoryMB, b.MemoryMB), min(a.Vcores, b.Vcores)}
}

// share is r's dominant share of of: the larger of its two fractions.
func (r Resource) share(of Resource) float64 {
	f := func(x, y int64) float64 {
		switch {
		case y > 0:
			return float64(x) / float64(y)
		case x > 0:
			return math.Inf(1)
		}
		return 0
	}
	return max(f(r.MemoryMB, of.MemoryMB), f(r.Vcores, of.Vcores))
}

// Queue is one CapacityScheduler queue's limits, parents included.
type Queue struct {
	// Path is the full path ("root.a.b"); its parent is the path up to the
	// last dot.
	Path string
	// AbsoluteCapacity and AbsoluteMaximumCapacity are fractions of the
	// cluster (0..1).
	AbsoluteCapacity, AbsoluteMaximumCapacity float64
	// Priority orders the queue among its siblings.
	Priority int
	// MaxParallelApps caps the applications running in the queue, in its
	// leaves together for a parent (max-parallel-apps); 0 is no limit, and
	// a negative one lets none run (YARN's 0).
	MaxParallelApps int
	// The leaf's limits. UserLimitFactor -1 is no limit;
	// MinimumUserLimitPercent is 0..100; MaxAMResourcePercent 0..1.
	UserLimitFactor         float64
	MinimumUserLimitPercent float64
	MaxAMResourcePercent    float64
	// Fair orders the leaf's applications by their use (FairOrderingPolicy)
	// instead of priority and submission (fifo, fifo-with-partitions).
	Fair bool
	// PreemptionDisabled keeps Preempt from taking the leaf's containers
	// for other queues (disable_preemption), and
	// IntraQueuePreemptionDisabled from taking them for its own
	// applications; the leaf may still take from others.
	PreemptionDisabled, IntraQueuePreemptionDisabled bool
	// The fields above are the queue's in the default partition;
	// Partitions are its shares of the labelled partitions it may use, by
	// partition name. A queue may use no labelled partition missing here.
	Partitions map[string]Capacity
}

// Capacity is a queue's share of one labelled partition.
type Capacity struct {
	// AbsoluteCapacity and AbsoluteMaximumCapacity are fractions of the
	// partition (0..1).
	AbsoluteCapacity, AbsoluteMaximumCapacity float64
	// MaxAMResourcePercent is the share of the queue's guarantee in the
	// partition its AMs there may use (0..1).
	MaxAMResourcePercent float64
}

// Pod is one Knit pod: a container asked for, gated or admitted.
type Pod struct {
	// Key names the pod to the caller.
	Key   string
	Queue string
	User  string
	App   yarnid.ApplicationID
	// AppPriority is the application's priority: higher goes first.
	AppPriority int32
	AM          bool
	Resource    Resource
	// Partition is the node-label partition the pod asks for; "" is the
	// default partition, the nodes without a label.
	Partition string
	// Seq orders an application's own pods: lower goes first.
	Seq int64
	// Admitted pods are no longer gated: they count as used.
	Admitted bool
	// Running marks an admitted pod that is a container: only those are
	// taken back by Preempt. Preempting marks one an earlier round chose.
	Running, Preempting bool
}

// Snapshot is what one admission pass reads.
type Snapshot struct {
	// Cluster is what the default partition's usable nodes hold.
	Cluster Resource
	// Partitions are what each labelled partition's usable nodes hold, by
	// name; a partition missing here has nothing.
	Partitions map[string]Resource
	Queues     []Queue
	Pods       []Pod
	// MinimumAllocation is the scheduler's minimum allocation
	// (yarn.scheduler.minimum-allocation-*): YARN reckons user limits in
	// its steps. Zero reckons them unrounded.
	MinimumAllocation Resource
	// MaxParallelAppsOfUser, if set, caps each user's applications
	// running at once in every queue together
	// (yarn.scheduler.capacity.user.<user>.max-parallel-apps), as
	// Queue.MaxParallelApps caps a queue's.
	MaxParallelAppsOfUser func(user string) int
}

// Admit returns the keys of the gated pods to admit now, in the order the
// CapacityScheduler would allocate them: the default partition's first,
// then each labelled partition's, by name.
func Admit(s Snapshot) []string {
	// Admitted here, a pod counts as running in the partitions that come
	// after its own: the caller's pods are not touched.
	s.Pods = slices.Clone(s.Pods)
	var out []string
	for _, partition := range pendingPartitions(s.Pods) {
		st := newState(s, partition)
		for {
			p := st.next()
			if p == nil {
				break
			}
			st.admit(p)
			out = append(out, p.Key)
		}
	}
	return out
}

// pendingPartitions are the partitions of the gated pods, the default
// first and the others by name.
func pendingPartitions(pods []Pod) []string {
	var out []string
	for i := range pods {
		if !pods[i].Admitted && !slices.Contains(out, pods[i].Partition) {
			out = append(out, pods[i].Partition)
		}
	}
	slices.Sort(out)
	return out
}

// node is a queue with its use in this pass.
type node struct {
	Queue
	parent   *node
	children []*node
	used     Resource
	// leaf only
	apps   map[yarnid.ApplicationID]*app
	users  map[string]Resource
	amUsed Resource
	// userAMs are the admitted AM pods' resources by user.
	userAMs map[string]Resource
	// running are the applications with an admitted pod, in any
	// partition: a parent's in its leaves together.
	running int
	blocked bool
	// runningElsewhere are the applications with an admitted pod in
	// another partition; waitingElsewhere the users with a gated pod in
	// another partition, who count among the leaf's active users.
	runningElsewhere map[yarnid.ApplicationID]bool
	waitingElsewhere map[string]bool
	// inaccessible marks a queue that may not use the partition.
	inaccessible bool
	// everyApp are the leaf's applications in any partition, gated or
	// admitted, with their users: the leaf's applications and users as
	// intra-queue preemption counts them (LeafQueue.getAllApplications).
	everyApp map[yarnid.ApplicationID]string
}

// app is one application's pods in a leaf.
type app struct {
	id       yarnid.ApplicationID
	priority int32
	user     string
	used     Resource
	amUsed   Resource // admitted AM pods
	admitted bool
	pending  []*Pod // gated, in Seq order
	running  []*Pod // admitted containers
}

// state is one partition's pass: its resource, and the queues' shares and
// use of it.
type state struct {
	// partition is "" for the default partition.
	partition     string
	cluster, free Resource
	minAlloc      Resource
	root          *node
	byPath        map[string]*node
	// userApps caps each user's running applications (nil: none), and
	// userRunning counts them, in every leaf and partition.
	userApps    func(user string) int
	userRunning map[string]int
}

// newState reads the snapshot for one partition: its pods are counted or
// pending; the other partitions' only mark their applications running and
// their users active.
func newState(s Snapshot, partition string) *state {
	cluster := s.Cluster
	if partition != "" {
		cluster = s.Partitions[partition]
	}
	st := &state{partition: partition, cluster: cluster, free: cluster, minAlloc: s.MinimumAllocation, byPath: map[string]*node{},
		userApps: s.MaxParallelAppsOfUser, userRunning: map[string]int{}}
	qs := slices.Clone(s.Queues)
	slices.SortFunc(qs, func(a, b Queue) int { return cmp.Compare(strings.Count(a.Path, "."), strings.Count(b.Path, ".")) })
	for _, q := range qs {
		n := &node{Queue: q}
		if partition != "" {
			c, ok := q.Partitions[partition]
			n.AbsoluteCapacity, n.AbsoluteMaximumCapacity, n.MaxAMResourcePercent = c.AbsoluteCapacity, c.AbsoluteMaximumCapacity, c.MaxAMResourcePercent
			n.inaccessible = !ok
		}
		st.byPath[q.Path] = n
		if i := strings.LastIndexByte(q.Path, '.'); i >= 0 {
			if p := st.byPath[q.Path[:i]]; p != nil {
				n.parent = p
				p.children = append(p.children, n)
			}
		} else if st.root == nil {
			st.root = n
		}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		leaf := st.byPath[p.Queue]
		if leaf == nil || len(leaf.children) > 0 {
			continue
		}
		if leaf.everyApp == nil {
			leaf.everyApp = map[yarnid.ApplicationID]string{}
		}
		leaf.everyApp[p.App] = p.User
		if p.Partition == partition {
			continue
		}
		switch {
		case p.Admitted && !leaf.runningElsewhere[p.App]:
			if leaf.runningElsewhere == nil {
				leaf.runningElsewhere = map[yarnid.ApplicationID]bool{}
			}
			leaf.runningElsewhere[p.App] = true
			st.startRunning(leaf, p.User)
		case !p.Admitted:
			if leaf.waitingElsewhere == nil {
				leaf.waitingElsewhere = map[string]bool{}
			}
			leaf.waitingElsewhere[p.User] = true
		}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Partition != partition {
			continue
		}
		leaf := st.byPath[p.Queue]
		if leaf == nil || len(leaf.children) > 0 {
			// A pod of a queue the RM no longer has is not Knit's to
			// admit; admitted, it still takes room.
			if p.Admitted {
				st.free = st.free.sub(p.Resource)
			}
			continue
		}
		if leaf.apps == nil {
			leaf.apps, leaf.users = map[yarnid.ApplicationID]*app{}, map[string]Resource{}
		}
		a := leaf.apps[p.App]
		if a == nil {
			a = &app{id: p.App, priority: p.AppPriority, user: p.User, admitted: leaf.runningElsewhere[p.App]}
			leaf.apps[p.App] = a
		}
		if !p.Admitted {
			a.pending = append(a.pending, p)
			continue
		}
		if p.Running {
			a.running = append(a.running, p)
		}
		st.use(leaf, a, p)
	}
	for _, n := range st.byPath {
		for _, a := range n.apps {
			// AMs first: an application without its AM has no use for
			// its tasks.
			slices.SortFunc(a.pending, func(x, y *Pod) int {
				if x.AM != y.AM {
					if x.AM {
						return -1
					}
					return 1
				}
				return cmp.Compare(x.Seq, y.Seq)
			})
		}
	}
	return st
}

// guaranteed is the queue's guaranteed resource.
func (st *state) guaranteed(n *node) Resource { return st.cluster.scale(n.AbsoluteCapacity) }

// maximum is the queue's maximum resource.
func (st *state) maximum(n *node) Resource { return st.cluster.scale(n.AbsoluteMaximumCapacity) }

// next is the pod the CapacityScheduler would allocate next, or nil.
func (st *state) next() *Pod {
	if st.root == nil {
		return nil
	}
	for {
		leaf := st.pickLeaf(st.root)
		if leaf == nil {
			return nil
		}
		if p := st.pickPod(leaf); p != nil {
			return p
		}
		leaf.blocked = true
	}
}

// pickLeaf descends from n to the leaf with pending pods that the
// CapacityScheduler's priority-utilization ordering offers first.
func (st *state) pickLeaf(n *node) *node {
	if len(n.children) == 0 {
		if n.blocked || !n.hasPending() {
			return nil
		}
		return n
	}
	kids := slices.Clone(n.children)
	slices.SortStableFunc(kids, func(a, b *node) int { return st.compareQueues(a, b) })
	for _, k := range kids {
		if l := st.pickLeaf(k); l != nil {
			return l
		}
	}
	return nil
}

// compareQueues orders siblings as PriorityUtilizationQueueOrderingPolicy
// does: queues under their guarantee first, by priority among them; then
// by how much of their guarantee they use.
func (st *state) compareQueues(a, b *node) int {
	ra, rb := a.used.share(st.guaranteed(a)), b.used.share(st.guaranteed(b))
	underA, underB := ra < 1, rb < 1
	switch {
	case underA && !underB:
		return -1
	case underB && !underA:
		return 1
	case underA && underB:
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(ra, rb)
	}
	if c := cmp.Compare(ra, rb); c != 0 {
		return c
	}
	return cmp.Compare(b.Priority, a.Priority)
}

func (n *node) hasPending() bool {
	for _, a := range n.apps {
		if len(a.pending) > 0 {
			return true
		}
	}
	return false
}

// pickPod offers the leaf's applications in its ordering policy's order
// and returns the first pod every limit lets through.
func (st *state) pickPod(leaf *node) *Pod {
	apps := make([]*app, 0, len(leaf.apps))
	activeUsers := map[string]bool{}
	for _, a := range leaf.apps {
		if len(a.pending) > 0 {
			apps = append(apps, a)
			activeUsers[a.user] = true
		}
	}
	for u := range leaf.waitingElsewhere {
		// UsersManager counts a user active whatever partition it asks.
		activeUsers[u] = true
	}
	slices.SortFunc(apps, func(x, y *app) int {
		if leaf.Fair {
			return st.fairOrder(x, y)
		}
		return byPriorityThenAge(x, y)
	})
	// The active users' use is what their limit divides
	// (UsersManager's totalResUsageForActiveUsers).
	var activeUsed Resource
	for u := range activeUsers {
		activeUsed = activeUsed.add(leaf.users[u])
	}
	for _, a := range apps {
		p := a.pending[0]
		if st.allows(leaf, a, p, len(activeUsers), activeUsed) {
			return p
		}
	}
	return nil
}

// fairOrder orders a fair leaf's applications as its FairOrderingPolicy
// does: the least used (dominant share of the partition) first, then the
// earlier submitted.
func (st *state) fairOrder(x, y *app) int {
	if c := cmp.Compare(x.used.share(st.cluster), y.used.share(st.cluster)); c != 0 {
		return c
	}
	return bySubmission(x, y)
}

// bySubmission orders applications by their ids: the earlier submitted
// first.
func bySubmission(x, y *app) int {
	if c := cmp.Compare(x.id.ClusterTimestamp, y.id.ClusterTimestamp); c != 0 {
		return c
	}
	return cmp.Compare(x.id.ID, y.id.ID)
}

// allows checks one pod against the cluster, the queue and its parents'
// maximum capacities, the maximum of parallel applications, the AM limit
// and the user limit, as the CapacityScheduler checks an allocation.
func (st *state) allows(leaf *node, a *app, p *Pod, activeUsers int, activeUsed Resource) bool {
	if !p.Resource.fitsIn(st.free) {
		return false
	}
	for n := leaf; n != nil; n = n.parent {
		if n.inaccessible || !n.used.add(p.Resource).fitsIn(st.maximum(n)) {
			return false
		}
	}
	if !a.admitted && !st.mayRunAnother(leaf, a.user) {
		return false
	}
	if p.AM && leaf.amUsed != (Resource{}) && !st.amFits(leaf, a.user, p.Resource, activeUsers) {
		return false
	}
	// LeafQueue.canAssignToUser: a user is refused once its use is over
	// its limit (a ">" check: the last container may take it over).
	return !leaf.users[a.user].greaterThan(st.activeUserLimit(leaf, activeUsers, activeUsed))
}

// mayRunAnother reports whether one more application of user may run in
// leaf, as CSMaxRunningAppsEnforcer.canAppBeRunnable checks it: the user's
// max-parallel-apps, then the leaf's and every parent's.
func (st *state) mayRunAnother(leaf *node, user string) bool {
	if st.userApps != nil && atMost(st.userRunning[user], st.userApps(user)) {
		return false
	}
	for n := leaf; n != nil; n = n.parent {
		if atMost(n.running, n.MaxParallelApps) {
			return false
		}
	}
	return true
}

// atMost reports whether running applications reach the limit most (0 no
// limit, negative none).
func atMost(running, most int) bool { return most != 0 && running >= max(most, 0) }

// startRunning counts an application of user as running in leaf, its
// parents and the user's.
func (st *state) startRunning(leaf *node, user string) {
	for n := leaf; n != nil; n = n.parent {
		n.running++
	}
	st.userRunning[user]++
}

// amFits reports whether one more AM of user fits the leaf's AM limits,
// as AbstractLeafQueue.activateApplications checks one: the queue's
// (calculateAndGetAMResourceLimitPerPartition: in the default partition a
// share of what the queue may use now, never less than its guarantee; in
// a labelled one a share of its guarantee there alone) and the user's
// (getUserAMResourceLimitPerPartition: the queue's AM share of its
// guarantee times the larger of minimum-user-limit-percent and an even
// share among the active users, times user-limit-factor, within the
// queue's). Both are rounded up to the minimum allocation. The caller lets
// the leaf's first AM through whatever the limits.
func (st *state) amFits(leaf *node, user string, am Resource, activeUsers int) bool {
	guaranteed := st.guaranteed(leaf)
	usable := guaranteed
	if st.partition == "" {
		usable = maxOf(usable, minOf(st.maximum(leaf), leaf.used.add(st.free)))
	}
	limit := st.normalizeUp(usable, leaf.MaxAMResourcePercent)
	userShare := UserAMShare(leaf.MaxAMResourcePercent, leaf.MinimumUserLimitPercent, leaf.UserLimitFactor, activeUsers)
	userLimit := minOf(st.normalizeUp(guaranteed, userShare), limit)
	return leaf.amUsed.add(am).fitsIn(limit) && leaf.userAMs[user].add(am).fitsIn(userLimit)
}

// UserAMShare is the share of a queue's guarantee one user's AMs may use,
// as LeafQueue.getUserAMResourceLimitPerPartition reckons it: the queue's
// AM share (maxAM, 0..1) times the larger of minimum-user-limit-percent
// (0..100) and an even share among the active users, times
// user-limit-factor; -1 for that factor is no user limit, the queue's AM
// share whole. No active user counts as one.
func UserAMShare(maxAM, minUserLimitPercent, userLimitFactor float64, activeUsers int) float64 {
	if userLimitFactor == -1 {
		return maxAM
	}
	return maxAM * max(minUserLimitPercent/100, 1/float64(max(activeUsers, 1))) * userLimitFactor
}

// normalizeUp is r times f, rounded up to the minimum allocation
// (Resources.multiplyAndNormalizeUp).
func (st *state) normalizeUp(r Resource, f float64) Resource {
	return roundUp(Resource{int64(math.Ceil(float64(r.MemoryMB) * f)), int64(math.Ceil(float64(r.Vcores) * f))}, st.minAlloc)
}

// activeUserLimit is the limit of each of the leaf's active users (those
// with pods waiting), UserLimit of the leaf as it stands in the pass.
func (st *state) activeUserLimit(leaf *node, users int, activeUsed Resource) Resource {
	return UserLimit(UserLimitOf{
		Guaranteed: st.guaranteed(leaf), Maximum: st.maximum(leaf), Used: leaf.used, ActiveUsed: activeUsed, ActiveUsers: users,
		MinimumUserLimitPercent: leaf.MinimumUserLimitPercent, UserLimitFactor: leaf.UserLimitFactor, MinimumAllocation: st.minAlloc,
	})
}

// UserLimitOf is what a leaf's user limit is reckoned from.
type UserLimitOf struct {
	// Guaranteed and Maximum are the leaf's capacity and maximum
	// capacity of its partition; Used what the leaf uses.
	Guaranteed, Maximum, Used Resource
	// ActiveUsed is what its active users use, ActiveUsers how many
	// they are.
	ActiveUsed  Resource
	ActiveUsers int
	// MinimumUserLimitPercent (0..100) and UserLimitFactor are the
	// leaf's settings (a factor of -1: no limit but the maximum).
	MinimumUserLimitPercent, UserLimitFactor float64
	MinimumAllocation                        Resource
}

// UserLimit is the limit of each of a leaf's active users as
// UsersManager.computeUserLimit reckons it for them: the current capacity
// is the queue's guarantee while its use is below it, else its use and
// one minimum allocation more; the limit is the larger of the active
// users' use and one minimum allocation, shared among them, and
// minimum-user-limit-percent of the current capacity; at most
// user-limit-factor times the guarantee (the maximum capacity when the
// factor is -1); rounded up to the minimum allocation. Dividing the active
// users' use, not the capacity, lets the users first offered grow past an
// even share before the last is offered one: with 3 users at 33% of 16
// GiB, the limit (5407 MB) rounds up to 6 GiB and each of the first two
// takes 8 GiB.
func UserLimit(in UserLimitOf) Resource {
	step := in.MinimumAllocation
	capacity := maxOf(in.Guaranteed, step)
	current := capacity
	if consumed := roundUp(in.Used, step); !consumed.fitsIn(capacity) || consumed == capacity {
		current = consumed.add(step)
	}
	n := int64(max(in.ActiveUsers, 1))
	shared := in.ActiveUsed.add(step)
	percent := func(x int64) int64 { return ceilDiv(int64(math.Floor(float64(x)*in.MinimumUserLimitPercent)), 100) }
	limit := maxOf(Resource{ceilDiv(shared.MemoryMB, n), ceilDiv(shared.Vcores, n)},
		Resource{percent(current.MemoryMB), percent(current.Vcores)})
	most := roundDown(in.Maximum, step)
	if in.UserLimitFactor >= 0 {
		most = capacity.scale(in.UserLimitFactor)
	}
	return roundUp(minOf(limit, most), step)
}

func ceilDiv(x, y int64) int64 { return (x + y - 1) / y }

// roundUp and roundDown are r in whole steps of step, each resource on
// its own; a zero step leaves it.
func roundUp(r, step Resource) Resource {
	f := func(x, s int64) int64 {
		if s <= 0 {
			return x
		}
		return ceilDiv(x, s) * s
	}
	return Resource{f(r.MemoryMB, step.MemoryMB), f(r.Vcores, step.Vcores)}
}

func roundDown(r, step Resource) Resource {
	f := func(x, s int64) int64 {
		if s <= 0 {
			return x
		}
		return x / s * s
	}
	return Resource{f(r.MemoryMB, step.MemoryMB), f(r.Vcores, step.Vcores)}
}

// admit counts p, its application's next pending pod, as used.
func (st *state) admit(p *Pod) {
	leaf := st.byPath[p.Queue]
	a := leaf.apps[p.App]
	a.pending = a.pending[1:]
	st.use(leaf, a, p)
	// Room taken here may have closed other leaves' ways; room is never
	// given back within a pass, so a blocked leaf stays blocked.
}

// use counts p as used by its application, user, leaf and the leaf's
// parents.
func (st *state) use(leaf *node, a *app, p *Pod) {
	if !a.admitted {
		a.admitted = true
		st.startRunning(leaf, a.user)
	}
	p.Admitted = true
	a.used = a.used.add(p.Resource)
	leaf.users[p.User] = leaf.users[p.User].add(p.Resource)
	if p.AM {
		a.amUsed = a.amUsed.add(p.Resource)
		leaf.amUsed = leaf.amUsed.add(p.Resource)
		if leaf.userAMs == nil {
			leaf.userAMs = map[string]Resource{}
		}
		leaf.userAMs[p.User] = leaf.userAMs[p.User].add(p.Resource)
	}
	for n := leaf; n != nil; n = n.parent {
		n.used = n.used.add(p.Resource)
	}
	st.free = st.free.sub(p.Resource)
}
