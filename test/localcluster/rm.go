package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	return c.startProcessWith(name, logPath, supervised, supervise.Backoff{}, build)
}

// startProcessWith is startProcess with a restart policy of its own.
func (c *Cluster) startProcessWith(name, logPath string, supervised bool, restarts supervise.Backoff, build func() *exec.Cmd) (*process, error) {
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
		Backoff:    restarts,
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
		c.rms = append(c.rms, p)
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

// freeRMAddresses are four free loopback ports, for a replica after the
// first.
func freeRMAddresses() (RMAddresses, error) {
	var picked [4]string
	for i := range picked {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return RMAddresses{}, fmt.Errorf("localcluster: rm port: %w", err)
		}
		picked[i] = l.Addr().String()
		defer l.Close()
	}
	return RMAddresses{Client: picked[0], Scheduler: picked[1], Admin: picked[2], Web: picked[3]}, nil
}

// rmID is the RM id of the i-th replica (from 0): rm1, rm2, …
func rmID(i int) string { return "rm" + strconv.Itoa(i+1) }

// rmOwned are the RM properties the cluster picks: the addresses of a
// single RM, or with several the RM HA keys and each id's addresses (and
// rm1's as the plain keys, for tools that know no HA).
func rmOwned(a []RMAddresses) []hadoopconf.Property {
	owned := []hadoopconf.Property{
		{Name: "yarn.resourcemanager.hostname", Value: "127.0.0.1"},
		{Name: "yarn.resourcemanager.address", Value: a[0].Client},
		{Name: "yarn.resourcemanager.scheduler.address", Value: a[0].Scheduler},
		{Name: "yarn.resourcemanager.admin.address", Value: a[0].Admin},
		{Name: "yarn.resourcemanager.webapp.address", Value: a[0].Web},
	}
	if len(a) < 2 {
		return owned
	}
	ids := make([]string, len(a))
	for i := range a {
		ids[i] = rmID(i)
	}
	owned = append(owned,
		hadoopconf.Property{Name: hadoopconf.KeyRMHAEnabled, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyRMHAAutomaticFailover, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyRMHAIDs, Value: strings.Join(ids, ",")},
		hadoopconf.Property{Name: hadoopconf.KeyRMClusterID, Value: "knit-local"},
	)
	for i, x := range a {
		id := ids[i]
		owned = append(owned,
			hadoopconf.Property{Name: "yarn.resourcemanager.hostname." + id, Value: "127.0.0.1"},
			hadoopconf.Property{Name: "yarn.resourcemanager.address." + id, Value: x.Client},
			hadoopconf.Property{Name: "yarn.resourcemanager.scheduler.address." + id, Value: x.Scheduler},
			hadoopconf.Property{Name: "yarn.resourcemanager.admin.address." + id, Value: x.Admin},
			hadoopconf.Property{Name: "yarn.resourcemanager.webapp.address." + id, Value: x.Web},
		)
	}
	return owned
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
func writeRMConf(log *slog.Logger, dir string, a []RMAddresses, p nodePorts, u userConf, site []hadoopconf.Property) (rmConfDir string, err error) {
	return writeConfIn(log, dir, RMConfDir(dir), a, p, u, site)
}

// writeConfIn is writeRMConf into confDir, for a folder other than
// HadoopConfDir: a sub-cluster RM's of a local federation.
func writeConfIn(log *slog.Logger, dir, confDir string, a []RMAddresses, p nodePorts, u userConf, site []hadoopconf.Property) (string, error) {
	owned := rmOwned(a)
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
	rmConfDir := confDir
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
	// RMKubeconfigs, when set, gives each knit-rm replica its own (rm1's
	// first; an empty one means RMKubeconfig): a test can then cut one
	// replica off the API server and not the other.
	RMKubeconfigs []string
}

// StartRMAs is StartRM with knit-rm and every knit-node using the
// kubeconfigs of ids.
func (c *Cluster) StartRMAs(ctx context.Context, ids Identities, command []string, site ...hadoopconf.Property) (RMAddresses, error) {
	c.mu.Lock()
	running := len(c.rms) > 0
	c.mu.Unlock()
	if running {
		return RMAddresses{}, errors.New("localcluster: knit-rm already runs")
	}
	addrs, err := c.startRMAs(ctx, c.ControlPlane.Dir, ids, command, site)
	if err != nil {
		return RMAddresses{}, err
	}
	c.RM, c.RMs = &addrs[0], addrs
	return addrs[0], nil
}

// startRM is startRMAs with the admin kubeconfig.
func (c *Cluster) startRM(ctx context.Context, dir string, command []string, site []hadoopconf.Property) ([]RMAddresses, error) {
	return c.startRMAs(ctx, dir, Identities{}, command, site)
}

// startRMAs creates the RM's namespace, writes its configuration and starts
// command as knit-rm, as many replicas as the cluster runs, returning once
// each one's client and admin ports accept connections.
func (c *Cluster) startRMAs(ctx context.Context, dir string, ids Identities, command []string, site []hadoopconf.Property) ([]RMAddresses, error) {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RMNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("localcluster: rm namespace: %w", err)
	}
	if err := CheckConfDir(dir, c.confDir); err != nil {
		return nil, err
	}
	user, err := readUserConf(c.confDir)
	if err != nil {
		return nil, err
	}
	first, err := pickRMAddresses(dir)
	if err != nil {
		return nil, err
	}
	addrs := []RMAddresses{first}
	for len(addrs) < max(c.rmCount, 1) {
		a, err := freeRMAddresses()
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	if c.ports.rks == "" {
		nodeAddrs := make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			nodeAddrs[i] = n.Address
		}
		var avoid []string
		for _, a := range addrs {
			avoid = append(avoid, a.Client, a.Scheduler, a.Admin, a.Web)
		}
		if c.ports, err = pickNodePorts(nodeAddrs, avoid); err != nil {
			return nil, err
		}
	}
	confDir, err := writeRMConf(c.log, dir, addrs, c.ports, user, site)
	if err != nil {
		return nil, err
	}
	// Process nodes ignore images: the launcher's init container copies
	// knit-launcher from beside knit-rm.
	launcher := filepath.Join(filepath.Dir(command[0]), "knit-launcher")
	kubeconfig := ids.RMKubeconfig
	if kubeconfig == "" {
		kubeconfig = c.ControlPlane.Kubeconfig
	}
	ha := len(addrs) > 1
	ctx, cancel := context.WithTimeout(ctx, rmStartTimeout)
	defer cancel()
	for i, a := range addrs {
		name, logName := "knit-rm", "knit-rm.log"
		rmKubeconfig := kubeconfig
		if i < len(ids.RMKubeconfigs) && ids.RMKubeconfigs[i] != "" {
			rmKubeconfig = ids.RMKubeconfigs[i]
		}
		args := append(command[1:len(command):len(command)],
			"--kubeconfig", rmKubeconfig, "--namespace", RMNamespace, "--conf-dir", confDir,
			"--launcher-binary", launcher)
		args = append(args, c.rmNodeArgs(dir)...)
		if ha {
			if i > 0 {
				name, logName = "knit-rm-"+rmID(i), "knit-rm-"+rmID(i)+".log"
			}
			// One RKS address for all, which only the active holds, as a
			// Service selecting the active RM would give the nodes.
			args = append(args, "--ha-id", rmID(i), "--standby-rks=false")
		}
		if err := c.startOneRM(ctx, name, filepath.Join(dir, "logs", logName), command[0], args, confDir, a); err != nil {
			return nil, err
		}
	}
	if err := waitActive(ctx, addrs); err != nil {
		return nil, err
	}
	c.log.Info("knit-rm up", "replicas", len(addrs), "client", addrs[0].Client, "web", addrs[0].Web)
	if err := c.startNodeServices(dir, command[0], ids.NodeKubeconfig, c.servingAll(dir)); err != nil {
		return nil, err
	}
	return addrs, nil
}

