package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/renameio/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/daemonsets/amrmproxy"
	"github.com/knitdev/knit/federation"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rks/launch"
)

// A local federation (Options.SubClusters of 2 or more) is two or more
// RMs with separate node pools on one control plane, not a federation of
// control planes: a knit-rm per sub-cluster, each keeping its state in a
// namespace of its own (sc1 in RMNamespace, scN in knit-scN), registered
// in a store in FederationNamespace, with knit-router in front and knit-gpg
// weighing them. The process nodes are dealt out to the sub-clusters in
// turn (node-1 to sc1, node-2 to sc2, …; at least one each), each labelled
// with its sub-cluster (SubClusterNodeLabel): a knit-rm's --node-selector
// keeps its node view and its pods to its pool, and its pods carry its
// sub-cluster, by which it tells them from the others'. Each node's
// knit-node serves its pool's sub-cluster: it relays the NM port to that
// RKS, ends that namespace's applications, and runs the AMRMProxy with
// the FederationInterceptor, whose home is that sub-cluster's RM; so an
// AM's asks that the queue's policy sends to another sub-cluster become
// an unmanaged AM there, whose containers run on that pool's nodes. The
// sub-clusters' container ids never meet: each RM's epoch starts from its
// own yarn.resourcemanager.epoch, 1000 apart.

// FederationNamespace holds a local federation's store.
const FederationNamespace = "knit-federation"

// SubClusterID is the id of the i-th sub-cluster (from 0): sc1, sc2, …
func SubClusterID(i int) string { return "sc" + strconv.Itoa(i+1) }

// SubClusterNamespace is where the i-th sub-cluster's knit-rm keeps its
// state: RMNamespace for the first, as a cluster of one RM has it.
func SubClusterNamespace(i int) string {
	if i == 0 {
		return RMNamespace
	}
	return "knit-" + SubClusterID(i)
}

// SubClusterNodeLabel is the node label that puts a process node in a
// sub-cluster's pool, the value its id; each knit-rm's --node-selector
// names its own.
const SubClusterNodeLabel = launch.LabelSubCluster

// subClusterOfNode is the sub-cluster (from 0) whose pool holds the i-th
// node of a federation of n sub-clusters.
func subClusterOfNode(i, n int) int { return i % n }

// epochSeedStep sets the sub-clusters' yarn.resourcemanager.epoch apart,
// as YARN's Federation guide advises.
const epochSeedStep = 1000

// SubClusterNodeConfDir is the Hadoop configuration folder of the
// knit-nodes of sub-cluster id's pool, which their containers get too.
func SubClusterNodeConfDir(dir, id string) string {
	return filepath.Join(dir, "subclusters", id, "node-conf")
}

// SubClusterConfDir is the configuration folder of sub-cluster id's
// knit-rm in a cluster in dir.
func SubClusterConfDir(dir, id string) string { return filepath.Join(dir, "subclusters", id, "conf") }

// Federation is what a local federation runs.
type Federation struct {
	// Router, RouterAdmin and RouterWeb are knit-router's client, admin
	// and web addresses, which HadoopConfDir names.
	Router      string       `json:"router"`
	RouterAdmin string       `json:"routerAdmin"`
	RouterWeb   string       `json:"routerWeb"`
	SubClusters []SubCluster `json:"subClusters"`
}

// SubCluster is one knit-rm of a local federation.
type SubCluster struct {
	ID        string      `json:"id"`
	Namespace string      `json:"namespace"`
	RM        RMAddresses `json:"rm"`
	// RKS is where its RKS serves the relays of its pool's knit-nodes.
	RKS string `json:"rks"`
	// Nodes are the names of the process nodes of its pool.
	Nodes []string `json:"nodes"`
}

// The local federation's pace: heartbeats every few seconds rather than
// YARN's minute, a Router cache as short, and the GPG every half minute,
// so that what `knit local` shows moves while one looks.
const (
	localHeartbeatSecs = "5"
	localCacheTTLSecs  = "5"
	localGPGInterval   = "30s"
)

