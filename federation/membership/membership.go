package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/knitdev/knit/federation/store"
)

// Store is what a Member reads and writes of the federation store.
type Store interface {
	RegisterSubCluster(ctx context.Context, info store.SubClusterInfo) error
	SubClusterHeartbeat(ctx context.Context, id string, state store.State, capability string) error
	DeregisterSubCluster(ctx context.Context, id string, state store.State) error
	GetApplicationsHomeSubCluster(ctx context.Context, home string) ([]store.ApplicationHome, error)
	DeleteApplicationHomeSubCluster(ctx context.Context, application string) error
}

// CleanupGrace is how old a home must be before the member may forget it:
// a Router records the home before it submits, so a young home whose
// application the RM does not hold yet may be a submission on its way.
const CleanupGrace = 10 * time.Minute

// cleanupEvery is how many heartbeats pass between two cleanups: each
// lists the sub-cluster's homes, far more than a heartbeat writes.
const cleanupEvery = 10

// Config configures a Member.
type Config struct {
	Store Store
	// SubCluster is the sub-cluster as registered: its id, the addresses
	// clients and Routers reach its services at (see ConnectAddress), and
	// its start time. State and LastHeartBeat are set by the Member.
	SubCluster store.SubClusterInfo
	// Timestamps, if set, holds the RM's cluster timestamp, which the
	// registration then carries as its LastStartTime, as YARN's
	// SubClusterInfo carries the RM's cluster timestamp there.
	Timestamps *Timestamps
	// Capability returns the sub-cluster's capability for a heartbeat.
	Capability func(ctx context.Context) (string, error)
	// Holds reports whether the RM still holds an application (by its
	// id's string); nil turns the cleanup of homes off.
	Holds func(ctx context.Context, application string) (bool, error)
	// Now is the clock the cleanup judges homes' age by; nil means
	// time.Now.
	Now func() time.Time
	// Interval is the time between heartbeats; InitialDelay the wait
	// before the first (yarn.federation.state-store.heartbeat-interval-secs
	// and .heartbeat.initial-delay).
	Interval, InitialDelay time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Member keeps one sub-cluster registered: Register, then Run until the
// RM stops, then Deregister.
type Member struct {
	cfg Config
	log *slog.Logger
}

// New returns the member cfg describes; it does no I/O.
func New(cfg Config) (*Member, error) {
	if cfg.Store == nil || cfg.Capability == nil {
		return nil, errors.New("membership: needs a store and a capability")
	}
	if cfg.SubCluster.ID == "" {
		return nil, errors.New("membership: a federated RM needs a sub-cluster id (yarn.resourcemanager.cluster-id)")
	}
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("membership: heartbeat interval %v", cfg.Interval)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Member{cfg: cfg, log: log.With("subCluster", cfg.SubCluster.ID)}, nil
}

// Register registers the sub-cluster as SC_NEW, retrying until it succeeds
// or ctx ends: an RM that cannot join its federation does not start, as
// YARN's FederationStateStoreService fails the RM's start.
func (m *Member) Register(ctx context.Context) error {
	info := m.registration()
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxElapsedTime(0)), ctx)
	err := backoff.RetryNotify(func() error {
		return m.cfg.Store.RegisterSubCluster(ctx, info)
	}, b, func(err error, wait time.Duration) {
		m.log.WarnContext(ctx, "registering the sub-cluster, retrying", "retryIn", wait, "err", err)
	})
	if err != nil {
		return fmt.Errorf("membership: register %s: %w", info.ID, err)
	}
	m.log.InfoContext(ctx, "registered the sub-cluster", "clientRM", info.ClientRMServiceAddress, "amRM", info.AMRMServiceAddress)
	return nil
}

