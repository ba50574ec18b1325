package rm

import (
	"cmp"
	"maps"
	"slices"
	"sync"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/rm/queues"
)

// appUse is what one application counts for in the queue usage index.
type appUse struct {
	queue, user string
	state       yarnpb.YarnApplicationStateProto // as clients see it
	unmanaged   bool
	unfinished  bool // its RM state is not final
	// live is what its live containers hold; current and reserved are its
	// current attempt's live containers and reservations (LiveUsage), am
	// its AM container while it is RUNNING. All zero once it has ended,
	// and current, reserved and am while it has had no container.
	live, current, reserved, am apps.Holding
	// partitions are current's, reserved's and am's part in each
	// labelled partition, by name (apps.Held's Partitions).
	partitions []apps.PartitionHeld
}

// same reports whether u and o count for the same figures.
func (u appUse) same(o appUse) bool {
	return u.queue == o.queue && u.user == o.user && u.state == o.state && u.unmanaged == o.unmanaged &&
		u.unfinished == o.unfinished && u.live == o.live && u.current == o.current && u.reserved == o.reserved &&
		u.am == o.am && slices.Equal(u.partitions, o.partitions)
}

// useOf is what app counts for now; the entry's lock is held (or the
// entry is not yet published). It costs the same at any number of
// containers (apps.Application.Held).
func useOf(a *apps.Application) appUse {
	u := appUse{queue: a.Queue(), user: a.User(), state: a.ClientState(), unmanaged: a.Unmanaged(), unfinished: !a.State().Final()}
	if !u.unfinished {
		return u
	}
	h := a.Held()
	u.live = h.Live
	if h.Containers > 0 {
		u.current, u.reserved = h.Current, h.Reserved
		running := u.state == yarnpb.YarnApplicationStateProto_RUNNING
		if running {
			u.am = h.AM
		}
		for _, p := range h.Partitions {
			if !running {
				p.AM = apps.Holding{}
			}
			if p != (apps.PartitionHeld{Partition: p.Partition}) {
				u.partitions = append(u.partitions, p)
			}
		}
	}
	return u
}

// numClientStates bounds the YarnApplicationState values (NEW = 1 …
// KILLED = 8).
const numClientStates = int(yarnpb.YarnApplicationStateProto_KILLED) + 1

// usageFigures are the applications of a queue, a user of it or the whole
// RM, added up.
type usageFigures struct {
	// apps and unmanaged count applications by client state.
	apps, unmanaged [numClientStates]int64
	// unfinished counts those whose RM state is not final.
	unfinished                  int64
	live, current, reserved, am apps.Holding
}

func (f *usageFigures) add(u appUse, sign int64) {
	if s := int(u.state); s >= 0 && s < numClientStates {
		f.apps[s] += sign
		if u.unmanaged {
			f.unmanaged[s] += sign
		}
	}
	if u.unfinished {
		f.unfinished += sign
	}
	if sign > 0 {
		f.live, f.current, f.reserved, f.am = f.live.Add(u.live), f.current.Add(u.current), f.reserved.Add(u.reserved), f.am.Add(u.am)
	} else {
		f.live, f.current, f.reserved, f.am = f.live.Sub(u.live), f.current.Sub(u.current), f.reserved.Sub(u.reserved), f.am.Sub(u.am)
	}
}

func (f *usageFigures) sum(g *usageFigures) {
	for s := range numClientStates {
		f.apps[s] += g.apps[s]
		f.unmanaged[s] += g.unmanaged[s]
	}
	f.unfinished += g.unfinished
	f.live, f.current, f.reserved, f.am = f.live.Add(g.live), f.current.Add(g.current), f.reserved.Add(g.reserved), f.am.Add(g.am)
}

func (f *usageFigures) count(s yarnpb.YarnApplicationStateProto) int64 { return f.apps[s] }

func (f *usageFigures) submitted() int64 {
	var n int64
	for _, k := range f.apps {
		n += k
	}
	return n
}

// queueStats are getQueueInfo's application counts: every application
// submitted, RUNNING, FINISHED, KILLED, FAILED, and pending the rest.
func (f *usageFigures) queueStats() queues.Stats {
	s := queues.Stats{
		AppsSubmitted: f.submitted(),
		AppsRunning:   f.count(yarnpb.YarnApplicationStateProto_RUNNING),
		AppsCompleted: f.count(yarnpb.YarnApplicationStateProto_FINISHED),
		AppsKilled:    f.count(yarnpb.YarnApplicationStateProto_KILLED),
		AppsFailed:    f.count(yarnpb.YarnApplicationStateProto_FAILED),
	}
	s.AppsPending = s.AppsSubmitted - s.AppsRunning - s.AppsCompleted - s.AppsKilled - s.AppsFailed
	return s
}

// partitionFigures are what a queue's applications' current attempts hold
// in one node-label partition: their containers, reservations and AMs.
type partitionFigures struct {
	current, reserved, am apps.Holding
}