// YARN's default Router ports, used when free.
const (
	routerClientPort = 8050
	routerAdminPort  = 8052
	routerWebPort    = 8089
)

// startFederation starts n knit-rm sub-clusters, each on its pool of the
// nodes, knit-router and knit-gpg (found beside command[0]) and every
// node's knit-node for its pool's sub-cluster, and writes the client
// configuration, pointing at the Router, in HadoopConfDir.
func (c *Cluster) startFederation(ctx context.Context, dir string, command []string, n int) (*Federation, error) {
	binDir := filepath.Dir(command[0])
	for _, bin := range []string{"knit-router", "knit-gpg"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			return nil, fmt.Errorf("localcluster: a federation needs %s beside knit-rm: %w", bin, err)
		}
	}
	if err := CheckConfDir(dir, c.confDir); err != nil {
		return nil, err
	}
	user, err := readUserConf(c.confDir)
	if err != nil {
		return nil, err
	}
	fed := &Federation{}
	var avoid []string
	for i := range n {
		a, err := freeRMAddresses()
		if err != nil {
			return nil, err
		}
		fed.SubClusters = append(fed.SubClusters, SubCluster{ID: SubClusterID(i), Namespace: SubClusterNamespace(i), RM: a})
		avoid = append(avoid, a.Client, a.Scheduler, a.Admin, a.Web)
	}
	for i, node := range c.Nodes {
		sc := &fed.SubClusters[subClusterOfNode(i, n)]
		sc.Nodes = append(sc.Nodes, node.Name)
	}
	if fed.Router, fed.RouterAdmin, fed.RouterWeb, err = pickRouterAddresses(dir); err != nil {
		return nil, err
	}
	avoid = append(avoid, fed.Router, fed.RouterAdmin, fed.RouterWeb)
	nodeAddrs := make([]string, len(c.Nodes))
	for i, node := range c.Nodes {
		nodeAddrs[i] = node.Address
	}
	if c.ports, err = pickNodePorts(nodeAddrs, avoid); err != nil {
		return nil, err
	}
	if err := c.ensureNamespace(ctx, FederationNamespace); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, rmStartTimeout)
	defer cancel()
	launcher := filepath.Join(binDir, "knit-launcher")
	for i, sc := range fed.SubClusters {
		if err := c.ensureNamespace(ctx, sc.Namespace); err != nil {
			return nil, err
		}
		site := []hadoopconf.Property{
			{Name: hadoopconf.KeyFederationEnabled, Value: "true"},
			{Name: hadoopconf.KeyRMClusterID, Value: sc.ID},
			{Name: hadoopconf.KeyFederationHeartbeatInterval, Value: localHeartbeatSecs},
			{Name: hadoopconf.KeyFederationHeartbeatInitialDelay, Value: "1"},
			{Name: hadoopconf.KeyRMEpoch, Value: strconv.Itoa(i * epochSeedStep)},
		}
		confDir, err := writeConfIn(c.log, dir, SubClusterConfDir(dir, sc.ID), []RMAddresses{sc.RM}, c.ports, user, site)
		if err != nil {
			return nil, err
		}
		args := append(command[1:len(command):len(command)],
			"--kubeconfig", c.ControlPlane.Kubeconfig, "--namespace", sc.Namespace, "--conf-dir", confDir,
			"--launcher-binary", launcher, "--federation-namespace", FederationNamespace,
			"--node-selector", SubClusterNodeLabel+"="+sc.ID)
		args = append(args, c.rmNodeArgs(dir)...)
		fed.SubClusters[i].RKS = c.ports.rks
		if i > 0 {
			// Each sub-cluster's RKS listens apart, for its own pool.
			if fed.SubClusters[i].RKS, err = freeAddress(); err != nil {
				return nil, err
			}
			args = append(args, "--rks-address", fed.SubClusters[i].RKS)
		}
		name := "knit-rm-" + sc.ID
		if err := c.startOneRM(ctx, name, filepath.Join(dir, "logs", name+".log"), command[0], args, confDir, sc.RM); err != nil {
			return nil, err
		}
		if err := waitActive(ctx, []RMAddresses{sc.RM}); err != nil {
			return nil, err
		}
	}

	// The clients' configuration: the Router as their RM, sc1's other
	// ports for tools that ask an RM's admin or web port, and the
	// settings knit-router and knit-gpg read from the same folder. AMs
	// find their scheduler in their node's configuration instead
	// (writeNodeConf): their node's AMRMProxy.
	sc1 := fed.SubClusters[0].RM
	clientSite := []hadoopconf.Property{
		{Name: hadoopconf.KeyRouterClientRMAddress, Value: fed.Router},
		{Name: hadoopconf.KeyRouterRMAdminAddress, Value: fed.RouterAdmin},
		{Name: hadoopconf.KeyRouterWebappAddress, Value: fed.RouterWeb},
		{Name: hadoopconf.KeyFederationCacheTTL, Value: localCacheTTLSecs},
		{Name: hadoopconf.KeyGPGPolicyClass, Value: federation.LoadBasedGlobalPolicy},
		{Name: hadoopconf.KeyGPGPolicyInterval, Value: localGPGInterval},
	}
	confDir, err := writeRMConf(c.log, dir, []RMAddresses{{Client: fed.Router, Scheduler: sc1.Scheduler, Admin: sc1.Admin, Web: sc1.Web}}, c.ports, user, clientSite)
	if err != nil {
		return nil, err
	}
	// knit-gpg weighs the sub-clusters active when it runs: started once
	// they all are, its first run writes the queues' policies, rather than
	// its next one, an interval later.
	if err := c.waitSubClustersActive(ctx, n); err != nil {
		return nil, err
	}
	for _, bin := range []string{"knit-router", "knit-gpg"} {
		p, err := c.startProcess(bin, filepath.Join(dir, "logs", bin+".log"), true, func() *exec.Cmd {
			cmd := exec.Command(filepath.Join(binDir, bin), "--kubeconfig", c.ControlPlane.Kubeconfig, "--namespace", FederationNamespace, "--conf-dir", confDir)
			cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir)
			return cmd
		})
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.federation = append(c.federation, p)
		c.mu.Unlock()
		c.componentsChanged()
	}
	if err := waitListening(ctx, fed.Router, fed.RouterAdmin, fed.RouterWeb); err != nil {
		return nil, fmt.Errorf("localcluster: waiting for knit-router: %w", err)
	}
	c.log.Info("federation up", "subClusters", n, "router", fed.Router)
	machines, err := c.writeMachineList(dir, n)
	if err != nil {
		return nil, err
	}
	nodeConf := make([]string, n)
	for i, sc := range fed.SubClusters {
		if nodeConf[i], err = c.writeNodeConf(dir, fed, sc, user, append(slices.Clip(clientSite), hadoopconf.Property{Name: hadoopconf.KeyFederationMachineList, Value: machines})); err != nil {
			return nil, err
		}
	}
	serving := func(i int) nodeServing {
		sc := subClusterOfNode(i, n)
		return nodeServing{rks: fed.SubClusters[sc].RKS, confDir: nodeConf[sc], appsNamespace: fed.SubClusters[sc].Namespace}
	}
	if err := c.startNodeServices(dir, command[0], "", serving); err != nil {
		return nil, err
	}
	return fed, nil
}

