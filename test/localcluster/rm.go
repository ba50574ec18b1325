package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/renameio/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm/conf"
)

// RMNamespace is where the local cluster's knit-rm keeps its state.
const RMNamespace = "knit"

// RMAddresses are the ports knit-rm serves on loopback.
type RMAddresses struct {
	Client    string `json:"client"`
	Scheduler string `json:"scheduler"`
	Admin     string `json:"admin"`
	Web       string `json:"web"`
}

// HadoopConfDir is the Hadoop client configuration folder `knit local`
// writes: HADOOP_CONF_DIR for any Hadoop client, Knit's own included.
func HadoopConfDir(dir string) string { return filepath.Join(dir, "hadoop-conf") }

// process is a Knit process the local cluster started: knit-rm or a knit-node.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// yarnPorts are YARN's default RM ports, used when free so that a Hadoop
// client with no configuration at all finds the local RM too.
var yarnPorts = [4]int{8032, 8030, 8033, 8088}

// pickRMAddresses takes, for each RM port, the one a kept folder's
// yarn-site.xml names (so clients configured before a restart still find
// the RM), else YARN's default, else any free port.
func pickRMAddresses(dir string) (RMAddresses, error) {
	preferred := make([]string, len(yarnPorts))
	for i, p := range yarnPorts {
		preferred[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	if old, err := keptRMAddresses(dir); err == nil {
		preferred = []string{old.Client, old.Scheduler, old.Admin, old.Web}
	}
	var picked [4]string
	for i, addr := range preferred {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return RMAddresses{}, fmt.Errorf("localcluster: rm port: %w", err)
			}
		}
		picked[i] = l.Addr().String()
		defer l.Close()
	}
	return RMAddresses{Client: picked[0], Scheduler: picked[1], Admin: picked[2], Web: picked[3]}, nil
}

// RMSettings reads the RM settings of the yarn-site.xml in confDir, as a
// Hadoop client pointed at it (HadoopConfDir) or knit-rm (RMConfDir) sees
// them.
func RMSettings(confDir string) (conf.RMSettings, error) {
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(filepath.Join(confDir, "yarn-site.xml")); err != nil {
		return conf.RMSettings{}, err
	}
	return conf.LoadRMSettings(c)
}

// keptRMAddresses reads the addresses a kept folder's knit-rm served on.
func keptRMAddresses(dir string) (RMAddresses, error) {
	s, err := RMSettings(RMConfDir(dir))
	if err != nil {
		return RMAddresses{}, err
	}
	return RMAddresses{Client: s.Address, Scheduler: s.SchedulerAddress, Admin: s.AdminAddress, Web: s.WebappAddress}, nil
}

// RMConfDir is the configuration folder (--conf-dir) of the knit-rm of a
// cluster in dir: its yarn-site.xml, and a capacity-scheduler.xml once one
// is written there (knit-rm then reads it at start and on refreshQueues).
func RMConfDir(dir string) string { return filepath.Join(dir, "rm-conf") }

