package rm

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/scheduling"
)

// recountUse is what one application counts for, found by walking its
// containers as the reports, the headroom and the metrics did before the
// index: the exact recount the index is checked against.
func recountUse(a *apps.Application) appUse {
	u := appUse{queue: a.Queue(), user: a.User(), state: a.ClientState(), unmanaged: a.Unmanaged(), unfinished: !a.State().Final()}
	if !u.unfinished {
		return u
	}
	cs := a.Containers()
	for _, c := range cs {
		switch c.State() {
		case apps.ContainerStateAllocated, apps.ContainerStateAcquired, apps.ContainerStateRunning:
			mb, vc := c.Resource()
			u.live = u.live.Add(apps.Holding{Containers: 1, MemoryMB: mb, VCores: vc})
		}
	}
	if len(cs) == 0 {
		return u
	}
	parts := map[string]*apps.PartitionHeld{}
	part := func(label string) *apps.PartitionHeld {
		if parts[label] == nil {
			parts[label] = &apps.PartitionHeld{Partition: label}
		}
		return parts[label]
	}
	t := a.CurrentAttempt()
	if lu := a.LiveUsage(); lu != nil {
		u.current = apps.Holding{Containers: lu.GetNumUsedContainers(), MemoryMB: lu.GetUsedResources().GetMemory(), VCores: lu.GetUsedResources().GetVirtualCores()}
		u.reserved = apps.Holding{Containers: lu.GetNumReservedContainers(), MemoryMB: lu.GetReservedResources().GetMemory(), VCores: lu.GetReservedResources().GetVirtualCores()}
		for _, c := range cs {
			if c.Partition() == "" || c.Attempt() != t.ID() {
				continue
			}
			mb, vc := c.Resource()
			one := apps.Holding{Containers: 1, MemoryMB: mb, VCores: vc}
			switch c.State() {
			case apps.ContainerStateAllocated, apps.ContainerStateAcquired, apps.ContainerStateRunning:
				part(c.Partition()).Current = part(c.Partition()).Current.Add(one)
			case apps.ContainerStateReserved:
				part(c.Partition()).Reserved = part(c.Partition()).Reserved.Add(one)
			}
		}
	}
	if t != nil && u.state == yarnpb.YarnApplicationStateProto_RUNNING {
		if c := t.AMContainer(); c != nil {
			u.am = apps.Holding{Containers: 1, MemoryMB: c.GetResource().GetMemory(), VCores: c.GetResource().GetVirtualCores()}
			if id, err := yarnid.ContainerIDFromProto(c.GetId()); err == nil {
				if amc := a.Container(id); amc != nil && amc.Partition() != "" {
					part(amc.Partition()).AM = u.am
				}
			}
		}
	}
	for _, label := range slices.Sorted(maps.Keys(parts)) {
		u.partitions = append(u.partitions, *parts[label])
	}
	return u
}

// recountUsage is the index rebuilt from every application the RM holds.
func recountUsage(rm *ResourceManager) *queueUsage {
	x := &queueUsage{}
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		x.apply(recountUse(e.app), 1)
		e.mu.Unlock()
	}
	return x
}

