package mapred

import (
	"container/heap"
	"iter"
)

// Merge yields the records of segments, each sorted by cmp, in one sorted
// sequence, as the reducer's Merger does; records with equal keys come in
// segment order. The segments are not modified.
func Merge(segments [][]Record, cmp func(a, b []byte) int) iter.Seq[Record] {
	return func(yield func(Record) bool) {
		h := &mergeHeap{cmp: cmp}
		for i, s := range segments {
			if len(s) > 0 {
				h.items = append(h.items, cursor{seg: i, recs: s})
			}
		}
		heap.Init(h)
		for h.Len() > 0 {
			top := &h.items[0]
			if !yield(top.recs[0]) {
				return
			}
			top.recs = top.recs[1:]
			if len(top.recs) == 0 {
				heap.Pop(h)
			} else {
				heap.Fix(h, 0)
			}
		}
	}
}

// cursor is what is left of one segment.
type cursor struct {
	seg  int
	recs []Record
}

type mergeHeap struct {
	items []cursor
	cmp   func(a, b []byte) int
}

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool {
	if c := h.cmp(h.items[i].recs[0].Key, h.items[j].recs[0].Key); c != 0 {
		return c < 0
	}
	return h.items[i].seg < h.items[j].seg
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(cursor)) }
func (h *mergeHeap) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return last
}