// waitActive waits until one replica is the active RM (its web port's
// /isActive answers 200) and serves its client port: a standby serves its
// ports at once, and the replica that wins the Lease swaps its standby
// servers for the RM's.
func waitActive(ctx context.Context, addrs []RMAddresses) error {
	hc := &http.Client{Timeout: time.Second}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	err := backoff.Retry(func() error {
		for _, a := range addrs {
			resp, err := hc.Get("http://" + a.Web + "/isActive")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				continue
			}
			conn, err := net.DialTimeout("tcp", a.Client, time.Second)
			if err != nil {
				continue
			}
			conn.Close()
			return nil
		}
		return errors.New("no active knit-rm yet")
	}, backoff.WithContext(b, ctx))
	if err != nil {
		return fmt.Errorf("localcluster: waiting for the active knit-rm: %w", err)
	}
	return nil
}

// startOneRM starts one knit-rm replica and waits for its client and admin
// ports, which a standby serves too; then supervises it.
func (c *Cluster) startOneRM(ctx context.Context, name, logPath, bin string, args []string, confDir string, addrs RMAddresses) error {
	offset := int64(0)
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	p, err := c.startProcessWith(name, logPath, false, c.rmRestarts, func() *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir)
		return cmd
	})
	if err != nil {
		return err
	}
	c.track(p, true)
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0))
	err = backoff.Retry(func() error {
		select {
		case <-p.sp.Done():
			return backoff.Permanent(fmt.Errorf("%s exited: %w", name, p.sp.Err()))
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
		return fmt.Errorf("localcluster: waiting for %s: %w; its log:\n%s", name, err, tailFrom(logPath, offset))
	}
	// Up, knit-rm is restarted whenever it ends, as a Deployment's pod.
	p.sp.Supervise()
	return nil
}

// stopRM ends the node services and knit-rm with SIGTERM and, after their
// grace, SIGKILL.
func (c *Cluster) stopRM() {
	c.stopNodeServices()
	c.mu.Lock()
	ps := c.rms
	c.rms = nil
	c.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		p.stop(15 * time.Second)
	}
	c.log.Info("knit-rm stopped")
	c.componentsChanged()
}
