package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/renameio/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/test/supervise"
)

// State is what a background cluster records in Dir/local.json once it is
// ready, and removes when it has stopped.
type State struct {
	PID        int          `json:"pid"`
	Server     string       `json:"server"`
	Kubeconfig string       `json:"kubeconfig"`
	Nodes      []Node       `json:"nodes"`
	RM         *RMAddresses `json:"rm,omitempty"`
	Federation *Federation  `json:"federation,omitempty"`
	HadoopConf string       `json:"hadoopConf,omitempty"`
	Started    time.Time    `json:"started"`
}

// ErrAlreadyUp is returned by Up when Dir already has a running cluster.
var ErrAlreadyUp = errors.New("local cluster is already up")

// ErrNotUp is returned by Status and Down when Dir has no running cluster.
var ErrNotUp = errors.New("local cluster is not up")

func statePath(dir string) string { return filepath.Join(dir, "local.json") }

// LogPath is the background cluster's own log.
func LogPath(dir string) string { return filepath.Join(dir, "logs", "knit-local.log") }

// ReadState reads Dir's state and checks that its process still runs. A
// state whose process is gone (the machine rebooted, the process was
// killed) is removed and reported as ErrNotUp.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotUp
	}
	if err != nil {
		return nil, fmt.Errorf("localcluster: state: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("localcluster: state %s: %w", statePath(dir), err)
	}
	if !alive(st.PID) {
		_ = os.Remove(statePath(dir))
		return nil, ErrNotUp
	}
	return &st, nil
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie has ended; only its parent has yet to reap it.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// Run starts a cluster in this process, records its State, and serves until
// ctx ends or the process gets SIGTERM or SIGINT; then it stops everything
// and removes the State. `knit local up` runs it in the background.
func Run(ctx context.Context, opts Options) error {
	if opts.Dir == "" {
		return errors.New("localcluster: run needs a folder")
	}
	if st, err := ReadState(opts.Dir); err == nil {
		return fmt.Errorf("%w (pid %d)", ErrAlreadyUp, st.PID)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts.Keep = true
	c, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	st := State{PID: os.Getpid(), Server: c.ControlPlane.Server, Kubeconfig: c.ControlPlane.Kubeconfig, Nodes: c.Nodes, RM: c.RM, Federation: c.Federation, Started: time.Now().UTC()}
	if c.RM != nil || c.Federation != nil {
		st.HadoopConf = HadoopConfDir(opts.Dir)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = renameio.WriteFile(statePath(opts.Dir), data, 0o644)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("localcluster: state: %w", err), c.Stop(context.WithoutCancel(ctx)))
	}
	c.log.Info("local cluster up", "server", st.Server, "nodes", len(st.Nodes))
	<-ctx.Done()
	c.log.Info("local cluster stopping")
	// The state goes first: from here on a new `up` may start, and the
	// ports it needs are released by Stop before this process exits.
	_ = os.Remove(statePath(opts.Dir))
	return c.Stop(context.Background())
}

// upTimeout bounds Up's wait for a background cluster; a cold start on a
// busy 2-core machine takes well under a minute.
const upTimeout = 5 * time.Minute

// Up starts `command... --dir DIR --nodes N` (the program's own `local run`)
// in its own session, in the background, with its output in LogPath, and
// returns its State once it is ready. A Dir that already has a running
// cluster gives ErrAlreadyUp and its State.
func Up(ctx context.Context, opts Options, command []string) (*State, error) {
	if opts.Dir == "" {
		return nil, errors.New("localcluster: up needs a folder")
	}
	if st, err := ReadState(opts.Dir); err == nil {
		return st, ErrAlreadyUp
	} else if !errors.Is(err, ErrNotUp) {
		return nil, err
	}
	if err := CheckConfDir(opts.Dir, opts.ConfDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(LogPath(opts.Dir)), 0o755); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	logFile, err := os.OpenFile(LogPath(opts.Dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localcluster: log: %w", err)
	}
	defer logFile.Close()
	offset, _ := logFile.Seek(0, io.SeekEnd)
	args := append(command[1:len(command):len(command)], "--dir", opts.Dir, "--nodes", strconv.Itoa(max(opts.Nodes, 1)))
	if opts.BinDir != "" {
		args = append(args, "--bin-dir", opts.BinDir)
	}
	if opts.RMs > 1 {
		args = append(args, "--rms", strconv.Itoa(opts.RMs))
	}
	if opts.SubClusters > 1 {
		args = append(args, "--subclusters", strconv.Itoa(opts.SubClusters))
	}
	if len(opts.RMCommand) > 0 {
		args = append(args, "--rm-binary", opts.RMCommand[0])
	}
	if opts.ConfDir != "" {
		args = append(args, "--conf-dir", opts.ConfDir)
	}
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localcluster: start: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	ctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("localcluster: the cluster process ended (%v) before it was ready; its log:\n%s", err, tailFrom(LogPath(opts.Dir), offset))
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			return nil, fmt.Errorf("localcluster: waiting for the cluster: %w; see %s", ctx.Err(), LogPath(opts.Dir))
		case <-tick.C:
			if st, err := ReadState(opts.Dir); err == nil && st.PID == cmd.Process.Pid {
				return st, nil
			}
		}
	}
}

// tailFrom is what a log gained since offset, at most its last 8 KiB.
func tailFrom(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || offset > int64(len(data)) {
		return ""
	}
	data = data[offset:]
	if len(data) > 8192 {
		data = data[len(data)-8192:]
	}
	return string(bytes.TrimSpace(data))
}

// NodeStatus is one node as the API server sees it.
type NodeStatus struct {
	Node
	Ready bool `json:"ready"`
}

// Status is a running background cluster's state and its nodes' readiness.
type Status struct {
	State
	NodeStatus []NodeStatus `json:"nodeStatus"`
	// Components are the processes the cluster supervises, with their
	// restarts.
	Components []supervise.Status `json:"components"`
}

// StatusOf reports on Dir's background cluster: ErrNotUp when none runs,
// else its State and what the API server says of each node.
func StatusOf(ctx context.Context, dir string) (*Status, error) {
	st, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("localcluster: kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("localcluster: client: %w", err)
	}
	out := &Status{State: *st}
	if out.Components, err = readComponents(dir); err != nil {
		return nil, err
	}
	for _, n := range st.Nodes {
		ns := NodeStatus{Node: n}
		if node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			ns.Ready = Schedulable(node)
		} else {
			return nil, fmt.Errorf("localcluster: node %s: %w", n.Name, err)
		}
		out.NodeStatus = append(out.NodeStatus, ns)
	}
	return out, nil
}

// downTimeout covers the pods' grace periods and the control plane's own
// stop, each of which is bounded well below it.
const downTimeout = 2 * time.Minute

// Down stops Dir's background cluster and returns once its process has
// exited, which happens only after every process it started has ended.
func Down(ctx context.Context, dir string) error {
	st, err := ReadState(dir)
	if err != nil {
		return err
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("localcluster: stop pid %d: %w", st.PID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, downTimeout)
	defer cancel()
	b := backoff.NewConstantBackOff(100 * time.Millisecond)
	err = backoff.Retry(func() error {
		if alive(st.PID) {
			return errors.New("still running")
		}
		return nil
	}, backoff.WithContext(b, ctx))
	if err != nil {
		// Past the bound, the session goes at once: nothing may stay behind.
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		return fmt.Errorf("localcluster: pid %d did not stop in %s and was killed: %w", st.PID, downTimeout, err)
	}
	_ = os.Remove(statePath(dir))
	return nil
}
