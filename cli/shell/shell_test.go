package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/webshell"
	"github.com/knitdev/knit/test/eventually"
)

// The test binary is also the client: run with these variables, it is
// `knit shell` (under a pseudo-terminal or pipes, as a user runs it).
const (
	envClient = "KNIT_SHELL_TEST_CLIENT"
	envRM     = "KNIT_SHELL_TEST_RM"
	envUser   = "KNIT_SHELL_TEST_USER"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(envClient); ok {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			panic(err)
		}
		os.Exit(Run(context.Background(), argv, Config{
			RMWeb: os.Getenv(envRM), User: os.Getenv(envUser), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		}))
	}
	os.Exit(m.Run())
}

const containerID = "container_1700000000000_0001_01_000002"

// cluster is one running container that alice may open a shell into.
type cluster struct{}

func (cluster) ShellContainer(_ context.Context, user string, id yarnid.ContainerID) (webshell.Container, error) {
	if id.String() != containerID {
		return webshell.Container{}, fmt.Errorf("%w: %s", webshell.ErrNoContainer, id)
	}
	return webshell.Container{App: id.Attempt.App, Access: webshell.Access{Modify: user == "alice", View: true, Owner: user == "alice"}}, nil
}

func (cluster) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod", Labels: map[string]string{
			launch.LabelContainer: id.String(), launch.LabelApplication: id.Attempt.App.String(), launch.LabelRole: launch.RoleTask,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: launch.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}, true
}

// localExec runs the shell's command on this machine, in a
// pseudo-terminal of its own for a terminal session, as a kubelet runs
// an exec in the container.
type localExec struct{}

type exitStatus int

func (e exitStatus) Error() string   { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitStatus) ExitStatus() int { return int(e) }

func (localExec) Exec(ctx context.Context, r webshell.ExecRequest) error {
	cmd := exec.CommandContext(ctx, r.Command[0], r.Command[1:]...)
	cmd.Env = append(os.Environ(), launch.EnvPodUID+"=none", "SHELL=/bin/sh", "PS1=knit$ ")
	var err error
	if r.TTY {
		err = runInTerminal(ctx, cmd, r)
	} else {
		// As a kubelet's exec, the command's end ends the session,
		// whether or not its input has ended.
		cmd.Stdout, cmd.Stderr = r.Stdout, r.Stderr
		in, perr := cmd.StdinPipe()
		if perr != nil {
			return perr
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(in, r.Stdin)
			in.Close()
		}()
		err = cmd.Wait()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitStatus(128 + int(ws.Signal()))
		}
		return exitStatus(ee.ExitCode())
	}
	return err
}

func runInTerminal(ctx context.Context, cmd *exec.Cmd, r webshell.ExecRequest) error {
	size := <-r.Sizes
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: size.Cols, Rows: size.Rows})
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case s, ok := <-r.Sizes:
				if !ok {
					return
				}
				_ = pty.Setsize(f, &pty.Winsize{Cols: s.Cols, Rows: s.Rows})
			}
		}
	}()
	go func() {
		defer wg.Done()
		// Ends with an error once the command's terminal is gone.
		_, _ = io.Copy(r.Stdout, f)
	}()
	// Stdin's copy ends when the session closes stdin after Exec.
	go func() { _, _ = io.Copy(f, r.Stdin) }()
	err = cmd.Wait()
	cancel()
	wg.Wait()
	return err
}

func serve(t *testing.T) string {
	t.Helper()
	s, err := webshell.New(webshell.Config{
		Apps: cluster{}, Pods: cluster{}, Exec: localExec{}, Events: events.NewFakeRecorder(100),
		Caller:   func(c echo.Context) (string, bool) { u := c.QueryParam("user.name"); return u, u != "" },
		Settings: webshell.Settings{Enabled: true}, LaunchDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	s.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	u, _ := url.Parse(srv.URL)
	return u.Host
}

func clientCmd(rm, user string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	argv, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), envClient+"="+string(argv), envRM+"="+rm, envUser+"="+user)
	return cmd
}

// terminal is the user's side of a pseudo-terminal running the client.
type terminal struct {
	t   *testing.T
	f   *os.File
	mu  sync.Mutex
	out bytes.Buffer
	wg  sync.WaitGroup
}

func startInTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, f: f}
	term.wg.Add(1)
	go func() {
		defer term.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		f.Close()
		term.wg.Wait()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

func (term *terminal) typeIn(s string) {
	if _, err := term.f.WriteString(s); err != nil {
		term.t.Fatal(err)
	}
}

// waitFor waits until the screen shows want count times.
func (term *terminal) waitFor(want string, count int) {
	term.t.Helper()
	eventually.True(term.t, 20*time.Second, fmt.Sprintf("%q %d times on the screen", want, count), func() bool {
		return strings.Count(term.screen(), want) >= count
	})
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

func TestInteractiveShellUnderATerminal(t *testing.T) {
	rm := serve(t)
	cmd := clientCmd(rm, "alice", containerID)
	term := startInTerminal(t, cmd)
	term.waitFor("knit$ ", 1)

	term.typeIn("stty size\r")
	term.waitFor("30 100", 1)

	// The user's terminal grows: the container's follows.
	if err := pty.Setsize(term.f, &pty.Winsize{Cols: 120, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	// SIGWINCH reaches knit shell when it does: ask until the answer
	// shows it, one prompt at a time.
	eventually.True(t, 20*time.Second, "the new size in the container", func() bool {
		prompts := strings.Count(term.screen(), "knit$ ")
		term.typeIn("stty size\r")
		term.waitFor("knit$ ", prompts+1)
		return strings.Contains(term.screen(), "40 120")
	})

	// Ctrl-C interrupts the command in the container, not knit shell.
	term.typeIn("echo sle\"\"eping; sleep 1000\r")
	term.waitFor("sleeping", 1)
	term.typeIn("\x03")
	term.typeIn("echo interrupted-$?\r")
	term.waitFor("interrupted-130", 1)

	term.typeIn("exit 7\r")
	if code := exitCode(t, cmd); code != 7 {
		t.Fatalf("knit shell exited %d, want the shell's 7; screen:\n%s", code, term.screen())
	}
}

func TestEndOfInputEndsTheInteractiveShell(t *testing.T) {
	rm := serve(t)
	cmd := clientCmd(rm, "alice", containerID)
	term := startInTerminal(t, cmd)
	term.waitFor("knit$ ", 1)
	term.typeIn("\x04")
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("knit shell exited %d after Ctrl-D, want 0; screen:\n%s", code, term.screen())
	}
}

func TestOneCommand(t *testing.T) {
	rm := serve(t)
	for _, tc := range []struct {
		name           string
		user           string
		args           []string
		stdin          string
		code           int
		stdout, stderr string
	}{
		{"keeps stdout and stderr apart and exits with the command's code", "alice",
			[]string{containerID, "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, "", 3, "out\n", "err\n"},
		{"reads stdin to its end", "alice", []string{containerID, "--", "sh", "-c", "tr a-z A-Z; exit 0"}, "shout\n", 0, "SHOUT\n", ""},
		{"runs the login shell on piped commands", "alice", []string{containerID}, "echo piped\nexit 4\n", 4, "piped\n", ""},
		{"refuses a user without the ACL", "bob", []string{containerID, "--", "true"}, "", exitRefused, "",
			"knit shell: User bob may not open a shell into container " + containerID},
		{"refuses an unknown container", "alice", []string{"container_1700000000000_0009_01_000002", "--", "true"}, "", exitRefused, "", "is unknown"},
		{"refuses a usage without a container", "alice", nil, "", exitUsage, "", "usage: knit shell"},
		{"refuses a -t without a terminal", "alice", []string{"-t", containerID, "--", "true"}, "", exitUsage, "", "-t needs a terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := clientCmd(rm, tc.user, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(tc.stdin), &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if code := exitCode(t, cmd); code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, and %q in stderr", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

func TestACommandGetsATerminalOnlyWithT(t *testing.T) {
	rm := serve(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{containerID, "--", "sh", "-c", "if [ -t 0 ]; then echo has-a-tty; else echo has-no-tty; fi"}, "has-no-tty"},
		{[]string{"-t", containerID, "--", "sh", "-c", "if [ -t 0 ]; then echo has-a-tty; else echo has-no-tty; fi; exit 5"}, "has-a-tty"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			cmd := clientCmd(rm, "alice", tc.args...)
			term := startInTerminal(t, cmd)
			code := exitCode(t, cmd)
			term.waitFor(tc.want, 1)
			if want := map[bool]int{true: 5, false: 0}[tc.args[0] == "-t"]; code != want {
				t.Fatalf("exit %d, want %d; screen:\n%s", code, want, term.screen())
			}
		})
	}
}
