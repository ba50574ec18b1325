package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// LabelKind labels every ConfigMap of the store with what it holds: one of
// KindSubCluster, KindApplication, KindReservation, KindPolicy.
const LabelKind = "knit.io/federation"

// LabelHome labels an application's ConfigMap with its home, so that a
// sub-cluster lists its own (labelValue of the sub-cluster id).
const LabelHome = "knit.io/federation-home"

// The kinds of object the store keeps.
const (
	KindSubCluster  = "subcluster"
	KindApplication = "application"
	KindReservation = "reservation"
	KindPolicy      = "policy"
)

// fieldManager names the store's writes.
const fieldManager = "knit-federation"

// MaxCapability bounds a heartbeat's capability: YARN's is the cluster
// metrics JSON, a few hundred bytes; far more is a bug and would crowd the
// ConfigMap (1 MiB in all).
const MaxCapability = 64 << 10

// The keys of the ConfigMaps' data.
const (
	keyID            = "id"
	keyAMRM          = "amrmServiceAddress"
	keyClientRM      = "clientRMServiceAddress"
	keyRMAdmin       = "rmAdminServiceAddress"
	keyRMWeb         = "rmWebServiceAddress"
	keyLastHeartBeat = "lastHeartBeat"
	keyState         = "state"
	keyLastStartTime = "lastStartTime"
	keyCapability    = "capability"
	keyApplication   = "applicationId"
	keyHome          = "homeSubCluster"
	keyReservation   = "reservationId"
	keyCreateTime    = "createTime"
	keyQueue         = "queue"
	keyType          = "type"
	keyParams        = "params"
	// keySequenceNumber is a router token's.
	keySequenceNumber = "sequenceNumber"
)

// KubeConfig configures a Kube store.
type KubeConfig struct {
	// Client reaches the API server of the cluster hosting the federation.
	Client kubernetes.Interface
	// Namespace holds the store's ConfigMaps; it must exist.
	Namespace string
	// Now stamps heartbeats; nil means time.Now.
	Now func() time.Time
}

// Kube is the store in ConfigMaps (see the package doc). Safe for
// concurrent use, by any number of processes.
type Kube struct {
	client kubernetes.Interface
	ns     string
	now    func() time.Time
}

var _ StateStore = (*Kube)(nil)

// NewKube returns the store cfg describes; it does no I/O.
func NewKube(cfg KubeConfig) (*Kube, error) {
	if cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("federation store: needs a client and a namespace")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Kube{client: cfg.Client, ns: cfg.Namespace, now: now}, nil
}

// labelValue is id as a label value: itself where it is one, else a hash.
func labelValue(id string) string {
	if len(id) <= 63 && validation.IsValidLabelValue(id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h-" + hex.EncodeToString(sum[:16])
}

// objectName is the ConfigMap of kind holding key: readable where key is,
// and unique through a hash of key, since sub-cluster ids and queue names
// may hold what an object name may not.
func objectName(kind, key string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(key))
	return "federation-" + kind + "-" + strings.Trim(b.String(), "-") + "-" + hex.EncodeToString(sum[:5])
}

func (k *Kube) configMaps() configMaps { return retrying{api: k.client.CoreV1().ConfigMaps(k.ns)} }

func newConfigMap(kind, key string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objectName(kind, key), Labels: map[string]string{LabelKind: kind}}}
}

// notFound turns the API's NotFound into ErrNotFound.
func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// modify reads the ConfigMap of kind and key, lets change edit its data,
// and writes it back under its resourceVersion, again on a conflict.
func (k *Kube) modify(ctx context.Context, kind, key string, change func(data map[string]string) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := k.configMaps().Get(ctx, objectName(kind, key), metav1.GetOptions{})
		if err != nil {
			return notFound(err)
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if err := change(cm.Data); err != nil {
			return err
		}
		_, err = k.configMaps().Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
		return notFound(err)
	})
}

