package admission

import (
	"fmt"
	"slices"
	"testing"

	"github.com/knitdev/knit/protocols/yarnid"
)

// The intra-queue cases run on an 8 GB, 8-vcore cluster of 1 GB
// containers, YARN's minimum allocation (1024 MB).
var (
	cluster8 = Resource{MemoryMB: 8192, Vcores: 8}
	gb       = Resource{MemoryMB: 1024, Vcores: 1}
)

// appPods are n 1 GB pods of application app (its id's sequence) with
// priority prio in queue for user, running or gated; keys "queue/app/i",
// the higher i the newer.
func appPods(queue, user string, app, prio int32, n int, run bool) []Pod {
	var out []Pod
	for i := range n {
		out = append(out, Pod{Key: fmt.Sprintf("%s/%d/%d", queue, app, i), Queue: queue, User: user,
			App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: app}, AppPriority: prio, Resource: gb, Seq: int64(i),
			Admitted: run, Running: run})
	}
	return out
}

// intraQueue are YARN's defaults with intra-queue preemption on in the
// given order, and total_preemption_per_round 1 so that a round's budget
// does not hide the intra-queue limits (its default, 10% of 8 GB, is 819
// MB: less than a container, so a round takes none; see the case below).
func intraQueue(order IntraQueueOrder, set func(*Preemption)) Preemption {
	p := DefaultPreemption
	p.TotalPreemptionPerRound = 1
	p.IntraQueue.Enabled, p.IntraQueue.Order = true, order
	if set != nil {
		set(&p)
	}
	return p
}

