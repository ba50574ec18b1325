package rm

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestDeadlinesGiveWhatIsDueEarliestFirst(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name string
		run  func(d *deadlines[string])
		now  int
		want []string
	}{
		{"nothing held", func(*deadlines[string]) {}, 10, nil},
		{"only those not after now, earliest first", func(d *deadlines[string]) {
			d.set("late", at(20))
			d.set("b", at(5))
			d.set("a", at(3))
			d.set("edge", at(10))
		}, 10, []string{"a", "b", "edge"}},
		{"a removed key is not due", func(d *deadlines[string]) {
			d.set("a", at(1))
			d.remove("a")
		}, 10, nil},
		{"a key set again is due by its last deadline", func(d *deadlines[string]) {
			d.set("a", at(1))
			d.set("a", at(20))
			d.set("b", at(20))
			d.set("b", at(2))
		}, 10, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeadlines[string]()
			tt.run(d)
			if got := d.due(at(tt.now)); !slices.Equal(got, tt.want) {
				t.Errorf("due = %v, want %v", got, tt.want)
			}
			if again := d.due(at(tt.now)); len(again) != 0 {
				t.Errorf("due twice: %v", again)
			}
		})
	}
}

// TestDeadlinesAgreeWithAMapWalkedEachTime drives random sets, removals and
// checks, with the heap compacted along the way, and compares every answer
// with the walk of a plain map the queue replaces.
func TestDeadlinesAgreeWithAMapWalkedEachTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := newDeadlines[int]()
	model := map[int]time.Time{}
	now := time.Unix(0, 0)
	for step := range 20_000 {
		k := r.IntN(500)
		switch op := r.IntN(10); {
		case op < 5:
			at := now.Add(time.Duration(r.IntN(100)) * time.Millisecond)
			d.set(k, at)
			model[k] = at
		case op < 8:
			d.remove(k)
			delete(model, k)
		default:
			now = now.Add(time.Duration(r.IntN(30)) * time.Millisecond)
			got := d.due(now)
			var want []int
			for k, at := range model {
				if !at.After(now) {
					want = append(want, k)
					delete(model, k)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: due = %v, want %v", step, got, want)
			}
		}
		if d.len() != len(model) {
			t.Fatalf("step %d: %d held, want %d", step, d.len(), len(model))
		}
		if len(d.order) > max(64, 2*len(model)+1) {
			t.Fatalf("step %d: heap of %d for %d deadlines", step, len(d.order), len(model))
		}
	}
}
