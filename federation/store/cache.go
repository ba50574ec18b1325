package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxCachedHomes bounds the application homes a Cache keeps: past it,
// expired ones go, and if that is not enough, all of them.
const maxCachedHomes = 100_000

// Cache is a StateStore that keeps what it reads of another for a TTL, as
// YARN's FederationStateStoreFacade does for the Router
// (yarn.federation.cache-ttl.secs): the sub-clusters, the policies, and
// application homes. Writes go to the store and update or drop what the
// cache holds, so a Router sees its own writes at once and other writers'
// within the TTL. Safe for concurrent use.
type Cache struct {
	store StateStore
	ttl   time.Duration
	now   func() time.Time

	mu sync.Mutex
	// clusters are all sub-clusters; policies all queues' policies.
	clusters snapshot[[]SubClusterInfo]
	policies snapshot[map[string]PolicyConfiguration]
	homes    map[string]cachedHome
}

// snapshot is a value the cache reads whole from the store and keeps for
// the TTL; guarded by the cache's mu.
type snapshot[T any] struct {
	v  T
	at time.Time
	// gen counts the drops: a read that raced a write is not kept.
	gen uint64
}

// load returns s's value while fresh, else fetches and keeps it.
func load[T any](ctx context.Context, c *Cache, s *snapshot[T], fetch func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	if c.fresh(s.at) {
		v := s.v
		c.mu.Unlock()
		return v, nil
	}
	gen := s.gen
	c.mu.Unlock()
	at := c.now()
	v, err := fetch(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	c.mu.Lock()
	if s.gen == gen {
		s.v, s.at = v, at
	}
	c.mu.Unlock()
	return v, nil
}

// drop forgets s's value, after a write that changes it.
func drop[T any](c *Cache, s *snapshot[T]) {
	c.mu.Lock()
	var zero T
	s.v, s.at = zero, time.Time{}
	s.gen++
	c.mu.Unlock()
}

type cachedHome struct {
	home string
	at   time.Time
}

var _ StateStore = (*Cache)(nil)

// NewCache returns a cache of store whose entries last ttl; a ttl of zero
// or less caches nothing, as YARN's facade with a TTL of 0. now is the
// clock (nil means time.Now).
func NewCache(store StateStore, ttl time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{store: store, ttl: ttl, now: now, homes: map[string]cachedHome{}}
}

func (c *Cache) fresh(at time.Time) bool {
	return c.ttl > 0 && !at.IsZero() && c.now().Sub(at) < c.ttl
}

func (c *Cache) dropClusters() { drop(c, &c.clusters) }

func (c *Cache) RegisterSubCluster(ctx context.Context, info SubClusterInfo) error {
	defer c.dropClusters()
	return c.store.RegisterSubCluster(ctx, info)
}

func (c *Cache) SubClusterHeartbeat(ctx context.Context, id string, state State, capability string) error {
	defer c.dropClusters()
	return c.store.SubClusterHeartbeat(ctx, id, state, capability)
}

func (c *Cache) DeregisterSubCluster(ctx context.Context, id string, state State) error {
	defer c.dropClusters()
	return c.store.DeregisterSubCluster(ctx, id, state)
}

// Claims of cluster timestamps are never cached: each is made once, at an
// RM's activation, and must see every other claim.

func (c *Cache) ClaimClusterTimestamp(ctx context.Context, ts int64, id string) (string, error) {
	return c.store.ClaimClusterTimestamp(ctx, ts, id)
}

// allClusters is every sub-cluster, from the cache while fresh.
func (c *Cache) allClusters(ctx context.Context) ([]SubClusterInfo, error) {
	return load(ctx, c, &c.clusters, func(ctx context.Context) ([]SubClusterInfo, error) {
		return c.store.GetSubClusters(ctx, false)
	})
}

func (c *Cache) GetSubCluster(ctx context.Context, id string) (SubClusterInfo, error) {
	all, err := c.allClusters(ctx)
	if err != nil {
		return SubClusterInfo{}, err
	}
	for _, info := range all {
		if info.ID == id {
			return info, nil
		}
	}
	// One the cache has not seen yet may have registered since.
	return c.store.GetSubCluster(ctx, id)
}

// GetSubClusterFlushed reads the sub-cluster from the store, dropping what
// the cache held of the sub-clusters: YARN's getSubCluster with
// flushCache, for a caller that found a cached address stale (an RM
// failover moves a sub-cluster's addresses).
func (c *Cache) GetSubClusterFlushed(ctx context.Context, id string) (SubClusterInfo, error) {
	c.dropClusters()
	return c.store.GetSubCluster(ctx, id)
}

func (c *Cache) GetSubClusters(ctx context.Context, filterInactive bool) ([]SubClusterInfo, error) {
	all, err := c.allClusters(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SubClusterInfo, 0, len(all))
	for _, info := range all {
		if !filterInactive || info.State.Active() {
			out = append(out, info)
		}
	}
	return out, nil
}

func (c *Cache) AddApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) (string, error) {
	home, err := c.store.AddApplicationHomeSubCluster(ctx, h)
	if err != nil {
		return "", err
	}
	c.putHome(h.Application, home)
	return home, nil
}