// partitionSums are a queue's holdings per labelled partition; a
// partition left with nothing is absent.
type partitionSums map[string]partitionFigures

// add adds f in label (sign 1) or takes it away (-1).
func (m partitionSums) add(label string, f partitionFigures, sign int64) {
	g := m[label]
	if sign > 0 {
		g.current, g.reserved, g.am = g.current.Add(f.current), g.reserved.Add(f.reserved), g.am.Add(f.am)
	} else {
		g.current, g.reserved, g.am = g.current.Sub(f.current), g.reserved.Sub(f.reserved), g.am.Sub(f.am)
	}
	if g == (partitionFigures{}) {
		delete(m, label)
	} else {
		m[label] = g
	}
}

// addHeld adds (sign 1) or takes away (-1) an application's holdings in
// labelled partitions.
func (m partitionSums) addHeld(ps []apps.PartitionHeld, sign int64) {
	for _, p := range ps {
		m.add(p.Partition, partitionFigures{current: p.Current, reserved: p.Reserved, am: p.AM}, sign)
	}
}

// leafFigures are one leaf queue's applications, in all and per user.
type leafFigures struct {
	usageFigures
	// partitions are its applications' holdings in each labelled
	// partition; usageFigures' current, reserved and am less these are
	// the default partition's.
	partitions partitionSums
	users      map[string]*usageFigures
	// activeUsers counts the users with unfinished applications, those a
	// user limit is shared between.
	activeUsers int
}

// queueUsage is the per-queue index: the applications the RM holds, added
// up per leaf queue and per (queue, user), kept as they come, change and
// go, so that getQueueInfo, the AM's headroom, the REST cluster metrics
// and scheduler and the Hadoop metrics cost O(queues × users), never
// O(applications). A parent's figures are its leaves', summed on read.
//
// Each entry holds what it counts for (entry.use) and whether it is in
// (entry.indexed), both guarded by mu. mu is taken after an entry's lock
// and after rm.mu, never before.
type queueUsage struct {
	mu     sync.Mutex
	total  usageFigures
	queues map[string]*leafFigures
	// parents are what the unfinished applications below each parent
	// queue hold (root's being every one's), by path: the headroom reads
	// each of a leaf's parents' in O(1), as YARN's ParentQueue hands its
	// children the room its other children leave.
	parents map[string]apps.Holding
}

func (x *queueUsage) apply(u appUse, sign int64) {
	x.total.add(u, sign)
	if x.queues == nil {
		x.queues = map[string]*leafFigures{}
	}
	q := x.queues[u.queue]
	if q == nil {
		q = &leafFigures{users: map[string]*usageFigures{}, partitions: partitionSums{}}
		x.queues[u.queue] = q
	}
	q.add(u, sign)
	q.partitions.addHeld(u.partitions, sign)
	f := q.users[u.user]
	if f == nil {
		f = &usageFigures{}
		q.users[u.user] = f
	}
	was := f.unfinished > 0
	f.add(u, sign)
	switch now := f.unfinished > 0; {
	case now && !was:
		q.activeUsers++
	case was && !now:
		q.activeUsers--
	}
	if *f == (usageFigures{}) {
		delete(q.users, u.user)
	}
	if len(q.users) == 0 && len(q.partitions) == 0 {
		delete(x.queues, u.queue)
	}
	x.applyParents(u, sign)
}

// applyParents adds (sign 1) or takes away (-1) what u holds in each
// parent of its leaf.
func (x *queueUsage) applyParents(u appUse, sign int64) {
	if u.live == (apps.Holding{}) {
		return
	}
	if x.parents == nil {
		x.parents = map[string]apps.Holding{}
	}
	for p := range selfAndParents(u.queue) {
		if p == u.queue {
			continue
		}
		h := x.parents[p]
		if sign > 0 {
			h = h.Add(u.live)
		} else {
			h = h.Sub(u.live)
		}
		if h == (apps.Holding{}) {
			delete(x.parents, p)
		} else {
			x.parents[p] = h
		}
	}
}

// insert counts a new entry in; call it under rm.mu as the entry goes
// into rm.apps, before anyone else can reach it.
func (x *queueUsage) insert(e *entry) {
	u := useOf(e.app)
	x.mu.Lock()
	defer x.mu.Unlock()
	if e.indexed {
		return
	}
	e.use, e.indexed = u, true
	x.apply(u, 1)
}

// remove takes an entry out as it leaves rm.apps (rm.mu held).
func (x *queueUsage) remove(e *entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !e.indexed {
		return
	}
	x.apply(e.use, -1)
	e.use, e.indexed = appUse{}, false
}

// update recounts an entry after its events; its lock is held. An entry
// not in the index (already forgotten) stays out.
func (x *queueUsage) update(e *entry) {
	u := useOf(e.app)
	x.mu.Lock()
	defer x.mu.Unlock()
	if !e.indexed || u.same(e.use) {
		return
	}
	x.apply(e.use, -1)
	x.apply(u, 1)
	e.use = u
}

