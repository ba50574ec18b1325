package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/test/eventually"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func info() store.SubClusterInfo {
	return store.SubClusterInfo{
		ID:                     "sc1",
		AMRMServiceAddress:     "10.0.0.1:8030",
		ClientRMServiceAddress: "10.0.0.1:8032",
		RMAdminServiceAddress:  "10.0.0.1:8033",
		RMWebServiceAddress:    "10.0.0.1:8088",
		LastStartTime:          time.UnixMilli(1_700_000_000_000),
	}
}

func newMember(t *testing.T, s Store, capability func(context.Context) (string, error)) *Member {
	t.Helper()
	m, err := New(Config{Store: s, SubCluster: info(), Capability: capability, Interval: 5 * time.Millisecond, InitialDelay: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAMemberRegistersNewHeartbeatsRunningAndDeregisters(t *testing.T) {
	s := store.NewMemory(nil)
	var beats atomic.Int64
	m := newMember(t, s, func(context.Context) (string, error) {
		beats.Add(1)
		return `{"clusterMetrics":{"appsSubmitted":1}}`, nil
	})
	ctx := t.Context()
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSubCluster(ctx, "sc1")
	if err != nil || got.State != store.StateNew || got.ClientRMServiceAddress != "10.0.0.1:8032" {
		t.Fatalf("registered: %+v, %v", got, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	eventually.True(t, 5*time.Second, "three heartbeats", func() bool { return beats.Load() >= 3 })
	stop()
	wg.Wait()
	got, _ = s.GetSubCluster(ctx, "sc1")
	if got.State != store.StateRunning || got.Capability != `{"clusterMetrics":{"appsSubmitted":1}}` {
		t.Errorf("after heartbeats: %+v", got)
	}
	if err := m.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSubCluster(ctx, "sc1"); got.State != store.StateUnregistered {
		t.Errorf("after deregistration: %v", got.State)
	}
}

// flakyStore fails its first registrations and every heartbeat while down.
type flakyStore struct {
	*store.Memory
	failRegistrations atomic.Int64
	down              atomic.Bool
}

func (f *flakyStore) RegisterSubCluster(ctx context.Context, info store.SubClusterInfo) error {
	if f.failRegistrations.Add(-1) >= 0 {
		return errors.New("store unavailable")
	}
	return f.Memory.RegisterSubCluster(ctx, info)
}

func (f *flakyStore) SubClusterHeartbeat(ctx context.Context, id string, state store.State, capability string) error {
	if f.down.Load() {
		return errors.New("store unavailable")
	}
	return f.Memory.SubClusterHeartbeat(ctx, id, state, capability)
}

func TestAMemberRidesOutAStoreOutage(t *testing.T) {
	s := &flakyStore{Memory: store.NewMemory(nil)}
	s.failRegistrations.Store(2)
	s.down.Store(true)
	var beats atomic.Int64
	m := newMember(t, s, func(context.Context) (string, error) { beats.Add(1); return "{}", nil })
	if err := m.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx) })
	eventually.True(t, 5*time.Second, "heartbeats tried while the store is down", func() bool { return beats.Load() >= 2 })
	s.down.Store(false)
	eventually.True(t, 5*time.Second, "the sub-cluster running once the store is back", func() bool {
		got, err := s.GetSubCluster(ctx, "sc1")
		return err == nil && got.State == store.StateRunning
	})
	stop()
	wg.Wait()
}

func TestRegistrationGivesUpWhenItsContextEnds(t *testing.T) {
	s := &flakyStore{Memory: store.NewMemory(nil)}
	s.failRegistrations.Store(1 << 40)
	m := newMember(t, s, func(context.Context) (string, error) { return "", nil })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := m.Register(ctx); err == nil {
		t.Fatal("registered with a store that refuses every registration")
	}
}

func TestNewRefusesAMemberWithoutASubClusterID(t *testing.T) {
	_, err := New(Config{Store: store.NewMemory(nil), Capability: func(context.Context) (string, error) { return "", nil }, Interval: time.Second})
	if err == nil {
		t.Fatal("a member without a sub-cluster id was built")
	}
}

func TestConnectAddressReplacesOnlyWildcardHosts(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"0.0.0.0:8032", "10.1.2.3:8032"},
		{"[::]:8032", "10.1.2.3:8032"},
		{":8032", "10.1.2.3:8032"},
		{"rm1.example.com:8032", "rm1.example.com:8032"},
		{"127.0.0.1:8032", "127.0.0.1:8032"},
	}
	for _, tt := range tests {
		got, err := ConnectAddress(tt.addr, "10.1.2.3")
		if err != nil || got != tt.want {
			t.Errorf("ConnectAddress(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
		}
	}
	if _, err := ConnectAddress("no-port", "h"); err == nil {
		t.Error("an address without a port was accepted")
	}
}

func TestCleanUpForgetsOldHomesOfApplicationsTheRMNoLongerHolds(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	s := store.NewMemory(clock)
	ctx := t.Context()
	add := func(app, home string) {
		t.Helper()
		if _, err := s.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: home}); err != nil {
			t.Fatal(err)
		}
	}
	add("application_1_0001", "sc1") // held by the RM
	add("application_1_0002", "sc1") // pruned by the RM
	add("application_1_0003", "sc2") // another sub-cluster's
	now = now.Add(CleanupGrace)
	add("application_1_0004", "sc1") // on its way: recorded, not yet submitted
	held := map[string]bool{"application_1_0001": true}
	m, err := New(Config{Store: s, SubCluster: info(), Interval: time.Second, Now: clock,
		Capability: func(context.Context) (string, error) { return "", nil },
		Holds:      func(_ context.Context, app string) (bool, error) { return held[app], nil }})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := m.CleanUp(ctx)
	if err != nil || len(gone) != 1 || gone[0] != "application_1_0002" {
		t.Fatalf("cleanup forgot %v, %v; want [application_1_0002]", gone, err)
	}
	left, _ := s.GetApplicationsHomeSubCluster(ctx, "")
	if len(left) != 3 {
		t.Errorf("homes left %v", left)
	}
}

// forgetting is a store that lost the sub-cluster's record once.
type forgetting struct {
	*store.Memory
	forgot atomic.Bool
}

func (f *forgetting) SubClusterHeartbeat(ctx context.Context, id string, state store.State, capability string) error {
	if f.forgot.CompareAndSwap(false, true) {
		return fmt.Errorf("heartbeat: %w", store.ErrNotFound)
	}
	return f.Memory.SubClusterHeartbeat(ctx, id, state, capability)
}

func TestAHeartbeatTheStoreHasNoRecordForRegistersAgain(t *testing.T) {
	s := &forgetting{Memory: store.NewMemory(nil)}
	m := newMember(t, s, func(context.Context) (string, error) { return "{}", nil })
	if err := m.Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSubCluster(t.Context(), "sc1")
	if err != nil || got.State != store.StateRunning || got.ClientRMServiceAddress != "10.0.0.1:8032" {
		t.Errorf("after the heartbeat: %+v, %v", got, err)
	}
}
