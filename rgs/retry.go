package rgs

import (
	"context"
	"log/slog"
	"strings"

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
