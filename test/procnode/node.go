package procnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// KubeletVersion is what a process node reports as nodeInfo.kubeletVersion.
const KubeletVersion = "v1.34.4-knit"

const (
	fieldManager       = "knit-procnode"
	nodeLeaseNamespace = "kube-node-lease"
	// minGracePeriod is the kubelet's floor for SIGTERM → SIGKILL.
	minGracePeriod = 2 * time.Second
)

// Config describes one process node. Name, Address, Dir and Client are
// required; zero values of the rest take the defaults written on them.
type Config struct {
	Name    string // Node object name, e.g. "node-1"
	Address string // loopback address, e.g. "127.0.1.1": InternalIP, pod hostIP and podIP
	Dir     string // this node's state folder (pods, logs, volumes); survives restarts
	Client  kubernetes.Interface
	// Capacity, also reported as allocatable. Default cpu=8, memory=16Gi,
	// pods=110, ephemeral-storage=100Gi; names given here replace those.
	Capacity corev1.ResourceList
	// Labels are extra node labels. kubernetes.io/hostname, kubernetes.io/os
	// and kubernetes.io/arch are always set.
	Labels map[string]string
	// APIServerHost and APIServerPort, when both set, become
	// KUBERNETES_SERVICE_HOST/PORT (and the rest of the kubernetes Service
	// variables) in every container.
	APIServerHost, APIServerPort string
	LeaseDuration                time.Duration // default 40s; renewed every LeaseDuration/4
	StatusInterval               time.Duration // full node status refresh, default 1m
	Logger                       *slog.Logger  // default slog.Default()

	// RestartBackoffBase is the crash-loop back-off before the second
	// restart of a container (the first is immediate); it doubles up to
	// RestartBackoffMax. Defaults 10s and 5m, the kubelet's; tests use ~100ms.
	RestartBackoffBase, RestartBackoffMax time.Duration
	// BaseEnv is the environment every container starts from, as an image's
	// ENV would be, before the pod's env is applied. Default: PATH and HOME
	// of this process (PATH falls back to the usual system folders).
	BaseEnv []string
	// Workers is how many pods are synced at once. Default 4.
	Workers int
	// StopAllGracePeriod is how long StopAll waits after SIGTERM before
	// SIGKILL. Default 10s.
	StopAllGracePeriod time.Duration
	// KubeletTLS, when set, has the node serve the kubelet API the API
	// server proxies to (container logs, exec, attach, port-forward,
	// healthz) over HTTPS on Address:KubeletPort, so kubectl logs, exec,
	// attach and port-forward work; see kubeletapi.go. Without it the node
	// serves nothing and reports KubeletPort as given.
	KubeletTLS *KubeletTLS
	// KubeletPort is reported as daemonEndpoints.kubeletEndpoint.Port.
	// With KubeletTLS, 0 takes a free port, which is then reported.
	KubeletPort int32
}

// Node is a kubelet stand-in: it registers a Node object, keeps its Lease,
// and runs the containers of the pods bound to it as local processes. It
// is safe for concurrent use; Run may be called once.
type Node struct {
	cfg     Config
	log     *slog.Logger
	rt      *procRuntime
	backoff backoffPolicy
	started atomic.Bool

	// Set by Run before any worker starts.
	queue workqueue.TypedRateLimitingInterface[string]
	pods  corelisters.PodLister

	mu      sync.Mutex
	nodeUID types.UID
	watched map[string]watchedRun    // running runs, by spec path
	killing map[string]bool          // runs being stopped, by spec path
	posted  map[types.UID]postedPair // last status written per pod
	bg      sync.WaitGroup           // kill goroutines
	// deferred holds the keys of pods whose resize waits for room;
	// roomFreed counts the times room may have grown, so a decision
	// that raced with a pod ending is taken again.
	deferred  map[string]bool
	roomFreed uint64

	// resizeMu serializes allocation decisions (see resize.go); it is
	// taken before mu, never while holding it.
	resizeMu sync.Mutex
}

