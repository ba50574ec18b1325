package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
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
	"github.com/knitdev/knit/test/supervise"
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

// process is a Knit process the local cluster started and supervises:
// knit-rm, as a Deployment's pod, or a knit-node, as a DaemonSet's.
type process struct {
	sp      *supervise.Process
	logFile *os.File
}

// startProcess starts the command build makes, its output appended to
// logPath, with restarts after every end once supervised (at once for a
// knit-node, after its start-up for knit-rm).
func (c *Cluster) startProcess(name, logPath string, supervised bool, build func() *exec.Cmd) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %s log: %w", name, err)
	}
	sp, err := supervise.Start(supervise.Config{
		Name: name,
		Command: func() (*exec.Cmd, error) {
			cmd := build()
			cmd.Stdout, cmd.Stderr = logFile, logFile
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return cmd, nil
		},
		Supervised: supervised,
		Logger:     c.log,
		OnChange:   c.componentsChanged,
	})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return &process{sp: sp, logFile: logFile}, nil
}

// track adds p to the cluster's processes, as knit-rm or a knit-node, and
// tells the components file.
func (c *Cluster) track(p *process, asRM bool) {
	c.mu.Lock()
	if asRM {
		c.rm = p
	} else {
		c.nodeServices = append(c.nodeServices, p)
	}
	c.mu.Unlock()
	c.componentsChanged()
}

// stop ends p's supervision and process: SIGTERM, SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	_ = p.sp.Stop(grace)
	_ = p.logFile.Close()
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
// cluster in dir: the client folder, HadoopConfDir, itself. knit-rm reads its
// yarn-site.xml and core-site.xml, and its capacity-scheduler.xml, at start
// and on every refreshQueues (see userconf.go for what --conf-dir puts there).
func RMConfDir(dir string) string { return HadoopConfDir(dir) }

// AppLogsDir is where the nodes of a cluster in dir aggregate the logs of
// ended applications (yarn.nodemanager.remote-app-log-dir), unless the
// user's --conf-dir says otherwise.
func AppLogsDir(dir string) string { return filepath.Join(dir, "app-logs") }

// appLogsURI is AppLogsDir as a file:// URI, absolute as Hadoop needs it.
func appLogsURI(dir string) string {
	d := AppLogsDir(dir)
	if abs, err := filepath.Abs(d); err == nil {
		d = abs
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(d)}).String()
}

// writeRMConf writes yarn-site.xml and core-site.xml in HadoopConfDir, for
// knit-rm (what it binds), the knit-nodes and clients (where they connect):
// the RM's addresses and the node ports of p.nodeConf, then local defaults
// (log aggregation into AppLogsDir among them),
// then the user's properties (u), then site, later ones winning; and links
// u's other files there.
func writeRMConf(log *slog.Logger, dir string, a RMAddresses, p nodePorts, u userConf, site []hadoopconf.Property) (rmConfDir string, err error) {
	owned := []hadoopconf.Property{
		{Name: "yarn.resourcemanager.hostname", Value: "127.0.0.1"},
		{Name: "yarn.resourcemanager.address", Value: a.Client},
		{Name: "yarn.resourcemanager.scheduler.address", Value: a.Scheduler},
		{Name: "yarn.resourcemanager.admin.address", Value: a.Admin},
		{Name: "yarn.resourcemanager.webapp.address", Value: a.Web},
	}
	defaults := []hadoopconf.Property{
		{Name: "yarn.resourcemanager.max-completed-applications", Value: "1000"},
		{Name: "yarn.timeline-service.enabled", Value: "false"},
		// Log aggregation on, into the cluster's folder, as `knit logs`
		// reads it once an application ends.
		{Name: "yarn.log-aggregation-enable", Value: "true"},
		{Name: "yarn.nodemanager.remote-app-log-dir", Value: appLogsURI(dir)},
	}
	nodeOwned, nodeDefaults := p.nodeConf()
	owned, defaults = append(owned, nodeOwned...), append(defaults, nodeDefaults...)
	files := map[string][]hadoopconf.Property{
		"yarn-site.xml": mergeProperties(log, "yarn-site.xml", owned, defaults, u.yarn, site),
		"core-site.xml": mergeProperties(log, "core-site.xml", nil, []hadoopconf.Property{{Name: "fs.defaultFS", Value: "file:///"}}, u.core, nil),
	}
	rmConfDir = RMConfDir(dir)
	if err := os.MkdirAll(rmConfDir, 0o755); err != nil {
		return "", fmt.Errorf("localcluster: %w", err)
	}
	for name, props := range files {
		var buf bytes.Buffer
		if err := hadoopconf.Write(&buf, props); err != nil {
			return "", fmt.Errorf("localcluster: %s: %w", name, err)
		}
		if err := renameio.WriteFile(filepath.Join(rmConfDir, name), buf.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("localcluster: %s: %w", name, err)
		}
	}
	if err := linkUserConf(log, rmConfDir, u); err != nil {
		return "", err
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
	if err := CheckConfDir(dir, c.confDir); err != nil {
		return RMAddresses{}, err
	}
	user, err := readUserConf(c.confDir)
	if err != nil {
		return RMAddresses{}, err
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
	confDir, err := writeRMConf(c.log, dir, addrs, c.ports, user, site)
	if err != nil {
		return RMAddresses{}, err
	}
	logPath := filepath.Join(dir, "logs", "knit-rm.log")
	offset := int64(0)
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
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
	p, err := c.startProcess("knit-rm", logPath, false, func() *exec.Cmd {
		cmd := exec.Command(command[0], args...)
		cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir)
		return cmd
	})
	if err != nil {
		return RMAddresses{}, err
	}
	c.track(p, true)

	ctx, cancel := context.WithTimeout(ctx, rmStartTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0))
	err = backoff.Retry(func() error {
		select {
		case <-p.sp.Done():
			return backoff.Permanent(fmt.Errorf("knit-rm exited: %w", p.sp.Err()))
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
	// Up, knit-rm is restarted whenever it ends, as a Deployment's pod.
	p.sp.Supervise()
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
	c.mu.Lock()
	p := c.rm
	c.rm = nil
	c.mu.Unlock()
	if p == nil {
		return
	}
	p.stop(15 * time.Second)
	c.log.Info("knit-rm stopped")
	c.componentsChanged()
}
