package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

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

// MaxRouterKeys bounds the keys record: a Secret holds 1 MiB in all. The
// record holds the master keys (a few a week) and, written by a Router of
// before the tokens had records of their own, the live tokens, which the
// next write moves to their records.
const MaxRouterKeys = 1000 << 10

// KindRouterToken labels the ConfigMap of one live delegation token: its
// identifier and renew date, no secret (its password is the HMAC of its
// key, which only the keys Secret holds).
const KindRouterToken = "routertoken"

// routerTokenDataKey holds a token record's data.
const routerTokenDataKey = "token"

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

// routerTokenName is the ConfigMap of token seq.
func routerTokenName(seq int32) string {
	return objectName(KindRouterToken, strconv.FormatInt(int64(seq), 10))
}

// GetRouterTokens lists the token ConfigMaps; a version is a
// resourceVersion.
func (k *Kube) GetRouterTokens(ctx context.Context) ([]RouterToken, error) {
	cms, err := k.list(ctx, KindRouterToken)
	if err != nil {
		return nil, err
	}
	out := make([]RouterToken, 0, len(cms))
	for _, cm := range cms {
		seq, err := strconv.ParseInt(cm.Data[keySequenceNumber], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("federation store: ConfigMap %s: %s: %w", cm.Name, keySequenceNumber, err)
		}
		out = append(out, RouterToken{SequenceNumber: int32(seq), Data: cm.BinaryData[routerTokenDataKey], Version: cm.ResourceVersion})
	}
	slices.SortFunc(out, func(a, b RouterToken) int { return cmp.Compare(a.SequenceNumber, b.SequenceNumber) })
	return out, nil
}

// PutRouterToken creates the token's ConfigMap (version empty) or updates
// it under the resourceVersion given; the API server's AlreadyExists,
// Conflict or NotFound is ErrConflict.
func (k *Kube) PutRouterToken(ctx context.Context, t RouterToken) (string, error) {
	if len(t.Data) > MaxRouterToken {
		return "", fmt.Errorf("federation store: router token %d of %d bytes, over %d", t.SequenceNumber, len(t.Data), MaxRouterToken)
	}
	cm := newConfigMap(KindRouterToken, strconv.FormatInt(int64(t.SequenceNumber), 10))
	cm.ResourceVersion = t.Version
	cm.Data = map[string]string{keySequenceNumber: strconv.FormatInt(int64(t.SequenceNumber), 10)}
	cm.BinaryData = map[string][]byte{routerTokenDataKey: t.Data}
	var out *corev1.ConfigMap
	var err error
	if t.Version == "" {
		out, err = k.configMaps().Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		out, err = k.configMaps().Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err := tokenConflict(err); err != nil {
		return "", fmt.Errorf("federation store: router token %d of version %q: %w", t.SequenceNumber, t.Version, err)
	}
	return out.ResourceVersion, nil
}

// DeleteRouterToken deletes the token's ConfigMap on the precondition of
// its resourceVersion.
func (k *Kube) DeleteRouterToken(ctx context.Context, seq int32, version string) error {
	err := k.configMaps().Delete(ctx, routerTokenName(seq), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err := tokenConflict(err); err != nil {
		return fmt.Errorf("federation store: delete router token %d of version %q: %w", seq, version, err)
	}
	return nil
}

// tokenConflict is err with the API server's answers to a write over a
// version no longer stored (AlreadyExists, Conflict, NotFound) as
// ErrConflict.
func tokenConflict(err error) error {
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}