// writeNodeConf writes the configuration of the knit-nodes of sc's pool,
// as YARN's NodeManagers of a federation have it: the sub-cluster's RM
// for the scheduler (the AMRMProxy's home), the Router for clients,
// federation on, and the AMRMProxy on with the FederationInterceptor in
// front of the default one.
func (c *Cluster) writeNodeConf(dir string, fed *Federation, sc SubCluster, user userConf, clientSite []hadoopconf.Property) (string, error) {
	site := append(slices.Clip(clientSite),
		hadoopconf.Property{Name: hadoopconf.KeyFederationEnabled, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyAMRMProxyEnabled, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyAMRMProxyAddress, Value: "0.0.0.0:" + strconv.Itoa(c.ports.amrmProxy)},
		hadoopconf.Property{Name: hadoopconf.KeyAMRMProxyPipeline, Value: amrmproxy.FederationInterceptorName + "," + amrmproxy.DefaultInterceptorName},
	)
	addrs := []RMAddresses{{Client: fed.Router, Scheduler: sc.RM.Scheduler, Admin: sc.RM.Admin, Web: sc.RM.Web}}
	return writeConfIn(c.log, dir, SubClusterNodeConfDir(dir, sc.ID), addrs, c.ports, user, site)
}

// waitSubClustersActive waits until the federation's store holds n
// active sub-clusters.
func (c *Cluster) waitSubClustersActive(ctx context.Context, n int) error {
	st, err := fedstore.NewKube(fedstore.KubeConfig{Client: c.Client, Namespace: FederationNamespace})
	if err != nil {
		return err
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0))
	err = backoff.Retry(func() error {
		active, err := st.GetSubClusters(ctx, true)
		if err != nil {
			return err
		}
		if len(active) < n {
			return fmt.Errorf("%d of %d sub-clusters active", len(active), n)
		}
		return nil
	}, backoff.WithContext(b, ctx))
	if err != nil {
		return fmt.Errorf("localcluster: waiting for the sub-clusters to register: %w", err)
	}
	return nil
}

