package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"
	"k8s.io/client-go/informers"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/cmd/internal/tokenroll"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/store"
	"github.com/knitdev/knit/rm/tokens"
	"github.com/knitdev/knit/scheduling"
)

// activation is this replica becoming the active RM, in one place and in
// the order it must go: the parts were built without reading or writing
// anything of the cluster, and Activate is where the active RM's I/O
// begins. It runs only once the replica leads (run builds the active app
// only then), and Close undoes it, waiting for what it started.
type activation struct {
	// settings give the epoch of the container ids.
	settings  conf.RMSettings
	store     *store.Store
	tokens    *tokens.Manager
	informers nodeInformers
	nodes     *nodes.Lister
	sched     *rgs.Controller
	rm        *rm.ResourceManager
	sink      scheduling.Sink
	policy    rgs.Policy
	log       *slog.Logger
	// stop ends the informers Activate started.
	stop chan struct{}
}

func newActivation(f flags, settings conf.RMSettings, s *store.Store, tm *tokens.Manager, inf nodeInformers, l *nodes.Lister, sched *rgs.Controller, r *rm.ResourceManager, m *rmMetrics, log *slog.Logger) *activation {
	a := &activation{settings: settings, store: s, tokens: tm, informers: inf, nodes: l, sched: sched, rm: r, sink: m.sink(r),
		log: log.With("component", "activation"), stop: make(chan struct{})}
	if f.queueAdmission {
		a.policy = r
	}
	return a
}

// Activate takes up the cluster's state. ctx bounds it (the app's start
// timeout): the store retries through an API server outage within it, and
// past it the RM exits for its Deployment to restart it.
func (a *activation) Activate(ctx context.Context) error {
	start := time.Now()
	// The store's resource, then this term's epoch: from here every write
	// of the store carries it, and a later leader's epoch fences them.
	if err := a.store.Install(ctx); err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	epoch, err := a.store.NextEpoch(ctx)
	if err != nil {
		return fmt.Errorf("activation: epoch: %w", err)
	}
	// The cluster timestamp names the cluster's applications and signs its
	// container tokens, whichever replica leads; the token keys are those
	// of every leader before, so that their tokens stay valid.
	ts, err := a.store.ClusterTimestamp(ctx)
	if err != nil {
		return fmt.Errorf("activation: cluster timestamp: %w", err)
	}
	if err := a.tokens.Activate(ctx, ts); err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	for _, f := range []informers.SharedInformerFactory{a.informers.nodes, a.informers.pods} {
		f.Start(a.stop)
	}
	if err := a.nodes.WaitForSync(ctx); err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	// The applications come back from the store, then the containers their
	// pods hold, before any AM can resync.
	if err := a.rm.Recover(ctx); err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	running, err := a.sched.Start(ctx, rgs.StartConfig{Epoch: a.settings.ContainerEpoch(epoch), Sink: a.sink, Mapping: a.rm.QueueMapping, Policy: a.policy, Desired: a.rm})
	if err != nil {
		return fmt.Errorf("activation: %w", err)
	}
	a.rm.Recovered(ctx, running)
	a.log.InfoContext(ctx, "active", "epoch", epoch, "clusterTimestamp", ts, "containers", len(running), "took", time.Since(start))
	return nil
}

// Close stops what Activate started and waits for it: the RM's own work
// (AM launches in flight), then the informers. The loops and the ports,
// started after Activate, have stopped before Close is called.
func (a *activation) Close(ctx context.Context) error {
	err := a.rm.Close(ctx)
	close(a.stop)
	for _, f := range []informers.SharedInformerFactory{a.informers.nodes, a.informers.pods} {
		f.Shutdown()
	}
	return err
}

// runActive activates the replica when the active app starts, then runs
// the active RM's loops: hooks start in the order they are appended, and
// stop in the reverse.
func runActive(run lifecycle.Runner, a *activation) {
	run.Lifecycle.Append(fx.Hook{OnStart: a.Activate, OnStop: a.Close})
	run.Background("token key rolling", tokenroll.Loop(run.Logger.With("loop", "token-keys"), a.tokens, time.Minute))
	run.Background("RGS", a.sched.Run)
	run.Background("application timeouts", a.rm.Run)
}
