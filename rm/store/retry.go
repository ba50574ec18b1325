package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// attemptTimeout bounds one request. client-go sets no timeout by default,
// and a connection left half-open by a partition would otherwise hold a
// write for as long as the kernel keeps the socket; a new attempt on a new
// connection gets through as soon as the server is back.
const attemptTimeout = 30 * time.Second

// errTryAgain marks an error of the store's own making that is worth
// another attempt after a pause; classify retries anything wrapping it.
var errTryAgain = errors.New("try again")

// errContended is returned by a write that found its object changed under it
// on every round.
var errContended = fmt.Errorf("object changed on every attempt: %w", errTryAgain)

// errNotYet is returned by a wait while its condition does not hold.
var errNotYet = fmt.Errorf("condition not met yet: %w", errTryAgain)

// retry runs op until it succeeds, fails with an error classify calls
// permanent, the backoff stops, or ctx ends. Each attempt gets its own
// deadline of attemptTimeout. The error names the operation (what) and
// wraps the last error op returned.
func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error) error {
	b := s.newBackOff()
	b.Reset()
	for attempt := 1; ; attempt++ {
		if s.fence != nil {
			if err := s.fence(); err != nil {
				return fmt.Errorf("store: %s: %w: %w", what, ErrFenced, err)
			}
		}
		err := s.runAttempt(ctx, op)
		if err == nil {
			if attempt > 1 {
				s.log.Info("store call succeeded after retries", "op", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("store: %s: %w (last error: %w)", what, ctx.Err(), err)
		}
		transient, after := classify(err)
		if !transient {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return fmt.Errorf("store: %s: gave up after %d attempts: %w", what, attempt, err)
		}
		// A server that says when to come back knows better than our
		// backoff; never come back sooner than it asked.
		wait = max(wait, after)
		level := slog.LevelWarn
		if errors.Is(err, errNotYet) {
			level = slog.LevelDebug // waiting is not failing
		}
		s.log.Log(ctx, level, "store call failed, retrying", "op", what, "attempt", attempt, "retryIn", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("store: %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// fencePoll is how often an attempt in flight asks the fence. A deposed
// leader's request held by a half-open connection (a read, which the
// fenced transport lets through) then ends at once rather than after
// attemptTimeout: the RPC it serves returns, the RM stops, and its
// successor may take the addresses they share.
const fencePoll = 100 * time.Millisecond

// runAttempt runs op with a deadline of attemptTimeout, cancelled early,
// with an error wrapping ErrFenced, if the fence fails meanwhile.
func (s *Store) runAttempt(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	if s.fence == nil {
		return op(ctx)
	}
	ctx, fenced := context.WithCancelCause(ctx)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		tick := time.NewTicker(fencePoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.fence(); err != nil {
					fenced(fmt.Errorf("%w: %w", ErrFenced, err))
					return
				}
			}
		}
	}()
	err := op(ctx)
	fenced(nil)
	watch.Wait()
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrFenced) {
		return cause
	}
	return err
}

// classify tells a transient error, worth another attempt, from a permanent
// one, and gives the least wait the server asked for. The caller checks its
// own context first, so a deadline seen here is one attempt's timeout.
//
// Transient: the API server or etcd is unreachable, overloaded, timing out,
// changing leader, or answered 5xx. Permanent: every other answer of the API
// server (invalid, forbidden, unauthorized, not found, conflict…: trying the
// same request again gives the same answer; conflicts are resolved by the
// operation that knows how) and every error that did not come from the
// transport, such as a cancelled context.
func classify(err error) (transient bool, after time.Duration) {
	switch {
	case err == nil:
		return false, 0
	case errors.Is(err, errTryAgain):
		return true, 0
	case errors.Is(err, ErrFenced):
		return false, 0
	case errors.Is(err, context.Canceled):
		return false, 0
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if secs, ok := apierrors.SuggestsClientDelay(err); ok && secs > 0 {
			after = time.Duration(secs) * time.Second
		}
		switch {
		case apierrors.IsTooManyRequests(err),
			apierrors.IsServerTimeout(err),
			status.Status().Code >= 500:
			return true, after
		}
		return false, 0
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		utilnet.IsConnectionRefused(err),
		utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err),
		utilnet.IsHTTP2ConnectionLost(err),
		utilnet.IsTimeout(err),
		isEtcdTransient(err):
		return true, 0
	}
	// Anything else the HTTP client or the dialer reports (DNS, TLS
	// handshake cut short, no route) means the request may never have
	// reached the server.
	var uerr *url.Error
	var operr *net.OpError
	if errors.As(err, &uerr) || errors.As(err, &operr) {
		return true, 0
	}
	return false, 0
}

// isEtcdTransient recognises etcd's messages for a cluster that is electing
// a leader or overloaded. The API server usually wraps them in a 500, which
// is transient anyway; a proxy or an older server may pass the bare text.
func isEtcdTransient(err error) bool {
	msg := err.Error()
	for _, m := range []string{
		"etcdserver: leader changed",
		"etcdserver: no leader",
		"etcdserver: request timed out",
		"etcdserver: too many requests",
	} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
