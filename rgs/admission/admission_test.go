package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/knitdev/knit/protocols/yarnid"
)

// The cluster of these tests: 16 GiB and 8 vcores, one node of a local
// cluster; each container asks 2 GiB and 1 vcore, so 8 fit.
var (
	cluster = Resource{MemoryMB: 16384, Vcores: 8}
	slot    = Resource{MemoryMB: 2048, Vcores: 1}
)

// leaf is a leaf queue with YARN's defaults: no user limit to speak of
// (minimum-user-limit-percent 100 with one user, user-limit-factor 1 of a
// guarantee), AMs up to 10%.
func leaf(path string, capacity, maxCapacity float64) Queue {
	return Queue{Path: path, AbsoluteCapacity: capacity, AbsoluteMaximumCapacity: maxCapacity,
		UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1}
}

func root(children ...Queue) []Queue {
	return append([]Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}}, children...)
}

// demand is n gated task pods of application app (its id's sequence) in
// queue, for user.
func demand(queue, user string, app int32, n int) []Pod {
	var out []Pod
	for i := range n {
		out = append(out, Pod{Key: fmt.Sprintf("%s/%d/%d", queue, app, i), Queue: queue, User: user,
			App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: app}, Resource: slot, Seq: int64(i)})
	}
	return out
}

// amsOf is n applications of user in queue, their ids' sequences from
// first on, each one gated AM pod.
func amsOf(queue, user string, first int32, n int) []Pod {
	var out []Pod
	for i := range n {
		p := demand(queue, user, first+int32(i), 1)
		p[0].AM = true
		out = append(out, p...)
	}
	return out
}

func admitted(pods ...Pod) []Pod {
	for i := range pods {
		pods[i].Admitted = true
	}
	return pods
}

// count groups admitted keys by what counted names them.
func count(keys []string, group func(string) string) map[string]int {
	out := map[string]int{}
	for _, k := range keys {
		out[group(k)]++
	}
	return out
}

// byQueue and byApp read a demand key ("queue/app/i").
func byQueue(k string) string { return strings.Split(k, "/")[0] }

func byApp(k string) string {
	parts := strings.Split(k, "/")
	return parts[0] + "/" + parts[1]
}

