// Package controlplane runs a real Kubernetes control plane on loopback: etcd
// from the machine's PATH and kube-apiserver, kube-scheduler and
// kube-controller-manager built from k8s.io/kubernetes at Version (see
// tools/k8s and `make tools`). Tests, benchmarks and `knit local` all start it
// through Start, so every one of them talks to the same kind of cluster.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/test/supervise"
)

// Version is the Kubernetes release the control plane runs. tools/k8s/go.mod
// pins k8s.io/kubernetes to the same release; a test keeps the two equal.
const Version = "v1.34.4"

// BinDirEnv names the folder holding kube-apiserver, kube-scheduler,
// kube-controller-manager and kubectl, when it is not the default cache folder.
const BinDirEnv = "KNIT_K8S_BIN"

// serviceCIDR is the cluster's service range; its first address is the
// kubernetes Service, which the serving certificate names.
const serviceCIDR = "10.96.0.0/16"

var serviceIP = net.IPv4(10, 96, 0, 1)

// Config says where the control plane keeps its files and finds its programs.
type Config struct {
	// Dir holds kubeconfig at its top, logs/ and controlplane/ (PKI, etcd
	// data, ports). Empty means a new temporary folder.
	Dir string
	// BinDir holds the Kubernetes binaries; empty means DefaultBinDir().
	BinDir string
	// Keep leaves Dir in place after Stop; a later Start on it is a warm start.
	Keep bool
	// Logger receives the control plane's own events (not the components' logs,
	// which go to Dir/logs).
	Logger *slog.Logger
	// OnChange, when set, is called after each start and end of a
	// component's process (see supervise.Config.OnChange).
	OnChange func()
}

// ControlPlane is a running control plane. Stop ends every process it started.
type ControlPlane struct {
	// Dir is the folder everything lives in.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig for this cluster.
	Kubeconfig string
	// Server is the API server's URL.
	Server string
	// BinDir holds the Kubernetes binaries, kubectl among them.
	BinDir string

	cfg       Config
	log       *slog.Logger
	restCfg   *rest.Config
	processes []*process
}

// DefaultBinDir is where `make tools` puts the binaries: $KNIT_K8S_BIN, or
// the user's cache folder under knit/k8s-<Version>/bin.
func DefaultBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("controlplane: cache folder: %w", err)
	}
	return filepath.Join(cache, "knit", "k8s-"+Version, "bin"), nil
}

// Start brings up etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager and returns once the API server is ready, both
// controllers report healthy and the default service account exists. On
// failure it stops whatever it had started.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	binDir := cfg.BinDir
	if binDir == "" {
		var err error
		if binDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	bins, err := findBinaries(binDir)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "knit-controlplane-"); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	c := &ControlPlane{
		Dir:        cfg.Dir,
		Kubeconfig: filepath.Join(cfg.Dir, "kubeconfig"),
		BinDir:     binDir,
		cfg:        cfg,
		log:        log,
	}
	if err := c.start(ctx, bins); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	// Up, each component is restarted whenever it ends, as the kubelet
	// restarts a static pod's container.
	for _, p := range c.processes {
		p.sp.Supervise()
	}
	return c, nil
}

// KubeletServing issues a serving certificate for the kubelet API of the
// node named node at address ip, signed by the cluster CA, which the API
// server trusts for kubelets (--kubelet-certificate-authority).
func (c *ControlPlane) KubeletServing(node string, ip net.IP) (tls.Certificate, error) {
	return c.keys().kubeletServing(node, ip)
}

// KubeletClientCAs holds the CA of the API server's kubelet client
// certificate (--kubelet-client-certificate): what a kubelet verifies its
// clients against (its --client-ca-file).
func (c *ControlPlane) KubeletClientCAs() (*x509.CertPool, error) {
	return c.keys().caPool()
}

func (c *ControlPlane) keys() pki {
	return pki{dir: filepath.Join(c.Dir, "controlplane", "pki")}
}

