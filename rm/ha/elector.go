package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease the RM replicas of a namespace elect their leader
// with.
const LeaseName = "knit-rm"

// Lease timings by default. A killed leader is replaced after about
// LeaseDuration plus up to 1.2 RetryPeriods (client-go's jitter on the
// standbys' tries); a leader that cannot renew for RenewDeadline stops
// writing a full second before anyone else may start. The short
// RetryPeriod keeps a failover under 5 s at the cost of four Lease
// writes a second from the leader.
const (
	DefaultLeaseDuration = 4 * time.Second
	DefaultRenewDeadline = 3 * time.Second
	DefaultRetryPeriod   = 250 * time.Millisecond
)

// ErrNotLeader is the error of a write this replica may not make: it does
// not lead, or could not renew its Lease in time.
var ErrNotLeader = errors.New("not the leading ResourceManager")

// ErrLost is what Run returns when this replica lost its leadership.
var ErrLost = errors.New("lost the ResourceManager leader lease")

// Config is what NewElector needs. Client, Namespace and Identity are
// required.
type Config struct {
	// Client reaches the Lease; it must not be fenced itself.
	Client kubernetes.Interface
	// Namespace holds the Lease (the RM's namespace).
	Namespace string
	// Name of the Lease; empty means LeaseName.
	Name string
	// Identity names this replica in the Lease. An elector whose identity
	// holds the Lease takes it back at once. With rm-ids knit-rm names each
	// process (<rm id>/<nonce>), so that a restarted replica is a standby
	// like the others and a standby can still name the active RM id.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are leaderelection's;
	// zero means the defaults above.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives leadership changes; nil discards them.
	Logger *slog.Logger
}

// Elector takes part in the election of the RM leader.
type Elector struct {
	le       *leaderelection.LeaderElector
	identity string
	renew    time.Duration
	log      *slog.Logger

	leading  atomic.Bool
	renewed  atomic.Int64 // Unix ns when the last successful write of our Lease was sent
	elected  chan struct{}
	lost     chan struct{}
	lostOnce sync.Once
	leader   atomic.Pointer[string]
}

// NewElector checks cfg and returns an Elector. It does no I/O.
func NewElector(cfg Config) (*Elector, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("ha: elector: no client")
	case cfg.Namespace == "":
		return nil, errors.New("ha: elector: no namespace")
	case cfg.Identity == "":
		return nil, errors.New("ha: elector: no identity")
	}
	if cfg.Name == "" {
		cfg.Name = LeaseName
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Elector{
		identity: cfg.Identity,
		renew:    cfg.RenewDeadline,
		log:      cfg.Logger,
		elected:  make(chan struct{}),
		lost:     make(chan struct{}),
	}
	none := ""
	e.leader.Store(&none)
	lock := renewTracking{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}, e: e}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// A replica that stops cleanly hands over at once, not after a
		// lease duration; it releases only once it has stopped writing
		// (Run's caller stops everything before cancelling Run).
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.leading.Store(true)
				e.log.Info("leading", "identity", e.identity)
				close(e.elected)
			},
			OnStoppedLeading: func() {
				if e.leading.Swap(false) {
					e.lostOnce.Do(func() { close(e.lost) })
				}
			},
			OnNewLeader: func(identity string) {
				e.leader.Store(&identity)
				e.log.Info("leader observed", "leader", identity, "self", identity == e.identity)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("ha: elector: %w", err)
	}
	e.le = le
	return e, nil
}

// Run takes part in the election until ctx ends (nil) or this replica,
// having led, stops leading (ErrLost). It releases a Lease it holds when
// ctx ends.
func (e *Elector) Run(ctx context.Context) error {
	e.le.Run(ctx)
	select {
	case <-e.lost:
		if ctx.Err() == nil {
			e.log.Error("lost the leader lease", "identity", e.identity)
			return ErrLost
		}
	default:
	}
	return nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.identity }

// Elected is closed once this replica leads.
func (e *Elector) Elected() <-chan struct{} { return e.elected }

// Lost is closed once this replica, having led, no longer does.
func (e *Elector) Lost() <-chan struct{} { return e.lost }

// Leading reports whether this replica leads and may write (see Fence).
func (e *Elector) Leading() bool { return e.Fence() == nil }

// Leader is the identity of the leader this replica last saw, or "".
func (e *Elector) Leader() string { return *e.leader.Load() }

// Fence returns nil while this replica leads and renewed its Lease within
// the renew deadline, else an error wrapping ErrNotLeader. Every write of
// the leader's state checks it first: once it fails it never succeeds
// again, since a replica leads once.
func (e *Elector) Fence() error {
	if !e.leading.Load() {
		return fmt.Errorf("ResourceManager %s: %w", e.identity, ErrNotLeader)
	}
	// The renew loop gives up after RenewDeadline without a renewal; the
	// fence does not wait for it to notice. Others wait LeaseDuration.
	if since := time.Since(time.Unix(0, e.renewed.Load())); since >= e.renew {
		return fmt.Errorf("ResourceManager %s: %w: lease last renewed %s ago", e.identity, ErrNotLeader, since.Round(time.Millisecond))
	}
	return nil
}

// renewTracking notes when each write that holds the Lease for this
// replica was sent: the Lease runs from then, whatever the answer's delay.
// (LeaderElector.Check reads its own time without a lock.)
type renewTracking struct {
	resourcelock.Interface
	e *Elector
}

func (l renewTracking) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.note(sent, ler, err)
	return err
}

func (l renewTracking) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.note(sent, ler, err)
	return err
}

func (l renewTracking) note(sent time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && ler.HolderIdentity == l.e.identity {
		l.e.renewed.Store(sent.UnixNano())
	}
}