// writeRMConf writes the same yarn-site.xml twice: for knit-rm (what it
// binds) and in hadoop-conf/ for clients (where they connect), plus a
// core-site.xml with the local file system as the default one; the node
// services' properties (p.nodeConf) go in it too, for knit-node and
// clients. site is written after the local settings, so it wins where both
// set a property.
func writeRMConf(dir string, a RMAddresses, p nodePorts, site []hadoopconf.Property) (rmConfDir string, err error) {
	yarn := []hadoopconf.Property{
		{Name: "yarn.resourcemanager.hostname", Value: "127.0.0.1"},
		{Name: "yarn.resourcemanager.address", Value: a.Client},
		{Name: "yarn.resourcemanager.scheduler.address", Value: a.Scheduler},
		{Name: "yarn.resourcemanager.admin.address", Value: a.Admin},
		{Name: "yarn.resourcemanager.webapp.address", Value: a.Web},
		{Name: "yarn.resourcemanager.max-completed-applications", Value: "1000"},
		{Name: "yarn.timeline-service.enabled", Value: "false"},
	}
	nodeOwned, nodeDefaults := p.nodeConf()
	yarn = append(append(append(yarn, nodeOwned...), nodeDefaults...), site...)
	core := []hadoopconf.Property{{Name: "fs.defaultFS", Value: "file:///"}}
	rmConfDir = RMConfDir(dir)
	for _, d := range []string{rmConfDir, HadoopConfDir(dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		for name, props := range map[string][]hadoopconf.Property{"yarn-site.xml": yarn, "core-site.xml": core} {
			var buf bytes.Buffer
			if err := hadoopconf.Write(&buf, props); err != nil {
				return "", fmt.Errorf("localcluster: %s: %w", name, err)
			}
			if err := renameio.WriteFile(filepath.Join(d, name), buf.Bytes(), 0o644); err != nil {
				return "", fmt.Errorf("localcluster: %s: %w", name, err)
			}
		}
	}
	return rmConfDir, nil
}

// rmStartTimeout bounds the wait for knit-rm's client and admin ports.
const rmStartTimeout = 2 * time.Minute

// StartRM starts command as knit-rm on a running cluster that has none, as
// Start does for Options.RMCommand, with the site properties added to the
// yarn-site.xml it writes. It returns once knit-rm's client and admin ports
// accept connections, and sets c.RM; Stop ends knit-rm. It is for tests
// that need knit-rm on the cluster only some of the time.
func (c *Cluster) StartRM(ctx context.Context, command []string, site ...hadoopconf.Property) (RMAddresses, error) {
	return c.StartRMAs(ctx, Identities{}, command, site...)
}

// Identities are the kubeconfig files knit-rm and the knit-nodes talk to
// the API server with; an empty one means the cluster's admin kubeconfig.
// A test that gives them kubeconfigs impersonating the service accounts of
// manifests/ runs them with exactly the RBAC a real cluster gives them.
type Identities struct {
	RMKubeconfig   string
	NodeKubeconfig string
}

// StartRMAs is StartRM with knit-rm and every knit-node using the
// kubeconfigs of ids.
func (c *Cluster) StartRMAs(ctx context.Context, ids Identities, command []string, site ...hadoopconf.Property) (RMAddresses, error) {
	if c.rm != nil {
		return RMAddresses{}, errors.New("localcluster: knit-rm already runs")
	}
	addrs, err := c.startRMAs(ctx, c.ControlPlane.Dir, ids, command, site)
	if err != nil {
		return RMAddresses{}, err
	}
	c.RM = &addrs
	return addrs, nil
}

// startRM is startRMAs with the admin kubeconfig.
func (c *Cluster) startRM(ctx context.Context, dir string, command []string, site []hadoopconf.Property) (RMAddresses, error) {
	return c.startRMAs(ctx, dir, Identities{}, command, site)
}

// startRMAs creates the RM's namespace, writes its configuration and starts
// command as knit-rm, returning once its client and admin ports accept
// connections.
func (c *Cluster) startRMAs(ctx context.Context, dir string, ids Identities, command []string, site []hadoopconf.Property) (RMAddresses, error) {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RMNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return RMAddresses{}, fmt.Errorf("localcluster: rm namespace: %w", err)
	}
	addrs, err := pickRMAddresses(dir)
	if err != nil {
		return RMAddresses{}, err
	}
	if c.ports.rks == "" {
		addrs := make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			addrs[i] = n.Address
		}
		if c.ports, err = pickNodePorts(addrs); err != nil {
			return RMAddresses{}, err
		}
	}
	confDir, err := writeRMConf(dir, addrs, c.ports, site)
	if err != nil {
		return RMAddresses{}, err
	}
	logPath := filepath.Join(dir, "logs", "knit-rm.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return RMAddresses{}, fmt.Errorf("localcluster: rm log: %w", err)
	}
	defer logFile.Close()
	offset, _ := logFile.Seek(0, 2)
	// Process nodes ignore images: the launcher's init container copies
	// knit-launcher from beside knit-rm.
	launcher := filepath.Join(filepath.Dir(command[0]), "knit-launcher")
	kubeconfig := ids.RMKubeconfig
	if kubeconfig == "" {
		kubeconfig = c.ControlPlane.Kubeconfig
	}
	args := append(command[1:len(command):len(command)],
		"--kubeconfig", kubeconfig, "--namespace", RMNamespace, "--conf-dir", confDir,
		"--launcher-binary", launcher)
	args = append(args, c.rmNodeArgs(dir)...)
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return RMAddresses{}, fmt.Errorf("localcluster: start knit-rm: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.rm = p

	ctx, cancel := context.WithTimeout(ctx, rmStartTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0))
	err = backoff.Retry(func() error {
		select {
		case <-p.done:
			return backoff.Permanent(errors.New("knit-rm exited"))
		default:
		}
		for _, addr := range []string{addrs.Client, addrs.Admin} {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	}, backoff.WithContext(b, ctx))
	if err != nil {
		return RMAddresses{}, fmt.Errorf("localcluster: waiting for knit-rm: %w; its log:\n%s", err, tailFrom(logPath, offset))
	}
	c.log.Info("knit-rm up", "client", addrs.Client, "web", addrs.Web)
	if err := c.startNodeServices(dir, command[0], ids.NodeKubeconfig); err != nil {
		return RMAddresses{}, err
	}
	return addrs, nil
}

// stopRM ends the node services and knit-rm with SIGTERM and, after their
// grace, SIGKILL.
func (c *Cluster) stopRM() {
	c.stopNodeServices()
	p := c.rm
	if p == nil {
		return
	}
	c.rm = nil
	stopProcess(p, 15*time.Second)
	c.log.Info("knit-rm stopped")
}