// dumpUsage renders an index, sorted, for comparison.
func dumpUsage(x *queueUsage) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var lines []string
	lines = append(lines, fmt.Sprintf("total %+v", x.total))
	for path, q := range x.queues {
		lines = append(lines, fmt.Sprintf("queue %s activeUsers=%d %+v partitions %+v", path, q.activeUsers, q.usageFigures, map[string]partitionFigures(q.partitions)))
		for user, f := range q.users {
			lines = append(lines, fmt.Sprintf("queue %s user %s %+v", path, user, *f))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// walkedStats are getQueueInfo's figures of q as it counted them before the
// index, every application walked.
func walkedStats(rm *ResourceManager, q *queues.Queue) queues.Stats {
	var s queues.Stats
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		queue, state := e.app.Queue(), e.app.ClientState()
		e.mu.Unlock()
		if !inQueue(queue, q.Path) {
			continue
		}
		s.AppsSubmitted++
		switch state {
		case yarnpb.YarnApplicationStateProto_RUNNING:
			s.AppsRunning++
		case yarnpb.YarnApplicationStateProto_FINISHED:
			s.AppsCompleted++
		case yarnpb.YarnApplicationStateProto_KILLED:
			s.AppsKilled++
		case yarnpb.YarnApplicationStateProto_FAILED:
			s.AppsFailed++
		default:
			s.AppsPending++
		}
	}
	return s
}

// walkedPartition is what the applications in q and below hold in one
// partition, every container walked: their current attempts' live
// containers and reservations there, and the AM of those RUNNING.
func walkedPartition(rm *ResourceManager, q *queues.Queue, label string) partitionFigures {
	var f partitionFigures
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		a := e.app
		t := a.CurrentAttempt()
		if !inQueue(a.Queue(), q.Path) || a.State().Final() || t == nil || a.LiveUsage() == nil {
			e.mu.Unlock()
			continue
		}
		for _, c := range a.Containers() {
			if c.Partition() != label || c.Attempt() != t.ID() {
				continue
			}
			mb, vc := c.Resource()
			one := apps.Holding{Containers: 1, MemoryMB: mb, VCores: vc}
			switch c.State() {
			case apps.ContainerStateAllocated, apps.ContainerStateAcquired, apps.ContainerStateRunning:
				f.current = f.current.Add(one)
			case apps.ContainerStateReserved:
				f.reserved = f.reserved.Add(one)
			}
			if c.IsAM() && a.ClientState() == yarnpb.YarnApplicationStateProto_RUNNING && t.AMContainer() != nil &&
				proto.Equal(t.AMContainer().GetId(), c.ID().Proto()) {
				r := t.AMContainer().GetResource()
				f.am = apps.Holding{Containers: 1, MemoryMB: r.GetMemory(), VCores: r.GetVirtualCores()}.Add(f.am)
			}
		}
		e.mu.Unlock()
	}
	return f
}

// walkedRoom is the headroom's figures of user in leaf queue as the
// cluster view walked them before the index: the unfinished applications'
// live containers, its users those with unfinished applications.
func walkedRoom(rm *ResourceManager, queue, user string) queueRoom {
	users := map[string]apps.Holding{}
	var r queueRoom
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		if e.app.Queue() == queue && !e.app.State().Final() {
			u := recountUse(e.app)
			r.used = r.used.Add(u.live)
			users[e.app.User()] = users[e.app.User()].Add(u.live)
		}
		e.mu.Unlock()
	}
	r.users = len(users)
	if h, ok := users[user]; ok {
		r.user = h
	} else {
		r.users++
	}
	return r
}

// walkedParent is what the unfinished applications of the leaves below
// parent hold, from a walk of every application.
func walkedParent(rm *ResourceManager, parent string) apps.Holding {
	var h apps.Holding
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		if strings.HasPrefix(e.app.Queue(), parent+".") && !e.app.State().Final() {
			h = h.Add(recountUse(e.app).live)
		}
		e.mu.Unlock()
	}
	return h
}

// usageQueues are root.default, root.b (at most three applications, so
// that some are refused) and root.p.x and root.p.y under parent root.p.
func usageQueues() map[string]string {
	return map[string]string{
		"yarn.scheduler.capacity.root.queues":                          "default,b,p",
		"yarn.scheduler.capacity.root.default.capacity":                "40",
		"yarn.scheduler.capacity.root.b.capacity":                      "30",
		"yarn.scheduler.capacity.root.b.maximum-applications":          "3",
		"yarn.scheduler.capacity.root.p.capacity":                      "30",
		"yarn.scheduler.capacity.root.p.queues":                        "x,y",
		"yarn.scheduler.capacity.root.p.x.capacity":                    "50",
		"yarn.scheduler.capacity.root.p.y.capacity":                    "50",
		"yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
		"yarn.scheduler.capacity.root.b.acl_submit_applications":       "*",
		"yarn.scheduler.capacity.root.p.x.acl_submit_applications":     "*",
		"yarn.scheduler.capacity.root.p.y.acl_submit_applications":     "*",
	}
}

var (
	usageLeaves = []string{"default", "b", "root.p.x", "y"}
	usagePaths  = []string{"root.default", "root.b", "root.p.x", "root.p.y"}
	usageUsers  = []string{"alice", "bob", "carol"}
	// usagePartitions are the node-label partitions containers land in,
	// the default one ("") among them.
	usagePartitions = []string{"", "gpu", "ssd"}
)

// usageDriver drives one RM through random steps, as clients, AMs and RGS
// would, and restarts it over the same store.
type usageDriver struct {
	t     *testing.T
	r     *rand.Rand
	e     *env
	sched *recordingScheduler
	seq   int64
	// noRestart leaves the RM running: other drivers share it.
	noRestart bool // container sequence numbers, never reused
}

func (d *usageDriver) ctx(user string) context.Context { return as(d.t.Context(), user) }

