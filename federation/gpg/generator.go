package gpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
)

// Store is what the Generator reads and writes of the federation store;
// the store itself, not a Cache, so that each run sees the last heartbeats.
type Store interface {
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	GetPolicyConfiguration(ctx context.Context, queue string) (store.PolicyConfiguration, error)
	SetPolicyConfiguration(ctx context.Context, p store.PolicyConfiguration) error
}

// Queues lists the queues of a sub-cluster's scheduler.
type Queues interface {
	Queues(ctx context.Context, sc store.SubClusterInfo) ([]string, error)
}

// Config configures a Generator.
type Config struct {
	Store  Store
	Queues Queues
	Policy LoadBased
	// Blacklist are sub-clusters given no weight.
	Blacklist []string
	// Interval is how often Run generates.
	Interval time.Duration
	Logger   *slog.Logger
}

// Generator is PolicyGenerator running LoadBasedGlobalPolicy. Safe for one
// Run at a time; Generate may be called alone.
type Generator struct {
	cfg Config
	log *slog.Logger
}

// New returns the generator cfg describes; it does no I/O.
func New(cfg Config) (*Generator, error) {
	if cfg.Store == nil || cfg.Queues == nil || cfg.Interval <= 0 {
		return nil, errors.New("gpg: a generator needs a store, a queue source and an interval")
	}
	g := &Generator{cfg: cfg, log: cfg.Logger}
	if g.log == nil {
		g.log = slog.Default()
	}
	return g, nil
}

// Run generates every interval until ctx ends, then returns nil; a failed
// run is logged and the next one tries again.
func (g *Generator) Run(ctx context.Context) error {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := g.Generate(ctx); err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "policy generator", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Generate makes one run, as PolicyGenerator.run: the queues of every
// active sub-cluster's scheduler get a WeightedLocalityPolicyManager
// policy whose router and AMRMProxy weights are the load-based weights of
// the active sub-clusters not blacklisted. A queue whose policy is of
// another manager keeps it; a policy that would not change is not
// rewritten. It returns the queues whose policy it wrote.
func (g *Generator) Generate(ctx context.Context) ([]string, error) {
	active, err := g.cfg.Store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("gpg: active sub-clusters: %w", err)
	}
	queues := map[string]bool{}
	for _, sc := range active {
		qs, err := g.cfg.Queues.Queues(ctx, sc)
		if err != nil {
			// PolicyGenerator skips a sub-cluster without scheduler info.
			g.log.WarnContext(ctx, "skipped the queues of a sub-cluster", "subCluster", sc.ID, "err", err)
			continue
		}
		for _, q := range qs {
			queues[q] = true
		}
	}
	pending := map[string]int{}
	for _, sc := range active {
		if slices.Contains(g.cfg.Blacklist, sc.ID) {
			continue
		}
		m, err := store.ParseCapability(sc.Capability)
		if err != nil {
			g.log.WarnContext(ctx, "skipped a sub-cluster without cluster metrics", "subCluster", sc.ID, "err", err)
			continue
		}
		pending[sc.ID] = m.AppsPending
	}
	if len(pending) == 0 {
		g.log.InfoContext(ctx, "no sub-cluster to weigh; no policy written", "active", len(active))
		return nil, nil
	}
	weights := g.cfg.Policy.TargetWeights(pending)
	params, err := router.MarshalWeightedPolicyInfo(router.WeightedPolicyInfo{RouterWeights: weights, AMRMWeights: weights})
	if err != nil {
		return nil, fmt.Errorf("gpg: weights: %w", err)
	}
	var written []string
	var errs []error
	for _, q := range slices.Sorted(maps.Keys(queues)) {
		cur, err := g.cfg.Store.GetPolicyConfiguration(ctx, q)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			errs = append(errs, fmt.Errorf("policy of queue %s: %w", q, err))
			continue
		case cur.Type != federation.WeightedLocalityPolicyManager:
			g.log.WarnContext(ctx, "queue's policy is not the generator's; kept", "queue", q, "type", cur.Type)
			continue
		case bytes.Equal(cur.Params, params):
			continue
		}
		p := store.PolicyConfiguration{Queue: q, Type: federation.WeightedLocalityPolicyManager, Params: params}
		if err := g.cfg.Store.SetPolicyConfiguration(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("policy of queue %s: %w", q, err))
			continue
		}
		g.log.InfoContext(ctx, "queue policy written", "queue", q, "weights", weights)
		written = append(written, q)
	}
	if err := errors.Join(errs...); err != nil {
		return written, fmt.Errorf("gpg: %w", err)
	}
	return written, nil
}