// RESTConfig is an admin client configuration for this cluster.
func (c *ControlPlane) RESTConfig() *rest.Config {
	return rest.CopyConfig(c.restCfg)
}

// Client is an admin clientset for this cluster.
func (c *ControlPlane) Client() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("controlplane: client: %w", err)
	}
	return cs, nil
}

// Kubectl is the kubectl built with the control plane, as a command bound to
// this cluster's kubeconfig.
func (c *ControlPlane) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"),
		append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// PID is the process id of a running component ("etcd", "kube-apiserver",
// "kube-scheduler", "kube-controller-manager"), for benchmarks that read
// its memory.
func (c *ControlPlane) PID(name string) (int, bool) {
	p := c.component(name)
	if p == nil {
		return 0, false
	}
	pid := p.sp.PID()
	return pid, pid != 0
}

// Components reports each component's process: its pid, restarts and last
// exit.
func (c *ControlPlane) Components() []supervise.Status {
	out := make([]supervise.Status, 0, len(c.processes))
	for _, p := range c.processes {
		out = append(out, p.sp.Status())
	}
	return out
}

// StopComponent ends one component as Stop would, leaving the others
// running: a scale benchmark drops kube-controller-manager, whose informers
// would hold one more copy of every pod.
func (c *ControlPlane) StopComponent(name string) error {
	p := c.component(name)
	if p == nil {
		return fmt.Errorf("controlplane: no component %s", name)
	}
	return p.stop(stopGrace)
}

// component is the process of a running component, or nil.
func (c *ControlPlane) component(name string) *process {
	for _, p := range c.processes {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Stop ends the processes in the reverse order of their start, each with
// SIGTERM and, after a grace period, SIGKILL; then removes Dir unless Keep.
func (c *ControlPlane) Stop() error {
	var errs []error
	for i := len(c.processes) - 1; i >= 0; i-- {
		if err := c.processes[i].stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	c.processes = nil
	if !c.cfg.Keep && c.Dir != "" {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("controlplane: remove data: %w", err))
		}
	}
	return errors.Join(errs...)
}

const stopGrace = 10 * time.Second

type binaries struct {
	etcd, apiserver, scheduler, controllerManager string
}

func findBinaries(binDir string) (binaries, error) {
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		return binaries{}, fmt.Errorf("controlplane: etcd not on PATH (Debian package etcd-server): %w", err)
	}
	b := binaries{
		etcd:              etcd,
		apiserver:         filepath.Join(binDir, "kube-apiserver"),
		scheduler:         filepath.Join(binDir, "kube-scheduler"),
		controllerManager: filepath.Join(binDir, "kube-controller-manager"),
	}
	for _, p := range []string{b.apiserver, b.scheduler, b.controllerManager, filepath.Join(binDir, "kubectl")} {
		if _, err := os.Stat(p); err != nil {
			return binaries{}, fmt.Errorf("controlplane: %s missing; `make tools` builds it: %w", filepath.Base(p), err)
		}
	}
	return b, nil
}

// ports are kept in the data folder: etcd remembers its peer URL, and a warm
// start on the same ports keeps it and the kubernetes Service unchanged.
type ports struct {
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	Scheduler         int `json:"scheduler"`
	ControllerManager int `json:"controllerManager"`
}

func (c *ControlPlane) ports() (ports, error) {
	path := filepath.Join(c.Dir, "controlplane", "ports.json")
	var p ports
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &p) == nil &&
		free(p.EtcdClient) && free(p.EtcdPeer) && free(p.APIServer) && free(p.Scheduler) && free(p.ControllerManager) {
		return p, nil
	}
	picked, err := freePorts(5)
	if err != nil {
		return ports{}, err
	}
	p = ports{picked[0], picked[1], picked[2], picked[3], picked[4]}
	data, err := json.Marshal(p)
	if err != nil {
		return ports{}, fmt.Errorf("controlplane: ports: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return ports{}, fmt.Errorf("controlplane: ports: %w", err)
	}
	return p, nil
}