func concat(parts ...[]Pod) []Pod {
	var out []Pod
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestSharesConvergeToWhatTheCapacitySchedulerGives states each case's
// numbers from YARN's rules.
func TestSharesConvergeToWhatTheCapacitySchedulerGives(t *testing.T) {
	twoLeaves := root(leaf("root.a", 0.25, 1), leaf("root.b", 0.75, 0.75))
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		group  func(string) string
		want   map[string]int
	}{
		{
			name:   "both leaves asking more than the cluster get their guarantees (25% and 75% of 8)",
			queues: twoLeaves, pods: concat(demand("root.a", "u", 1, 20), demand("root.b", "u", 2, 20)),
			group: byQueue, want: map[string]int{"root.a": 2, "root.b": 6},
		},
		{
			name:   "a leaf alone grows elastically up to its maximum capacity (100%)",
			queues: twoLeaves, pods: demand("root.a", "u", 1, 20),
			group: byQueue, want: map[string]int{"root.a": 8},
		},
		{
			name:   "a leaf alone stops at its maximum capacity (75%), leaving the rest idle",
			queues: twoLeaves, pods: demand("root.b", "u", 2, 20),
			group: byQueue, want: map[string]int{"root.b": 6},
		},
		{
			name:   "what is admitted stays: nothing is taken back without preemption",
			queues: twoLeaves, pods: concat(admitted(demand("root.a", "u", 1, 8)...), demand("root.b", "u", 2, 20)),
			group: byQueue, want: map[string]int{},
		},
		{
			name:   "freed room goes to the leaf furthest below its guarantee",
			queues: twoLeaves, pods: concat(admitted(demand("root.a", "u", 1, 5)...), demand("root.a", "u", 3, 5), demand("root.b", "u", 2, 20)),
			group: byQueue, want: map[string]int{"root.b": 3},
		},
		{
			name: "a parent's maximum capacity bounds its children",
			queues: root(Queue{Path: "root.p", AbsoluteCapacity: 0.5, AbsoluteMaximumCapacity: 0.5},
				leaf("root.p.x", 0.25, 0.5), leaf("root.p.y", 0.25, 0.5), leaf("root.q", 0.5, 1)),
			pods:  demand("root.p.x", "u", 1, 20),
			group: byQueue, want: map[string]int{"root.p.x": 4},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := count(Admit(Snapshot{Cluster: cluster, Queues: tc.queues, Pods: tc.pods}), tc.group)
			if !maps.Equal(got, tc.want) {
				t.Errorf("admitted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWithinALeafUsersApplicationsAndAMsAreLimitedAsYARNLimitsThem(t *testing.T) {
	one := func(q Queue) []Queue { return root(q) }
	def := leaf("root.default", 1, 1)
	twoUsers := def
	twoUsers.MinimumUserLimitPercent, twoUsers.UserLimitFactor = 50, 1
	fair := def
	fair.Fair = true
	amLimited := def
	amLimited.MaxAMResourcePercent = 0.25
	userAMLimited := leaf("root.default", 0.5, 1)
	userAMLimited.MaxAMResourcePercent, userAMLimited.UserLimitFactor = 0.5, 1
	oneAtATime := def
	oneAtATime.MaxParallelApps = 1
	withAMs := func(app int32, n int) []Pod {
		pods := demand("root.default", "u", app, n)
		pods[0].AM = true
		return pods
	}
	prioritized := demand("root.default", "u", 2, 20)
	for i := range prioritized {
		prioritized[i].AppPriority = 5
	}
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		want   map[string]int
	}{
		// Each user's limit is half of 16 GiB; canAssignToUser refuses only
		// a user already over it, so the first takes one container more.
		{"two users share the leaf by minimum-user-limit-percent 50, the first one container over", one(twoUsers),
			concat(demand("root.default", "alice", 1, 20), demand("root.default", "bob", 2, 20)),
			map[string]int{"root.default/1": 5, "root.default/2": 3}},
		{"one user alone takes it all", one(twoUsers), demand("root.default", "alice", 1, 20),
			map[string]int{"root.default/1": 8}},
		{"FIFO gives the first application everything it asks", one(def),
			concat(demand("root.default", "u", 1, 20), demand("root.default", "u", 2, 20)),
			map[string]int{"root.default/1": 8}},
		{"fair ordering shares between applications", one(fair),
			concat(demand("root.default", "u", 1, 20), demand("root.default", "u", 2, 20)),
			map[string]int{"root.default/1": 4, "root.default/2": 4}},
		{"a higher application priority goes first under FIFO", one(def),
			concat(demand("root.default", "u", 1, 20), prioritized),
			map[string]int{"root.default/2": 8}},
		{"AMs stop at maximum-am-resource-percent (25% of 16 GiB: two 2 GiB AMs)", one(amLimited),
			concat(withAMs(1, 1), withAMs(2, 1), withAMs(3, 1), withAMs(4, 1)),
			map[string]int{"root.default/1": 1, "root.default/2": 1}},
		// The leaf's AMs may use half of what it may use now, the empty
		// cluster's 16 GiB: four 2 GiB AMs. Each user's, at
		// user-limit-factor 1 and minimum-user-limit-percent 100, half
		// its 8 GiB guarantee: two. alice's third waits, bob's two go.
		{"each user's AMs stop at its share of the AM limit", root(userAMLimited, leaf("root.other", 0.5, 1)),
			concat(amsOf("root.default", "alice", 1, 3), amsOf("root.default", "bob", 4, 3)),
			map[string]int{"root.default/1": 1, "root.default/2": 1, "root.default/4": 1, "root.default/5": 1}},
		{"the first AM always runs, even over the AM limit", one(func() Queue { q := amLimited; q.MaxAMResourcePercent = 0.01; return q }()),
			concat(withAMs(1, 2), withAMs(2, 2)),
			map[string]int{"root.default/1": 2}},
		{"max-parallel-apps holds back a second application", one(oneAtATime),
			concat(demand("root.default", "u", 1, 3), demand("root.default", "u", 2, 3)),
			map[string]int{"root.default/1": 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := count(Admit(Snapshot{Cluster: cluster, Queues: tc.queues, Pods: tc.pods}), byApp)
			if !maps.Equal(got, tc.want) {
				t.Errorf("admitted %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParentsAndUsersMaxParallelAppsHoldBackApplicationsAsYARNDoes: a
// parent's max-parallel-apps counts its leaves' running applications
// together, and a user's counts the user's in every queue and partition,
// as CSMaxRunningAppsEnforcer counts them; an application held back asks
// for nothing until one ends. Applications ask 2 containers each, so that
// 4 run in the 8 slots.
func TestParentsAndUsersMaxParallelAppsHoldBackApplicationsAsYARNDoes(t *testing.T) {
	// root.p (parent, 50%) holds root.p.a and root.p.b, 25% each; root.c
	// has the other 50%. Every leaf may take the whole cluster.
	tree := func(parentApps int) []Queue {
		p := Queue{Path: "root.p", AbsoluteCapacity: 0.5, AbsoluteMaximumCapacity: 1, MaxParallelApps: parentApps}
		return root(p, leaf("root.p.a", 0.25, 1), leaf("root.p.b", 0.25, 1), leaf("root.c", 0.5, 1))
	}
	// alice has an application in each queue; bob one in root.c.
	apps := concat(demand("root.p.a", "alice", 1, 2), demand("root.p.b", "alice", 2, 2),
		demand("root.c", "alice", 3, 2), demand("root.c", "bob", 4, 2))
	onlyAlice := func(n int) func(string) int {
		return func(user string) int {
			if user == "alice" {
				return n
			}
			return 0
		}
	}
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		users  func(string) int
		want   map[string]int
	}{
		{name: "no limits: every application runs", queues: tree(0), pods: apps,
			want: map[string]int{"root.p.a/1": 2, "root.p.b/2": 2, "root.c/3": 2, "root.c/4": 2}},
		// root.p's leaves are below their guarantees and go first; a is
		// offered first, so b's application waits for a's.
		{name: "a parent's limit holds its leaves' applications together", queues: tree(1), pods: apps,
			want: map[string]int{"root.p.a/1": 2, "root.c/3": 2, "root.c/4": 2}},
		{name: "an application running in one leaf counts against its parent's limit in another", queues: tree(1),
			pods: concat(admitted(demand("root.p.b", "alice", 2, 1)...), demand("root.p.a", "alice", 1, 2)),
			want: map[string]int{}},
		// Offered in turn: root.p.a's application, root.c's first
		// (alice's), then root.p.b's, alice's third, which waits.
		{name: "a user's limit counts its applications in every queue", queues: tree(0), pods: apps, users: onlyAlice(2),
			want: map[string]int{"root.p.a/1": 2, "root.c/3": 2, "root.c/4": 2}},
		{name: "a parent's negative limit (YARN's 0) lets none of its leaves' applications run", queues: tree(-1), pods: apps,
			want: map[string]int{"root.c/3": 2, "root.c/4": 2}},
		{name: "a user's negative limit lets none of its applications run", queues: tree(0), pods: apps, users: onlyAlice(-1),
			want: map[string]int{"root.c/4": 2}},
		{name: "a user's application running in another partition counts", queues: tree(0), users: onlyAlice(1),
			pods: concat(func() []Pod {
				p := admitted(demand("root.c", "alice", 3, 1)...)
				p[0].Partition = "gpu"
				return p
			}(), demand("root.p.a", "alice", 1, 2)),
			want: map[string]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := count(Admit(Snapshot{Cluster: cluster, Queues: tc.queues, Pods: tc.pods, MaxParallelAppsOfUser: tc.users}), byApp)
			if !maps.Equal(got, tc.want) {
				t.Errorf("admitted %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUserLimitsDivideTheActiveUsersUseAsYARNDoes reckons user limits in
// steps of YARN's default minimum allocation (1 GiB, 1 vcore), as
// UsersManager.computeUserLimit does: the larger of the active users' use
// and one step, shared among them, and minimum-user-limit-percent of the
// current capacity (the guarantee, or once the leaf is at it its use and
// one step), rounded up to a step; a user is refused once over it.
func TestUserLimitsDivideTheActiveUsersUseAsYARNDoes(t *testing.T) {
	step := Resource{MemoryMB: 1024, Vcores: 1}
	withUsers := func(capacity, percent, factor float64) []Queue {
		q := leaf("root.default", capacity, 1)
		q.MinimumUserLimitPercent, q.UserLimitFactor = percent, factor
		return root(q, leaf("root.other", 1-capacity, 1))
	}
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		want   map[string]int
	}{
		{
			// 33% of 16 GiB is 5407 MB, rounded up to 6 GiB; the active
			// users' use shared by three stays under it. alice is refused
			// only at 8 GiB, then bob; carol is offered nothing.
			name:   "three users at 33% of the leaf: the first two take 8 GiB each",
			queues: withUsers(1, 33, 1),
			pods:   concat(demand("root.default", "alice", 1, 20), demand("root.default", "bob", 2, 20), demand("root.default", "carol", 3, 20)),
			want:   map[string]int{"root.default/1": 4, "root.default/2": 4},
		},
		{
			// A 4 GiB guarantee, 50%, user-limit-factor 4. Leaf use 0 and
			// 2 GiB: limit 2 GiB, alice. 4: (4+1)/2 rounds up to 3, alice
			// is over it: bob. 6: 4, alice. 8: 5, bob. 10: 6, alice. 12:
			// 7, bob. 14: 8, alice.
			name:   "two users at 50% of a leaf growing past its guarantee: 5 and 3",
			queues: withUsers(0.25, 50, 4),
			pods:   concat(demand("root.default", "alice", 1, 20), demand("root.default", "bob", 2, 20)),
			want:   map[string]int{"root.default/1": 5, "root.default/2": 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := count(Admit(Snapshot{Cluster: cluster, Queues: tc.queues, Pods: tc.pods, MinimumAllocation: step}), byApp)
			if !maps.Equal(got, tc.want) {
				t.Errorf("admitted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueuePriorityDecidesBetweenLeavesBelowTheirGuarantee(t *testing.T) {
	a, b := leaf("root.a", 0.5, 1), leaf("root.b", 0.5, 1)
	b.Priority = 1
	keys := Admit(Snapshot{Cluster: cluster, Queues: root(a, b), Pods: concat(demand("root.a", "u", 1, 1), demand("root.b", "u", 2, 1))})
	if len(keys) != 2 || byQueue(keys[0]) != "root.b" {
		t.Errorf("admitted %v, want root.b's pod first", keys)
	}
}

func TestAnAMGoesBeforeItsTasksAndUnknownQueuesAreLeft(t *testing.T) {
	pods := demand("root.default", "u", 1, 3)
	pods[2].AM = true
	pods = append(pods, Pod{Key: "gone/1", Queue: "root.gone", App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 9}, Resource: slot})
	keys := Admit(Snapshot{Cluster: cluster, Queues: root(leaf("root.default", 1, 1)), Pods: pods})
	if len(keys) != 3 || keys[0] != "root.default/1/2" {
		t.Errorf("admitted %v, want the AM first and nothing of a queue the RM does not have", keys)
	}
}

// running is n admitted containers of application app in queue.
func running(queue string, app int32, n int) []Pod {
	pods := admitted(demand(queue, "u", app, n)...)
	for i := range pods {
		pods[i].Running = true
	}
	return pods
}

func TestPreemptionTakesBackWhatALeafHoldsOverItsIdealShare(t *testing.T) {
	twoLeaves := root(leaf("root.a", 0.25, 1), leaf("root.b", 0.75, 0.75))
	// total_preemption_per_round 0.15 of the 16 GiB cluster is 2457 MB: a
	// round's budget holds one 2 GiB container.
	oneARound := DefaultPreemption
	oneARound.TotalPreemptionPerRound = 0.15
	tests := []struct {
		name string
		p    Preemption
		pods []Pod
		want []string
	}{
		{
			// root.a holds all 8; root.b wants its 6. root.a's ideal is 2
			// slots (4 GiB), its excess 12 GiB; a round takes 20% of it,
			// at most 15% of the cluster (2457 MB): one container, the
			// newest.
			name: "a round takes the newest container of the leaf over its share",
			p:    oneARound,
			pods: concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6)),
			want: []string{"root.a/1/7"},
		},
		{
			// YARN's default 10% of 16 GiB is 1638 MB, less than any of
			// root.a's containers: the policy takes none
			// (tryPreemptContainerAndDeductResToObtain's fitsIn).
			name: "no container larger than the round's budget is taken",
			p:    DefaultPreemption,
			pods: concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6)),
			want: nil,
		},
		{
			name: "a container too large for what is left of the budget stays and a smaller one after it goes",
			p:    oneARound,
			pods: func() []Pod {
				pods := concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6))
				pods[7].Resource = Resource{MemoryMB: 4096, Vcores: 1}
				return pods
			}(),
			want: []string{"root.a/1/6"},
		},
		{
			name: "containers chosen before stay chosen, and the round adds its own",
			p:    oneARound,
			pods: func() []Pod {
				pods := concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6))
				pods[7].Preempting = true
				return pods
			}(),
			want: []string{"root.a/1/7", "root.a/1/6"},
		},
		{
			name: "nothing is taken without demand that waits",
			p:    oneARound,
			pods: running("root.a", 1, 8),
			want: nil,
		},
		{
			name: "a leaf within its share gives nothing back and its chosen containers go free",
			p:    oneARound,
			pods: func() []Pod {
				pods := concat(running("root.a", 1, 2), running("root.b", 2, 6), demand("root.b", "u", 2, 3))
				pods[0].Preempting = true
				return pods
			}(),
			want: nil,
		},
		{
			name: "AM containers go last",
			p:    oneARound,
			pods: func() []Pod {
				pods := concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6))
				pods[7].AM = true
				return pods
			}(),
			want: []string{"root.a/1/6"},
		},
		{
			name: "the last submitted application gives first",
			p:    oneARound,
			pods: concat(running("root.a", 1, 4), running("root.a", 3, 4), demand("root.b", "u", 2, 6)),
			want: []string{"root.a/3/3"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Preempt(Snapshot{Cluster: cluster, Queues: twoLeaves, Pods: tc.pods}, tc.p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("preempt %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAQueueWhosePreemptionIsDisabledKeepsWhatItHolds: root.a
// (disable_preemption) and root.b, 25% each, hold 8 GiB each of the 16;
// root.c (50%) wants its 8. A round here takes a leaf's whole excess. The
// policy's ideal for root.a is its use, guarantee and untouchable extra
// (8 GiB); root.b keeps its guarantee (4 GiB), and root.c gets the rest:
// root.b gives its 4 GiB excess, its two newest containers, and root.a
// nothing. Without the setting, each gives two.
func TestAQueueWhosePreemptionIsDisabledKeepsWhatItHolds(t *testing.T) {
	whole := DefaultPreemption
	whole.TotalPreemptionPerRound, whole.NaturalTerminationFactor = 1, 1
	pods := concat(running("root.a", 1, 4), running("root.b", 2, 4), demand("root.c", "u", 3, 4))
	for _, tc := range []struct {
		name     string
		disabled bool
		want     []string
	}{
		{"a queue's containers are taken back by default", false, []string{"root.a/1/3", "root.a/1/2", "root.b/2/3", "root.b/2/2"}},
		{"a queue whose preemption is disabled keeps them", true, []string{"root.b/2/3", "root.b/2/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := leaf("root.a", 0.25, 1)
			a.PreemptionDisabled = tc.disabled
			qs := root(a, leaf("root.b", 0.25, 1), leaf("root.c", 0.5, 1))
			got := Preempt(Snapshot{Cluster: cluster, Queues: qs, Pods: slices.Clone(pods)}, whole)
			if !slices.Equal(got, tc.want) {
				t.Errorf("preempt %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAQueueWhosePreemptionIsDisabledKeepsItsWholeUseInTheIdealShares: as
// computeFixpointAllocation starts a leaf over its guarantee from its
// guarantee plus its untouchable extra, root.a (25%, disable_preemption)
// keeps all 10 GiB it holds of the 16 in the ideal shares, root.b (25%)
// starts from its guarantee, 4 GiB of the 6 it holds, and root.c (50%),
// which holds none and wants 4, is offered the 2 GiB left: root.b gives
// back its 2 GiB over that, its newest container. Were root.a's extra
// shared out, root.b would keep its 6 and root.c would wait for ever.
func TestAQueueWhosePreemptionIsDisabledKeepsItsWholeUseInTheIdealShares(t *testing.T) {
	whole := DefaultPreemption
	whole.TotalPreemptionPerRound, whole.NaturalTerminationFactor = 1, 1
	a := leaf("root.a", 0.25, 1)
	a.PreemptionDisabled = true
	qs := root(a, leaf("root.b", 0.25, 1), leaf("root.c", 0.5, 1))
	pods := concat(running("root.a", 1, 5), running("root.b", 2, 3), demand("root.c", "u", 3, 2))
	got := Preempt(Snapshot{Cluster: cluster, Queues: qs, Pods: pods}, whole)
	if want := []string{"root.b/2/2"}; !slices.Equal(got, want) {
		t.Errorf("preempt %v, want %v", got, want)
	}
}
