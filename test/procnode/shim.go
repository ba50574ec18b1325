package procnode

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The shim protocol. To start a run, the node writes the run's spec file
// and has /bin/sh start its own binary in the background, with
// envShimSpec naming the spec file and the write end of a pipe as fd 3;
// sh exits at once. The shim is thus an orphan, adopted by init: the node
// is never its parent, never has to reap it, and can die or restart without
// taking the shim along. The shim makes itself a session leader, starts the
// container process, records it, and reports "ok" on fd 3 (or, if the
// process could not be started, records that as the run's exit and reports
// "ok" all the same: the outcome is on disk). Anything else on fd 3, or
// nothing, means the launch itself failed.
const (
	envShimSpec = "KNIT_PROCNODE_SHIM"
	launchOK    = "ok"

	// defaultPath is what a container gets when its environment has no
	// PATH, like a container runtime's default.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER for prctl(2).
	prSetChildSubreaper = 36

	// shimDrainTimeout bounds how long the shim waits for the rest of the
	// process tree to die after the container's main process ended.
	shimDrainTimeout = 10 * time.Second
)

// RunShimIfRequested must be the first call in main() and in TestMain of
// any test binary that runs process nodes: when the process was
// re-executed as a container shim it runs the shim and exits (the one place
// this package ends a process, because the shim is the whole process);
// otherwise it returns at once.
func RunShimIfRequested() {
	specPath := os.Getenv(envShimSpec)
	if specPath == "" {
		return
	}
	os.Exit(runShim(specPath))
}

// shimEnv is the environment the shim process itself runs with (not the
// container's, which comes from the spec). A binary built with -race
// sleeps a second before it exits unless told otherwise; the shim's exit
// is on the path of every container stop, so it is told otherwise.
func shimEnv(env []string, specPath string) []string {
	out := make([]string, 0, len(env)+2)
	gorace := "atexit_sleep_ms=0"
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, envShimSpec+"="):
		case strings.HasPrefix(kv, "GORACE="):
			if strings.Contains(kv, "atexit_sleep_ms") {
				gorace = strings.TrimPrefix(kv, "GORACE=")
			} else {
				gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
			}
		default:
			out = append(out, kv)
		}
	}
	return append(out, "GORACE="+gorace, envShimSpec+"="+specPath)
}

