package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// FieldManager names the RM in the managedFields of every object it writes.
const FieldManager = "knit-rm"

// Config is what New needs. Dynamic, Core and Namespace are required.
type Config struct {
	// Dynamic reads and writes YarnApplications and the CRD itself, so that
	// no generated clientset is needed.
	Dynamic dynamic.Interface
	// Core reads and writes the cluster ConfigMap and the keys Secret.
	Core kubernetes.Interface
	// Namespace is the RM's namespace; every object but the CRD lives there.
	Namespace string
	// Logger receives retries and one-off events; nil discards them.
	Logger *slog.Logger
	// NewBackOff makes the backoff for one call; each call gets its own,
	// since a BackOff is not safe for concurrent use. It should not give
	// up on its own (a write is bounded by its context, not by a count);
	// nil means DefaultBackOff.
	NewBackOff func() backoff.BackOff
	// Now is the clock, read once: when the cluster timestamp is first
	// fixed. Nil means time.Now.
	Now func() time.Time
	// Fence, if set, is asked before every attempt of every call; an error
	// fails the call at once (wrapping ErrFenced and the fence's error),
	// unretried: the RM that may no longer write is the leader that lost
	// its Lease.
	Fence func() error
	// Timestamps, if set, keeps the cluster timestamp apart from those of
	// the other members of the RM's federation (see TimestampClaims); nil
	// for an RM of no federation.
	Timestamps TimestampClaims
}

// TimestampClaims keeps a federated RM's cluster timestamp apart from the
// other sub-clusters' (federation/membership's Timestamps): application
// ids are the timestamp and a sequence number, so two sub-clusters under
// one timestamp would give the same ids, which the federation's Router
// could not tell apart.
type TimestampClaims interface {
	// Pick claims, and returns, the first millisecond from from on that no
	// other sub-cluster holds: the timestamp of a cluster fixing its own.
	Pick(ctx context.Context, from int64) (int64, error)
	// Hold claims ts, fixed before, again, and reports whether the
	// sub-cluster holds it: false when another sub-cluster does.
	Hold(ctx context.Context, ts int64) (bool, error)
}

// ErrTimestampTaken is wrapped by the error of a federation member's call
// that found its cluster timestamp held by another sub-cluster: it hands
// out no application id under it.
var ErrTimestampTaken = errors.New("store: cluster timestamp held by another sub-cluster of the federation")

// ErrFenced is the error of a call refused because this RM may no longer
// write: its fence said so, or a newer RM epoch has taken over.
var ErrFenced = errors.New("store: fenced")

// Store reads and writes the RM's state in the Kubernetes API. It is safe
// for concurrent use and holds no cache: every call goes to the API server.
type Store struct {
	dyn        dynamic.Interface
	core       kubernetes.Interface
	ns         string
	log        *slog.Logger
	newBackOff func() backoff.BackOff
	now        func() time.Time
	fence      func() error
	timestamps TimestampClaims
	// held is the cluster timestamp Timestamps last held, 0 before: it is
	// held once per Store, before the first id under it.
	held atomic.Int64
	// epoch is the RM epoch NextEpoch took for this Store, 0 before: the
	// cluster's identity is not written once a higher epoch is stored.
	epoch atomic.Int64
}

// New checks cfg and returns a Store. It does no I/O; call Install before
// the first Put.
func New(cfg Config) (*Store, error) {
	var errs []error
	if cfg.Dynamic == nil {
		errs = append(errs, errors.New("no dynamic client"))
	}
	if cfg.Core == nil {
		errs = append(errs, errors.New("no core client"))
	}
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("no namespace"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("store: config: %w", err)
	}
	s := &Store{
		dyn:        cfg.Dynamic,
		core:       cfg.Core,
		ns:         cfg.Namespace,
		log:        cfg.Logger,
		newBackOff: cfg.NewBackOff,
		now:        cfg.Now,
		fence:      cfg.Fence,
		timestamps: cfg.Timestamps,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.newBackOff == nil {
		s.newBackOff = DefaultBackOff
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// DefaultBackOff starts at 100ms and grows to 10s between attempts, and
// never stops by itself: an outage of any length only delays a write.
func DefaultBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(10*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}
