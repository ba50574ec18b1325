package queues

import (
	"errors"
	"testing"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// base is a hierarchy to refresh from:
//
//	root ── a 50%
//	     └─ b 50% ── x 50%
//	              └─ y 50% STOPPED
func base(extra ...string) []string {
	return append([]string{
		cs("root.queues"), "a,b",
		cs("root.a.capacity"), "50",
		cs("root.b.capacity"), "50",
		cs("root.b.queues"), "x,y",
		cs("root.b.x.capacity"), "50",
		cs("root.b.y.capacity"), "50",
		cs("root.b.y.state"), "STOPPED",
	}, extra...)
}

// with returns base with some properties changed (an empty value removes
// the property).
func with(changes ...string) []string {
	kv := base()
	for i := 0; i+1 < len(changes); i += 2 {
		found := false
		for j := 0; j+1 < len(kv); j += 2 {
			if kv[j] == changes[i] {
				kv[j+1], found = changes[i+1], true
			}
		}
		if !found {
			kv = append(kv, changes[i], changes[i+1])
		}
	}
	var out []string
	for j := 0; j+1 < len(kv); j += 2 {
		if kv[j+1] != "" {
			out = append(out, kv[j], kv[j+1])
		}
	}
	return out
}

func TestReload(t *testing.T) {
	tests := []struct {
		name    string
		old     []string
		next    []string
		apps    map[string]int
		wantMsg string
		wantErr error
	}{
		{
			name: "a new queue is added",
			old:  base(),
			next: with(cs("root.queues"), "a,b,c", cs("root.a.capacity"), "40", cs("root.c.capacity"), "10"),
		},
		{
			name: "settings of existing queues change",
			old:  base(),
			next: with(cs("root.a.maximum-capacity"), "80", cs("root.b.x.state"), "STOPPED"),
		},
		{
			name:    "a running queue cannot be removed",
			old:     base(),
			next:    with(cs("root.queues"), "b", cs("root.a.capacity"), "", cs("root.b.capacity"), "100"),
			wantMsg: "java.io.IOException: Failed to re-init queues : root.a cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : RUNNING",
			wantErr: ErrQueueInUse,
		},
		{
			name: "a stopped, empty queue is removed",
			old:  base(),
			next: with(cs("root.b.queues"), "x", cs("root.b.x.capacity"), "100"),
		},
		{
			// Its applications keep it DRAINING until they finish.
			name:    "a stopped queue with applications cannot be removed",
			old:     base(),
			next:    with(cs("root.b.queues"), "x", cs("root.b.x.capacity"), "100"),
			apps:    map[string]int{"root.b.y": 2},
			wantMsg: "java.io.IOException: Failed to re-init queues : root.b.y cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : DRAINING",
			wantErr: ErrQueueInUse,
		},
		{
			// The CapacityScheduler lets a queue go when the new file
			// stops it on the way out.
			name: "a running queue stopped by the new configuration is removed",
			old:  base(),
			next: with(cs("root.queues"), "b", cs("root.b.capacity"), "100", cs("root.a.state"), "STOPPED"),
		},
		{
			name:    "but not while it has applications",
			old:     base(),
			next:    with(cs("root.queues"), "b", cs("root.b.capacity"), "100", cs("root.a.state"), "STOPPED"),
			apps:    map[string]int{"root.a": 1},
			wantMsg: "java.io.IOException: Failed to re-init queues : root.a cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : RUNNING",
			wantErr: ErrQueueInUse,
		},
		{
			name:    "a running leaf cannot become a parent",
			old:     base(),
			next:    with(cs("root.a.queues"), "z", cs("root.a.z.capacity"), "100"),
			wantMsg: "java.io.IOException: Failed to re-init queues : Can not convert the leaf queue: root.a to parent queue since it is not yet in stopped state. Current State : RUNNING",
			wantErr: ErrQueueInUse,
		},
		{
			name: "a leaf stopped by the new configuration becomes a parent",
			old:  base(),
			next: with(cs("root.a.queues"), "z", cs("root.a.z.capacity"), "100", cs("root.a.state"), "STOPPED"),
		},
		{
			name: "a parent whose children are stopped becomes a leaf",
			old:  base(cs("root.b.state"), "STOPPED"),
			next: with(cs("root.b.state"), "STOPPED", cs("root.b.queues"), "", cs("root.b.x.capacity"), "",
				cs("root.b.y.capacity"), "", cs("root.b.y.state"), ""),
		},
		{
			name:    "an invalid configuration is refused with the scheduler's reason",
			old:     base(),
			next:    with(cs("root.a.capacity"), "70"),
			wantMsg: "java.io.IOException: Failed to re-init queues : Illegal capacity sum of 1.2 for children of queue root for label=. It should be either 0 or 1.0",
			wantErr: ErrInvalidConfig,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := Build(csConf(tt.old...), Options{DefaultNamespace: "batch"})
			if err != nil {
				t.Fatal(err)
			}
			next, err := old.Reload(csConf(tt.next...), counts{queue: tt.apps})
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Reload: %v", err)
				}
				// The caller's options carry over to the new tree.
				if ns := next.Root().Kube.Namespace; ns != "batch" {
					t.Errorf("root namespace after reload = %q", ns)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Reload = %v, want an *Error wrapping %v", err, tt.wantErr)
			}
			if e.Class != yarnerr.YarnException || e.Message != tt.wantMsg {
				t.Errorf("class %q message\n%s\nwant\n%s", e.Class, e.Message, tt.wantMsg)
			}
			// A refused refresh leaves the old tree as it was.
			if _, err := old.Lookup("root.a"); err != nil {
				t.Errorf("old tree after a refused refresh: %v", err)
			}
		})
	}
}
