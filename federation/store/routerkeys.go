package store

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RouterKeysSecret is the Secret that holds the Routers' delegation token
// state, in its RouterKeysDataKey: master keys are secrets, so they are
// kept where RBAC and encryption at rest treat them as such, not in a
// ConfigMap.
const (
	RouterKeysSecret  = "federation-router-keys"
	RouterKeysDataKey = "keys"
)

// KindRouterKeys labels the Secret of the Routers' delegation token state.
const KindRouterKeys = "routerkeys"

// MaxRouterKeys bounds the state: a Secret holds 1 MiB in all. Each live
// delegation token takes some 300 bytes of it, so this is a few thousand
// tokens live at once; a write past it fails the issue, and the Router
// answers the caller with the error.
const MaxRouterKeys = 1000 << 10

// GetRouterKeys reads the Secret; its version is its resourceVersion.
func (k *Kube) GetRouterKeys(ctx context.Context) ([]byte, string, error) {
	var s *corev1.Secret
	err := retryTransient(ctx, func() (err error) {
		s, err = k.client.CoreV1().Secrets(k.ns).Get(ctx, RouterKeysSecret, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("federation store: router keys: %w", err)
	}
	return s.Data[RouterKeysDataKey], s.ResourceVersion, nil
}

// PutRouterKeys creates the Secret (version empty) or updates it under
// the resourceVersion given; the API server's AlreadyExists or Conflict is
// ErrConflict.
func (k *Kube) PutRouterKeys(ctx context.Context, data []byte, version string) (string, error) {
	if len(data) > MaxRouterKeys {
		return "", fmt.Errorf("federation store: router keys of %d bytes, over %d", len(data), MaxRouterKeys)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RouterKeysSecret, Labels: map[string]string{LabelKind: KindRouterKeys}, ResourceVersion: version},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{RouterKeysDataKey: data},
	}
	api := k.client.CoreV1().Secrets(k.ns)
	var out *corev1.Secret
	err := retryTransient(ctx, func() (err error) {
		if version == "" {
			out, err = api.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
		} else {
			out, err = api.Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		return err
	})
	switch {
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), version != "" && apierrors.IsNotFound(err):
		return "", fmt.Errorf("federation store: router keys of version %q: %w: %w", version, ErrConflict, err)
	case err != nil:
		return "", fmt.Errorf("federation store: router keys: %w", err)
	}
	return out.ResourceVersion, nil
}