func (c *Cache) UpdateApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) error {
	if err := c.store.UpdateApplicationHomeSubCluster(ctx, h); err != nil {
		c.dropHome(h.Application)
		return err
	}
	c.putHome(h.Application, h.Home)
	return nil
}

func (c *Cache) GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error) {
	c.mu.Lock()
	h, ok := c.homes[application]
	c.mu.Unlock()
	if ok && c.fresh(h.at) {
		return h.home, nil
	}
	home, err := c.store.GetApplicationHomeSubCluster(ctx, application)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			c.dropHome(application)
		}
		return "", err
	}
	c.putHome(application, home)
	return home, nil
}

// GetApplicationsHomeSubCluster is not cached: it serves admin views.
func (c *Cache) GetApplicationsHomeSubCluster(ctx context.Context, home string) ([]ApplicationHome, error) {
	return c.store.GetApplicationsHomeSubCluster(ctx, home)
}

func (c *Cache) DeleteApplicationHomeSubCluster(ctx context.Context, application string) error {
	defer c.dropHome(application)
	return c.store.DeleteApplicationHomeSubCluster(ctx, application)
}

// Reservation homes are not cached: reservations are few and each call
// about one is rare.

func (c *Cache) AddReservationHomeSubCluster(ctx context.Context, h ReservationHome) (string, error) {
	return c.store.AddReservationHomeSubCluster(ctx, h)
}

func (c *Cache) UpdateReservationHomeSubCluster(ctx context.Context, h ReservationHome) error {
	return c.store.UpdateReservationHomeSubCluster(ctx, h)
}

func (c *Cache) GetReservationHomeSubCluster(ctx context.Context, reservation string) (string, error) {
	return c.store.GetReservationHomeSubCluster(ctx, reservation)
}

func (c *Cache) DeleteReservationHomeSubCluster(ctx context.Context, reservation string) error {
	return c.store.DeleteReservationHomeSubCluster(ctx, reservation)
}

// The Routers' delegation token state is never cached: a Router that
// issued on keys a TTL old would write over another's tokens, so every
// read goes to the store, and a write over a stale read is refused there.

func (c *Cache) GetRouterKeys(ctx context.Context) ([]byte, string, error) {
	return c.store.GetRouterKeys(ctx)
}

func (c *Cache) PutRouterKeys(ctx context.Context, data []byte, version string) (string, error) {
	return c.store.PutRouterKeys(ctx, data, version)
}

func (c *Cache) GetRouterTokens(ctx context.Context) ([]RouterToken, error) {
	return c.store.GetRouterTokens(ctx)
}

func (c *Cache) PutRouterToken(ctx context.Context, t RouterToken) (string, error) {
	return c.store.PutRouterToken(ctx, t)
}

func (c *Cache) DeleteRouterToken(ctx context.Context, seq int32, version string) error {
	return c.store.DeleteRouterToken(ctx, seq, version)
}

func (c *Cache) putHome(application, home string) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.homes) >= maxCachedHomes {
		for app, h := range c.homes {
			if !c.fresh(h.at) {
				delete(c.homes, app)
			}
		}
		if len(c.homes) >= maxCachedHomes {
			clear(c.homes)
		}
	}
	c.homes[application] = cachedHome{home: home, at: c.now()}
}

func (c *Cache) dropHome(application string) {
	c.mu.Lock()
	delete(c.homes, application)
	c.mu.Unlock()
}

func (c *Cache) GetPolicyConfiguration(ctx context.Context, queue string) (PolicyConfiguration, error) {
	all, err := c.allPolicies(ctx)
	if err != nil {
		return PolicyConfiguration{}, err
	}
	p, ok := all[queue]
	if !ok {
		// YARN's facade answers from its map alone; a policy set by
		// another writer shows after the TTL.
		return PolicyConfiguration{}, fmt.Errorf("federation store: policy of queue %s: %w", queue, ErrNotFound)
	}
	return p, nil
}

func (c *Cache) allPolicies(ctx context.Context) (map[string]PolicyConfiguration, error) {
	return load(ctx, c, &c.policies, func(ctx context.Context) (map[string]PolicyConfiguration, error) {
		list, err := c.store.GetPoliciesConfigurations(ctx)
		if err != nil {
			return nil, err
		}
		all := make(map[string]PolicyConfiguration, len(list))
		for _, p := range list {
			all[p.Queue] = p
		}
		return all, nil
	})
}

func (c *Cache) SetPolicyConfiguration(ctx context.Context, p PolicyConfiguration) error {
	defer drop(c, &c.policies)
	return c.store.SetPolicyConfiguration(ctx, p)
}

func (c *Cache) GetPoliciesConfigurations(ctx context.Context) ([]PolicyConfiguration, error) {
	return c.store.GetPoliciesConfigurations(ctx)
}

func (c *Cache) DeletePoliciesConfigurations(ctx context.Context, queues []string) error {
	defer drop(c, &c.policies)
	return c.store.DeletePoliciesConfigurations(ctx, queues)
}
