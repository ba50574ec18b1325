package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knitdev/knit/test/eventually"
)

// These tests start real processes under real shims (this test binary,
// re-executed) and use no Kubernetes at all.

func newTestRuntime(t *testing.T) *procRuntime {
	t.Helper()
	rt, err := newProcRuntime(testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// startRun starts argv as run 0 of a container called name under dir.
func startRun(t *testing.T, rt *procRuntime, dir, name string, argv ...string) attemptPaths {
	t.Helper()
	ap := attemptPathsIn(filepath.Join(dir, "_state", name), filepath.Join(dir, name), 0)
	spec := shimSpec{Argv: argv, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: dir,
		Pod: "test/pod", Container: name, CreatedAt: time.Now()}
	if err := rt.start(context.Background(), ap, spec); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(func() {
		// Whatever a failed test left running.
		if a, err := rt.load(ap); err == nil {
			_ = rt.stop(context.Background(), a, 0)
		}
	})
	return ap
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, d, what, cond)
}

// waitExited polls the run's files (as a fresh reader would) until it has
// an exit record.
func waitExited(t *testing.T, rt *procRuntime, ap attemptPaths) *attempt {
	t.Helper()
	var a *attempt
	waitFor(t, 20*time.Second, "exit of "+ap.Spec, func() bool {
		var err error
		if a, err = rt.load(ap); err != nil {
			t.Fatal(err)
		}
		running, err := rt.settle(a)
		if err != nil {
			t.Fatal(err)
		}
		return !running
	})
	return a
}

func TestShimExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		argv     []string
		code     int
		signal   int
		reason   string
		inLog    string
		inMsg    string
		noStateF bool
	}{
		{name: "success", argv: []string{"sh", "-c", "echo hello; echo oops >&2"}, code: 0, inLog: "hello\noops\n"},
		{name: "exit-code", argv: []string{"sh", "-c", "exit 3"}, code: 3},
		{name: "sigterm", argv: []string{"sh", "-c", "kill -TERM $$"}, code: 143, signal: 15},
		{name: "sigkill", argv: []string{"sh", "-c", "kill -KILL $$"}, code: 137, signal: 9},
		{name: "not-found", argv: []string{"no-such-binary-knit"}, code: 128, reason: reasonStartError,
			inMsg: `exec: "no-such-binary-knit": executable file not found in $PATH`, noStateF: true},
		{name: "not-executable", argv: []string{"/dev/null"}, code: 128, reason: reasonStartError,
			inMsg: "permission denied", noStateF: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt := newTestRuntime(t)
			dir := t.TempDir()
			ap := startRun(t, rt, dir, "c", tc.argv...)
			a := waitExited(t, rt, ap)
			if a.Exit.ExitCode != tc.code || a.Exit.Signal != tc.signal || a.Exit.Reason != tc.reason {
				t.Errorf("exit = %+v, want code %d signal %d reason %q", *a.Exit, tc.code, tc.signal, tc.reason)
			}
			if !strings.Contains(a.Exit.Message, tc.inMsg) {
				t.Errorf("message %q does not contain %q", a.Exit.Message, tc.inMsg)
			}
			if (a.State == nil) != tc.noStateF {
				t.Errorf("state = %+v, want state file: %v", a.State, !tc.noStateF)
			}
			if a.Exit.FinishedAt.Before(a.Exit.StartedAt) {
				t.Errorf("finished %v before started %v", a.Exit.FinishedAt, a.Exit.StartedAt)
			}
			if tc.inLog != "" {
				// stdout and stderr are two pipes: their lines interleave
				// as they arrive, each stream in its own order.
				data, err := os.ReadFile(ap.Log)
				got := strings.SplitAfter(string(criContent(data)), "\n")
				want := strings.SplitAfter(tc.inLog, "\n")
				slices.Sort(got)
				slices.Sort(want)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("log lines = %q, %v; want %q (log %q)", got, err, want, data)
				}
			}
		})
	}
}

func TestShimEnvironmentAndWorkingDir(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	ap := attemptPathsIn(filepath.Join(dir, "_state", "c"), filepath.Join(dir, "c"), 0)
	spec := shimSpec{Argv: []string{"sh", "-c", `echo "$FOO|$(pwd)|$KNIT_PROCNODE_SHIM"`},
		Env: []string{"PATH=" + os.Getenv("PATH"), "FOO=bar"}, Dir: dir, Container: "c"}
	if err := rt.start(context.Background(), ap, spec); err != nil {
		t.Fatal(err)
	}
	waitExited(t, rt, ap)
	raw, err := os.ReadFile(ap.Log)
	if err != nil {
		t.Fatal(err)
	}
	data := criContent(raw)
	realDir, _ := filepath.EvalSymlinks(dir)
	if want := "bar|" + realDir + "|\n"; string(data) != want {
		t.Errorf("output %q, want %q (the shim's own variables must not leak)", data, want)
	}
}

