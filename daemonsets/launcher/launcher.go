package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/knitdev/knit/rks/launch"
)

const (
	// DefaultKillDelay is YARN's yarn.nodemanager.sleep-delay-before-sigkill.ms.
	DefaultKillDelay = 250 * time.Millisecond
	// defaultPoll is how often the launch files are looked for.
	defaultPoll = 100 * time.Millisecond
	// drainTimeout bounds the wait for the container's output once it has
	// exited: a process that left the group may still hold the pipes.
	drainTimeout = 2 * time.Second
	// exitLaunchFailed is the exit code when the launcher itself fails: the
	// NodeManager's -1 for a launch that failed, as an exit status.
	exitLaunchFailed = 255
	// bash runs the launch script; the script needs it at this path anyway.
	bash = "/bin/bash"
)

// Config is where the launcher finds its launch files and leaves its
// termination message, and how it stops the container.
type Config struct {
	// LaunchDir is the launch folder; the pod's launch files appear at
	// launch.FilesPath(LaunchDir, PodUID).
	LaunchDir string
	// PodUID is the pod's UID, from launch.EnvPodUID.
	PodUID string
	// TerminationLog is the file the kubelet reads the termination message
	// from; empty leaves none.
	TerminationLog string
	// KillDelay is how long after a forwarded SIGTERM the process group
	// gets SIGKILL (yarn.nodemanager.sleep-delay-before-sigkill.ms,
	// DefaultKillDelay). Zero or less sends SIGKILL in place of SIGTERM, as
	// YARN does with 0.
	KillDelay time.Duration
	// Poll is how often the launch files are looked for; zero means 100 ms.
	Poll time.Duration
	// Reap makes the launcher reap every child that ends, the orphans the
	// container leaves included, as PID 1 must. Set it only when nothing
	// else in the process waits for children.
	Reap bool
	// Environ is the environment the launch script starts from, the
	// image's; nil means os.Environ().
	Environ []string
	// Stdout and Stderr receive the container's output; nil means
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Logger logs the launcher's own events; nil logs text to Stderr.
	Logger *slog.Logger
}

// Signals returns the signals the launcher forwards to the container's
// process group; knit-launcher's main relays these to Run.
func Signals() []os.Signal {
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT}
}

// Run waits for the launch files, runs the container and returns the exit
// code knit-launcher exits with: the container's (128+n when signal n
// ended it), launch.ExitLocalizationFailed when knit-node could not
// prepare the container, 128+n when signal n (SIGTERM or SIGINT) or, as a
// SIGTERM, the end of ctx stopped the pod before its launch, and 255 when
// the launcher itself failed. Every failure leaves a termination message.
//
// Signals are read from signals. Before the launch there is nothing to
// signal, so only SIGTERM and SIGINT count there; once the container runs,
// each is forwarded to its process group, and the end of ctx is forwarded
// as one SIGTERM.
func Run(ctx context.Context, cfg Config, signals <-chan os.Signal) int {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(cfg.Stderr, nil))
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = defaultPoll
	}
	log := cfg.Logger
	fail := func(containerID string, err error) int {
		log.Error("launcher: container not run", "container", containerID, "err", err)
		if werr := writeTerminationMessage(cfg.TerminationLog, err.Error()); werr != nil {
			log.Error("launcher: no termination message", "err", werr)
		}
		return exitLaunchFailed
	}

	f, stopped, err := wait(ctx, cfg, signals)
	if err != nil {
		return fail("", err)
	}
	if stopped != 0 {
		// ContainerLaunch's words for a container killed before its launch.
		if err := writeTerminationMessage(cfg.TerminationLog, "Container terminated before launch."); err != nil {
			log.Error("launcher: no termination message", "err", err)
		}
		return stopped
	}
	if f.Failure != "" {
		log.Error("launcher: container cannot start", "container", f.ContainerID, "failure", f.Failure)
		if err := writeTerminationMessage(cfg.TerminationLog, launch.LocalizationFailureMessage(f.Failure)); err != nil {
			log.Error("launcher: no termination message", "err", err)
		}
		return launch.ExitLocalizationFailed
	}

	code, stderr, err := runContainer(ctx, cfg, f, signals)
	if err != nil {
		return fail(f.ContainerID, err)
	}
	if code != 0 {
		var ef *errorFile
		if len(f.LogDirs) > 0 {
			if ef, err = readErrorFile(f.LogDirs[0]); err != nil {
				log.Warn("launcher: diagnostics without the error file", "err", err)
			}
		}
		if err := writeTerminationMessage(cfg.TerminationLog, diagnostics(f.ContainerID, code, stderr, ef)); err != nil {
			log.Error("launcher: no termination message", "err", err)
		}
	}
	return code
}

