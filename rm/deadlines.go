package rm

import (
	"container/heap"
	"time"
)

// deadlines holds a deadline per key and gives those due in the order they
// fall, at a cost of the keys due rather than of all keys held: the
// container allocation monitor holds a deadline for every container
// allocated and not yet started, 100,000 at a time on a large cluster, and
// is checked every second. Its zero value is not usable; call
// newDeadlines. It is not safe for concurrent use.
type deadlines[K comparable] struct {
	at map[K]time.Time
	// order is a heap of every deadline set, the earliest first. A key
	// removed or set again leaves its old entry behind, skipped when it
	// comes up; compact drops them once they outnumber the live ones.
	order deadlineHeap[K]
}

func newDeadlines[K comparable]() *deadlines[K] {
	return &deadlines[K]{at: map[K]time.Time{}}
}

// set gives key the deadline at, replacing the one it had.
func (d *deadlines[K]) set(key K, at time.Time) {
	d.at[key] = at
	heap.Push(&d.order, deadlineEntry[K]{key: key, at: at})
	d.compact()
}

// remove forgets key's deadline.
func (d *deadlines[K]) remove(key K) {
	delete(d.at, key)
	d.compact()
}

// len is how many keys hold a deadline.
func (d *deadlines[K]) len() int { return len(d.at) }

// due forgets and returns the keys whose deadline is not after now, the
// earliest first.
func (d *deadlines[K]) due(now time.Time) []K {
	var out []K
	for len(d.order) > 0 && !d.order[0].at.After(now) {
		e := heap.Pop(&d.order).(deadlineEntry[K])
		if at, ok := d.at[e.key]; ok && at.Equal(e.at) {
			delete(d.at, e.key)
			out = append(out, e.key)
		}
	}
	return out
}

// compact rebuilds the heap from the live deadlines once stale entries are
// more than half of it, so that keys set and removed without falling due
// (a container started in time) cost memory only until the next rebuild.
func (d *deadlines[K]) compact() {
	const floor = 64
	if len(d.order) <= floor || len(d.order) <= 2*len(d.at) {
		return
	}
	d.order = d.order[:0]
	for k, at := range d.at {
		d.order = append(d.order, deadlineEntry[K]{key: k, at: at})
	}
	heap.Init(&d.order)
}

type deadlineEntry[K comparable] struct {
	key K
	at  time.Time
}

// deadlineHeap is a container/heap of entries, the earliest at the top.
type deadlineHeap[K comparable] []deadlineEntry[K]

func (h deadlineHeap[K]) Len() int           { return len(h) }
func (h deadlineHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap[K]) Push(x any)        { *h = append(*h, x.(deadlineEntry[K])) }
func (h *deadlineHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
