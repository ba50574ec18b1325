package store

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindTimestamp labels the ConfigMap of a claimed cluster timestamp.
const KindTimestamp = "timestamp"

// keyClusterTimestamp and keySubCluster are a claim's data.
const (
	keyClusterTimestamp = "clusterTimestamp"
	keySubCluster       = "subClusterId"
)

// ClaimClusterTimestamp creates the ConfigMap named after ts: the API
// server creates one object of a name once, so of two claims of one ts
// the first created holds, and the other reads its holder.
func (k *Kube) ClaimClusterTimestamp(ctx context.Context, ts int64, id string) (string, error) {
	if err := validateClaim(ts, id); err != nil {
		return "", err
	}
	key := strconv.FormatInt(ts, 10)
	cm := newConfigMap(KindTimestamp, key)
	cm.Data = map[string]string{keyClusterTimestamp: key, keySubCluster: id}
	_, err := k.configMaps().Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	if err == nil {
		return id, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("federation store: claim cluster timestamp %d: %w", ts, err)
	}
	// Another claim, or a retried one of ours, was first.
	got, err := k.configMaps().Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("federation store: cluster timestamp %d: %w", ts, err)
	}
	holder := got.Data[keySubCluster]
	if holder == "" {
		return "", fmt.Errorf("federation store: ConfigMap %s: no %s", got.Name, keySubCluster)
	}
	return holder, nil
}
