package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Retries of one API call that failed for a passing reason: 100 ms,
// doubling, 6 tries in all (about 3 s), so that an API server blip delays
// a heartbeat or a submission rather than failing it, and an outage still
// answers the Router's caller in seconds.
const (
	retryFirst = 100 * time.Millisecond
	retryTries = 6
)

// configMaps is what the store calls of the ConfigMaps API, each call
// retried on a transient failure (retrying). A retried write may find its
// first attempt's effect (AlreadyExists, a Conflict, NotFound): every
// caller resolves those as it resolves another writer's.
type configMaps interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
}

type retrying struct {
	api corev1client.ConfigMapInterface
}

var _ configMaps = retrying{}

func (r retrying) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (out *corev1.ConfigMap, err error) {
	err = retryTransient(ctx, func() error { out, err = r.api.Create(ctx, cm, opts); return err })
	return out, err
}

func (r retrying) Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (out *corev1.ConfigMap, err error) {
	err = retryTransient(ctx, func() error { out, err = r.api.Update(ctx, cm, opts); return err })
	return out, err
}

func (r retrying) Get(ctx context.Context, name string, opts metav1.GetOptions) (out *corev1.ConfigMap, err error) {
	err = retryTransient(ctx, func() error { out, err = r.api.Get(ctx, name, opts); return err })
	return out, err
}

func (r retrying) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return retryTransient(ctx, func() error { return r.api.Delete(ctx, name, opts) })
}

func (r retrying) List(ctx context.Context, opts metav1.ListOptions) (out *corev1.ConfigMapList, err error) {
	err = retryTransient(ctx, func() error { out, err = r.api.List(ctx, opts); return err })
	return out, err
}

// retryTransient runs call until it succeeds, fails for good, the tries
// run out or ctx ends; it returns call's last error.
func retryTransient(ctx context.Context, call func() error) error {
	wait := retryFirst
	for try := 1; ; try++ {
		err := call()
		if err == nil || try == retryTries || !transient(err) {
			return err
		}
		t := time.NewTimer(wait + rand.N(wait/5))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// transient tells a failure worth another try (the API server or etcd
// unreachable, overloaded, timing out, or failing inside) from an answer
// the same request would get again (invalid, forbidden, not found, a
// conflict: the caller's to resolve).
func transient(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsForbidden(err),
		apierrors.IsUnauthorized(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return false
	}
	var ne net.Error
	return utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err) ||
		(errors.As(err, &ne) && ne.Timeout())
}
