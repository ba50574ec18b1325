package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/renameio/v2"

	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
)

const podUID = "0b7c2a8e-1111-4e4e-9c9c-000000000001"

// syncBuffer is a bytes.Buffer the launcher's output goroutines and its
// logger may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pod is one container's folders and the launcher's config for them.
type pod struct {
	cfg            Config
	work, logs     string
	stdout, stderr *syncBuffer
}

func newPod(t *testing.T) *pod {
	t.Helper()
	root := t.TempDir()
	p := &pod{
		work:   filepath.Join(root, "work"),
		logs:   filepath.Join(root, "logs"),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
	}
	for _, dir := range []string{p.work, p.logs, filepath.Join(root, "launch", podUID)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.cfg = Config{
		LaunchDir:      filepath.Join(root, "launch"),
		PodUID:         podUID,
		TerminationLog: filepath.Join(root, "termination-log"),
		KillDelay:      DefaultKillDelay,
		Poll:           10 * time.Millisecond,
		Stdout:         p.stdout,
		Stderr:         p.stderr,
	}
	return p
}

// files is a container of this pod running commands.
func (p *pod) files(commands ...string) launch.Files {
	return launch.Files{
		ContainerID: "container_1700000000000_0001_01_000002",
		User:        "alice",
		NMHost:      "node1",
		NMPort:      8041,
		NMHTTPPort:  8042,
		LocalDirs:   []string{filepath.Dir(p.work)},
		LogDirs:     []string{p.logs},
		WorkDir:     p.work,
		Commands:    commands,
	}
}

// deliver writes the launch files as knit-node does: whole, by a rename.
func (p *pod) deliver(t *testing.T, f launch.Files) {
	t.Helper()
	b, err := launch.EncodeFiles(f)
	if err != nil {
		t.Error(err)
		return
	}
	if err := renameio.WriteFile(launch.FilesPath(p.cfg.LaunchDir, p.cfg.PodUID), b, 0o600); err != nil {
		t.Error(err)
	}
}

// deliverLater delivers f once the launcher has polled a few times.
func (p *pod) deliverLater(t *testing.T, f launch.Files) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		p.deliver(t, f)
	}()
}

// run runs the launcher in the background; the result is its exit code.
func (p *pod) run(ctx context.Context, signals <-chan os.Signal) <-chan int {
	code := make(chan int, 1)
	go func() { code <- Run(ctx, p.cfg, signals) }()
	return code
}

func (p *pod) exit(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatalf("the launcher did not end; stderr:\n%s", p.stderr)
		return 0
	}
}