func TestIntraQueuePreemptionTakesFromALeafsOwnApplicationsAsYARNDoes(t *testing.T) {
	whole := leaf("root.default", 1, 1) // MULP 100, no user-limit factor
	twoUsers := whole
	twoUsers.MinimumUserLimitPercent, twoUsers.UserLimitFactor = 50, 1
	fair := whole
	fair.Fair = true
	// Priority inversion: the low-priority application 1 holds the whole
	// 8 GB, the high-priority application 2 of the same user asks 4 GB.
	inversion := concat(appPods("root.default", "u", 1, 0, 8, true), appPods("root.default", "u", 2, 10, 4, false))
	threeUsers := concat(appPods("root.default", "alice", 1, 0, 5, true), appPods("root.default", "bob", 2, 0, 3, true),
		appPods("root.default", "carol", 3, 0, 3, false))
	halves := []Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}, leaf("root.a", 0.5, 1), leaf("root.b", 0.5, 1)}
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		p      Preemption
		want   []string
	}{
		{
			name:   "off by default: the high-priority application waits",
			queues: root(whole), pods: inversion,
			p: func() Preemption { p := DefaultPreemption; p.TotalPreemptionPerRound = 1; return p }(),
		},
		{
			// The leaf is the whole cluster and wants 12 GB of 8: the ideal
			// shares leave it wanting (under-served). Its use is 100% of
			// its guarantee (>= minimum-threshold 0.5). Its 8192 MB go in
			// priority order: app 2 is given its 4096 pending and lacks
			// them all, app 1 the other 4096 and holds 4096 over. A round
			// takes at most max-allowable-limit 0.2 of the 8192 guarantee:
			// int(1638.4) = 1638 MB; app 1 gives min(4096, 1638) = 1638 to
			// app 2. Its containers newest first: the first leaves 614 MB
			// to obtain, the second takes it past: 2 containers.
			name:   "priority_first: round 1 takes 2 of the low-priority application's 8 (max-allowable-limit 0.2)",
			queues: root(whole), pods: inversion, p: intraQueue(PriorityFirst, nil),
			want: []string{"root.default/1/7", "root.default/1/6"},
		},
		{
			// intra-queue-preemption.disable_preemption on the leaf.
			name:   "a leaf whose intra-queue preemption is disabled keeps its containers",
			queues: root(func() Queue { q := whole; q.IntraQueuePreemptionDisabled = true; return q }()),
			pods:   inversion, p: intraQueue(PriorityFirst, nil),
		},
		{
			// disable_preemption keeps them from its own applications too.
			name:   "a leaf whose preemption is disabled keeps its containers",
			queues: root(func() Queue { q := whole; q.PreemptionDisabled = true; return q }()),
			pods:   inversion, p: intraQueue(PriorityFirst, nil),
		},
		{
			// Under userlimit_first a container goes only while its user
			// stays over its limit. The user's limit: the leaf is at its
			// capacity, so 8192 + 1024 (a minimum allocation) = 9216 for
			// its one user, capped by the capacity times user-limit-factor
			// at 8192. 8192 - 1024 <= 8192: the user would go to its limit
			// or below, so the application gives nothing.
			name:   "userlimit_first: the same user within its limit keeps its containers",
			queues: root(whole), pods: inversion, p: intraQueue(UserLimitFirst, nil),
		},
		{
			// alice (app 1, priority 0) holds 8 GB, bob (app 2, priority
			// 10) asks 4. Both users' limit: max(ceil(9216/2), 9216) capped
			// at 8192; alice's 8192 is not over it. priority_first takes
			// 1638 MB from her for bob's higher priority: 2 containers.
			name:   "priority_first takes from another user within its limit for a higher priority",
			queues: root(whole),
			pods:   concat(appPods("root.default", "alice", 1, 0, 8, true), appPods("root.default", "bob", 2, 10, 4, false)),
			p:      intraQueue(PriorityFirst, nil),
			want:   []string{"root.default/1/7", "root.default/1/6"},
		},
		{
			// userlimit_first takes from another user only once that user
			// is over its limit (validateOutSameAppPriorityFromDemand).
			name:   "userlimit_first takes nothing from another user within its limit, whatever the priorities",
			queues: root(whole),
			pods:   concat(appPods("root.default", "alice", 1, 0, 8, true), appPods("root.default", "bob", 2, 10, 4, false)),
			p:      intraQueue(UserLimitFirst, nil),
		},
		{
			// Same priorities; minimum-user-limit-percent 50,
			// user-limit-factor 1. The leaf is at its capacity: 9216 MB to
			// divide between its 2 users, max(ceil(9216/2),
			// ceil(9216*50/100)) = 4608, rounded up to 1024: 5120 each.
			// In FIFO order alice's app 1 is given 5120 of the leaf's 8192,
			// bob's app 2 the 3072 left, all of which it lacks. alice holds
			// 8192 - 5120 = 3072 over, less one minimum allocation under
			// userlimit_first: 2048, at most 1638 this round. Alice is over
			// her limit by 3072 >= 1638, so bob takes the 1638: her two
			// newest containers, each leaving her over her limit (7168,
			// 6144 > 5120).
			name:   "a user over its limit gives back to one below it with pending demand (minimum-user-limit-percent 50)",
			queues: root(twoUsers),
			pods:   concat(appPods("root.default", "alice", 1, 0, 8, true), appPods("root.default", "bob", 2, 0, 4, false)),
			p:      intraQueue(UserLimitFirst, nil),
			want:   []string{"root.default/1/7", "root.default/1/6"},
		},
		{
			// After those two went to bob: alice 6144, bob 2048 and 2048
			// pending. alice is given 5120 and holds 1024 over, less the
			// minimum allocation userlimit_first leaves her: 0. She stays
			// one container over her limit, as canAssignToUser lets a user
			// go.
			name:   "the next round leaves that user one minimum allocation over its limit",
			queues: root(twoUsers),
			pods: concat(appPods("root.default", "alice", 1, 0, 6, true), appPods("root.default", "bob", 2, 0, 2, true),
				appPods("root.default", "bob", 2, 0, 4, false)[2:]),
			p: intraQueue(UserLimitFirst, nil),
		},
		{
			// App 1 holds 8 GB, its newest container its AM; app 2 asks 8
			// GB; max-allowable-limit 1. The AM is frozen: the leaf hands
			// out 8192 - 1024, all to app 2, and app 1 gives its 7168
			// without the AM. Its 7 tasks go; the AM, newest, is passed
			// over.
			name:   "AMs are never taken, even for demand they would meet",
			queues: root(whole),
			pods: func() []Pod {
				pods := concat(appPods("root.default", "u", 1, 0, 8, true), appPods("root.default", "u", 2, 10, 8, false))
				pods[7].AM = true
				return pods
			}(),
			p:    intraQueue(PriorityFirst, func(p *Preemption) { p.IntraQueue.MaxAllowableLimit = 1 }),
			want: []string{"root.default/1/6", "root.default/1/5", "root.default/1/4", "root.default/1/3", "root.default/1/2", "root.default/1/1", "root.default/1/0"},
		},
		{
			// total_preemption_per_round 0.1 of 8192 is 819 MB; YARN takes
			// a container only if it fits in what is left of the round's
			// budget (tryPreemptContainerAndDeductResToObtain).
			name:   "a round's budget smaller than a container takes none",
			queues: root(whole), pods: inversion,
			p: intraQueue(PriorityFirst, func(p *Preemption) { p.TotalPreemptionPerRound = 0.1 }),
		},
		{
			// Fair ordering (YARN-10559): each of the 2 applications' fair
			// share is ceil(8192/2) = 4096 (minimum-user-limit-percent
			// 100). priority_first keeps the priority order: app 2 is given
			// its 4096 pending, all lacking; app 1 holds 8192 - 4096 over,
			// at most 1638 this round, which app 2 takes. A fair leaf's
			// application gives no container larger than what is left of
			// what it gives: the first leaves 614, the second (1024) stays.
			name:   "a fair leaf under priority_first takes back from the application over its fair share",
			queues: root(fair), pods: inversion, p: intraQueue(PriorityFirst, nil),
			want: []string{"root.default/1/7"},
		},
		{
			// alice's app 1 holds 5 GB, bob's app 2 3 GB, carol's app 3
			// asks 3 GB. Fair shares: ceil(8192/3) = 2731 each. Under
			// userlimit_first the applications go by their users' use
			// (TAFairOrderingComparator): carol's app 3 (0), bob's app 2
			// (3072), alice's app 1 (5120). Ideals: 2731 each, app 3
			// lacking all 2731. From the last up: app 1 gives 5120 - 2731
			// less one minimum allocation = 1365; app 2 3072 - 2731 - 1024
			// < 0: nothing. App 3 takes app 1's 1365: one container, the
			// next (1024) being more than the 341 left.
			name:   "a fair leaf under userlimit_first takes from the application over its fair share for one below it",
			queues: root(fair), pods: threeUsers, p: intraQueue(UserLimitFirst, func(p *Preemption) { p.IntraQueue.MaxAllowableLimit = 1 }),
			want: []string{"root.default/1/4"},
		},
		{
			// The same leaf FIFO-ordered: the 8192 go in submission order,
			// app 1 its 5120, app 2 its 3072, app 3 nothing; no one lacks
			// what it was given, no one gives.
			name:   "the same applications in a FIFO leaf give nothing",
			queues: root(whole), pods: threeUsers, p: intraQueue(UserLimitFirst, func(p *Preemption) { p.IntraQueue.MaxAllowableLimit = 1 }),
		},
		{
			// priority_first in the fair leaf: the priority order (app 1,
			// 2, 3, all priority 0) and no minimum allocation kept: app 1
			// gives 5120 - 2731 = 2389, app 2's 341 is less than a minimum
			// allocation. App 3 takes 2389 of app 1: two containers, the
			// third (1024) more than the 341 left.
			name:   "a fair leaf under priority_first keeps no minimum allocation to the giving application",
			queues: root(fair), pods: threeUsers, p: intraQueue(PriorityFirst, func(p *Preemption) { p.IntraQueue.MaxAllowableLimit = 1 }),
			want: []string{"root.default/1/4", "root.default/1/3"},
		},
		{
			// root.a and root.b are half the cluster each, both wanting
			// more than 4096: ideal 4096 each, both under-served. root.b
			// holds 7168, over its ideal: between queues it gives 20% of its
			// 3072 excess, one container. root.a holds 1024 of its 4096
			// guarantee: 25%, under minimum-threshold 0.5, so its
			// low-priority app keeps its container.
			name:   "a leaf using less of its guarantee than minimum-threshold is left alone",
			queues: halves,
			pods: concat(appPods("root.a", "u", 1, 0, 1, true), appPods("root.a", "u", 2, 10, 4, false),
				appPods("root.b", "u", 3, 0, 7, true)),
			p:    intraQueue(PriorityFirst, nil),
			want: []string{"root.b/3/6"},
		},
		{
			// The same with minimum-threshold 0.2: root.a's 1024 go to app
			// 2, app 1 gives min(1024, int(4096*0.2) = 819); its one
			// container goes past it.
			name:   "the same leaf over a lower minimum-threshold gives its low-priority container",
			queues: halves,
			pods: concat(appPods("root.a", "u", 1, 0, 1, true), appPods("root.a", "u", 2, 10, 4, false),
				appPods("root.b", "u", 3, 0, 7, true)),
			p:    intraQueue(PriorityFirst, func(p *Preemption) { p.IntraQueue.MinimumThreshold = 0.2 }),
			want: []string{"root.b/3/6", "root.a/1/0"},
		},
		{
			// root.a (half) holds 6144 of app 1 and app 2 asks 2048; root.b
			// holds 2048 and asks 4096. Ideal 4096 each: root.a gives 20%
			// of its 2048 excess between queues, its newest container
			// (root.a/1/5, 1024). Within root.a, max-allowable-limit 0.5 of
			// 4096 less those 1024 leaves 1024; the leaf's 6144 less the
			// 1024 taken go to app 2 (2048, all lacking) and app 1 (3072 of
			// the 5120 it holds but for root.a/1/5): app 1 gives
			// min(2048, 1024) = 1024 to app 2. root.a/1/5 does not count
			// twice: it is passed over and the next newest goes. (YARN
			// takes each container chosen between queues off what each
			// application of the leaf gives only when it gives more; app 1
			// gives exactly 1024.)
			name:   "containers chosen between queues come first and do not count twice",
			queues: halves,
			pods: concat(appPods("root.a", "u", 1, 0, 6, true), appPods("root.a", "u", 2, 10, 2, false),
				appPods("root.b", "u", 3, 0, 2, true), appPods("root.b", "u", 3, 0, 6, false)[2:]),
			p:    intraQueue(PriorityFirst, func(p *Preemption) { p.IntraQueue.MaxAllowableLimit = 0.5 }),
			want: []string{"root.a/1/5", "root.a/1/4"},
		},
		{
			// The whole cluster wanted by no one: the ideal shares leave
			// room, so the leaf is not under-served and the scheduler, not
			// preemption, serves app 2.
			name:   "a leaf whose demand fits in the idle cluster gives nothing",
			queues: root(leaf("root.default", 1, 1)),
			pods:   concat(appPods("root.default", "u", 1, 0, 2, true), appPods("root.default", "u", 2, 10, 2, false)),
			p:      intraQueue(PriorityFirst, nil),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Preempt(Snapshot{Cluster: cluster8, Queues: tc.queues, Pods: tc.pods}, tc.p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("preempt %v, want %v", got, tc.want)
			}
		})
	}
}

// A round recomputes from what runs: the containers it chose last time
// are still running, so it chooses them again, as YARN's policy does each
// monitoring interval until they are killed.
func TestIntraQueuePreemptionChoosesTheSameContainersWhileTheyRun(t *testing.T) {
	pods := concat(appPods("root.default", "u", 1, 0, 8, true), appPods("root.default", "u", 2, 10, 4, false))
	s := Snapshot{Cluster: cluster8, Queues: root(leaf("root.default", 1, 1)), Pods: pods}
	first := Preempt(s, intraQueue(PriorityFirst, nil))
	for i := range s.Pods {
		s.Pods[i].Preempting = slices.Contains(first, s.Pods[i].Key)
	}
	if again := Preempt(s, intraQueue(PriorityFirst, nil)); len(first) != 2 || !slices.Equal(again, first) {
		t.Errorf("first round %v, second %v; want the same 2", first, again)
	}
}