// app picks one of the applications the RM holds.
func (d *usageDriver) app() (*entry, bool) {
	all := d.e.rm.snapshot()
	if len(all) == 0 {
		return nil, false
	}
	return all[d.r.IntN(len(all))], true
}

// container picks one of e's containers, or none.
func (d *usageDriver) container(e *entry) (*apps.Container, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cs := e.app.Containers()
	if len(cs) == 0 {
		return nil, false
	}
	return cs[d.r.IntN(len(cs))], true
}

func (d *usageDriver) current(e *entry) (apps.AttemptID, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.app.CurrentAttempt()
	if t == nil {
		return apps.AttemptID{}, false
	}
	return t.ID(), true
}

func (d *usageDriver) containerProto(attempt apps.AttemptID, seq int64) *yarnpb.ContainerProto {
	k := int64(1 + d.r.IntN(4))
	id := yarnid.ContainerID{Attempt: attempt, Epoch: 0, Sequence: seq}
	return &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024*k, int32(k)), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
}

// partition picks the node-label partition of a new container.
func (d *usageDriver) partition() string { return usagePartitions[d.r.IntN(len(usagePartitions))] }

// step takes one random step and names it. Steps an application's state
// does not take are refused as they would be from a client or RGS; the
// index must follow whatever happened.
func (d *usageDriver) step() string {
	ctx := d.t.Context()
	rm := d.e.rm
	n := d.r.IntN(100)
	e, ok := d.app()
	if n < 18 || !ok {
		user := usageUsers[d.r.IntN(len(usageUsers))]
		resp, err := rm.GetNewApplication(d.ctx(user), &yarnpb.GetNewApplicationRequestProto{})
		if err != nil {
			d.t.Error(err) // Error, not Fatal: drivers may run in goroutines of their own
			return "no new application id"
		}
		sc := &yarnpb.ApplicationSubmissionContextProto{
			ApplicationId: resp.GetApplicationId(), Queue: proto.String(usageLeaves[d.r.IntN(len(usageLeaves))]),
			AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: yarnpb.NewResource(1024, 1),
			UnmanagedAm:                             proto.Bool(d.r.IntN(2) == 0),
			KeepContainersAcrossApplicationAttempts: proto.Bool(d.r.IntN(2) == 0),
		}
		_, err = rm.SubmitApplication(d.ctx(user), &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc})
		id, _ := yarnid.ApplicationIDFromProto(resp.GetApplicationId())
		return fmt.Sprintf("%s submits %s to %s (unmanaged %v): %v", user, id, sc.GetQueue(), sc.GetUnmanagedAm(), err)
	}
	id := e.app.ID()
	e.mu.Lock()
	user := e.app.User()
	e.mu.Unlock()
	attempt, hasAttempt := d.current(e)
	switch {
	case n < 26 && hasAttempt: // RGS places the AM container
		err := rm.SchedulerSink().Allocated(ctx, scheduling.Allocation{Role: launch.RoleAM, Container: d.containerProto(attempt, 1), Partition: d.partition()})
		return fmt.Sprintf("AM container of %s allocated: %v", attempt, err)
	case n < 34 && hasAttempt: // the AM starts and registers
		_ = rm.Handle(ctx, id, apps.AttemptLaunched{Attempt: attempt})
		_ = rm.Handle(ctx, id, apps.ContainerLaunched{Container: yarnid.ContainerID{Attempt: attempt, Sequence: 1}})
		err := rm.Handle(ctx, id, apps.AttemptRegistered{Attempt: attempt, Host: "am", RPCPort: 1})
		return fmt.Sprintf("AM of %s registers: %v", attempt, err)
	case n < 50 && hasAttempt: // RGS hands a task container over
		d.seq++
		err := rm.SchedulerSink().Allocated(ctx, scheduling.Allocation{Role: launch.RoleTask, Container: d.containerProto(attempt, 1+d.seq), Partition: d.partition()})
		return fmt.Sprintf("task container %d of %s allocated: %v", 1+d.seq, attempt, err)
	case n < 53 && hasAttempt: // a reservation (RGS makes none, the state machine takes them)
		d.seq++
		err := rm.Handle(ctx, id, apps.ContainerReserved{Container: d.containerProto(attempt, 1+d.seq)})
		return fmt.Sprintf("container %d of %s reserved: %v", 1+d.seq, attempt, err)
	case n < 60: // the AM pulls a container and the node starts it
		c, ok := d.container(e)
		if !ok {
			return "no container to start"
		}
		_ = rm.Handle(ctx, id, apps.ContainerAcquired{Container: c.ID()})
		err := rm.Handle(ctx, id, apps.ContainerLaunched{Container: c.ID()})
		return fmt.Sprintf("%s acquired and started: %v", c.ID(), err)
	case n < 64: // a resize
		c, ok := d.container(e)
		if !ok {
			return "no container to resize"
		}
		p := d.containerProto(c.ID().Attempt, c.ID().Sequence)
		err := rm.Handle(ctx, id, apps.ContainerUpdated{Container: p})
		return fmt.Sprintf("%s resized to %d MB: %v", c.ID(), p.GetResource().GetMemory(), err)
	case n < 72: // a container ends, is preempted or goes away
		c, ok := d.container(e)
		if !ok {
			return "no container to end"
		}
		done := scheduling.Completion{Container: c.ID(), ExitStatus: int32(d.r.IntN(2)), Preempted: d.r.IntN(4) == 0, Vanished: d.r.IntN(4) == 0}
		rm.SchedulerSink().Completed(ctx, done)
		return fmt.Sprintf("%s completed %+v", c.ID(), done)
	case n < 75: // the AM releases one
		c, ok := d.container(e)
		if !ok {
			return "no container to release"
		}
		err := rm.Handle(ctx, id, apps.ContainerReleased{Container: c.ID()})
		return fmt.Sprintf("%s released: %v", c.ID(), err)
	case n < 79 && hasAttempt: // the AM unregisters
		err := rm.Handle(ctx, id, apps.AttemptUnregistered{Attempt: attempt, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED})
		return fmt.Sprintf("AM of %s unregisters: %v", attempt, err)
	case n < 85:
		_, err := rm.ForceKillApplication(d.ctx(user), &yarnpb.KillApplicationRequestProto{ApplicationId: id.Proto()})
		return fmt.Sprintf("%s killed: %v", id, err)
	case n < 93:
		to := usageLeaves[d.r.IntN(len(usageLeaves))]
		_, err := rm.MoveApplicationAcrossQueues(d.ctx(user), &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id.Proto(), TargetQueue: proto.String(to)})
		return fmt.Sprintf("%s moved to %s: %v", id, to, err)
	case n < 96 && hasAttempt: // the AM goes silent
		err := rm.Handle(ctx, id, apps.AttemptExpired{Attempt: attempt})
		return fmt.Sprintf("AM of %s expired: %v", attempt, err)
	case n >= 96 && !d.noRestart:
		d.restart()
		return "the RM restarts and RGS reports the containers still running"
	}
	return "nothing"
}

