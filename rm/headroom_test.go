package rm

import (
	"maps"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rm/apps"
)

// hierarchyQueues are root.a (50%) and root.p (50%, at most 60%) over the
// leaves given, with ACLs that let anyone submit to them.
func hierarchyQueues(leaves []string, props map[string]string) map[string]string {
	out := baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.queues":                    "a,p",
		"yarn.scheduler.capacity.root.a.capacity":                "50",
		"yarn.scheduler.capacity.root.p.capacity":                "50",
		"yarn.scheduler.capacity.root.p.maximum-capacity":        "60",
		"yarn.scheduler.capacity.root.a.acl_submit_applications": "*",
	})
	delete(out, "yarn.scheduler.capacity.root.default.capacity")
	delete(out, "yarn.scheduler.capacity.root.b.capacity")
	delete(out, "yarn.scheduler.capacity.root.default.acl_submit_applications")
	delete(out, "yarn.scheduler.capacity.root.b.acl_submit_applications")
	for _, l := range leaves {
		out["yarn.scheduler.capacity."+l+".acl_submit_applications"] = "*"
	}
	maps.Copy(out, props)
	return out
}

// TestHeadroomIsBoundedByWhatTheParentsLeave checks the headroom against
// the numbers YARN 3.4's CapacityScheduler gives, with 1 vcore per 1024 MB
// held so that both resources tell the same story. The queue's current
// limit is what its parents hand down (ParentQueue.getResourceLimitsOfChild:
// child.limit = min(parent.limit capped by the parent's maximum -
// parent.used + child.used, child.max), root's limit being the cluster);
// LeafQueue.getHeadroom takes the least of that limit less the leaf's use,
// the user limit less the user's use, and the cluster's free room. alice
// asks in every case; minimum-user-limit-percent is 100 and
// user-limit-factor 1, so her user limit in a leaf used below its capacity
// is the leaf's capacity.
func TestHeadroomIsBoundedByWhatTheParentsLeave(t *testing.T) {
	// Two levels, cluster 20480 MB: root.p (50%, max 60% = 12288 MB) over
	// root.p.x and root.p.y (50% each, max 100% of p's): x's capacity is
	// 5120 MB, its maximum 12288 MB.
	twoLevel := twoLevelQueues()
	// Three levels, cluster 40960 MB: root.p (50%, max 60% = 24576 MB) over
	// root.p.q (50%, max 50% of p's = 12288 MB) and root.p.z (50%); q over
	// root.p.q.l1 and root.p.q.l2 (50% each, max 100% of q's): l1's
	// capacity is 5120 MB, its maximum 12288 MB.
	threeLevel := hierarchyQueues([]string{"root.p.z", "root.p.q.l1", "root.p.q.l2"}, map[string]string{
		"yarn.scheduler.capacity.root.p.queues":             "q,z",
		"yarn.scheduler.capacity.root.p.q.capacity":         "50",
		"yarn.scheduler.capacity.root.p.q.maximum-capacity": "50",
		"yarn.scheduler.capacity.root.p.z.capacity":         "50",
		"yarn.scheduler.capacity.root.p.q.queues":           "l1,l2",
		"yarn.scheduler.capacity.root.p.q.l1.capacity":      "50",
		"yarn.scheduler.capacity.root.p.q.l2.capacity":      "50",
	})
	// held is what one user's unfinished application in a leaf holds, MB.
	type held struct {
		queue, user string
		mb          int64
	}
	tests := []struct {
		name    string
		queues  map[string]string
		totalMB int64
		leaf    string
		held    []held
		// wantMB is YARN's headroom; the vcores are wantMB/1024.
		wantMB int64
	}{
		{"two levels, all idle: alice's user limit, x's capacity", twoLevel, 20480, "root.p.x", nil,
			// p.limit = min(20480, 12288) = 12288; x.limit = min(12288 - 0 + 0, 12288) = 12288;
			// user limit 5120; free 20480.
			5120},
		{"two levels, a sibling leaves the leaf less than its capacity", twoLevel, 20480, "root.p.x",
			[]held{{"root.p.y", "bob", 8192}},
			// x.limit = min(12288 - 8192 + 0, 12288) = 4096, less x's 0.
			4096},
		{"two levels, the leaf's own use and its sibling's", twoLevel, 20480, "root.p.x",
			[]held{{"root.p.x", "alice", 2048}, {"root.p.y", "bob", 8192}},
			// x.limit = min(12288 - 10240 + 2048, 12288) = 4096, less x's 2048;
			// the user limit leaves 5120 - 2048 = 3072.
			2048},
		{"two levels, another child of root takes the cluster", twoLevel, 20480, "root.p.x",
			[]held{{"root.a", "carol", 16384}},
			// p.limit = min(20480 - 16384 + 0, 12288) = 4096; x.limit = 4096; free 4096.
			4096},
		{"three levels, all idle: alice's user limit, l1's capacity", threeLevel, 40960, "root.p.q.l1", nil,
			// q.limit = min(24576, 12288) = 12288; l1.limit = 12288; user limit 5120.
			5120},
		{"three levels, the grandparent's other child leaves less", threeLevel, 40960, "root.p.q.l1",
			[]held{{"root.p.z", "bob", 20480}},
			// q.limit = min(24576 - 20480 + 0, 12288) = 4096; l1.limit = min(4096 - 0 + 0, 12288) = 4096.
			4096},
		{"three levels, the parent's maximum binds below the grandparent's room", threeLevel, 40960, "root.p.q.l1",
			[]held{{"root.p.q.l2", "bob", 10240}},
			// q.limit = min(24576 - 10240 + 10240, 12288) = 12288; l1.limit = min(12288 - 10240 + 0, 12288) = 2048.
			2048},
		{"three levels, every level's use counts", threeLevel, 40960, "root.p.q.l1",
			[]held{{"root.p.q.l1", "alice", 1024}, {"root.p.q.l2", "bob", 4096}, {"root.p.z", "carol", 16384}},
			// p.used 21504, q.used 5120: q.limit = min(24576 - 21504 + 5120, 12288) = 8192;
			// l1.limit = min(8192 - 5120 + 1024, 12288) = 4096, less l1's 1024 = 3072;
			// the user limit leaves 5120 - 1024 = 4096.
			3072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{queues: tt.queues})
			var used int64
			for _, h := range tt.held {
				e.rm.usage.apply(appUse{queue: h.queue, user: h.user, state: yarnpb.YarnApplicationStateProto_RUNNING, unfinished: true,
					live: apps.Holding{Containers: 1, MemoryMB: h.mb, VCores: int32(h.mb / 1024)}}, 1)
				used += h.mb
			}
			v := clusterView{totalMB: tt.totalMB, totalVCs: int32(tt.totalMB / 1024),
				freeMB: tt.totalMB - used, freeVC: int32((tt.totalMB - used) / 1024)}
			mem, vc := e.rm.am.headroom(v, tt.leaf, "alice")
			if mem != tt.wantMB || vc != int32(tt.wantMB/1024) {
				t.Errorf("headroom = <memory:%d, vCores:%d>, want <memory:%d, vCores:%d>", mem, vc, tt.wantMB, tt.wantMB/1024)
			}
		})
	}
}

