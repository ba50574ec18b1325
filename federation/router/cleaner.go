package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/knitdev/knit/federation/store"
)

// CleanerStore is what the Cleaner reads and writes of the store; it must
// not be a Cache, whose view may be a TTL old.
type CleanerStore interface {
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	DeregisterSubCluster(ctx context.Context, id string, state store.State) error
}

// Cleaner marks SC_LOST the sub-clusters whose heartbeats stopped (YARN's
// Router SubClusterCleaner, yarn.router.deregister.subcluster.enabled):
// a usable one (SC_NEW or SC_RUNNING) whose last heartbeat is older than
// the expiration (yarn.router.subcluster.heartbeat.expiration.time). Every
// Router may run one; their writes agree.
type Cleaner struct {
	store      CleanerStore
	expiration time.Duration
	interval   time.Duration
	now        func() time.Time
	log        *slog.Logger
}

// CleanerConfig configures a Cleaner.
type CleanerConfig struct {
	Store CleanerStore
	// Expiration is how long a sub-cluster may be silent; Interval how
	// often the Cleaner looks (yarn.router.subcluster.cleaner.interval.time).
	Expiration, Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// NewCleaner returns the cleaner cfg describes; it does no I/O.
func NewCleaner(cfg CleanerConfig) (*Cleaner, error) {
	if cfg.Store == nil || cfg.Expiration <= 0 || cfg.Interval <= 0 {
		return nil, errors.New("router: a sub-cluster cleaner needs a store, an expiration and an interval")
	}
	c := &Cleaner{store: cfg.Store, expiration: cfg.Expiration, interval: cfg.Interval, now: cfg.Now, log: cfg.Logger}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// Clean makes one pass and returns the sub-clusters it marked lost.
func (c *Cleaner) Clean(ctx context.Context) ([]string, error) {
	all, err := c.store.GetSubClusters(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("router: cleaner: %w", err)
	}
	now := c.now()
	var lost []string
	var errs []error
	for _, sc := range all {
		usable := sc.State == store.StateRunning || sc.State == store.StateNew
		if !usable || now.Sub(sc.LastHeartBeat) <= c.expiration {
			continue
		}
		if err := c.store.DeregisterSubCluster(ctx, sc.ID, store.StateLost); err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.WarnContext(ctx, "sub-cluster lost: no heartbeat", "subCluster", sc.ID, "lastHeartBeat", sc.LastHeartBeat, "expiration", c.expiration)
		lost = append(lost, sc.ID)
	}
	if err := errors.Join(errs...); err != nil {
		return lost, fmt.Errorf("router: cleaner: %w", err)
	}
	return lost, nil
}

// Run cleans every interval until ctx ends, then returns nil; a failed
// pass is logged and the next one tries again.
func (c *Cleaner) Run(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := c.Clean(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "sub-cluster cleaner", "err", err)
		}
	}
}