// restart starts a new RM over the same store, which recovers the
// applications; RGS then reports the live containers, as it finds their
// pods.
func (d *usageDriver) restart() {
	var running []scheduling.Allocation
	for _, e := range d.e.rm.snapshot() {
		e.mu.Lock()
		for _, c := range e.app.Containers() {
			switch c.State() {
			case apps.ContainerStateAllocated, apps.ContainerStateAcquired, apps.ContainerStateRunning:
				running = append(running, scheduling.Allocation{Container: c.Proto(), Created: c.CreationTime(), Partition: c.Partition()})
			}
		}
		e.mu.Unlock()
	}
	d.sched = &recordingScheduler{}
	d.e = newEnv(d.t, envOptions{queues: usageQueues(), store: d.e.store, ids: d.e.ids, clock: d.e.clock, scheduler: d.sched, maxDone: 6})
	if err := d.check(); err != nil {
		d.t.Fatalf("once recovered, %v", err)
	}
	d.e.rm.Recovered(d.t.Context(), running)
}

// check compares the index with a full recount, and its answers with those
// the walks gave.
func (d *usageDriver) check() error {
	rm := d.e.rm
	if got, want := dumpUsage(&rm.usage), dumpUsage(recountUsage(rm)); got != want {
		return fmt.Errorf("the index holds\n%s\nthe applications count for\n%s", got, want)
	}
	figs := rm.usage.byQueue()
	for _, q := range rm.queueTree().Queues() {
		var got queues.Stats
		f := figs[q.Path]
		if f != nil {
			got = f.queueStats()
		}
		if want := walkedStats(rm, q); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("queue %s's figures are %+v, walked %+v", q.Path, got, want)
		}
		for _, label := range usagePartitions {
			var got partitionFigures
			if f != nil {
				got = f.inPartition(label)
			}
			if want := walkedPartition(rm, q, label); got != want {
				return fmt.Errorf("queue %s holds %+v in partition %q, walked %+v", q.Path, got, label, want)
			}
		}
	}
	for _, path := range usagePaths {
		leaf, err := rm.queueTree().Lookup(path)
		if err != nil {
			return err
		}
		for _, user := range append(usageUsers, "dave") {
			parents := map[string]apps.Holding{}
			got := rm.usage.room(leaf, user, func(p *queues.Queue, used apps.Holding) { parents[p.Path] = used })
			if want := walkedRoom(rm, path, user); got != want {
				return fmt.Errorf("the headroom of %s in %s counts %+v, walked %+v", user, path, got, want)
			}
			for p := leaf.Parent; p != nil; p = p.Parent {
				if got, want := parents[p.Path], walkedParent(rm, p.Path); got != want {
					return fmt.Errorf("the headroom of %s in %s counts %+v held below %s, walked %+v", user, path, got, p.Path, want)
				}
			}
		}
	}
	return nil
}

