package procnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimSpec is <n>.spec.json: what the shim runs and where it reports. The
// node writes it before launching the shim and never changes it; the fields
// after ShimLog are the node's own bookkeeping, read back after a restart.
type shimSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Mounts are the container's paths and where they are on the host,
	// for commands exec'd in it later.
	Mounts  []pathMapping `json:"mounts,omitempty"`
	Log     string        `json:"log"`
	State   string        `json:"state"`
	Exit    string        `json:"exit"`
	ShimLog string        `json:"shimLog"`

	Pod         string    `json:"pod"` // namespace/name, for ps output and logs
	Container   string    `json:"container"`
	Restart     int       `json:"restart"`
	ContainerID string    `json:"containerID"`
	Image       string    `json:"image"`
	BackoffStep int       `json:"backoffStep"` // see backoffDelay
	CreatedAt   time.Time `json:"createdAt"`
}

// shimState is <n>.state.json, written by the shim once the container
// process runs. ShimStart (clock ticks since boot, /proc/<pid>/stat field
// 22) tells the shim apart from a later process that reuses its pid.
type shimState struct {
	ShimPID   int       `json:"shimPID"`
	ShimStart uint64    `json:"shimStart"`
	BootID    string    `json:"bootID"` // /proc/sys/kernel/random/boot_id: pids mean nothing across boots
	PID       int       `json:"pid"`    // the container process, leader of its process group
	StartedAt time.Time `json:"startedAt"`
}

// exitRecord is <n>.exit.json, written once when the run is over: by the
// shim normally, by the node when the shim could not start or vanished.
type exitRecord struct {
	ExitCode   int       `json:"exitCode"` // 128+signal when killed by a signal
	Signal     int       `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"` // StartError, ContainerStatusUnknown; empty: decided by exit code
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// killRecord is <n>.kill.json: the node decided to stop this run, and why.
// It survives a node restart, so a container killed for an image change is
// started again even if the node restarted in between.
type killRecord struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Reasons for a killRecord.
const (
	killImageChanged = "ImageChanged"
	killPodDeleted   = "PodDeleted"
	killPodCompleted = "PodCompleted" // sidecars once the regular containers are done
	killStopAll      = "StopAll"
	killPodGone      = "PodGone"
)

// Reasons the node writes into exit records it makes up itself.
const (
	reasonStartError      = "StartError"
	reasonStatusUnknown   = "ContainerStatusUnknown"
	lostShimMessage       = "The container's shim ended without recording an exit"
	exitCodeStartError    = 128
	exitCodeStatusUnknown = 137
)

// attempt is everything on disk about one run of a container.
type attempt struct {
	Paths attemptPaths
	Spec  shimSpec
	State *shimState  // nil until the process ran
	Exit  *exitRecord // nil while it runs
	Kill  *killRecord // nil unless the node stopped it
}

// procRuntime starts, finds and stops shims. It holds no state of its own:
// everything is in the files, so a new procRuntime on the same folder (a
// restarted node) sees the same processes.
type procRuntime struct {
	exe    string // this binary, re-executed as the shim
	bootID string
	log    *slog.Logger
}

func newProcRuntime(log *slog.Logger) (*procRuntime, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the shim: %w", err)
	}
	return &procRuntime{exe: exe, bootID: readBootID(), log: log}, nil
}

func readBootID() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// start writes spec and launches its shim. When it returns nil the run has
// either a state file (the process runs) or an exit file (it could not be
// started); ctx is not used to abort the launch, which takes milliseconds,
// because a half-done launch would leave a shim no one records.
func (r *procRuntime) start(ctx context.Context, ap attemptPaths, spec shimSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(ap.Spec), filepath.Dir(ap.Log)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("start %s: %w", spec.Container, err)
		}
	}
	spec.Log, spec.State, spec.Exit, spec.ShimLog = ap.Log, ap.State, ap.Exit, ap.ShimLog
	if err := writeJSONAtomic(ap.Spec, spec); err != nil {
		return fmt.Errorf("start %s: %w", spec.Container, err)
	}
	msg, err := r.launch(ap, spec)
	if err == nil && msg == launchOK {
		return nil
	}
	// The shim did not report; record the run as failed to start so the
	// pod's status and restart logic see it like any other start error.
	if err == nil {
		err = fmt.Errorf("launch shim: shim reported %q", strings.TrimSpace(msg))
	}
	if _, statErr := os.Stat(ap.Exit); statErr == nil {
		return nil // the shim recorded the outcome itself before failing
	}
	now := time.Now()
	if werr := writeJSONAtomic(ap.Exit, exitRecord{ExitCode: exitCodeStartError, Reason: reasonStartError,
		Message: err.Error(), StartedAt: now, FinishedAt: now}); werr != nil {
		return fmt.Errorf("start %s: %w; %w", spec.Container, err, werr)
	}
	r.log.Warn("shim launch failed", "pod", spec.Pod, "container", spec.Container, "err", err)
	return nil
}

