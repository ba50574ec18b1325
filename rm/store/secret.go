package store

import (
	"bytes"
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeysSecret names the Secret holding the token master keys.
const KeysSecret = "knit-rm-keys"

// KeysDataKey is the key of the blob in KeysSecret's data.
const KeysDataKey = "keys"

// SecretBlob keeps one opaque blob in one key of one Secret. Its encoding is
// its user's (for the token keys, rm/tokens). Safe for concurrent use;
// concurrent Saves leave one of the blobs.
type SecretBlob struct {
	store     *Store
	name, key string
}

// TokenKeys is the blob of token master keys: Secret KeysSecret, key
// KeysDataKey, in the Store's namespace.
func (s *Store) TokenKeys() *SecretBlob {
	return &SecretBlob{store: s, name: KeysSecret, key: KeysDataKey}
}

// Load returns the stored blob, or nil and no error when nothing was saved
// yet. The slice is the caller's.
func (b *SecretBlob) Load(ctx context.Context) ([]byte, error) {
	var blob []byte
	err := b.store.retry(ctx, "load secret "+b.name, func(ctx context.Context) error {
		sec, err := b.store.core.CoreV1().Secrets(b.store.ns).Get(ctx, b.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			blob = nil
			return nil
		}
		if err != nil {
			return err
		}
		blob = sec.Data[b.key]
		return nil
	})
	return blob, err
}

// Save replaces the stored blob, creating the Secret if needed, and returns
// once the API server has stored it. Other keys of the Secret are kept.
func (b *SecretBlob) Save(ctx context.Context, blob []byte) error {
	blob = bytes.Clone(blob)
	if blob == nil {
		blob = []byte{}
	}
	secrets := b.store.core.CoreV1().Secrets(b.store.ns)
	return b.store.retry(ctx, "save secret "+b.name, func(ctx context.Context) error {
		for range maxConflictRounds {
			cur, err := secrets.Get(ctx, b.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = secrets.Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.store.ns},
					Type:       corev1.SecretTypeOpaque,
					Data:       map[string][]byte{b.key: blob},
				}, metav1.CreateOptions{FieldManager: FieldManager})
				if apierrors.IsAlreadyExists(err) {
					continue
				}
				return err
			}
			if err != nil {
				return err
			}
			sec := cur.DeepCopy()
			if sec.Data == nil {
				sec.Data = map[string][]byte{}
			}
			sec.Data[b.key] = blob
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue // changed or deleted since read: read again and overwrite
			}
			return err
		}
		return errContended
	})
}