// Run heartbeats after the initial delay and every interval until ctx
// ends, then returns nil. A failed heartbeat is logged and the next one
// tries again: the Router marks the sub-cluster LOST only after its
// expiration, far longer than an interval.
func (m *Member) Run(ctx context.Context) error {
	t := time.NewTimer(m.cfg.InitialDelay)
	defer t.Stop()
	for beat := 0; ; beat++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := m.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "federation heartbeat", "err", err)
		}
		if beat%cleanupEvery == 0 {
			if _, err := m.CleanUp(ctx); err != nil && ctx.Err() == nil {
				m.log.WarnContext(ctx, "cleaning up application homes", "err", err)
			}
		}
		t.Reset(m.cfg.Interval)
	}
}

// CleanUp deletes the homes in this sub-cluster, older than CleanupGrace,
// of the applications the RM no longer holds, and returns them.
func (m *Member) CleanUp(ctx context.Context) ([]string, error) {
	if m.cfg.Holds == nil {
		return nil, nil
	}
	homes, err := m.cfg.Store.GetApplicationsHomeSubCluster(ctx, m.cfg.SubCluster.ID)
	if err != nil {
		return nil, fmt.Errorf("membership: cleanup: %w", err)
	}
	now := m.cfg.Now()
	var gone []string
	var errs []error
	for _, h := range homes {
		if now.Sub(h.CreateTime) < CleanupGrace {
			continue
		}
		held, err := m.cfg.Holds(ctx, h.Application)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if held {
			continue
		}
		if err := m.cfg.Store.DeleteApplicationHomeSubCluster(ctx, h.Application); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, h.Application)
	}
	if len(gone) > 0 {
		m.log.InfoContext(ctx, "forgot the homes of applications the RM no longer holds", "applications", len(gone))
	}
	if err := errors.Join(errs...); err != nil {
		return gone, fmt.Errorf("membership: cleanup: %w", err)
	}
	return gone, nil
}

// Heartbeat sends one heartbeat: SC_RUNNING and the capability, as
// FederationStateStoreHeartbeat does. A sub-cluster the store no longer
// holds (its record deleted by hand) registers again first, rather than
// heartbeating into nothing until the RM restarts.
func (m *Member) Heartbeat(ctx context.Context) error {
	capability, err := m.cfg.Capability(ctx)
	if err != nil {
		return fmt.Errorf("membership: capability: %w", err)
	}
	err = m.cfg.Store.SubClusterHeartbeat(ctx, m.cfg.SubCluster.ID, store.StateRunning, capability)
	if errors.Is(err, store.ErrNotFound) {
		info := m.registration()
		if err = m.cfg.Store.RegisterSubCluster(ctx, info); err == nil {
			m.log.WarnContext(ctx, "the store had lost the sub-cluster; registered it again")
			err = m.cfg.Store.SubClusterHeartbeat(ctx, m.cfg.SubCluster.ID, store.StateRunning, capability)
		}
	}
	if err != nil {
		return fmt.Errorf("membership: %w", err)
	}
	return nil
}

// registration is the record Register writes: SC_NEW, started at the
// cluster timestamp held, if any.
func (m *Member) registration() store.SubClusterInfo {
	info := m.cfg.SubCluster
	info.State = store.StateNew
	if m.cfg.Timestamps != nil {
		if ts := m.cfg.Timestamps.Held(); ts > 0 {
			info.LastStartTime = time.UnixMilli(ts)
		}
	}
	return info
}

// Deregister marks the sub-cluster SC_UNREGISTERED, on a clean stop.
func (m *Member) Deregister(ctx context.Context) error {
	if err := m.cfg.Store.DeregisterSubCluster(ctx, m.cfg.SubCluster.ID, store.StateUnregistered); err != nil {
		return fmt.Errorf("membership: deregister: %w", err)
	}
	m.log.InfoContext(ctx, "deregistered the sub-cluster")
	return nil
}

// ConnectAddress is the address others reach a service bound at addr at:
// addr itself, or, where its host is a wildcard (0.0.0.0, ::, empty), host
// in its place, as YARN's NetUtils.getConnectAddress gives the local host.
func ConnectAddress(addr, host string) (string, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("membership: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = host
	}
	return net.JoinHostPort(h, port), nil
}