// launchTimeout bounds the wait for a shim's report; it takes milliseconds.
const launchTimeout = 30 * time.Second

// launch starts the shim through /bin/sh so that it is not our child (see
// the protocol in shim.go) and returns what it reported on fd 3.
func (r *procRuntime) launch(ap attemptPaths, spec shimSpec) (string, error) {
	shimLog, err := os.OpenFile(ap.ShimLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer shimLog.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer pr.Close()
	// "knit-shim <pod>/<container>" only labels the process for ps.
	cmd := exec.Command("/bin/sh", "-c", `"$0" "$@" &`, r.exe, "knit-shim", spec.Pod+"/"+spec.Container)
	cmd.Env = shimEnv(os.Environ(), ap.Spec)
	cmd.Stdout, cmd.Stderr = shimLog, shimLog
	cmd.ExtraFiles = []*os.File{pw}
	// Out of the node's process group from the start, so a Ctrl-C meant
	// for the node never reaches a shim that has not called setsid yet.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Run()
	_ = pw.Close() // now only the shim holds the write end
	if err != nil {
		return "", fmt.Errorf("launch shim: %w", err)
	}
	_ = pr.SetReadDeadline(time.Now().Add(launchTimeout))
	out, err := io.ReadAll(pr)
	if err != nil {
		return string(out), fmt.Errorf("read shim report: %w", err)
	}
	return string(out), nil
}

// load reads the files of one run. The spec must exist.
func (r *procRuntime) load(ap attemptPaths) (*attempt, error) {
	a := &attempt{Paths: ap}
	ok, err := readJSON(ap.Spec, &a.Spec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("load %s: %w", ap.Spec, os.ErrNotExist)
	}
	var st shimState
	if ok, err := readJSON(ap.State, &st); err != nil {
		return nil, err
	} else if ok {
		a.State = &st
	}
	if err := r.reloadExit(a); err != nil {
		return nil, err
	}
	var k killRecord
	if ok, err := readJSON(ap.Kill, &k); err != nil {
		return nil, err
	} else if ok {
		a.Kill = &k
	}
	return a, nil
}

func (r *procRuntime) reloadExit(a *attempt) error {
	var ex exitRecord
	ok, err := readJSON(a.Paths.Exit, &ex)
	if err != nil {
		return err
	}
	if ok {
		a.Exit = &ex
	}
	return nil
}

// settle makes a run's files tell the truth about a run without an exit
// record: if its shim is gone (or its pid now belongs to someone else), the
// run is recorded as ended with ContainerStatusUnknown and any process it
// left behind is killed. It reports whether the run is still going.
func (r *procRuntime) settle(a *attempt) (running bool, err error) {
	if a.Exit != nil {
		return false, nil
	}
	// A shim of an earlier boot is gone, and so are its processes; its pid
	// and session id may belong to anyone now.
	sameBoot := a.State == nil || a.State.BootID == "" || a.State.BootID == r.bootID
	if a.State != nil && sameBoot && shimAlive(a.State, a.Paths.Spec) {
		return true, nil
	}
	// A run whose shim has not written its state yet is being launched,
	// not lost: start records the outcome of a launch that never reports
	// within launchTimeout. Reading it as vanished here would restart a
	// container that is about to run.
	if a.State == nil && time.Since(a.Spec.CreatedAt) < launchTimeout {
		if err := r.reloadExit(a); err != nil || a.Exit != nil {
			return false, err
		}
		var st shimState
		ok, err := readJSON(a.Paths.State, &st)
		if err != nil || !ok {
			return err == nil, err
		}
		a.State = &st
		if shimAlive(a.State, a.Paths.Spec) {
			return true, nil
		}
	}
	// The shim writes the exit record before it exits; read again in case
	// it did so after we first looked.
	if err := r.reloadExit(a); err != nil {
		return false, err
	}
	if a.Exit != nil {
		return false, nil
	}
	started := a.Spec.CreatedAt
	if a.State != nil {
		started = a.State.StartedAt
		if sameBoot {
			signalTree(a.State, syscall.SIGKILL)
		}
	}
	ex := exitRecord{ExitCode: exitCodeStatusUnknown, Reason: reasonStatusUnknown, Message: lostShimMessage,
		StartedAt: started, FinishedAt: time.Now()}
	if err := writeJSONAtomic(a.Paths.Exit, ex); err != nil {
		return false, err
	}
	r.log.Warn("container shim vanished", "pod", a.Spec.Pod, "container", a.Spec.Container, "restart", a.Spec.Restart)
	a.Exit = &ex
	return false, nil
}

// stop ends a run as a container runtime stops a container: SIGTERM to
// the main process only (the container's PID 1, which passes it on as it
// sees fit: knit-launcher forwards it to its command's process group, so a
// SIGTERM to every process would reach the command twice), up to grace
// for the shim to record the exit, then SIGKILL to the whole tree. When
// the main process ends, the shim kills the rest of the tree itself. The
// shim is spared so it can record how the process ended; only if it is
// stuck too is it killed and the exit recorded here. ctx ending abandons
// the wait and leaves the processes as they are.
func (r *procRuntime) stop(ctx context.Context, a *attempt, grace time.Duration) error {
	if running, err := r.settle(a); err != nil || !running {
		return err
	}
	signalMain(a.State, syscall.SIGTERM)
	if done, err := r.waitExit(ctx, a, grace); err != nil || done {
		return err
	}
	signalTree(a.State, syscall.SIGKILL)
	if done, err := r.waitExit(ctx, a, 10*time.Second); err != nil || done {
		return err
	}
	if shimAlive(a.State, a.Paths.Spec) {
		_ = syscall.Kill(a.State.ShimPID, syscall.SIGKILL)
	}
	_, err := r.settle(a)
	return err
}

// waitExit polls until the run has an exit record (true), d passes
// (false), or ctx ends (its error).
func (r *procRuntime) waitExit(ctx context.Context, a *attempt, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		running, err := r.settle(a)
		if err != nil || !running {
			return err == nil, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// procStat is the part of /proc/<pid>/stat this package needs.
type procStat struct {
	PID, PPID, PGRP, Session int
	State                    byte
	Start                    uint64 // clock ticks after boot
}

func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

// parseProcStat reads "pid (comm) state ppid pgrp session ... starttime";
// comm may hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 > len(data) {
		return procStat{}, errors.New("malformed /proc stat")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data[:bytes.IndexByte(data, '(')])))
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 20 {
		return procStat{}, errors.New("malformed /proc stat: too few fields")
	}
	s := procStat{PID: pid, State: f[0][0]}
	var errs [4]error
	s.PPID, errs[0] = strconv.Atoi(f[1])
	s.PGRP, errs[1] = strconv.Atoi(f[2])
	s.Session, errs[2] = strconv.Atoi(f[3])
	s.Start, errs[3] = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return s, nil
}