// runShim runs the container process described by the spec and records its
// start and end.
func runShim(specPath string) int {
	ready := os.NewFile(3, "ready")
	// The container must not inherit the report pipe, or the node would
	// wait for it to end before it hears the report.
	syscall.CloseOnExec(3)
	report := func(msg string) {
		if ready != nil {
			_, _ = ready.WriteString(msg)
			_ = ready.Close()
			ready = nil
		}
	}
	// Its own session: no signal for the node's process group or terminal
	// reaches it, and it leads the session the container's processes join.
	if _, err := syscall.Setsid(); err != nil {
		report("setsid: " + err.Error())
		return 1
	}
	var spec shimSpec
	if _, err := readJSON(specPath, &spec); err != nil {
		report(err.Error())
		return 1
	}
	startFailed := func(msg string) int {
		now := time.Now()
		if err := writeJSONAtomic(spec.Exit, exitRecord{ExitCode: exitCodeStartError, Reason: reasonStartError,
			Message: msg, StartedAt: now, FinishedAt: now}); err != nil {
			report(err.Error())
			return 1
		}
		report(launchOK)
		return 0
	}
	if _, err := os.Stat(spec.Exit); err == nil {
		// The node already gave this run up (it crashed mid-launch and a
		// new node recorded the run as lost); do not start it behind its back.
		report(launchOK)
		return 0
	}
	// As a subreaper the shim inherits every orphan of the container, like
	// PID 1 of a container: the whole tree stays below it, so it can kill and
	// reap all of it when the main process ends.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return startFailed("prctl(PR_SET_CHILD_SUBREAPER): " + errno.Error())
	}
	logf, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return startFailed(err.Error())
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return startFailed(err.Error())
	}
	if len(spec.Argv) == 0 {
		return startFailed("no command")
	}
	argv0, err := lookPath(spec.Argv[0], spec.Env, spec.Dir)
	if err != nil {
		return startFailed(err.Error())
	}
	// stdout and stderr reach the log through the shim, which writes them
	// as CRI log records (crilog.go), each line with its time and stream.
	outR, outW, err := os.Pipe()
	if err != nil {
		return startFailed(err.Error())
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return startFailed(err.Error())
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	pid, err := syscall.ForkExec(argv0, spec.Argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: []uintptr{devnull.Fd(), outW.Fd(), errW.Fd()},
		// Its own process group, so forwarded signals reach the whole job
		// and never the shim.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	_ = outW.Close() // only the container's processes write now
	_ = errW.Close()
	if err != nil {
		return startFailed(fmt.Sprintf("exec %q: %v", spec.Argv[0], err))
	}
	startedAt := time.Now()
	_ = devnull.Close()
	logw := &criLogWriter{w: logf, now: time.Now}
	var copiers sync.WaitGroup
	for _, s := range []struct {
		r      *os.File
		stream string
	}{{outR, streamStdout}, {errR, streamStderr}} {
		copiers.Go(func() {
			defer s.r.Close()
			if err := logw.copyStream(s.r, s.stream); err != nil {
				fmt.Fprintln(os.Stderr, "knit-shim: log:", err)
			}
		})
	}
	self, err := readProcStat(os.Getpid())
	if err == nil {
		err = writeJSONAtomic(spec.State, shimState{ShimPID: os.Getpid(), ShimStart: self.Start, BootID: readBootID(),
			PID: pid, StartedAt: startedAt})
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return startFailed("record shim state: " + err.Error())
	}
	report(launchOK)

	ws, finishedAt := superviseChild(&shimState{ShimPID: os.Getpid(), ShimStart: self.Start, PID: pid}, sigs)
	// The tree is dead, so the pipes are at their end, unless a process
	// escaped the kill; the exit is recorded after shimDrainTimeout all
	// the same, and the shim's exit ends the copy.
	drained := make(chan struct{})
	go func() { copiers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(shimDrainTimeout):
	}
	_ = logf.Close()
	ex := exitRecord{ExitCode: ws.ExitStatus(), StartedAt: startedAt, FinishedAt: finishedAt}
	if ws.Signaled() {
		ex.Signal = int(ws.Signal())
		ex.ExitCode = 128 + ex.Signal
	}
	if err := writeJSONAtomic(spec.Exit, ex); err != nil {
		fmt.Fprintln(os.Stderr, "knit-shim:", err)
		return 1
	}
	return 0
}

// superviseChild forwards signals to the container's process group, reaps
// every child, and once the main process has ended kills whatever is left
// of the tree, as the end of a container's PID 1 ends the container. It
// returns the main process's wait status and when it ended.
func superviseChild(st *shimState, sigs <-chan os.Signal) (syscall.WaitStatus, time.Time) {
	pid := st.PID
	type reaped struct {
		pid int
		ws  syscall.WaitStatus
	}
	reapc := make(chan reaped)
	go func() {
		defer close(reapc)
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return // ECHILD: no child left, hence no descendant either
			}
			reapc <- reaped{wpid, ws}
		}
	}()
	killRest := func() {
		for _, p := range treeOf(listProcs(), st) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	var (
		mainWS   syscall.WaitStatus
		mainDone bool
		finished time.Time
		tick     <-chan time.Time
		giveUp   <-chan time.Time
	)
	for {
		select {
		case s := <-sigs:
			if !mainDone {
				_ = syscall.Kill(-pid, s.(syscall.Signal))
			}
		case r, ok := <-reapc:
			if !ok {
				return mainWS, finished
			}
			if r.pid == pid && !mainDone {
				mainWS, mainDone, finished = r.ws, true, time.Now()
				killRest()
				t := time.NewTicker(50 * time.Millisecond)
				defer t.Stop()
				tick = t.C
				giveUp = time.After(shimDrainTimeout)
			}
		case <-tick:
			killRest()
		case <-giveUp:
			return mainWS, finished
		}
	}
}

// lookPath finds file as exec would, but in the container's PATH rather
// than the shim's.
func lookPath(file string, env []string, dir string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil // relative names resolve against dir after chdir
	}
	pathEnv := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}
