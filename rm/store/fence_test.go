package store

import (
	"errors"
	"testing"
)

func TestADeposedLeaderWritesNothingMore(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	old := e.store(t, storeOptions{})
	if _, err := old.NextEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	rec := Record{ID: "application_1700000000000_0001", State: "RUNNING", User: "alice", Queue: "default", Data: []byte("old")}
	if _, err := old.Put(ctx, rec); err != nil {
		t.Fatalf("put before the takeover: %v", err)
	}

	// A new leader starts: its epoch is higher, and it writes the record.
	next := e.store(t, storeOptions{})
	if _, err := next.NextEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	rec.Data = []byte("new")
	if _, err := next.Put(ctx, rec); err != nil {
		t.Fatalf("new leader's put: %v", err)
	}

	tests := []struct {
		name  string
		write func() error
	}{
		{"its record write", func() error {
			r := rec
			r.Data = []byte("stale")
			_, err := old.Put(ctx, r)
			return err
		}},
		{"its id reservation", func() error {
			_, err := old.NextApplicationIDs(ctx, 10)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.write(); !errors.Is(err, ErrFenced) {
				t.Fatalf("old leader's write = %v, want ErrFenced", err)
			}
		})
	}
	got, err := next.List(ctx)
	if err != nil || len(got) != 1 || string(got[0].Data) != "new" {
		t.Fatalf("stored = %+v, %v; want the new leader's record", got, err)
	}
	if _, err := next.NextApplicationIDs(ctx, 10); err != nil {
		t.Errorf("new leader's id reservation: %v", err)
	}
}

func TestAFailingFenceStopsEveryCallUnretried(t *testing.T) {
	e := newEnv(t)
	notLeader := errors.New("not the leader")
	s := e.store(t, storeOptions{fence: func() error { return notLeader }})
	_, err := s.Put(t.Context(), Record{ID: "application_1700000000000_0002", State: "NEW"})
	if !errors.Is(err, ErrFenced) || !errors.Is(err, notLeader) {
		t.Fatalf("put = %v, want ErrFenced wrapping the fence's error", err)
	}
	if got, err := e.store(t, storeOptions{}).List(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("stored = %v, %v; want nothing", got, err)
	}
}