// New checks cfg, fills in defaults and prepares Dir. It starts nothing.
func New(cfg Config) (*Node, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("procnode: Config.Name is required")
	case net.ParseIP(cfg.Address) == nil:
		return nil, fmt.Errorf("procnode: Config.Address %q is not an IP address", cfg.Address)
	case cfg.Dir == "":
		return nil, errors.New("procnode: Config.Dir is required")
	case cfg.Client == nil:
		return nil, errors.New("procnode: Config.Client is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("procnode: %w", err)
	}
	cfg.Dir = dir
	if err := os.MkdirAll(filepath.Join(dir, podsFolder), 0o755); err != nil {
		return nil, fmt.Errorf("procnode: %w", err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	for k, v := range cfg.Capacity {
		capacity[k] = v.DeepCopy()
	}
	cfg.Capacity = capacity
	labels := make(map[string]string, len(cfg.Labels)+5)
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = cfg.Name
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelArchStable] = goruntime.GOARCH
	labels["beta.kubernetes.io/os"] = "linux"
	labels["beta.kubernetes.io/arch"] = goruntime.GOARCH
	cfg.Labels = labels
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40 * time.Second
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RestartBackoffBase <= 0 {
		cfg.RestartBackoffBase = 10 * time.Second
	}
	if cfg.RestartBackoffMax <= 0 {
		cfg.RestartBackoffMax = 5 * time.Minute
	}
	if cfg.BaseEnv == nil {
		path := os.Getenv("PATH")
		if path == "" {
			path = defaultPath
		}
		cfg.BaseEnv = []string{"PATH=" + path}
		if home := os.Getenv("HOME"); home != "" {
			cfg.BaseEnv = append(cfg.BaseEnv, "HOME="+home)
		}
	} else {
		cfg.BaseEnv = append([]string(nil), cfg.BaseEnv...)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.StopAllGracePeriod <= 0 {
		cfg.StopAllGracePeriod = 10 * time.Second
	}
	log := cfg.Logger.With("node", cfg.Name)
	rt, err := newProcRuntime(log)
	if err != nil {
		return nil, fmt.Errorf("procnode: %w", err)
	}
	return &Node{
		cfg:      cfg,
		log:      log,
		rt:       rt,
		backoff:  backoffPolicy{Base: cfg.RestartBackoffBase, Max: cfg.RestartBackoffMax},
		watched:  map[string]watchedRun{},
		killing:  map[string]bool{},
		posted:   map[types.UID]postedPair{},
		deferred: map[string]bool{},
	}, nil
}

// StopAll ends every pod process this node's Dir knows of: SIGTERM to each
// run's main process, StopAllGracePeriod, then SIGKILL to its whole
// process tree. It is meant
// for `knit local down` and test clean-up, after Run has returned (while
// Run serves, it would restart what StopAll stops). The files stay; a Node
// started later on the same Dir restarts the containers by their
// restartPolicy, as a kubelet does after a reboot.
func (n *Node) StopAll(ctx context.Context) error {
	root := filepath.Join(n.cfg.Dir, podsFolder)
	podDirs, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("procnode %s: stop all: %w", n.cfg.Name, err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, pd := range podDirs {
		runs, err := n.runsIn(filepath.Join(root, pd.Name()))
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			continue
		}
		for _, a := range runs {
			wg.Go(func() {
				err := error(nil)
				if a.Kill == nil {
					err = writeJSONAtomic(a.Paths.Kill, killRecord{Reason: killStopAll, At: time.Now()})
				}
				if err == nil {
					err = n.rt.stop(ctx, a, n.cfg.StopAllGracePeriod)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stop %s/%s: %w", a.Spec.Pod, a.Spec.Container, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("procnode %s: stop all: %w", n.cfg.Name, err)
	}
	return nil
}

// runsIn lists the runs of a pod folder whose processes still run.
func (n *Node) runsIn(podRoot string) ([]*attempt, error) {
	stateRoot := filepath.Join(podRoot, "_state")
	containers, err := os.ReadDir(stateRoot)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []*attempt
	for _, c := range containers {
		stateDir := filepath.Join(stateRoot, c.Name())
		nums, err := attemptNumbers(stateDir)
		if err != nil {
			return nil, err
		}
		for _, num := range nums {
			a, err := n.rt.load(attemptPathsIn(stateDir, filepath.Join(podRoot, c.Name()), num))
			if err != nil {
				return nil, err
			}
			running, err := n.rt.settle(a)
			if err != nil {
				return nil, err
			}
			if running {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// register creates the Node (or brings an existing one up to date after a
// restart), posts its Ready status, lifts the not-ready taint it was born
// with and takes its Lease, retrying with back-off until ctx ends.
func (n *Node) register(ctx context.Context) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	return backoff.RetryNotify(func() error {
		err := n.registerOnce(ctx)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return backoff.Permanent(err)
		}
		return err
	}, b, func(err error, d time.Duration) {
		n.log.Warn("node registration failed, retrying", "err", err, "in", d)
	})
}

func (n *Node) registerOnce(ctx context.Context) error {
	nodes := n.cfg.Client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, n.newNode(time.Now()), metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		node, err = n.adoptNode(ctx)
	}
	if err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	n.mu.Lock()
	n.nodeUID = node.UID
	n.mu.Unlock()
	if err := n.postNodeStatus(ctx); err != nil {
		return err
	}
	if err := n.removeNotReadyTaint(ctx); err != nil {
		return err
	}
	return n.renewLease(ctx)
}

// newNode is the Node as first registered: born with the not-ready taint,
// so nothing is scheduled before it has said it is Ready.
func (n *Node) newNode(now time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: n.cfg.Labels},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule,
		}}},
		Status: n.nodeStatus(now, nil),
	}
}

// adoptNode updates an existing Node of this name (a restart): our labels
// are set again, everything others own (taints, annotations) is kept.
func (n *Node) adoptNode(ctx context.Context) (*corev1.Node, error) {
	nodes := n.cfg.Client.CoreV1().Nodes()
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out = cur
		upd := cur.DeepCopy()
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		for k, v := range n.cfg.Labels {
			upd.Labels[k] = v
		}
		if apiequality.Semantic.DeepEqual(cur.Labels, upd.Labels) {
			return nil
		}
		out, err = nodes.Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	return out, err
}

// nodeStatus is the status a process node reports; conditions keep their
// lastTransitionTime while their status stays.
func (n *Node) nodeStatus(now time.Time, old *corev1.NodeStatus) corev1.NodeStatus {
	t := metav1.NewTime(apiTime(now))
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	var conds []corev1.NodeCondition
	if old != nil {
		for _, c := range old.Conditions {
			switch c.Type {
			case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady:
			default:
				conds = append(conds, c) // someone else's, e.g. NetworkUnavailable
			}
		}
	}
	for _, c := range want {
		c.LastHeartbeatTime, c.LastTransitionTime = t, t
		if old != nil {
			for _, o := range old.Conditions {
				if o.Type == c.Type && o.Status == c.Status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
		}
		conds = append(conds, c)
	}
	s := corev1.NodeStatus{
		Capacity:    n.cfg.Capacity.DeepCopy(),
		Allocatable: n.cfg.Capacity.DeepCopy(),
		Conditions:  conds,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.cfg.Address},
			{Type: corev1.NodeHostName, Address: n.cfg.Name},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: n.cfg.KubeletPort}},
		NodeInfo:        nodeInfo(),
	}
	if old != nil {
		// Kept for whoever wrote them.
		s.Images, s.VolumesInUse, s.VolumesAttached, s.Config = old.Images, old.VolumesInUse, old.VolumesAttached, old.Config
	}
	return s
}

