package localcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rks/launch"
)

// NodeRoot is the folder every process node's knit-node shares with pods
// (knit-rm's --node-root). Process nodes share the machine, so they share
// it too; each node's local and log dirs are folders of their own in it.
func NodeRoot(dir string) string { return filepath.Join(dir, "node-root") }

// NodeLogDir is the YARN log dir (yarn.nodemanager.log-dirs) of node name:
// a container's logs are in <NodeLogDir>/<appId>/<containerId>.
func NodeLogDir(dir, name string) string { return filepath.Join(NodeRoot(dir), name, "logs") }

// NodeLocalDir is the YARN local dir of node name.
func NodeLocalDir(dir, name string) string { return filepath.Join(NodeRoot(dir), name, "local") }

// nodePorts are the NodeManager ports the process nodes serve on their
// addresses, and where knit-rm's RKS listens for the relays.
type nodePorts struct {
	nm, web, shuffle, sparkShuffle int
	// amrmProxy is where a local federation's nodes serve the AMRMProxy.
	amrmProxy int
	rks       string
}

// amrmProxyPort is the AMRMProxy's port of yarn.nodemanager.amrmproxy.address.
const amrmProxyPort = 8049

// pickNodePorts prefers YARN's NM ports (8041, 8042), the MapReduce
// shuffle's (13562), Spark's external shuffle's (7337) and the AMRMProxy's
// (8049) where they are
// free on every node's address, else ports free on all of them; the RKS
// address is none of avoid.
func pickNodePorts(addrs, avoid []string) (nodePorts, error) {
	free := func(port int) bool {
		for _, a := range addrs {
			l, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				return false
			}
			l.Close()
		}
		return true
	}
	pick := func(preferred int, taken ...int) (int, error) {
		if !slices.Contains(taken, preferred) && free(preferred) {
			return preferred, nil
		}
		for range 50 {
			l, err := net.Listen("tcp", net.JoinHostPort(addrs[0], "0"))
			if err != nil {
				return 0, err
			}
			p := l.Addr().(*net.TCPAddr).Port
			l.Close()
			if !slices.Contains(taken, p) && free(p) {
				return p, nil
			}
		}
		return 0, errors.New("no port free on every node address")
	}
	var ports nodePorts
	var err error
	if ports.nm, err = pick(8041); err != nil {
		return ports, fmt.Errorf("localcluster: nm port: %w", err)
	}
	if ports.web, err = pick(8042, ports.nm); err != nil {
		return ports, fmt.Errorf("localcluster: nm web port: %w", err)
	}
	if ports.shuffle, err = pick(13562, ports.nm, ports.web); err != nil {
		return ports, fmt.Errorf("localcluster: shuffle port: %w", err)
	}
	if ports.sparkShuffle, err = pick(sparkshuffle.DefaultPort, ports.nm, ports.web, ports.shuffle); err != nil {
		return ports, fmt.Errorf("localcluster: spark shuffle port: %w", err)
	}
	if ports.amrmProxy, err = pick(amrmProxyPort, ports.nm, ports.web, ports.shuffle, ports.sparkShuffle); err != nil {
		return ports, fmt.Errorf("localcluster: amrmproxy port: %w", err)
	}
	// The RKS port must not be one the RM replicas were given: their
	// listeners are closed by now, and the kernel may hand the same port
	// out again. Each refused pick stays held until one is found.
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports, fmt.Errorf("localcluster: rks port: %w", err)
		}
		defer l.Close()
		if addr := l.Addr().String(); !slices.Contains(avoid, addr) {
			ports.rks = addr
			return ports, nil
		}
	}
	return ports, errors.New("localcluster: no rks port free of the RMs' addresses")
}

// nodeConf are the properties of the node services the cluster writes in
// yarn-site.xml, which knit-node and clients read: Spark's external shuffle
// port, which the cluster picks as it picks the RM's addresses (Spark's
// executors read spark.shuffle.service.port from the YARN configuration
// when their SparkConf does not set it), and authentication on, as a
// secure cluster runs it.
func (p nodePorts) nodeConf() (owned, defaults []hadoopconf.Property) {
	if p.sparkShuffle == 0 {
		return nil, nil
	}
	owned = []hadoopconf.Property{{Name: sparkshuffle.PropPort, Value: strconv.Itoa(p.sparkShuffle)}}
	defaults = []hadoopconf.Property{{Name: sparkshuffle.PropAuthenticate, Value: "true"}}
	return owned, defaults
}