func (p *pod) message(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.cfg.TerminationLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// awaitFile waits until the container has made the file name in its work
// folder, its way of saying it runs.
func (p *pod) awaitFile(t *testing.T, name string, code <-chan int) {
	t.Helper()
	eventually.Within(t, 20*time.Second, func(context.Context) error {
		if _, err := os.Stat(filepath.Join(p.work, name)); err == nil {
			return nil
		}
		select {
		case c := <-code:
			t.Fatalf("the launcher ended with %d before %s appeared; stderr:\n%s", c, name, p.stderr)
		default:
		}
		return fmt.Errorf("%s has not appeared; stderr:\n%s", name, p.stderr)
	})
}

func TestRunWaitsForTheLaunchFilesThenRunsTheContainer(t *testing.T) {
	tests := []struct {
		name     string
		commands []string
		env      []launch.EnvVar
		want     int
		message  []string // in the termination message; none means no message
		stdout   string
		stderr   string
	}{
		{
			name: "a container that succeeds exits 0 and leaves no message",
			// The commands sit inside the script's double quotes, as in YARN:
			// the script expands $VAR before bash -c sees the command.
			commands: []string{`test $CONTAINER_ID = container_1700000000000_0001_01_000002 && test $PWD = $(pwd) && test -n $JVM_PID && echo $GREETING`},
			env:      []launch.EnvVar{{Name: "GREETING", Value: "hello $USER"}},
			stdout:   "hello alice\n",
		},
		{
			name:     "a failure keeps its exit code and quotes stderr",
			commands: []string{"echo oops >&2;", "exit 7"},
			want:     7,
			message:  []string{"Exception from container-launch.\nContainer id: container_1700000000000_0001_01_000002\nExit code: 7\n", "Last 4096 bytes of prelaunch.err :\noops\n"},
			stderr:   "oops\n",
		},
		{
			name:     "a failure quotes the error file in the log folder",
			commands: []string{"echo from-the-file > <LOG_DIR>/stderr;", "exit 3"},
			want:     3,
			message:  []string{"Exit code: 3\n", "Last 4096 bytes of stderr :\nfrom-the-file\n"},
		},
		{
			name:     "the application's variables refer to each other in any order",
			commands: []string{`echo "$A"`},
			env:      []launch.EnvVar{{Name: "A", Value: "{{B}}/a"}, {Name: "B", Value: "$C/b"}, {Name: "C", Value: "c"}},
			stdout:   "c/b/a\n",
		},
		{
			name:     "a container killed by a signal of its own exits 128+n",
			commands: []string{"kill -SEGV $$"},
			want:     128 + 11,
			message:  []string{"Exit code: 139\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			f := p.files(tt.commands...)
			f.Env = tt.env
			p.deliverLater(t, f)
			if got := p.exit(t, p.run(t.Context(), nil)); got != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tt.want, p.stderr)
			}
			msg := p.message(t)
			if len(tt.message) == 0 && msg != "" {
				t.Errorf("termination message %q, want none", msg)
			}
			for _, m := range tt.message {
				if !strings.Contains(msg, m) {
					t.Errorf("termination message %q lacks %q", msg, m)
				}
			}
			if !strings.HasSuffix(p.stdout.String(), tt.stdout) || !strings.Contains(p.stdout.String(), "Launching container\n") {
				t.Errorf("stdout %q, want the script's echoes and then %q", p.stdout, tt.stdout)
			}
			if !strings.Contains(p.stderr.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", p.stderr, tt.stderr)
			}
			// The NodeManager's files: the script in the work folder, its
			// output in the log folder.
			if script, err := os.ReadFile(filepath.Join(p.work, ScriptName)); err != nil || !strings.HasPrefix(string(script), "#!/bin/bash\n") {
				t.Errorf("%s: %.40q, %v", ScriptName, script, err)
			}
			if out, err := os.ReadFile(filepath.Join(p.logs, prelaunchOut)); err != nil || string(out) != p.stdout.String() {
				t.Errorf("%s = %q, %v; want stdout %q", prelaunchOut, out, err, p.stdout)
			}
			if errs, err := os.ReadFile(filepath.Join(p.logs, prelaunchErr)); err != nil || !strings.Contains(string(errs), tt.stderr) {
				t.Errorf("%s = %q, %v; want %q in it", prelaunchErr, errs, err, tt.stderr)
			}
		})
	}
}

func TestRunStopsBeforeTheLaunch(t *testing.T) {
	tests := []struct {
		name string
		stop func(cancel context.CancelFunc, signals chan<- os.Signal)
		want int
	}{
		{name: "the end of the context is a SIGTERM", stop: func(cancel context.CancelFunc, _ chan<- os.Signal) { cancel() }, want: 143},
		{name: "SIGTERM", stop: func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGTERM }, want: 143},
		{name: "SIGINT", stop: func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGINT }, want: 130},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			signals := make(chan os.Signal, 4)
			// Signals that would end nothing while nothing runs are passed over.
			signals <- syscall.SIGHUP
			signals <- syscall.SIGUSR1
			code := p.run(ctx, signals)
			time.Sleep(50 * time.Millisecond)
			tt.stop(cancel, signals)
			if got := p.exit(t, code); got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
			if msg := p.message(t); msg != "Container terminated before launch." {
				t.Errorf("termination message %q", msg)
			}
		})
	}
}