func (k *Kube) RegisterSubCluster(ctx context.Context, info SubClusterInfo) error {
	if err := validateInfo(info); err != nil {
		return fmt.Errorf("federation store: register sub-cluster: %w", err)
	}
	if len(info.Capability) > MaxCapability {
		return fmt.Errorf("federation store: register sub-cluster %s: capability of %d bytes, over %d", info.ID, len(info.Capability), MaxCapability)
	}
	info.LastHeartBeat = k.now()
	cm := newConfigMap(KindSubCluster, info.ID)
	cm.Data = subClusterData(info)
	_, err := k.configMaps().Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		// A registration replaces whatever the sub-cluster was.
		err = k.modify(ctx, KindSubCluster, info.ID, func(data map[string]string) error {
			clear(data)
			for key, v := range subClusterData(info) {
				data[key] = v
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("federation store: register sub-cluster %s: %w", info.ID, err)
	}
	return nil
}

func (k *Kube) SubClusterHeartbeat(ctx context.Context, id string, state State, capability string) error {
	if err := validateState(state); err != nil {
		return fmt.Errorf("federation store: heartbeat of %s: %w", id, err)
	}
	if len(capability) > MaxCapability {
		return fmt.Errorf("federation store: heartbeat of %s: capability of %d bytes, over %d", id, len(capability), MaxCapability)
	}
	err := k.modify(ctx, KindSubCluster, id, func(data map[string]string) error {
		data[keyState] = state.String()
		data[keyCapability] = capability
		data[keyLastHeartBeat] = millis(k.now())
		return nil
	})
	if err != nil {
		return fmt.Errorf("federation store: heartbeat of sub-cluster %s: %w", id, err)
	}
	return nil
}

func (k *Kube) DeregisterSubCluster(ctx context.Context, id string, state State) error {
	if err := validateState(state); err != nil {
		return fmt.Errorf("federation store: deregister %s: %w", id, err)
	}
	err := k.modify(ctx, KindSubCluster, id, func(data map[string]string) error {
		data[keyState] = state.String()
		return nil
	})
	if err != nil {
		return fmt.Errorf("federation store: deregister sub-cluster %s: %w", id, err)
	}
	return nil
}

func (k *Kube) GetSubCluster(ctx context.Context, id string) (SubClusterInfo, error) {
	cm, err := k.configMaps().Get(ctx, objectName(KindSubCluster, id), metav1.GetOptions{})
	if err != nil {
		return SubClusterInfo{}, fmt.Errorf("federation store: sub-cluster %s: %w", id, notFound(err))
	}
	info, err := SubClusterFromData(cm.Data)
	if err != nil {
		return SubClusterInfo{}, fmt.Errorf("federation store: ConfigMap %s: %w", cm.Name, err)
	}
	return info, nil
}

func (k *Kube) GetSubClusters(ctx context.Context, filterInactive bool) ([]SubClusterInfo, error) {
	cms, err := k.list(ctx, KindSubCluster)
	if err != nil {
		return nil, err
	}
	var out []SubClusterInfo
	for _, cm := range cms {
		info, err := SubClusterFromData(cm.Data)
		if err != nil {
			return nil, fmt.Errorf("federation store: ConfigMap %s: %w", cm.Name, err)
		}
		if !filterInactive || info.State.Active() {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b SubClusterInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (k *Kube) list(ctx context.Context, kind string) ([]corev1.ConfigMap, error) {
	l, err := k.configMaps().List(ctx, metav1.ListOptions{LabelSelector: LabelKind + "=" + kind})
	if err != nil {
		return nil, fmt.Errorf("federation store: list %s: %w", kind, err)
	}
	return l.Items, nil
}

func (k *Kube) AddApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) (string, error) {
	return k.addHome(ctx, homeOf{KindApplication, keyApplication, h.Application}, h.Home)
}

func (k *Kube) UpdateApplicationHomeSubCluster(ctx context.Context, h ApplicationHome) error {
	return k.updateHome(ctx, homeOf{KindApplication, keyApplication, h.Application}, h.Home)
}

func (k *Kube) GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error) {
	return k.getHome(ctx, homeOf{KindApplication, keyApplication, application})
}

// homeOf names the record of an application's or a reservation's home:
// its kind, the data key of its id, and the id.
type homeOf struct{ kind, idKey, id string }

// addHome records home unless the record has one, and returns the home
// stored: another writer's, when it was first.
func (k *Kube) addHome(ctx context.Context, of homeOf, home string) (string, error) {
	if of.id == "" || home == "" {
		return "", fmt.Errorf("federation store: add %s home: missing %s or home", of.kind, of.kind)
	}
	cm := newConfigMap(of.kind, of.id)
	cm.Labels[LabelHome] = labelValue(home)
	cm.Data = map[string]string{of.idKey: of.id, keyHome: home, keyCreateTime: millis(k.now())}
	_, err := k.configMaps().Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	if err == nil {
		return home, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("federation store: add home of %s: %w", of.id, err)
	}
	return k.getHome(ctx, of)
}

func (k *Kube) updateHome(ctx context.Context, of homeOf, home string) error {
	if of.id == "" || home == "" {
		return fmt.Errorf("federation store: update %s home: missing %s or home", of.kind, of.kind)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := k.configMaps().Get(ctx, objectName(of.kind, of.id), metav1.GetOptions{})
		if err != nil {
			return notFound(err)
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Data[of.idKey], cm.Data[keyHome] = of.id, home
		cm.Labels[LabelHome] = labelValue(home)
		_, err = k.configMaps().Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
		return notFound(err)
	})
	if err != nil {
		return fmt.Errorf("federation store: update home of %s: %w", of.id, err)
	}
	return nil
}

func (k *Kube) getHome(ctx context.Context, of homeOf) (string, error) {
	cm, err := k.configMaps().Get(ctx, objectName(of.kind, of.id), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("federation store: %s %s: %w", of.kind, of.id, notFound(err))
	}
	home := cm.Data[keyHome]
	if home == "" {
		return "", fmt.Errorf("federation store: ConfigMap %s: no %s", cm.Name, keyHome)
	}
	return home, nil
}

func (k *Kube) deleteHome(ctx context.Context, of homeOf) error {
	err := k.configMaps().Delete(ctx, objectName(of.kind, of.id), metav1.DeleteOptions{})
	if err != nil {
		return fmt.Errorf("federation store: delete home of %s: %w", of.id, notFound(err))
	}
	return nil
}

func (k *Kube) GetApplicationsHomeSubCluster(ctx context.Context, home string) ([]ApplicationHome, error) {
	selector := LabelKind + "=" + KindApplication
	if home != "" {
		selector += "," + LabelHome + "=" + labelValue(home)
	}
	l, err := k.configMaps().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("federation store: list application homes: %w", err)
	}
	out := make([]ApplicationHome, 0, len(l.Items))
	for _, cm := range l.Items {
		h := ApplicationHome{Application: cm.Data[keyApplication], Home: cm.Data[keyHome]}
		// The label is a hash where the id cannot be a label value.
		if home != "" && h.Home != home {
			continue
		}
		if ms, err := strconv.ParseInt(cm.Data[keyCreateTime], 10, 64); err == nil {
			h.CreateTime = time.UnixMilli(ms)
		} else {
			h.CreateTime = cm.CreationTimestamp.Time
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b ApplicationHome) int { return cmp.Compare(a.Application, b.Application) })
	return out, nil
}

func (k *Kube) DeleteApplicationHomeSubCluster(ctx context.Context, application string) error {
	return k.deleteHome(ctx, homeOf{KindApplication, keyApplication, application})
}

func (k *Kube) AddReservationHomeSubCluster(ctx context.Context, h ReservationHome) (string, error) {
	return k.addHome(ctx, homeOf{KindReservation, keyReservation, h.Reservation}, h.Home)
}

func (k *Kube) UpdateReservationHomeSubCluster(ctx context.Context, h ReservationHome) error {
	return k.updateHome(ctx, homeOf{KindReservation, keyReservation, h.Reservation}, h.Home)
}

func (k *Kube) GetReservationHomeSubCluster(ctx context.Context, reservation string) (string, error) {
	return k.getHome(ctx, homeOf{KindReservation, keyReservation, reservation})
}

func (k *Kube) DeleteReservationHomeSubCluster(ctx context.Context, reservation string) error {
	return k.deleteHome(ctx, homeOf{KindReservation, keyReservation, reservation})
}

func (k *Kube) GetPolicyConfiguration(ctx context.Context, queue string) (PolicyConfiguration, error) {
	cm, err := k.configMaps().Get(ctx, objectName(KindPolicy, queue), metav1.GetOptions{})
	if err != nil {
		return PolicyConfiguration{}, fmt.Errorf("federation store: policy of queue %s: %w", queue, notFound(err))
	}
	return policyFromConfigMap(cm), nil
}

func (k *Kube) SetPolicyConfiguration(ctx context.Context, p PolicyConfiguration) error {
	if p.Queue == "" || p.Type == "" {
		return errors.New("federation store: set policy: missing queue or type")
	}
	cm := newConfigMap(KindPolicy, p.Queue)
	cm.Data = map[string]string{keyQueue: p.Queue, keyType: p.Type}
	cm.BinaryData = map[string][]byte{keyParams: p.Params}
	_, err := k.configMaps().Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := k.configMaps().Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = cur.DeepCopy()
			cur.Data, cur.BinaryData = cm.Data, cm.BinaryData
			_, err = k.configMaps().Update(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("federation store: set policy of queue %s: %w", p.Queue, err)
	}
	return nil
}

func (k *Kube) GetPoliciesConfigurations(ctx context.Context) ([]PolicyConfiguration, error) {
	cms, err := k.list(ctx, KindPolicy)
	if err != nil {
		return nil, err
	}
	out := make([]PolicyConfiguration, 0, len(cms))
	for i := range cms {
		out = append(out, policyFromConfigMap(&cms[i]))
	}
	slices.SortFunc(out, func(a, b PolicyConfiguration) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

func (k *Kube) DeletePoliciesConfigurations(ctx context.Context, queues []string) error {
	for _, q := range queues {
		err := k.configMaps().Delete(ctx, objectName(KindPolicy, q), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("federation store: delete policy of queue %s: %w", q, err)
		}
	}
	return nil
}

func policyFromConfigMap(cm *corev1.ConfigMap) PolicyConfiguration {
	return PolicyConfiguration{Queue: cm.Data[keyQueue], Type: cm.Data[keyType], Params: slices.Clone(cm.BinaryData[keyParams])}
}

// millis is t as YARN's records hold times: milliseconds since the epoch.
func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func subClusterData(info SubClusterInfo) map[string]string {
	return map[string]string{
		keyID:            info.ID,
		keyAMRM:          info.AMRMServiceAddress,
		keyClientRM:      info.ClientRMServiceAddress,
		keyRMAdmin:       info.RMAdminServiceAddress,
		keyRMWeb:         info.RMWebServiceAddress,
		keyLastHeartBeat: millis(info.LastHeartBeat),
		keyState:         info.State.String(),
		keyLastStartTime: millis(info.LastStartTime),
		keyCapability:    info.Capability,
	}
}

// SubClusterFromData reads a sub-cluster's ConfigMap data, as written by
// the store or by hand, checking what the Router relies on: an id, a
// known state, times in milliseconds, a capability within MaxCapability.
func SubClusterFromData(data map[string]string) (SubClusterInfo, error) {
	info := SubClusterInfo{
		ID:                     data[keyID],
		AMRMServiceAddress:     data[keyAMRM],
		ClientRMServiceAddress: data[keyClientRM],
		RMAdminServiceAddress:  data[keyRMAdmin],
		RMWebServiceAddress:    data[keyRMWeb],
		Capability:             data[keyCapability],
	}
	if info.ID == "" {
		return SubClusterInfo{}, fmt.Errorf("no %s", keyID)
	}
	if len(info.Capability) > MaxCapability {
		return SubClusterInfo{}, fmt.Errorf("capability of %d bytes, over %d", len(info.Capability), MaxCapability)
	}
	state, err := ParseState(data[keyState])
	if err != nil {
		return SubClusterInfo{}, err
	}
	info.State = state
	for _, t := range []struct {
		key string
		dst *time.Time
	}{{keyLastHeartBeat, &info.LastHeartBeat}, {keyLastStartTime, &info.LastStartTime}} {
		ms, err := strconv.ParseInt(data[t.key], 10, 64)
		if err != nil {
			return SubClusterInfo{}, fmt.Errorf("%s: %w", t.key, err)
		}
		*t.dst = time.UnixMilli(ms)
	}
	return info, nil
}
