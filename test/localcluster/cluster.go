// Package localcluster is the single-machine Kubernetes cluster behind
// `knit local` and Knit's integration tests: the control plane of package
// controlplane and N process nodes of package procnode, each on its own
// loopback address. Start runs one in this process; Up, Status and Down manage
// one that runs in the background and outlives the command that started it.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/test/controlplane"
	"github.com/knitdev/knit/test/procnode"
	"github.com/knitdev/knit/test/supervise"
)

// Options describe a local cluster.
type Options struct {
	// Dir holds everything: kubeconfig at its top, logs/, controlplane/ and
	// nodes/. Empty means a temporary folder removed on Stop.
	Dir string
	// Nodes is the number of process nodes; zero means one.
	Nodes int
	// BinDir holds the Kubernetes binaries; empty means controlplane.DefaultBinDir.
	BinDir string
	// Keep leaves Dir in place after Stop, for a warm start next time.
	Keep bool
	// Logger receives the cluster's and the nodes' events.
	Logger *slog.Logger
	// RMCommand, when set, is the knit-rm program (and leading arguments)
	// to start once the nodes are ready; Start adds the kubeconfig,
	// namespace and configuration flags and writes hadoop-conf/.
	RMCommand []string
	// ConfDir is the user's Hadoop configuration folder (`knit local up
	// --conf-dir`) for knit-rm, the knit-nodes and clients; see userconf.go.
	ConfDir string
	// RMRestarts is knit-rm's restart policy; the zero value is the
	// kubelet's. Benchmarks that kill RMs over and over shorten it.
	RMRestarts supervise.Backoff
	// RMs is how many knit-rm replicas RMCommand runs; zero means one.
	// Two or more run with RM HA (rm1, rm2, …: one active, elected by the
	// Lease, the others standby), and hadoop-conf/ says so to clients.
	RMs int
	// SubClusters, when 2 or more, runs a local federation (federation.go)
	// of that many knit-rm sub-clusters in place of one knit-rm, each with
	// its pool of the nodes (Nodes is raised to SubClusters if below), with
	// knit-router and knit-gpg from beside RMCommand; RMs must then be at
	// most one.
	SubClusters int
	// NodeCapacity, when set, is each node's capacity (and allocatable)
	// in place of procnode's defaults, name by name: a test that runs
	// more containers at once than 8 CPUs a node hold gives more.
	NodeCapacity corev1.ResourceList
}

// Node is one process node of a running cluster.
type Node struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// Cluster is a running local cluster.
type Cluster struct {
	ControlPlane *controlplane.ControlPlane
	Nodes        []Node
	Client       kubernetes.Interface
	// RM holds knit-rm's addresses when Options.RMCommand started one: with
	// several, rm1's.
	RM *RMAddresses
	// RMs holds every replica's addresses, rm1 first.
	RMs []RMAddresses
	// Federation is what Options.SubClusters started, if anything; RM and
	// RMs are then empty.
	Federation *Federation

	log     *slog.Logger
	confDir string
	nodes   []*procnode.Node
	// mu guards rm and nodeServices, which the supervisors' OnChange reads;
	// statusMu orders the writes of the components file.
	mu       sync.Mutex
	statusMu sync.Mutex
	// rms are the knit-rm replicas, rm1 first; rmCount is how many a
	// start runs.
	rms        []*process
	rmCount    int
	rmRestarts supervise.Backoff
	// nodeServices are the knit-node processes, one per node; ports are
	// theirs and RKS's, picked with the first knit-rm.
	nodeServices []*process
	// federation are knit-router and knit-gpg, when a federation runs.
	federation []*process
	ports      nodePorts
	cancel     context.CancelFunc
	running    sync.WaitGroup
}

// NodeAddress is the loopback address of the i-th node (from 0): 127.0.1.1,
// 127.0.1.2, … Linux routes all of 127/8 to the loopback device, so each
// node can bind its own copy of the NodeManager's ports.
func NodeAddress(i int) string {
	return net.IPv4(127, 0, 1+byte((i+1)/256), byte((i+1)%256)).String()
}

// NodeName is the Kubernetes name of the i-th node (from 0).
func NodeName(i int) string { return "node-" + strconv.Itoa(i+1) }