// wait polls for the launch files until they appear, or returns the exit
// code of a stop request that came first.
func wait(ctx context.Context, cfg Config, signals <-chan os.Signal) (launch.Files, int, error) {
	if cfg.LaunchDir == "" || cfg.PodUID == "" {
		return launch.Files{}, 0, fmt.Errorf("launcher: no launch folder or pod UID (%s)", launch.EnvPodUID)
	}
	path := launch.FilesPath(cfg.LaunchDir, cfg.PodUID)
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for {
		f, ok, err := readFiles(path)
		if err != nil || ok {
			return f, 0, err
		}
		select {
		case <-ctx.Done():
			return launch.Files{}, exitTerminated, nil
		case s := <-signals:
			if s == syscall.SIGTERM || s == syscall.SIGINT {
				return launch.Files{}, 128 + int(s.(syscall.Signal)), nil
			}
		case <-t.C:
		}
	}
}

// readFiles reads the launch files at path; ok is false while there are
// none. knit-node writes them atomically, so what exists is whole.
func readFiles(path string) (f launch.Files, ok bool, err error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("launcher: open launch files: %w", err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, launch.MaxFilesBytes+1))
	if err != nil {
		return f, false, fmt.Errorf("launcher: read launch files: %w", err)
	}
	f, err = launch.DecodeFiles(b)
	if err != nil {
		return f, false, fmt.Errorf("launcher: %s: %w", path, err)
	}
	return f, true, nil
}