// writeMachineList writes the federation's yarn.federation.machine-list,
// by which the AMRMProxies' locality policy sends an ask for a node to
// the node's sub-cluster: each node by its NodeId host (its address) and
// its name, with the rack YARN gives a node the topology does not place.
func (c *Cluster) writeMachineList(dir string, n int) (string, error) {
	var b strings.Builder
	for i, node := range c.Nodes {
		for _, host := range []string{node.Address, node.Name} {
			fmt.Fprintf(&b, "%s, %s, %s\n", host, SubClusterID(subClusterOfNode(i, n)), defaultRack)
		}
	}
	path := filepath.Join(dir, "subclusters", "machine-list")
	if err := renameio.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("localcluster: machine list: %w", err)
	}
	return path, nil
}

// defaultRack is YARN's rack of a node the topology does not place, as
// knit-rm reports the process nodes (they carry no zone label).
const defaultRack = "/default-rack"

// pickRouterAddresses takes the Router's ports a kept folder's
// yarn-site.xml names, else YARN's defaults, else free ones.
func pickRouterAddresses(dir string) (client, admin, web string, err error) {
	loopback := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	preferred := []string{loopback(routerClientPort), loopback(routerAdminPort), loopback(routerWebPort)}
	c := hadoopconf.New(hadoopconf.Options{})
	if c.AddDir(HadoopConfDir(dir), "yarn-site.xml") == nil && c.Has(hadoopconf.KeyRouterClientRMAddress) {
		if s, err := federation.LoadSettings(c); err == nil {
			preferred = []string{s.RouterClientRMAddress, s.RouterRMAdminAddress, s.RouterWebappAddress}
		}
	}
	var picked [3]string
	for i, addr := range preferred {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return "", "", "", fmt.Errorf("localcluster: router port: %w", err)
			}
		}
		picked[i] = l.Addr().String()
		defer l.Close()
	}
	return picked[0], picked[1], picked[2], nil
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("localcluster: port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitListening waits until every address accepts connections.
func waitListening(ctx context.Context, addrs ...string) error {
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	return backoff.Retry(func() error {
		for _, a := range addrs {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	}, backoff.WithContext(b, ctx))
}

// ensureNamespace creates a namespace unless a kept folder's cluster has
// it, and waits for its default service account.
func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return c.CreateNamespace(ctx, name)
	}
	return fmt.Errorf("localcluster: namespace %s: %w", name, err)
}

// stopFederation ends knit-router and knit-gpg.
func (c *Cluster) stopFederation() {
	c.mu.Lock()
	ps := c.federation
	c.federation = nil
	c.mu.Unlock()
	for _, p := range ps {
		p.stop(15 * time.Second)
	}
	if len(ps) > 0 {
		c.componentsChanged()
	}
}