// TestQueueUsageIndexMatchesAFullRecountAfterEveryStep drives random
// sequences of submissions (some refused by a full queue), AM starts and
// failures, containers allocated, reserved, started, resized, completed
// and released, kills, moves between queues, the removal of old completed
// applications and RM restarts with recovery, and after every step
// compares the per-queue index with a recount of every application.
func TestQueueUsageIndexMatchesAFullRecountAfterEveryStep(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 1955, 20260101} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			sched := &recordingScheduler{}
			d := &usageDriver{t: t, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), sched: sched,
				e: newEnv(t, envOptions{queues: usageQueues(), scheduler: sched, maxDone: 6})}
			var trail []string
			for i := range 300 {
				trail = append(trail, fmt.Sprintf("%d: %s", i, d.step()))
				if err := d.check(); err != nil {
					t.Fatalf("after these steps\n%s\n%v", strings.Join(trail[max(0, len(trail)-15):], "\n"), err)
				}
			}
			if got := d.e.rm.usage.totals(); got.submitted() == 0 {
				t.Error("no applications held at the end")
			}
		})
	}
}

// TestQueueInfoCountsApplicationsOfEveryQueueBelow: getQueueInfo's figures
// of a parent are its leaves' summed, an empty queue's zero.
func TestQueueInfoCountsApplicationsOfEveryQueueBelow(t *testing.T) {
	e := newEnv(t, envOptions{queues: usageQueues()})
	c := e.client("alice")
	killed := e.mustSubmit(c, subOpts{queue: "x"})
	e.mustSubmit(c, subOpts{queue: "y"})
	e.mustSubmit(e.client("bob"), subOpts{queue: "y"})
	mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: killed}, &yarnpb.KillApplicationResponseProto{})
	info := mustCall(t, c, "getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("root"),
		IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true)}, &yarnpb.GetQueueInfoResponseProto{}).GetQueueInfo()
	got := map[string][2]int64{} // submitted, pending
	var walk func(q *yarnpb.QueueInfoProto)
	walk = func(q *yarnpb.QueueInfoProto) {
		got[q.GetQueuePath()] = [2]int64{q.GetQueueStatistics().GetNumAppsSubmitted(), q.GetQueueStatistics().GetNumAppsPending()}
		for _, ch := range q.GetChildQueues() {
			walk(ch)
		}
	}
	walk(info)
	want := map[string][2]int64{"root": {3, 2}, "root.default": {0, 0}, "root.b": {0, 0}, "root.p": {3, 2}, "root.p.x": {1, 0}, "root.p.y": {2, 2}}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: submitted, pending %v, want %v", path, got[path], w)
		}
	}
}

// TestQueueUsageIndexStaysExactUnderConcurrentCalls: clients, AMs and RGS
// calling at once (with completed applications forgotten meanwhile) leave
// the index equal to a recount.
func TestQueueUsageIndexStaysExactUnderConcurrentCalls(t *testing.T) {
	sched := &recordingScheduler{}
	e := newEnv(t, envOptions{queues: usageQueues(), scheduler: sched, maxDone: 6})
	var wg sync.WaitGroup
	for g := range uint64(4) {
		d := &usageDriver{t: t, r: rand.New(rand.NewPCG(g, 42)), sched: sched, e: e, noRestart: true, seq: int64(g) * 1_000_000}
		wg.Go(func() {
			for range 150 {
				d.step()
			}
		})
	}
	wg.Wait()
	d := &usageDriver{t: t, e: e}
	if err := d.check(); err != nil {
		t.Fatal(err)
	}
}
