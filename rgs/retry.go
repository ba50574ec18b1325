package rgs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
)

// RGS has one retry policy, the work queues' rate limiters, as a
// ReplicaSet controller has: a sync tries each write once, and a failure
// returns the key to its queue, to be synced again after the key's
// backoff. Nothing sleeps and retries inside a worker, so a worker is
// never held by one key's trouble, and what a retry must do is decided
// anew from the cache each time. An error a retry cannot mend (terminal)
// is logged and its key forgotten: the next change of the key's state
// queues it again.
//
// A write made on a request path (an update the AM was granted, the node
// side of it, a thread dump) has a caller waiting for its outcome and no
// key to requeue: it is tried again in place (retryRequest), by the same
// rule and the same backoff as a queue's key, a bounded number of times.

// fieldManager names RGS's writes in the objects' managed fields.
const fieldManager = "knit-rgs"

// finish ends a worker's handling of key with the sync's err: forgotten
// on success and on a terminal error, else requeued rate-limited. msg and
// args describe the key in the log.
func finish[K comparable](ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[K], key K, err error, msg string, args ...any) {
	switch {
	case err == nil:
		q.Forget(key)
	case terminal(err):
		log.ErrorContext(ctx, msg+": refused for good, not retried", append(args, "err", err)...)
		q.Forget(key)
	default:
		log.WarnContext(ctx, msg, append(args, "err", err, "requeues", q.NumRequeues(key))...)
		q.AddRateLimited(key)
	}
}

// requestTries bounds the tries of a request path's write: with the
// queues' backoff (5 ms, doubling), ten tries span about 2.5 s, enough to
// ride out an API server's brief trouble and well within an RPC client's
// timeout.
const requestTries = 10

// retryRequest runs a request path's write op until it succeeds, fails
// with a terminal error, has been tried requestTries times, or ctx ends,
// waiting between tries as the work queues' rate limiter would have a key
// wait. The error is op's last, wrapped.
func (c *Controller) retryRequest(ctx context.Context, what string, op func(context.Context) error) error {
	backoff := workqueue.DefaultTypedControllerRateLimiter[string]()
	for try := 1; ; try++ {
		err := op(ctx)
		switch {
		case err == nil:
			return nil
		case terminal(err):
			return err
		case try == requestTries:
			return fmt.Errorf("%s: gave up after %d tries: %w", what, try, err)
		}
		wait := backoff.When(what)
		c.log.WarnContext(ctx, "request write failed, retrying", "write", what, "try", try, "retryIn", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// terminal says whether no retry of the writes that failed with err can
// succeed: every error joined in it is permanent.
func terminal(err error) bool {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		some := false
		for _, x := range e.Unwrap() {
			if x == nil {
				continue
			}
			if !terminal(x) {
				return false
			}
			some = true
		}
		return some
	case apierrors.APIStatus:
		return isPermanent(err)
	case interface{ Unwrap() error }:
		return terminal(e.Unwrap())
	}
	return isPermanent(err)
}

// isPermanent: retrying the same write cannot succeed. A namespace's quota
// exceeded is a Forbidden that can: pods of the namespace may end.
func isPermanent(err error) bool {
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
		return false
	}
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) || meta.IsNoMatchError(err)
}