// runContainer writes the launch script, runs it and forwards signals to
// it until it exits; it returns the exit code and the tail of the script's
// stderr.
func runContainer(ctx context.Context, cfg Config, f launch.Files, signals <-chan os.Signal) (int, []byte, error) {
	log := cfg.Logger.With("container", f.ContainerID)
	admin := adminEnv(cfg.Environ)
	addOpens := ""
	if usesAddOpens(f) {
		var why string
		addOpens, why = AddOpens(f, admin, cfg.Environ)
		log.Info("launcher: <ADD_OPENS> expanded", "flags", addOpens, "because", why)
	}
	script := Script(f, admin, addOpens)
	if err := os.WriteFile(filepath.Join(f.WorkDir, ScriptName), []byte(script), 0o700); err != nil {
		return 0, nil, fmt.Errorf("launcher: write launch script: %w", err)
	}
	logDir := ""
	if len(f.LogDirs) > 0 {
		logDir = f.LogDirs[0]
	}
	stderrTail := &tail{n: tailBytes}
	out := fanout{cfg.Stdout}
	errs := fanout{cfg.Stderr, stderrTail}
	// The NodeManager's script sends its own output to these two files; the
	// launcher copies it there and to the pod's log.
	if logDir != "" {
		for name, to := range map[string]*fanout{prelaunchOut: &out, prelaunchErr: &errs} {
			file, err := os.OpenFile(filepath.Join(logDir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
			if err != nil {
				log.Warn("launcher: no prelaunch log", "err", err)
				continue
			}
			defer file.Close()
			*to = append(*to, file)
		}
	}

	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, fmt.Errorf("launcher: open %s: %w", os.DevNull, err)
	}
	defer devNull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, nil, fmt.Errorf("launcher: stdout pipe: %w", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return 0, nil, fmt.Errorf("launcher: stderr pipe: %w", err)
	}
	defer errR.Close()
	proc, err := os.StartProcess(bash, []string{"bash", ScriptName}, &os.ProcAttr{
		Dir:   f.WorkDir,
		Env:   cfg.Environ,
		Files: []*os.File{devNull, outW, errW},
		// A session, and so a process group, of its own, as both of the
		// NodeManager's executors start the script (`exec setsid`,
		// setsid()), so that signals reach every process of the container.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		return 0, nil, fmt.Errorf("launcher: start launch script: %w", err)
	}
	defer proc.Release()
	group := proc.Pid

	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(out, outR) })
	copies.Go(func() { _, _ = io.Copy(errs, errR) })

	type exit struct {
		status syscall.WaitStatus
		err    error
	}
	exited := make(chan exit, 1)
	go func() {
		ws, err := waitFor(proc.Pid, cfg.Reap)
		exited <- exit{ws, err}
	}()

	send := func(sig syscall.Signal) {
		if err := syscall.Kill(-group, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("launcher: signal not sent", "signal", sig, "err", err)
		}
	}
	// Thread dumps asked before the launch are not the process's to answer.
	dumpsPath := launch.ThreadDumpsPath(cfg.LaunchDir, cfg.PodUID)
	dumps := readCount(dumpsPath)
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
	var (
		killTimer *time.Timer
		kill      <-chan time.Time
		done      = ctx.Done()
		status    exit
	)
	stop := func() {
		if cfg.KillDelay <= 0 {
			send(syscall.SIGKILL)
			return
		}
		send(syscall.SIGTERM)
		if killTimer == nil {
			killTimer = time.NewTimer(cfg.KillDelay)
			kill = killTimer.C
		}
	}
wait:
	for {
		select {
		case s := <-signals:
			sig, ok := s.(syscall.Signal)
			if !ok {
				continue
			}
			log.Info("launcher: forwarding signal", "signal", sig)
			if sig == syscall.SIGTERM {
				stop()
			} else {
				send(sig)
			}
		case <-done:
			done = nil
			log.Info("launcher: stopping container", "cause", context.Cause(ctx))
			stop()
		case <-kill:
			kill = nil
			send(syscall.SIGKILL)
		case <-poll.C:
			// Asks within one poll get one signal, as the kernel merges
			// a pending SIGQUIT with the next anyway.
			if n := readCount(dumpsPath); n > dumps {
				dumps = n
				log.Info("launcher: thread dump asked", "count", n)
				send(syscall.SIGQUIT)
			}
		case status = <-exited:
			break wait
		}
	}
	if killTimer != nil {
		killTimer.Stop()
	}
	// What is left of the group goes with its leader, as it would with the
	// pod; that also closes the pipes it holds.
	send(syscall.SIGKILL)
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		outR.Close()
		errR.Close()
		<-drained
	}
	if status.err != nil {
		return 0, nil, status.err
	}
	return exitCode(status.status), stderrTail.buf, nil
}

// waitFor waits for the process pid to end. With reap, it waits for any
// child, so the orphans PID 1 inherits are reaped on the way.
func waitFor(pid int, reap bool) (syscall.WaitStatus, error) {
	target := pid
	if reap {
		target = -1
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(target, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("launcher: wait for the launch script: %w", err)
		}
		if got == pid {
			return ws, nil
		}
	}
}

// exitCode is the status bash would report for ws: 128+n for signal n.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// adminEnv is yarn.nodemanager.admin-env as YARN ships it,
// MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX: the node's value, when it has one,
// over the application's.
func adminEnv(environ []string) []launch.EnvVar {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "MALLOC_ARENA_MAX="); ok && v != "" {
			return []launch.EnvVar{{Name: "MALLOC_ARENA_MAX", Value: v}}
		}
	}
	return nil
}

// fanout writes to every writer whatever any one of them does: a broken
// pod log must not stop the prelaunch file or the stderr tail.
type fanout []io.Writer

func (w fanout) Write(p []byte) (int, error) {
	for _, to := range w {
		_, _ = to.Write(p)
	}
	return len(p), nil
}

// readCount reads a count file knit-node writes; none, or one that does not
// read, is 0.
func readCount(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0
	}
	return n
}