func free(port int) bool {
	if port == 0 {
		return false
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// freePorts asks the kernel for n distinct ports, holding all of them open
// until the last is chosen so that none is handed out twice.
func freePorts(n int) ([]int, error) {
	var picked []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: free port: %w", err)
		}
		defer l.Close()
		picked = append(picked, l.Addr().(*net.TCPAddr).Port)
	}
	return picked, nil
}

func (c *ControlPlane) start(ctx context.Context, bins binaries) error {
	base := filepath.Join(c.Dir, "controlplane")
	logDir := filepath.Join(c.Dir, "logs")
	for _, d := range []string{base, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
	}
	p, err := c.ports()
	if err != nil {
		return err
	}
	keys := c.keys()
	if err := keys.ensure(serviceIP); err != nil {
		return err
	}
	c.Server = "https://127.0.0.1:" + strconv.Itoa(p.APIServer)
	if err := writeKubeconfig(c.Kubeconfig, c.Server, keys); err != nil {
		return err
	}
	if c.restCfg, err = restConfig(c.Kubeconfig); err != nil {
		return err
	}
	tlsCfg, err := adminTLS(keys)
	if err != nil {
		return err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(p.EtcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(p.EtcdPeer)
	etcd, err := c.run(ctx, "etcd", bins.etcd, logDir,
		"--name=knit",
		"--data-dir="+filepath.Join(base, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=knit="+peerURL,
		"--quota-backend-bytes=4294967296",
		"--snapshot-count=10000",
		"--log-outputs=stderr",
		"--logger=zap",
	)
	if err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, etcd, etcdURL+"/health", http.DefaultClient); err != nil {
		return err
	}

	apiserver, err := c.run(ctx, "kube-apiserver", bins.apiserver, logDir,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(p.APIServer),
		"--tls-cert-file="+keys.servingCert(),
		"--tls-private-key-file="+keys.servingKey(),
		"--client-ca-file="+keys.caCert(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+keys.serviceAccountPub(),
		"--service-account-signing-key-file="+keys.serviceAccountKey(),
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=RBAC",
		// Process nodes serve the kubelet API on their InternalIP (a
		// loopback address); their Hostname address, the node's name,
		// resolves nowhere. The API server presents its kubelet client
		// certificate and checks the node's serving certificate.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+keys.kubeletClientCert(),
		"--kubelet-client-key="+keys.kubeletClientKey(),
		"--kubelet-certificate-authority="+keys.caCert(),
		"--allow-privileged=true",
		"--profiling=false",
		"--event-ttl=1h",
	)
	if err != nil {
		return err
	}
	secure := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 5 * time.Second}
	if err := c.waitHealthy(ctx, apiserver, c.Server+"/readyz", secure); err != nil {
		return err
	}

	scheduler, err := c.run(ctx, "kube-scheduler", bins.scheduler, logDir,
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(p.Scheduler),
		"--cert-dir="+filepath.Join(base, "scheduler"),
		"--leader-elect=false",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	controllerManager, err := c.run(ctx, "kube-controller-manager", bins.controllerManager, logDir,
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(p.ControllerManager),
		"--cert-dir="+filepath.Join(base, "controller-manager"),
		"--leader-elect=false",
		"--profiling=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+keys.serviceAccountKey(),
		"--root-ca-file="+keys.caCert(),
		"--cluster-signing-cert-file="+keys.caCert(),
		"--cluster-signing-key-file="+keys.caKey(),
		"--controllers=*",
	)
	if err != nil {
		return err
	}
	// The scheduler and controller manager serve their health endpoints with
	// certificates they make up at start; on loopback, only liveness is asked
	// of them, so their certificate is not checked.
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	if err := c.waitHealthy(ctx, scheduler, "https://127.0.0.1:"+strconv.Itoa(p.Scheduler)+"/healthz", probe); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, controllerManager, "https://127.0.0.1:"+strconv.Itoa(p.ControllerManager)+"/healthz", probe); err != nil {
		return err
	}
	return c.waitServiceAccount(ctx, controllerManager)
}

// waitServiceAccount waits for the controller manager to have made the
// default namespace's service account, the first thing a pod there needs.
func (c *ControlPlane) waitServiceAccount(ctx context.Context, cm *process) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	return c.poll(ctx, cm, "default service account", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

func (c *ControlPlane) waitHealthy(ctx context.Context, p *process, url string, client *http.Client) error {
	return c.poll(ctx, p, url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return backoff.Permanent(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
}

// startTimeout bounds each readiness wait: a cold API server on a loaded
// 2-core machine has been seen to take tens of seconds.
const startTimeout = 3 * time.Minute

// poll retries check until it succeeds, p exits, or startTimeout passes; a
// failure carries the end of p's log, which is where the reason is.
func (c *ControlPlane) poll(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	started := time.Now()
	var last error
	op := func() error {
		select {
		case <-p.sp.Done():
			return backoff.Permanent(fmt.Errorf("%s exited: %w", p.name, p.sp.Err()))
		default:
		}
		last = check(ctx)
		return last
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(20*time.Millisecond), backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		if last != nil && !errors.Is(err, last) {
			err = fmt.Errorf("%w (last: %v)", err, last)
		}
		return fmt.Errorf("controlplane: waiting for %s: %w\n%s", what, err, p.logTail())
	}
	c.log.Info("ready", "component", p.name, "check", what, "after", time.Since(started).Round(time.Millisecond))
	return nil
}

// process is one component the control plane started, supervised once the
// control plane is up (see Supervise).
type process struct {
	name    string
	sp      *supervise.Process
	logFile *os.File
	logPath string
}

func (c *ControlPlane) run(ctx context.Context, name, bin, logDir string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %s log: %w", name, err)
	}
	sp, err := supervise.Start(supervise.Config{
		Name: name,
		Command: func() (*exec.Cmd, error) {
			fmt.Fprintf(logFile, "---- %s start %s\n", name, time.Now().Format(time.RFC3339))
			// Not exec.CommandContext: the processes must outlive the context
			// that started them and end only through Stop or the death of
			// this process.
			cmd := exec.Command(bin, args...)
			cmd.Stdout = logFile
			cmd.Stderr = logFile
			cmd.Dir = c.Dir
			// Pdeathsig ends a component when the process that started it
			// dies, so a test that times out or is interrupted leaves
			// nothing running.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return cmd, nil
		},
		Logger:   c.log.With("component", name),
		OnChange: c.cfg.OnChange,
	})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	p := &process{name: name, sp: sp, logFile: logFile, logPath: logPath}
	c.processes = append(c.processes, p)
	c.log.Info("started", "component", name, "pid", sp.PID(), "log", logPath)
	return p, ctx.Err()
}

func (p *process) stop(grace time.Duration) error {
	err := p.sp.Stop(grace)
	if cerr := p.logFile.Close(); cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		err = errors.Join(err, fmt.Errorf("controlplane: %s log: %w", p.name, cerr))
	}
	return err
}

// logTail is the end of a component's log, for error messages.
func (p *process) logTail() string {
	const max = 4096
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	tail, _ := io.ReadAll(f)
	return p.name + " log tail:\n" + string(tail)
}

func adminTLS(keys pki) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(keys.adminCert(), keys.adminKey())
	if err != nil {
		return nil, fmt.Errorf("controlplane: admin credential: %w", err)
	}
	caPEM, err := os.ReadFile(keys.caCert())
	if err != nil {
		return nil, fmt.Errorf("controlplane: ca: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	// Tests and benchmarks create pods by the hundred; client-go's default of
	// 5 requests a second would measure the client, not the cluster.
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}