// admittedScheduler is a Scheduler whose admission let pods go that are
// not yet containers: what they ask for by queue (each leaf's in it and
// above) and by (leaf, user).
type admittedScheduler struct {
	recordingScheduler
	queues map[string]admission.Resource
	users  map[[2]string]admission.Resource
	// unplaced is what those of them on no node yet ask for.
	unplaced admission.Resource
}

func (s *admittedScheduler) AdmittedUnbound(path string) admission.Resource { return s.queues[path] }

func (s *admittedScheduler) AdmittedUnplaced() admission.Resource { return s.unplaced }

func (s *admittedScheduler) AdmittedUnboundOf(leaf, user string) admission.Resource {
	return s.users[[2]string{leaf, user}]
}

var _ admittedCounter = (*admittedScheduler)(nil)

// twoLevelQueues are root.a (50%), root.p (50%, at most 60%) and
// root.p.x, root.p.y (50% of p each).
func twoLevelQueues() map[string]string {
	return hierarchyQueues([]string{"root.p.x", "root.p.y"}, map[string]string{
		"yarn.scheduler.capacity.root.p.queues":     "x,y",
		"yarn.scheduler.capacity.root.p.x.capacity": "50",
		"yarn.scheduler.capacity.root.p.y.capacity": "50",
	})
}

