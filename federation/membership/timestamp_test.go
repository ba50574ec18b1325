package membership

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/federation/store"
)

// timestampStores are the federation stores the claims run on: Memory, and
// Kube over a fake API (the Kube store's own tests check it against a
// real API server).
func timestampStores(t *testing.T) map[string]store.StateStore {
	k, err := store.NewKube(store.KubeConfig{Client: fake.NewClientset(), Namespace: "knit-federation"})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]store.StateStore{"memory": store.NewMemory(nil), "kube": k}
}

func newTimestamps(t *testing.T, s TimestampStore, id string) *Timestamps {
	t.Helper()
	ts, err := NewTimestamps(s, id)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// Two sub-clusters whose RMs fix their timestamps in the same millisecond
// no longer share it: the second picks the next one.
func TestSubClustersFixingTheirTimestampsInOneMillisecondPickDifferentOnes(t *testing.T) {
	const now = 1_700_000_000_000
	for name, s := range timestampStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			sc1, sc2, sc3 := newTimestamps(t, s, "sc1"), newTimestamps(t, s, "sc2"), newTimestamps(t, s, "sc3")
			for _, c := range []struct {
				claims *Timestamps
				want   int64
			}{{sc1, now}, {sc2, now + 1}, {sc3, now + 2}} {
				got, err := c.claims.Pick(ctx, now)
				if err != nil || got != c.want || c.claims.Held() != c.want {
					t.Errorf("%s picks from %d: %d (held %d), %v; want %d", c.claims.id, int64(now), got, c.claims.Held(), err, c.want)
				}
			}
			// A restarted RM holds what it picked; its claim stays its own.
			again := newTimestamps(t, s, "sc2")
			if ok, err := again.Hold(ctx, now+1); !ok || err != nil || again.Held() != now+1 {
				t.Errorf("sc2 holds its own timestamp again: %v (held %d), %v", ok, again.Held(), err)
			}
		})
	}
}

// An RM whose fixed timestamp another sub-cluster holds (both fixed
// before the federation guarded them) may not hand out ids under it.
func TestASubClusterMayNotHoldATimestampAnotherHolds(t *testing.T) {
	const ts = 1_700_000_000_000
	for name, s := range timestampStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if ok, err := newTimestamps(t, s, "sc1").Hold(ctx, ts); !ok || err != nil {
				t.Fatalf("sc1 holds a timestamp no one holds: %v, %v", ok, err)
			}
			sc2 := newTimestamps(t, s, "sc2")
			if ok, err := sc2.Hold(ctx, ts); ok || err != nil {
				t.Errorf("sc2 holds sc1's timestamp: %v, %v; want refused", ok, err)
			}
			if sc2.Held() != 0 {
				t.Errorf("sc2 holds %d after a refused claim", sc2.Held())
			}
		})
	}
}

// The registration carries the cluster timestamp held as the
// sub-cluster's LastStartTime, as YARN's SubClusterInfo carries the RM's.
func TestARegistrationCarriesTheClusterTimestampHeld(t *testing.T) {
	s := store.NewMemory(nil)
	claims := newTimestamps(t, s, "sc1")
	picked, err := claims.Pick(t.Context(), 1_700_000_000_123)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Store: s, SubCluster: info(), Timestamps: claims, Capability: func(context.Context) (string, error) { return "", nil }, Interval: time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSubCluster(t.Context(), "sc1")
	if err != nil || got.LastStartTime.UnixMilli() != picked {
		t.Errorf("registered start time %v, %v; want the cluster timestamp %d", got.LastStartTime.UnixMilli(), err, picked)
	}
}