// listProcs reads every process's stat; processes that end while it reads
// are skipped.
func listProcs() map[int]procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	procs := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			procs[pid] = s
		}
	}
	return procs
}

// shimAlive reports whether st's shim still runs: the pid exists, is not a
// zombie, started at the recorded clock tick, and, where /proc lets us read
// it, carries this run's spec path in its environment. The start time alone
// rules out pid reuse in practice; the environment makes it certain.
func shimAlive(st *shimState, specPath string) bool {
	s, err := readProcStat(st.ShimPID)
	if err != nil || s.Start != st.ShimStart || s.State == 'Z' || s.State == 'X' {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(st.ShimPID) + "/environ")
	if err != nil || len(env) == 0 {
		return true // unreadable (another user) or exiting; start time decides
	}
	want := []byte(envShimSpec + "=" + specPath + "\x00")
	return bytes.Contains(env, want)
}

// treeOf lists the processes of a run other than the shim: the members of
// the shim's session (it is the session leader; the container's process
// group lies inside that session, as a group cannot span sessions) and,
// while the shim lives, every descendant of the shim (it is a child
// subreaper, so even processes that left the session with setsid stay its
// descendants).
//
// A session id stays reserved while any member lives, so members found by
// it are the run's own, with one exception: once the whole session ended,
// the shim's pid may be reused by a new process that starts a session of
// its own. That new leader then holds the shim's pid with another start
// time, and nothing is returned.
func treeOf(procs map[int]procStat, st *shimState) []int {
	leader, ok := procs[st.ShimPID]
	if ok && leader.Start != st.ShimStart {
		return nil
	}
	alive := ok && leader.State != 'Z' && leader.State != 'X'
	in := map[int]bool{}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.PPID] = append(children[p.PPID], pid)
		if p.Session == st.ShimPID {
			in[pid] = true
		}
	}
	if alive {
		queue := []int{st.ShimPID}
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, c := range children[pid] {
				// ppid links form a tree, so each pid is queued once.
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	delete(in, st.ShimPID)
	out := make([]int, 0, len(in))
	for pid := range in {
		if procs[pid].State != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// signalMain sends sig to the run's main process, if that pid is still
// one of the run's processes (once reaped, it may be anyone's).
func signalMain(st *shimState, sig syscall.Signal) {
	for _, pid := range treeOf(listProcs(), st) {
		if pid == st.PID {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// signalTree sends sig to every process of the run except the shim, the
// container's main process first: were its children to go first, a shell
// waiting for them could end normally (exit 0) before its own signal came.
func signalTree(st *shimState, sig syscall.Signal) {
	pids := treeOf(listProcs(), st)
	for _, pid := range pids {
		if pid == st.PID {
			_ = syscall.Kill(pid, sig)
		}
	}
	for _, pid := range pids {
		if pid != st.PID {
			_ = syscall.Kill(pid, sig)
		}
	}
}