func TestRunReportsWhatKeepsTheContainerFromStarting(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(p *pod)
		want    int
		message string
		// localization: RGS reads the end back as a localization failure.
		localization bool
	}{
		{
			name: "a localization failure",
			prepare: func(p *pod) {
				p.deliverLater(t, launch.Files{ContainerID: "container_1700000000000_0001_01_000002", Failure: "Resource hdfs://nn/job.jar changed on src filesystem"})
			},
			want:         launch.ExitLocalizationFailed,
			message:      "Resource hdfs://nn/job.jar changed on src filesystem",
			localization: true,
		},
		{
			name: "launch files that do not decode",
			prepare: func(p *pod) {
				_ = renameio.WriteFile(launch.FilesPath(p.cfg.LaunchDir, p.cfg.PodUID), []byte("{"), 0o600)
			},
			want:    255,
			message: "decode files",
		},
		{
			name:    "no pod UID",
			prepare: func(p *pod) { p.cfg.PodUID = "" },
			want:    255,
			message: launch.EnvPodUID,
		},
		{
			name: "a work folder that is gone",
			prepare: func(p *pod) {
				f := p.files("true")
				f.WorkDir = filepath.Join(p.work, "gone")
				p.deliverLater(t, f)
			},
			want:    255,
			message: "launch script",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			tt.prepare(p)
			got := p.exit(t, p.run(t.Context(), nil))
			if got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
			msg := p.message(t)
			if !strings.Contains(msg, tt.message) {
				t.Errorf("termination message %q lacks %q", msg, tt.message)
			}
			if failure, ok := launch.LocalizationFailure(int32(got), msg); ok != tt.localization || (ok && failure != tt.message) {
				t.Errorf("read back as localization failure %q, %v; want %v", failure, ok, tt.localization)
			}
			if !strings.Contains(p.stderr.String(), tt.message) {
				t.Errorf("stderr %q lacks %q", p.stderr, tt.message)
			}
		})
	}
}

func TestRunStopsARunningContainerAsTheNodeManagerDoes(t *testing.T) {
	tests := []struct {
		name      string
		command   string
		killDelay time.Duration
		stop      func(cancel context.CancelFunc, signals chan<- os.Signal)
		want      int
		// termed: the container noted the SIGTERM, and lived on until the
		// SIGKILL after the kill delay.
		termed bool
	}{
		{
			name:      "SIGTERM ends it with 143",
			command:   "touch ready; sleep 30",
			killDelay: 10 * time.Second,
			stop:      func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGTERM },
			want:      143,
		},
		{
			name:      "the end of the context is a SIGTERM",
			command:   "touch ready; sleep 30",
			killDelay: 10 * time.Second,
			stop:      func(cancel context.CancelFunc, _ chan<- os.Signal) { cancel() },
			want:      143,
		},
		{
			name:      "SIGKILL follows when the container ignores SIGTERM",
			command:   "trap 'touch termed' TERM; touch ready; while :; do sleep 0.01; done",
			killDelay: 300 * time.Millisecond,
			stop:      func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGTERM },
			want:      137,
			termed:    true,
		},
		{
			name:      "no kill delay sends SIGKILL at once",
			command:   "trap '' TERM; touch ready; sleep 30",
			killDelay: 0,
			stop:      func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGTERM },
			want:      137,
		},
		{
			name:      "other signals are forwarded",
			command:   "trap 'exit 42' USR1; touch ready; while :; do sleep 0.01; done",
			killDelay: 10 * time.Second,
			stop:      func(_ context.CancelFunc, s chan<- os.Signal) { s <- syscall.SIGUSR1 },
			want:      42,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			p.cfg.KillDelay = tt.killDelay
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			signals := make(chan os.Signal, 1)
			p.deliver(t, p.files(tt.command))
			code := p.run(ctx, signals)
			p.awaitFile(t, "ready", code)
			tt.stop(cancel, signals)
			got := p.exit(t, code)
			if got != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tt.want, p.stderr)
			}
			// 143 and 42 show the container ended before the kill delay.
			if _, err := os.Stat(filepath.Join(p.work, "termed")); tt.termed && err != nil {
				t.Errorf("the container was killed before it noted the SIGTERM: %v", err)
			}
			if msg := p.message(t); !strings.Contains(msg, "Exit code") {
				t.Errorf("termination message %q", msg)
			}
		})
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of linux/prctl.h: orphans
// below a subreaper come to it, as they come to PID 1.
const prSetChildSubreaper = 36

func TestRunAsPID1ReapsTheOrphansOfTheContainer(t *testing.T) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("no subreaper: %v", errno)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)
	p := newPod(t)
	p.cfg.Reap = true
	// The subshell's child is orphaned at once and ends long before the
	// container does.
	p.deliver(t, p.files("(sleep 0.01 &);", "sleep 1;", "exit 5"))
	if got := p.exit(t, p.run(t.Context(), nil)); got != 5 {
		t.Errorf("exit %d, want 5; stderr:\n%s", got, p.stderr)
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid > 0 {
		t.Errorf("process %d was left a zombie", pid)
	} else if !errors.Is(err, syscall.ECHILD) {
		t.Errorf("children left: %d, %v", pid, err)
	}
}