// pidsOf returns the processes of a running run other than its shim.
func pidsOf(st *shimState) []int {
	return treeOf(listProcs(), st)
}

// gone reports whether pid has ended (or is a zombie nobody reaped yet).
func gone(pid int, start uint64) bool {
	s, err := readProcStat(pid)
	return err != nil || s.Start != start || s.State == 'Z'
}

func TestStopKillsWholeProcessTree(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	// A process that left the session (setsid) is still below the shim,
	// which is a child subreaper.
	ap := startRun(t, rt, dir, "c", "sh", "-c", "sleep 1000 & sleep 1000 & setsid sleep 1000 & wait")
	a, err := rt.load(ap)
	if err != nil || a.State == nil {
		t.Fatalf("load: %v, state %+v", err, a)
	}
	var pids []int
	waitFor(t, 10*time.Second, "sh and three sleeps", func() bool {
		pids = pidsOf(a.State)
		return len(pids) >= 4
	})
	starts := map[int]uint64{}
	for _, pid := range pids {
		if s, err := readProcStat(pid); err == nil {
			starts[pid] = s.Start
		}
	}
	if err := rt.stop(context.Background(), a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if a.Exit == nil || a.Exit.ExitCode != 143 {
		t.Fatalf("exit = %+v, want 143 (sh ended by SIGTERM)", a.Exit)
	}
	for pid, start := range starts {
		waitFor(t, 5*time.Second, "pid "+strconv.Itoa(pid)+" gone", func() bool { return gone(pid, start) })
	}
	waitFor(t, 5*time.Second, "shim gone", func() bool { return gone(a.State.ShimPID, a.State.ShimStart) })
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	// The main process notes the SIGTERM and carries on; only the tree's
	// SIGKILL after the grace period ends it.
	termed := filepath.Join(dir, "termed")
	ap := startRun(t, rt, dir, "c", "sh", "-c", `trap "touch '`+termed+`'" TERM; sleep 1000 & while :; do wait; done`)
	a, _ := rt.load(ap)
	waitFor(t, 10*time.Second, "sleep started", func() bool { return len(pidsOf(a.State)) >= 2 })
	if err := rt.stop(context.Background(), a, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a.Exit == nil || a.Exit.ExitCode != 137 || a.Exit.Signal != 9 {
		t.Fatalf("exit = %+v, want 137 (SIGKILL after the grace period)", a.Exit)
	}
	if _, err := os.Stat(termed); err != nil {
		t.Errorf("killed before the main process noted its SIGTERM: %v", err)
	}
}

func TestOrphansDieWithMainProcess(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	// The background sleep outlives sh; as in a container whose PID 1
	// ended, it must not outlive the run.
	ap := startRun(t, rt, dir, "c", "sh", "-c", "sleep 1000 & echo $! > "+pidFile+"; exit 0")
	a := waitExited(t, rt, ap)
	if a.Exit.ExitCode != 0 {
		t.Fatalf("exit = %+v", a.Exit)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	// The exit record is written after the tree is gone, so no waiting here.
	if s, err := readProcStat(pid); err == nil && s.State != 'Z' && s.Session == a.State.ShimPID {
		t.Errorf("background sleep %d still runs after the run ended: %+v", pid, s)
	}
}

func TestFreshRuntimeAdoptsLiveShim(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ap := startRun(t, newTestRuntime(t), dir, "c", "sleep", "1000")

	// A restarted node: a new runtime that knows nothing but the folder.
	rt2 := newTestRuntime(t)
	a, err := rt2.load(ap)
	if err != nil {
		t.Fatal(err)
	}
	running, err := rt2.settle(a)
	if err != nil || !running {
		t.Fatalf("settle = %v, %v; want the shim adopted as running", running, err)
	}
	if err := rt2.stop(context.Background(), a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if a.Exit == nil || a.Exit.ExitCode != 143 {
		t.Fatalf("exit = %+v, want 143", a.Exit)
	}
}

func TestFreshRuntimeSeesExitThatHappenedWhileAway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ap := startRun(t, newTestRuntime(t), dir, "c", "sh", "-c", "exit 7")
	// Nobody watches; the exit record appears on its own.
	waitFor(t, 10*time.Second, "exit record", func() bool {
		_, err := os.Stat(ap.Exit)
		return err == nil
	})
	rt2 := newTestRuntime(t)
	a, err := rt2.load(ap)
	if err != nil {
		t.Fatal(err)
	}
	if running, _ := rt2.settle(a); running || a.Exit == nil || a.Exit.ExitCode != 7 {
		t.Fatalf("running %v, exit %+v; want ended with 7", running, a.Exit)
	}
}

func TestVanishedShimIsRecordedAndItsProcessesKilled(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	ap := startRun(t, rt, dir, "c", "sleep", "1000")
	a, _ := rt.load(ap)
	var pids []int
	waitFor(t, 10*time.Second, "sleep", func() bool { pids = pidsOf(a.State); return len(pids) == 1 })
	sleepStat, _ := readProcStat(pids[0])
	if err := syscall.Kill(a.State.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "shim dead", func() bool { return !shimAlive(a.State, ap.Spec) })
	a2 := waitExited(t, rt, ap)
	if a2.Exit.Reason != reasonStatusUnknown || a2.Exit.ExitCode != exitCodeStatusUnknown {
		t.Errorf("exit = %+v, want %s/%d", a2.Exit, reasonStatusUnknown, exitCodeStatusUnknown)
	}
	waitFor(t, 5*time.Second, "orphaned sleep killed", func() bool { return gone(pids[0], sleepStat.Start) })
}

func TestShimAliveRejectsPidReuse(t *testing.T) {
	t.Parallel()
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		st   shimState
		spec string
		want bool
	}{
		{"other start time", shimState{ShimPID: os.Getpid(), ShimStart: self.Start + 1}, "/x.spec.json", false},
		{"no such pid", shimState{ShimPID: 1 << 30, ShimStart: 1}, "/x.spec.json", false},
		// Our own pid and start time, but this process is not the shim of
		// that spec: its environment says so.
		{"not our shim", shimState{ShimPID: os.Getpid(), ShimStart: self.Start}, "/x.spec.json", false},
	}
	for _, tc := range cases {
		if got := shimAlive(&tc.st, tc.spec); got != tc.want {
			t.Errorf("%s: shimAlive = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	line := "4242 (we ird) (name) S 1 4242 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	s, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{PID: 4242, PPID: 1, PGRP: 4242, Session: 4240, State: 'S', Start: 987654}
	if s != want {
		t.Errorf("parse = %+v, want %+v", s, want)
	}
	if _, err := parseProcStat([]byte("garbage")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestTreeOf(t *testing.T) {
	t.Parallel()
	st := &shimState{ShimPID: 100, ShimStart: 5, PID: 101}
	base := map[int]procStat{
		101: {PID: 101, PPID: 100, PGRP: 101, Session: 100, State: 'S', Start: 6},
		102: {PID: 102, PPID: 101, PGRP: 102, Session: 102, State: 'S', Start: 7}, // left the session
		103: {PID: 103, PPID: 100, PGRP: 101, Session: 100, State: 'Z', Start: 7}, // zombie: nothing to signal
		104: {PID: 104, PPID: 1, PGRP: 101, Session: 100, State: 'S', Start: 8},   // orphan still in the session
		200: {PID: 200, PPID: 1, PGRP: 200, Session: 200, State: 'S', Start: 1},   // a stranger
	}
	with := func(extra ...procStat) map[int]procStat {
		m := map[int]procStat{}
		for k, v := range base {
			m[k] = v
		}
		for _, p := range extra {
			m[p.PID] = p
		}
		return m
	}
	cases := []struct {
		name  string
		procs map[int]procStat
		want  []int
	}{
		{"shim alive: session and descendants", with(procStat{PID: 100, PPID: 1, Session: 100, State: 'S', Start: 5}), []int{101, 102, 104}},
		{"shim gone: session only", with(), []int{101, 104}},
		{"shim a zombie: session only", with(procStat{PID: 100, PPID: 1, Session: 100, State: 'Z', Start: 5}), []int{101, 104}},
		{"shim pid reused: nothing", with(procStat{PID: 100, PPID: 1, Session: 100, State: 'S', Start: 9}), nil},
	}
	for _, tc := range cases {
		got := treeOf(tc.procs, st)
		sortInts(got)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: treeOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func sortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestRunOfAnotherBootIsLostWithoutKilling(t *testing.T) {
	t.Parallel()
	rt := newTestRuntime(t)
	dir := t.TempDir()
	ap := startRun(t, rt, dir, "c", "sleep", "1000")
	a, err := rt.load(ap)
	if err != nil {
		t.Fatal(err)
	}
	// The same files read after a reboot: the recorded pids mean nothing.
	other := &procRuntime{exe: rt.exe, bootID: "another-boot", log: rt.log}
	running, err := other.settle(a)
	if err != nil || running {
		t.Fatalf("settle = %v, %v; want not running", running, err)
	}
	if a.Exit == nil || a.Exit.Reason != reasonStatusUnknown {
		t.Errorf("exit = %+v", a.Exit)
	}
	if !shimAlive(a.State, ap.Spec) {
		t.Error("processes of this boot were killed on the word of another boot's record")
	}
	// The run's exit is recorded already, so clean-up's stop would skip it.
	signalTree(a.State, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "shim gone", func() bool { return !shimAlive(a.State, ap.Spec) })
}