// Start brings up the control plane and the nodes and returns when every
// node is Ready and schedulable. The nodes run in this process; their pods'
// processes run under shims (see procnode.RunShimIfRequested).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.SubClusters >= 2 && opts.RMs > 1 {
		return nil, errors.New("localcluster: a local federation runs one knit-rm per sub-cluster, not RM HA")
	}
	if opts.SubClusters >= 2 && opts.Nodes < opts.SubClusters {
		// Each sub-cluster's pool holds a node at least.
		opts.Nodes = opts.SubClusters
	}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "knit-local-")
		if err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
		opts.Dir = dir
	}
	// The cluster exists only once the control plane is up; until then a
	// component's start or end has nobody to tell.
	var started atomic.Pointer[Cluster]
	onChange := func() {
		if c := started.Load(); c != nil {
			c.componentsChanged()
		}
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: opts.Dir, BinDir: opts.BinDir, Keep: opts.Keep, Logger: log, OnChange: onChange})
	if err != nil {
		return nil, err
	}
	client, err := cp.Client()
	if err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Cluster{ControlPlane: cp, Client: client, log: log, confDir: opts.ConfDir, cancel: cancel, rmCount: max(opts.RMs, 1), rmRestarts: opts.RMRestarts}
	started.Store(c)
	c.componentsChanged()
	host, port, err := net.SplitHostPort(cp.Server[len("https://"):])
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("localcluster: server address: %w", err), cp.Stop())
	}
	// Each node serves the kubelet API, as the API server's kubelet
	// client expects it, so kubectl logs, exec, attach and port-forward
	// reach its pods.
	kubeletCAs, err := cp.KubeletClientCAs()
	if err != nil {
		cancel()
		return nil, errors.Join(err, cp.Stop())
	}
	for i := range opts.Nodes {
		info := Node{Name: NodeName(i), Address: NodeAddress(i)}
		var labels map[string]string
		if opts.SubClusters >= 2 {
			labels = map[string]string{SubClusterNodeLabel: SubClusterID(subClusterOfNode(i, opts.SubClusters))}
		}
		serving, err := cp.KubeletServing(info.Name, net.ParseIP(info.Address))
		if err != nil {
			c.cancel()
			return nil, errors.Join(err, c.stopControlPlane())
		}
		node, err := procnode.New(procnode.Config{
			KubeletTLS:    &procnode.KubeletTLS{Certificate: serving, ClientCAs: kubeletCAs},
			Name:          info.Name,
			Address:       info.Address,
			Dir:           filepath.Join(opts.Dir, "nodes", info.Name),
			Client:        client,
			APIServerHost: host,
			APIServerPort: port,
			Capacity:      opts.NodeCapacity,
			Labels:        labels,
			Logger:        log,
		})
		if err != nil {
			c.cancel()
			return nil, errors.Join(err, c.stopControlPlane())
		}
		c.Nodes = append(c.Nodes, info)
		c.nodes = append(c.nodes, node)
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			if err := node.Run(runCtx); err != nil && runCtx.Err() == nil {
				log.Error("node stopped", "node", info.Name, "err", err)
			}
		}()
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	if len(opts.RMCommand) > 0 && opts.SubClusters >= 2 {
		fed, err := c.startFederation(ctx, opts.Dir, opts.RMCommand, opts.SubClusters)
		if err != nil {
			return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
		c.Federation = fed
	} else if len(opts.RMCommand) > 0 {
		addrs, err := c.startRM(ctx, opts.Dir, opts.RMCommand, nil)
		if err != nil {
			return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
		c.RM, c.RMs = &addrs[0], addrs
	}
	return c, nil
}

// waitNodesReady waits until every node reports Ready and carries no
// taint that keeps ordinary pods off it.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	op := func() error {
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			if !Schedulable(node) {
				return fmt.Errorf("node %s not ready yet", n.Name)
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return fmt.Errorf("localcluster: waiting for nodes: %w", err)
	}
	return nil
}

// Schedulable says whether a node is Ready and free of NoSchedule and
// NoExecute taints.
func Schedulable(node *corev1.Node) bool {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return ready && !node.Spec.Unschedulable
}

// Stop ends knit-router and knit-gpg, knit-rm, the nodes, then every pod process they started, then the
// control plane.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopFederation()
	c.stopRM()
	c.cancel()
	c.running.Wait()
	var errs []error
	for _, n := range c.nodes {
		if err := n.StopAll(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.stopControlPlane())
	return errors.Join(errs...)
}

func (c *Cluster) stopControlPlane() error {
	return c.ControlPlane.Stop()
}

// readyTimeout bounds the wait for nodes after the control plane is up; a
// node posts Ready within a heartbeat, so this is generous.
const readyTimeout = 2 * time.Minute

// CreateNamespace creates a namespace and returns once its default service
// account exists: until the controller manager has made it, the API server
// refuses the namespace's pods, on this cluster as on any.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("localcluster: namespace %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(20*time.Millisecond), backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	err := backoff.Retry(func() error {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}, backoff.WithContext(b, ctx))
	if err != nil {
		return fmt.Errorf("localcluster: namespace %s: default service account: %w", name, err)
	}
	return nil
}
