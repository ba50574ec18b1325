package admission

import (
	"maps"
	"slices"
	"testing"
)

// The gpu partition of these tests: 32 GiB and 16 vcores, 16 slots.
var gpu = Resource{MemoryMB: 32768, Vcores: 16}

// in puts pods in a partition; their keys gain "@partition", which byApp
// and byQueue ignore.
func in(partition string, pods []Pod) []Pod {
	for i := range pods {
		pods[i].Partition = partition
		pods[i].Key += "@" + partition
	}
	return pods
}

// labelled gives a queue a share of a partition.
func labelled(q Queue, partition string, capacity, maxCapacity float64) Queue {
	if q.Partitions == nil {
		q.Partitions = map[string]Capacity{}
	}
	q.Partitions[partition] = Capacity{AbsoluteCapacity: capacity, AbsoluteMaximumCapacity: maxCapacity, MaxAMResourcePercent: q.MaxAMResourcePercent}
	return q
}

// TestPartitionsAreAdmittedApartAsTheCapacitySchedulerAllocatesThem states
// each case's numbers from YARN's rules. Default partition: 8 slots, a
// 25% (max 100%), b 75% (max 75%), c 0% (max 100%). gpu: 16 slots, a 25%
// (max 50%), b 75% (max 100%); c may not use it.
func TestPartitionsAreAdmittedApartAsTheCapacitySchedulerAllocatesThem(t *testing.T) {
	queues := func(edit func(a, b *Queue)) []Queue {
		r := labelled(labelled(Queue{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}, "gpu", 1, 1), "ssd", 1, 1)
		a := labelled(labelled(leaf("root.a", 0.25, 1), "gpu", 0.25, 0.5), "ssd", 1, 1)
		b := labelled(leaf("root.b", 0.75, 0.75), "gpu", 0.75, 1)
		c := leaf("root.c", 0, 1)
		if edit != nil {
			edit(&a, &b)
			// A leaf's limits are the same in every partition but its
			// AM share, which edit sets for both.
			for _, q := range []*Queue{&a, &b} {
				for p, c := range q.Partitions {
					c.MaxAMResourcePercent = q.MaxAMResourcePercent
					q.Partitions[p] = c
				}
			}
		}
		return []Queue{r, a, b, c}
	}
	ams := func(queue string, first int32, n int) []Pod { return amsOf(queue, "u", first, n) }
	tests := []struct {
		name   string
		queues []Queue
		pods   []Pod
		want   map[string]int
	}{
		{
			// Default: 25% and 75% of 8 slots. gpu: 25% and 75% of 16.
			name:   "each partition gives its leaves their guarantees there",
			queues: queues(nil),
			pods: concat(demand("root.a", "u", 1, 40), demand("root.b", "u", 2, 40),
				in("gpu", demand("root.a", "u", 11, 40)), in("gpu", demand("root.b", "u", 12, 40))),
			want: map[string]int{"root.a/1": 2, "root.b/2": 6, "root.a/11": 4, "root.b/12": 12},
		},
		{
			// a alone in gpu: its maximum there, 50% of 16; b alone in the
			// default partition: its maximum, 75% of 8.
			name:   "a leaf alone in a partition grows to its maximum there",
			queues: queues(nil),
			pods:   concat(demand("root.b", "u", 2, 40), in("gpu", demand("root.a", "u", 11, 40))),
			want:   map[string]int{"root.b/2": 6, "root.a/11": 8},
		},
		{
			// a holds 8 gpu slots; the default partition is still all
			// free for it: 100% of 8.
			name:   "a partition's use takes nothing of the default partition",
			queues: queues(nil),
			pods:   concat(in("gpu", admitted(demand("root.a", "u", 11, 8)...)), demand("root.a", "u", 1, 40)),
			want:   map[string]int{"root.a/1": 8},
		},
		{
			name:   "a queue that may not use a partition has none of its pods there admitted",
			queues: queues(nil),
			pods:   concat(in("gpu", demand("root.c", "u", 13, 5)), demand("root.c", "u", 3, 2)),
			want:   map[string]int{"root.c/3": 2},
		},
		{
			name:   "a partition no node carries admits nothing",
			queues: queues(nil),
			pods:   in("ssd", demand("root.a", "u", 14, 3)),
			want:   map[string]int{},
		},
		{
			// b's AMs in gpu may use 25% of its guarantee there (12 slots):
			// 3 AMs. The default partition's rule (25% of what b may use
			// now, 16 slots) would give 4.
			name:   "the AM limit in a labelled partition is a share of the guarantee there alone",
			queues: queues(func(_, b *Queue) { b.MaxAMResourcePercent = 0.25 }),
			pods:   in("gpu", ams("root.b", 21, 6)),
			want:   map[string]int{"root.b/21": 1, "root.b/22": 1, "root.b/23": 1},
		},
		{
			// user-limit-factor 0.5 caps one user at half the guarantee in
			// each partition: 6 of gpu's 12 slots, 3 of the default's 6;
			// canAssignToUser refuses only a user already over it, so one
			// container more each.
			name:   "user limits are reckoned on the partition's guarantee",
			queues: queues(func(_, b *Queue) { b.UserLimitFactor, b.MinimumUserLimitPercent = 0.5, 100 }),
			pods:   concat(demand("root.b", "alice", 2, 20), in("gpu", demand("root.b", "alice", 12, 20))),
			want:   map[string]int{"root.b/2": 4, "root.b/12": 7},
		},
		{
			// bob waits in the default partition, alice in gpu: two active
			// users of b. Each partition's limit divides the active users'
			// use there, which is the one user's own, by two, so it is
			// minimum-user-limit-percent 25 of the guarantee in the
			// partition (1.5 of 6 slots, 3 of 12), one container over.
			// Were the other not active, each would take b's all.
			name:   "a user asking in another partition is an active user of the leaf",
			queues: queues(func(_, b *Queue) { b.UserLimitFactor, b.MinimumUserLimitPercent = -1, 25 }),
			pods:   concat(demand("root.b", "bob", 2, 20), in("gpu", demand("root.b", "alice", 12, 20))),
			want:   map[string]int{"root.b/2": 2, "root.b/12": 4},
		},
		{
			// Application 1 runs in gpu: it is a's one running
			// application, wherever its next pods go.
			name:   "max-parallel-apps counts applications running in any partition",
			queues: queues(func(a, _ *Queue) { a.MaxParallelApps = 1 }),
			pods: concat(in("gpu", admitted(demand("root.a", "u", 1, 1)...)),
				demand("root.a", "u", 1, 2), demand("root.a", "u", 2, 2)),
			want: map[string]int{"root.a/1": 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Cluster: cluster, Partitions: map[string]Resource{"gpu": gpu}, Queues: tc.queues, Pods: tc.pods}
			got := count(Admit(s), byApp)
			if !maps.Equal(got, tc.want) {
				t.Errorf("admitted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdmitLeavesTheCallersPodsAlone(t *testing.T) {
	pods := demand("root.default", "u", 1, 2)
	Admit(Snapshot{Cluster: cluster, Queues: root(leaf("root.default", 1, 1)), Pods: pods})
	for _, p := range pods {
		if p.Admitted {
			t.Fatalf("Admit marked the caller's pod %s admitted", p.Key)
		}
	}
}

// TestPreemptionIsReckonedPerPartitionAsYARNDoes states each case's
// numbers from ProportionalCapacityPreemptionPolicy's rules. Default
// partition: 16384 MB (8 slots of 2048), a 25% (max 100%), b 75% (max
// 75%). gpu: 32768 MB (16 slots), a 25%, b 75%, both max 100%. The whole
// cluster, of which total_preemption_per_round is taken, is 49152 MB.
func TestPreemptionIsReckonedPerPartitionAsYARNDoes(t *testing.T) {
	queues := []Queue{
		labelled(Queue{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}, "gpu", 1, 1),
		labelled(leaf("root.a", 0.25, 1), "gpu", 0.25, 1),
		labelled(leaf("root.b", 0.75, 0.75), "gpu", 0.75, 1),
	}
	with := func(set func(*Preemption)) Preemption {
		p := DefaultPreemption
		set(&p)
		return p
	}
	tests := []struct {
		name string
		pods []Pod
		p    Preemption
		want []string
	}{
		{
			// gpu: a holds 32768, b wants 24576. Ideal shares of gpu's
			// 32768: a 25% = 8192, b 75% = 24576 (all it wants). a is
			// 24576 over, more than 0.1 of 49152 = 4915.2 allowed: scaled
			// by 4915.2/24576 = 0.2, times natural termination 0.2: 983 MB,
			// one container, a's newest in gpu.
			name: "a leaf over its share in a labelled partition gives back there",
			pods: concat(in("gpu", running("root.a", 1, 16)), in("gpu", demand("root.b", "u", 2, 12))),
			p:    DefaultPreemption,
			want: []string{"root.a/1/15@gpu"},
		},
		{
			// Default partition: a holds 16384, b wants 12288 (its 75%
			// maximum): ideal a 4096, b 12288; a's 12288 excess, within
			// the allowed 49152 (total_preemption_per_round 1), times 0.2:
			// 2457.6 MB, two containers. gpu: no one else asks there, a's
			// ideal is all it holds; its gpu containers stay.
			name: "only the partition's own containers are taken back for demand there",
			pods: concat(running("root.a", 1, 8), in("gpu", running("root.a", 11, 16)), demand("root.b", "u", 2, 6)),
			p:    with(func(p *Preemption) { p.TotalPreemptionPerRound = 1 }),
			want: []string{"root.a/1/7", "root.a/1/6"},
		},
		{
			// total_preemption_per_round 0.125 of 49152: 6144 MB for the
			// round, natural termination 1. Default: a 12288 over its 4096,
			// scaled to 6144: three containers, 6144, the whole budget.
			// gpu: a 24576 over its 8192, scaled to 6144, but nothing of
			// the budget is left: none there.
			name: "one budget serves every partition, the default first",
			pods: concat(running("root.a", 1, 8), demand("root.b", "u", 2, 6),
				in("gpu", running("root.a", 11, 16)), in("gpu", demand("root.b", "u", 12, 12))),
			p:    with(func(p *Preemption) { p.TotalPreemptionPerRound, p.NaturalTerminationFactor = 0.125, 1 }),
			want: []string{"root.a/1/7", "root.a/1/6", "root.a/1/5"},
		},
		{
			// gpu, 1 GB pods: a's low-priority app 11 holds 32 GB, its
			// high-priority app 12 asks 4 GB; a alone asks in gpu and
			// wants more than the partition: under-served there, at 400%
			// of its 8192 guarantee. Its 32768 go to app 12's 4096 first,
			// app 11 holds 4096 over; a round takes at most
			// max-allowable-limit 0.2 of the gpu guarantee, int(1638.4) =
			// 1638 MB: app 11's two newest gpu containers.
			name: "intra-queue preemption runs in a labelled partition on its guarantee there",
			pods: concat(in("gpu", appPods("root.a", "u", 11, 0, 32, true)), in("gpu", appPods("root.a", "u", 12, 10, 4, false))),
			p:    intraQueue(PriorityFirst, nil),
			want: []string{"root.a/11/31@gpu", "root.a/11/30@gpu"},
		},
		{
			// ssd is in no Snapshot.Partitions: its resource is nothing and
			// so is every ideal share there.
			name: "a partition no node carries takes nothing back",
			pods: concat(in("ssd", running("root.a", 1, 4)), in("ssd", demand("root.b", "u", 2, 4))),
			p:    DefaultPreemption,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Preempt(Snapshot{Cluster: cluster, Partitions: map[string]Resource{"gpu": gpu}, Queues: queues, Pods: tc.pods}, tc.p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("preempt %v, want %v", got, tc.want)
			}
		})
	}
}
