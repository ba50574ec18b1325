package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/hadoopconf"
)

// A local federation (Options.SubClusters of 2 or more) has the shape of
// test/integration's federation test: one control plane, a knit-rm per
// sub-cluster, each keeping its state in a namespace of its own (sc1 in
// RMNamespace, scN in knit-scN), registered in a store in
// FederationNamespace, with knit-router in front and knit-gpg weighing
// them. It is not a federation of clusters: the sub-clusters share the
// control plane and the nodes, whose knit-nodes serve sc1 (they relay the
// NM port to sc1's RKS and read sc1's applications), so the containers of
// applications homed in another sub-cluster do not start.

// FederationNamespace holds a local federation's store.
const FederationNamespace = "knit-federation"

// SubClusterID is the id of the i-th sub-cluster (from 0): sc1, sc2, …
func SubClusterID(i int) string { return "sc" + strconv.Itoa(i+1) }

// SubClusterNamespace is where the i-th sub-cluster's knit-rm keeps its
// state: RMNamespace for the first, whose applications the nodes serve.
func SubClusterNamespace(i int) string {
	if i == 0 {
		return RMNamespace
	}
	return "knit-" + SubClusterID(i)
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

// startFederation starts n knit-rm sub-clusters, knit-router and knit-gpg
// (found beside command[0]) and sc1's knit-nodes, and writes the client
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
		}
		confDir, err := writeConfIn(c.log, dir, SubClusterConfDir(dir, sc.ID), []RMAddresses{sc.RM}, c.ports, user, site)
		if err != nil {
			return nil, err
		}
		args := append(command[1:len(command):len(command)],
			"--kubeconfig", c.ControlPlane.Kubeconfig, "--namespace", sc.Namespace, "--conf-dir", confDir,
			"--launcher-binary", launcher, "--federation-namespace", FederationNamespace)
		args = append(args, c.rmNodeArgs(dir)...)
		if i > 0 {
			// The nodes relay to sc1's RKS; the others' RKS listen apart.
			rks, err := freeAddress()
			if err != nil {
				return nil, err
			}
			args = append(args, "--rks-address", rks)
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
	// ports for the AMs of the nodes' containers, and the settings
	// knit-router and knit-gpg read from the same folder.
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
	if err := c.startNodeServices(dir, command[0], ""); err != nil {
		return nil, err
	}
	return fed, nil
}

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
