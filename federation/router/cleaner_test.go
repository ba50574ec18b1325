package router

import (
	"slices"
	"testing"
	"time"

	"github.com/knitdev/knit/federation/store"
)

func TestTheCleanerMarksSilentUsableSubClustersLost(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	s := store.NewMemory(clock)
	ctx := t.Context()
	register := func(id string, state store.State) {
		t.Helper()
		if err := s.RegisterSubCluster(ctx, store.SubClusterInfo{ID: id, AMRMServiceAddress: "a:1", ClientRMServiceAddress: "a:2", RMAdminServiceAddress: "a:3", RMWebServiceAddress: "a:4", State: store.StateNew}); err != nil {
			t.Fatal(err)
		}
		var err error
		switch state {
		case store.StateRunning:
			err = s.SubClusterHeartbeat(ctx, id, state, "{}")
		case store.StateNew:
		default:
			err = s.DeregisterSubCluster(ctx, id, state)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	register("silent-running", store.StateRunning)
	register("silent-new", store.StateNew)
	register("silent-unregistered", store.StateUnregistered)
	now = now.Add(10 * time.Minute)
	register("recent", store.StateRunning)
	now = now.Add(time.Minute)

	c, err := NewCleaner(CleanerConfig{Store: s, Expiration: 5 * time.Minute, Interval: time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	lost, err := c.Clean(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	if !slices.Equal(lost, []string{"silent-new", "silent-running"}) {
		t.Errorf("lost %v, want the silent usable ones", lost)
	}
	want := map[string]store.State{"silent-running": store.StateLost, "silent-new": store.StateLost, "silent-unregistered": store.StateUnregistered, "recent": store.StateRunning}
	for id, state := range want {
		if got, _ := s.GetSubCluster(ctx, id); got.State != state {
			t.Errorf("%s: %v, want %v", id, got.State, state)
		}
	}
	// A second pass finds nothing more to do.
	if lost, err := c.Clean(ctx); err != nil || len(lost) != 0 {
		t.Errorf("second pass: %v, %v", lost, err)
	}
}