// totals are the figures of every application the RM holds.
func (x *queueUsage) totals() usageFigures {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.total
}

// queueTotals are a queue's figures: its applications and, per labelled
// partition, what they hold there.
type queueTotals struct {
	usageFigures
	partitions partitionSums
}

// inPartition is what the queue's applications hold in a partition ("" the
// default: what they hold less the labelled partitions' part).
func (f *queueTotals) inPartition(label string) partitionFigures {
	if label != "" {
		return f.partitions[label]
	}
	d := partitionFigures{current: f.current, reserved: f.reserved, am: f.am}
	for _, p := range f.partitions {
		d.current, d.reserved, d.am = d.current.Sub(p.current), d.reserved.Sub(p.reserved), d.am.Sub(p.am)
	}
	return d
}

// byQueue is every queue's figures, its leaves' summed into each queue
// above them: O(leaf queues × depth). A queue with no applications is
// absent.
func (x *queueUsage) byQueue() map[string]*queueTotals {
	x.mu.Lock()
	leaves := make(map[string]queueTotals, len(x.queues))
	for path, q := range x.queues {
		leaves[path] = queueTotals{usageFigures: q.usageFigures, partitions: maps.Clone(q.partitions)}
	}
	x.mu.Unlock()
	out := make(map[string]*queueTotals, 2*len(leaves))
	for path, f := range leaves {
		for p := range selfAndParents(path) {
			g := out[p]
			if g == nil {
				g = &queueTotals{partitions: partitionSums{}}
				out[p] = g
			}
			g.sum(&f.usageFigures)
			for label, pf := range f.partitions {
				g.partitions.add(label, pf, 1)
			}
		}
	}
	return out
}

// userFigures are one user's figures in one leaf queue.
type userFigures struct {
	queue, user string
	usageFigures
}

// byUser is every (leaf queue, user) pair's figures, ordered by queue and
// user.
func (x *queueUsage) byUser() []userFigures {
	x.mu.Lock()
	var out []userFigures
	for path, q := range x.queues {
		for user, f := range q.users {
			out = append(out, userFigures{queue: path, user: user, usageFigures: *f})
		}
	}
	x.mu.Unlock()
	slices.SortFunc(out, func(a, b userFigures) int {
		return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.user, b.user))
	})
	return out
}

// queueRoom is what the headroom needs of a leaf queue: what its
// unfinished applications hold, in all and the asking user's, and how many
// users share its user limit (those with unfinished applications, the
// asking user counted once it asks).
type queueRoom struct {
	used, user apps.Holding
	users      int
}

// room is what leaf's unfinished applications hold, in all and user's; it
// calls parent with what those below each of leaf's parents hold, from
// the leaf's parent up to root, under the same lock, so that the leaf's
// and its parents' figures are of one moment. O(depth), whatever the
// number of applications.
func (x *queueUsage) room(leaf *queues.Queue, user string, parent func(p *queues.Queue, used apps.Holding)) queueRoom {
	x.mu.Lock()
	defer x.mu.Unlock()
	for p := leaf.Parent; p != nil; p = p.Parent {
		parent(p, x.parents[p.Path])
	}
	q := x.queues[leaf.Path]
	if q == nil {
		return queueRoom{users: 1}
	}
	r := queueRoom{used: q.live, users: q.activeUsers}
	if f := q.users[user]; f != nil && f.unfinished > 0 {
		r.user = f.live
	} else {
		r.users++
	}
	return r
}

// metricSums are the Hadoop metrics' applications, per leaf queue and
// user.
func (x *queueUsage) metricSums() []metrics.AppSums {
	users := x.byUser()
	out := make([]metrics.AppSums, 0, len(users))
	for _, f := range users {
		s := metrics.AppSums{
			Queue: f.queue, User: f.user,
			States:         map[yarnpb.YarnApplicationStateProto]int64{},
			Unmanaged:      map[yarnpb.YarnApplicationStateProto]int64{},
			UsedContainers: int64(f.current.Containers), UsedMB: f.current.MemoryMB, UsedVCores: int64(f.current.VCores),
			ReservedContainers: int64(f.reserved.Containers), ReservedMB: f.reserved.MemoryMB, ReservedVCores: int64(f.reserved.VCores),
			AMUsedMB: f.am.MemoryMB, AMUsedVCores: int64(f.am.VCores),
		}
		for st := range numClientStates {
			if n := f.apps[st]; n != 0 {
				s.States[yarnpb.YarnApplicationStateProto(st)] = n
			}
			if n := f.unmanaged[st]; n != 0 {
				s.Unmanaged[yarnpb.YarnApplicationStateProto(st)] = n
			}
		}
		out = append(out, s)
	}
	return out
}