// rmNodeArgs are knit-rm's flags for the node services of the cluster.
func (c *Cluster) rmNodeArgs(dir string) []string {
	return []string{"--node-root", NodeRoot(dir), "--rks-address", c.ports.rks,
		"--nm-port", strconv.Itoa(c.ports.nm), "--nm-web-port", strconv.Itoa(c.ports.web)}
}

// nodeServing is what a node's knit-node serves: the RKS it relays the NM
// port to, the Hadoop configuration it reads and gives containers (the
// RM's addresses, the AMRMProxy's settings), and the namespace of the
// applications it ends on the node.
type nodeServing struct {
	rks, confDir, appsNamespace string
}

// servingAll is the one RM's: every node serves it.
func (c *Cluster) servingAll(dir string) func(int) nodeServing {
	return func(int) nodeServing {
		return nodeServing{rks: c.ports.rks, confDir: HadoopConfDir(dir), appsNamespace: RMNamespace}
	}
}

// startNodeServices starts knit-node (found beside knit-rm) for every
// process node, on that node's address, serving what serving says of the
// i-th node, as the DaemonSet does on a real cluster; without the binary,
// it starts none. An empty kubeconfig means the cluster's admin one.
func (c *Cluster) startNodeServices(dir, rmBinary, kubeconfig string, serving func(i int) nodeServing) error {
	bin := filepath.Join(filepath.Dir(rmBinary), "knit-node")
	if _, err := os.Stat(bin); err != nil {
		c.log.Warn("no knit-node beside knit-rm: containers will not start", "path", bin)
		return nil
	}
	if kubeconfig == "" {
		kubeconfig = c.ControlPlane.Kubeconfig
	}
	for i, n := range c.Nodes {
		s := serving(i)
		logPath := filepath.Join(dir, "logs", "knit-node-"+n.Name+".log")
		// Supervised from the start, as a DaemonSet's pod: a restart leaves
		// the node's running containers running (they are the process
		// node's, not knit-node's).
		p, err := c.startProcess("knit-node-"+n.Name, logPath, true, func() *exec.Cmd {
			return exec.Command(bin,
				"--kubeconfig", kubeconfig,
				"--node-name", n.Name,
				"--address", n.Address,
				"--nm-port", strconv.Itoa(c.ports.nm),
				"--nm-web-port", strconv.Itoa(c.ports.web),
				"--rks-address", s.rks,
				"--node-root", NodeRoot(dir),
				// Kept across the supervisor's restarts of knit-node.
				"--state-dir", filepath.Join(dir, "node-state"),
				"--local-dirs", NodeLocalDir(dir, n.Name),
				"--log-dirs", NodeLogDir(dir, n.Name),
				"--hadoop-conf-dir", s.confDir,
				"--shuffle-port", strconv.Itoa(c.ports.shuffle),
				"--aux-services", launch.ShuffleService+","+launch.SparkShuffleService,
				"--spark-shuffle-port", strconv.Itoa(c.ports.sparkShuffle),
				"--applications-namespace", s.appsNamespace,
				"--federation-namespace", FederationNamespace,
			)
		})
		if err != nil {
			return fmt.Errorf("localcluster: start knit-node on %s: %w", n.Name, err)
		}
		c.track(p, false)
	}
	c.log.Info("knit-node up", "nodes", len(c.Nodes), "nm-port", c.ports.nm)
	return nil
}

// stopNodeServices ends every knit-node with SIGTERM, then SIGKILL.
func (c *Cluster) stopNodeServices() {
	c.mu.Lock()
	ps := c.nodeServices
	c.nodeServices = nil
	c.mu.Unlock()
	for _, p := range ps {
		p.stop(10 * time.Second)
	}
}