func TestRunSendsSIGQUITWhenThreadDumpsAreAskedAfterTheLaunch(t *testing.T) {
	p := newPod(t)
	p.cfg.Poll = 10 * time.Millisecond
	dumps := launch.ThreadDumpsPath(p.cfg.LaunchDir, p.cfg.PodUID)
	if err := os.MkdirAll(filepath.Dir(dumps), 0o755); err != nil {
		t.Fatal(err)
	}
	// One asked before the launch is not replayed.
	if err := os.WriteFile(dumps, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.deliver(t, p.files("trap 'echo dump >> dumps' QUIT; touch ready; while [ ! -e stop ]; do sleep 0.01; done; exit 0"))
	code := p.run(t.Context(), make(chan os.Signal))
	p.awaitFile(t, "ready", code)
	if err := os.WriteFile(dumps, []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := p.work
	eventually.True(t, 5*time.Second, "a SIGQUIT to reach the container", func() bool {
		b, _ := os.ReadFile(filepath.Join(work, "dumps"))
		return strings.Count(string(b), "dump") >= 1
	})
	time.Sleep(100 * time.Millisecond) // a second signal would land by now
	if err := os.WriteFile(filepath.Join(work, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := p.exit(t, code); got != 0 {
		t.Errorf("exit %d; stderr:\n%s", got, p.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "dumps")); strings.Count(string(b), "dump") != 1 {
		t.Errorf("dumps %q: want one SIGQUIT for the count going from 1 to 3 in one step", b)
	}
}

func TestRunLaunchesAsTheNodeManagerDoes(t *testing.T) {
	jdk := filepath.Join(t.TempDir(), "jdk")
	if err := os.MkdirAll(jdk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jdk, "release"), []byte("JAVA_VERSION=\"17.0.15\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		environ  []string
		commands []string
		check    func(t *testing.T, p *pod)
	}{
		{
			name:     "<ADD_OPENS> follows the JVM of the container's JAVA_HOME",
			environ:  []string{"JAVA_HOME=" + jdk},
			commands: []string{"echo <ADD_OPENS> > opens"},
			check: func(t *testing.T, p *pod) {
				if got := readFile(t, filepath.Join(p.work, "opens")); got != AddOpensJDK17+"\n" {
					t.Errorf("<ADD_OPENS> became %q, want %q", got, AddOpensJDK17)
				}
			},
		},
		{
			name:     "the script leads a session of its own",
			commands: []string{"echo $$ > pid; cut -d' ' -f6 /proc/$$/stat > sid"},
			check: func(t *testing.T, p *pod) {
				if pid, sid := readFile(t, filepath.Join(p.work, "pid")), readFile(t, filepath.Join(p.work, "sid")); pid != sid {
					t.Errorf("the container's shell %s is in session %s, want its own", pid, sid)
				}
			},
		},
		{
			name:     "the log folder gets a copy of the script and the work folder's contents",
			commands: []string{"true"},
			check: func(t *testing.T, p *pod) {
				if got, want := readFile(t, filepath.Join(p.logs, ScriptName)), readFile(t, filepath.Join(p.work, ScriptName)); got != want {
					t.Errorf("the log folder's %s differs from the work folder's", ScriptName)
				}
				if st, err := os.Stat(filepath.Join(p.logs, ScriptName)); err != nil || st.Mode().Perm() != 0o640 {
					t.Errorf("the copy's mode: %v, %v; want 0640", st, err)
				}
				if got := readFile(t, filepath.Join(p.logs, directoryContents)); !strings.Contains(got, "ls -l:\n") || !strings.Contains(got, ScriptName) {
					t.Errorf("%s:\n%s", directoryContents, got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			p.cfg.Environ = append(os.Environ(), tt.environ...)
			p.deliverLater(t, p.files(tt.commands...))
			if got := p.exit(t, p.run(t.Context(), nil)); got != 0 {
				t.Fatalf("exit %d; stderr:\n%s", got, p.stderr)
			}
			tt.check(t, p)
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