// TestHeadroomCountsAdmittedPodsAsUsed checks that pods admission let go
// and the Kubernetes scheduler has not bound yet count in the headroom as
// YARN counts containers it allocated and no AM has launched: in the
// leaf's, its parents' and its user's use, and against the cluster's free
// room, which the nodes report from bound pods only. Queues of
// twoLevelQueues on a 20480 MB cluster, alice asking in root.p.x
// (capacity 5120 MB, maximum 12288 MB).
func TestHeadroomCountsAdmittedPodsAsUsed(t *testing.T) {
	r := func(mb int64) admission.Resource { return admission.Resource{MemoryMB: mb, Vcores: mb / 1024} }
	tests := []struct {
		name   string
		queues map[string]admission.Resource
		users  map[[2]string]admission.Resource
		// bound is what of them is bound to nodes, whose free room
		// counts it already.
		bound  int64
		wantMB int64
	}{
		{"none admitted: alice's user limit", nil, nil, 0, 5120},
		{"bob's admitted pods in the sibling are its use",
			map[string]admission.Resource{"root.p.y": r(8192), "root.p": r(8192), "root": r(8192)},
			map[[2]string]admission.Resource{{"root.p.y", "bob"}: r(8192)},
			0,
			// x.limit = min(12288 - 8192 + 0, 12288) = 4096.
			4096},
		{"alice's own admitted pods count against her user limit",
			map[string]admission.Resource{"root.p.x": r(3072), "root.p": r(3072), "root": r(3072)},
			map[[2]string]admission.Resource{{"root.p.x", "alice"}: r(3072)},
			0,
			// x.limit = 12288, less x's 3072 = 9216; the user limit 5120 less 3072.
			2048},
		{"admitted pods of another child of root take the cluster's room",
			map[string]admission.Resource{"root.a": r(16384), "root": r(16384)},
			map[[2]string]admission.Resource{{"root.a", "carol"}: r(16384)},
			0,
			// p.limit = min(20480 - 16384 + 0, 12288) = 4096; free 20480 - 16384.
			4096},
		{"admitted pods bound to nodes take the cluster's room once",
			map[string]admission.Resource{"root.a": r(16384), "root": r(16384)},
			map[[2]string]admission.Resource{{"root.a", "carol"}: r(16384)},
			16384,
			// As above: the nodes' free room is 4096 with them, and they
			// are not taken from it again.
			4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched := &admittedScheduler{queues: tt.queues, users: tt.users, unplaced: r(tt.queues["root"].MemoryMB - tt.bound)}
			e := newEnv(t, envOptions{queues: twoLevelQueues(), scheduler: sched})
			v := clusterView{totalMB: 20480, totalVCs: 20, freeMB: 20480 - tt.bound, freeVC: 20 - int32(tt.bound/1024)}
			mem, vc := e.rm.am.headroom(v, "root.p.x", "alice")
			if mem != tt.wantMB || vc != int32(tt.wantMB/1024) {
				t.Errorf("headroom = <memory:%d, vCores:%d>, want <memory:%d, vCores:%d>", mem, vc, tt.wantMB, tt.wantMB/1024)
			}
		})
	}
}

// TestTheHeadroomAllocatesNothing holds the allocate hot path's headroom,
// parents and admitted pods included, to no allocation at all.
func TestTheHeadroomAllocatesNothing(t *testing.T) {
	sched := &admittedScheduler{queues: map[string]admission.Resource{"root.p.x": {MemoryMB: 1024, Vcores: 1}}}
	e := newEnv(t, envOptions{queues: twoLevelQueues(), scheduler: sched})
	e.rm.usage.apply(appUse{queue: "root.p.y", user: "bob", state: yarnpb.YarnApplicationStateProto_RUNNING, unfinished: true,
		live: apps.Holding{Containers: 1, MemoryMB: 4096, VCores: 4}}, 1)
	v := clusterView{nodes: 2, totalMB: 20480, totalVCs: 20, freeMB: 16384, freeVC: 16}
	if n := testing.AllocsPerRun(100, func() { e.rm.am.headroom(v, "root.p.x", "alice") }); n != 0 {
		t.Errorf("the headroom allocates %v times a call, want none", n)
	}
}