func nodeInfo() corev1.NodeSystemInfo {
	info := corev1.NodeSystemInfo{
		KubeletVersion:          KubeletVersion,
		ContainerRuntimeVersion: "knit-procnode://" + strings.TrimPrefix(KubeletVersion, "v"),
		OperatingSystem:         "linux",
		Architecture:            goruntime.GOARCH,
		MachineID:               readTrimmed("/etc/machine-id"),
		BootID:                  readTrimmed("/proc/sys/kernel/random/boot_id"),
		OSImage:                 osImage(),
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		info.KernelVersion = b.String()
	}
	return info
}

func readTrimmed(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func osImage() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return "Linux"
}

// postNodeStatus refreshes the node's status (heartbeat times included).
// A Node deleted behind our back is registered again.
func (n *Node) postNodeStatus(ctx context.Context) error {
	nodes := n.cfg.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		upd := cur.DeepCopy()
		upd.Status = n.nodeStatus(time.Now(), &cur.Status)
		_, err = nodes.UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("post node status: %w", err)
	}
	return nil
}

// removeNotReadyTaint lifts the taint the node was born with. The node
// lifecycle controller may have done it already; that is fine.
func (n *Node) removeNotReadyTaint(ctx context.Context) error {
	nodes := n.cfg.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		for _, t := range cur.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule {
				continue
			}
			keep = append(keep, t)
		}
		if len(keep) == len(cur.Spec.Taints) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Spec.Taints = keep
		_, err = nodes.Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove not-ready taint: %w", err)
	}
	return nil
}

// renewLease creates or renews the node's heartbeat Lease, owned by the
// Node so it goes when the Node goes.
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.cfg.Client.CoordinationV1().Leases(nodeLeaseNamespace)
	n.mu.Lock()
	uid := n.nodeUID
	n.mu.Unlock()
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.cfg.Name, UID: uid}}
	seconds := int32(n.cfg.LeaseDuration / time.Second)
	holder := n.cfg.Name
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now := metav1.NewMicroTime(time.Now())
		cur, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: nodeLeaseNamespace, OwnerReferences: owner},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now},
			}, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		}
		if err != nil {
			return err
		}
		upd := cur.DeepCopy()
		upd.Spec.HolderIdentity, upd.Spec.LeaseDurationSeconds, upd.Spec.RenewTime = &holder, &seconds, &now
		if uid != "" && !ownedBy(upd.OwnerReferences, uid) {
			upd.OwnerReferences = owner // a Lease left from an earlier Node of this name
		}
		_, err = leases.Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	return nil
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// leaseLoop renews the Lease every LeaseDuration/4 until ctx ends; a
// failed renewal is logged and tried again at the next tick.
func (n *Node) leaseLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.LeaseDuration / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("lease renewal failed", "err", err)
			}
		}
	}
}

// statusLoop refreshes the node status every StatusInterval until ctx
// ends, registering the node again if it was deleted.
func (n *Node) statusLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := n.postNodeStatus(ctx)
			if apierrors.IsNotFound(err) {
				err = n.registerOnce(ctx)
			}
			if err != nil && ctx.Err() == nil {
				n.log.Warn("node status update failed", "err", err)
			}
		}
	}
}
