package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore counts the reads that reach the store behind a cache.
type countingStore struct {
	StateStore
	clusterReads, policyReads, homeReads atomic.Int64
}

func (c *countingStore) GetSubClusters(ctx context.Context, filterInactive bool) ([]SubClusterInfo, error) {
	c.clusterReads.Add(1)
	return c.StateStore.GetSubClusters(ctx, filterInactive)
}

func (c *countingStore) GetPoliciesConfigurations(ctx context.Context) ([]PolicyConfiguration, error) {
	c.policyReads.Add(1)
	return c.StateStore.GetPoliciesConfigurations(ctx)
}

func (c *countingStore) GetApplicationHomeSubCluster(ctx context.Context, app string) (string, error) {
	c.homeReads.Add(1)
	return c.StateStore.GetApplicationHomeSubCluster(ctx, app)
}

func TestCacheServesReadsWithinTheTTLAndRereadsAfter(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	backing := &countingStore{StateStore: NewMemory(clk.now)}
	other := backing.StateStore // another Router's writes, behind the cache's back
	c := NewCache(backing, time.Minute, clk.now)
	if err := c.RegisterSubCluster(ctx, subCluster("sc1")); err != nil {
		t.Fatal(err)
	}
	if err := c.SubClusterHeartbeat(ctx, "sc1", StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if active, err := c.GetSubClusters(ctx, true); err != nil || len(active) != 1 {
			t.Fatalf("active = %v, %v", ids(active), err)
		}
	}
	if n := backing.clusterReads.Load(); n != 1 {
		t.Errorf("store read %d times for 3 reads within the TTL, want 1", n)
	}
	// Another writer's change shows once the TTL has passed.
	if err := other.DeregisterSubCluster(ctx, "sc1", StateLost); err != nil {
		t.Fatal(err)
	}
	if active, _ := c.GetSubClusters(ctx, true); len(active) != 1 {
		t.Errorf("the cache dropped sc1 before its TTL")
	}
	clk.advance(time.Minute)
	if active, _ := c.GetSubClusters(ctx, true); len(active) != 0 {
		t.Errorf("after the TTL, active = %v; want none", ids(active))
	}
	// The cache's own writes show at once.
	if err := c.SubClusterHeartbeat(ctx, "sc1", StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	if active, _ := c.GetSubClusters(ctx, true); len(active) != 1 {
		t.Errorf("own heartbeat not seen: %v", ids(active))
	}

	const app = "application_1700000000000_0001"
	if _, err := c.GetApplicationHomeSubCluster(ctx, app); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown app: %v", err)
	}
	if home, err := c.AddApplicationHomeSubCluster(ctx, ApplicationHome{Application: app, Home: "sc1"}); err != nil || home != "sc1" {
		t.Fatalf("add = %q, %v", home, err)
	}
	reads := backing.homeReads.Load()
	if home, err := c.GetApplicationHomeSubCluster(ctx, app); err != nil || home != "sc1" || backing.homeReads.Load() != reads {
		t.Errorf("home after add = %q, %v, with %d store reads", home, err, backing.homeReads.Load()-reads)
	}

	if err := other.SetPolicyConfiguration(ctx, PolicyConfiguration{Queue: "*", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if p, err := c.GetPolicyConfiguration(ctx, "*"); err != nil || p.Type != "T" {
			t.Errorf("policy = %+v, %v", p, err)
		}
	}
	if _, err := c.GetPolicyConfiguration(ctx, "root.x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("policy of a queue without one: %v", err)
	}
	if n := backing.policyReads.Load(); n != 1 {
		t.Errorf("policies read %d times, want 1", n)
	}
}

func TestCacheWithNoTTLReadsThrough(t *testing.T) {
	clk := newClock()
	backing := &countingStore{StateStore: NewMemory(clk.now)}
	c := NewCache(backing, 0, clk.now)
	for range 3 {
		if _, err := c.GetSubClusters(t.Context(), true); err != nil {
			t.Fatal(err)
		}
	}
	if n := backing.clusterReads.Load(); n != 3 {
		t.Errorf("store read %d times, want 3", n)
	}
}

func TestCacheReadsRouterKeysFromTheStoreEveryTime(t *testing.T) {
	clk := newClock()
	backing := NewMemory(clk.now)
	c := NewCache(backing, time.Hour, clk.now)
	ctx := t.Context()
	v, err := c.PutRouterKeys(ctx, []byte("mine"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetRouterKeys(ctx); err != nil {
		t.Fatal(err)
	}
	// Another Router writes past this one's cache.
	if _, err := backing.PutRouterKeys(ctx, []byte("theirs"), v); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c.GetRouterKeys(ctx); err != nil || string(data) != "theirs" {
		t.Errorf("keys through the cache within its TTL: %q, %v; want the other Router's", data, err)
	}
}

// blockingStore holds its first sub-cluster read until released.
type blockingStore struct {
	StateStore
	entered, release chan struct{}
	once             atomic.Bool
}

func (b *blockingStore) GetSubClusters(ctx context.Context, filterInactive bool) ([]SubClusterInfo, error) {
	out, err := b.StateStore.GetSubClusters(ctx, filterInactive)
	if b.once.CompareAndSwap(false, true) {
		close(b.entered)
		<-b.release
	}
	return out, err
}

// A read that began before a write through the cache is not kept: the
// next read sees the write, not the older answer.
func TestACacheReadThatRacedAWriteIsNotKept(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	backing := &blockingStore{StateStore: NewMemory(clk.now), entered: make(chan struct{}), release: make(chan struct{})}
	c := NewCache(backing, time.Hour, clk.now)
	if err := backing.RegisterSubCluster(ctx, subCluster("sc1")); err != nil {
		t.Fatal(err)
	}
	done := make(chan []SubClusterInfo)
	go func() {
		active, _ := c.GetSubClusters(ctx, true) // reads sc1 as SC_NEW, then waits
		done <- active
	}()
	<-backing.entered
	if err := c.SubClusterHeartbeat(ctx, "sc1", StateRunning, ""); err != nil {
		t.Fatal(err)
	}
	close(backing.release)
	if stale := <-done; len(stale) != 0 {
		t.Fatalf("the racing read saw %v", ids(stale))
	}
	if active, err := c.GetSubClusters(ctx, true); err != nil || len(active) != 1 {
		t.Errorf("after the write, active = %v, %v; want [sc1]", ids(active), err)
	}
}
