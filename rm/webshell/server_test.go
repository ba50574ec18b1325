package webshell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	wire "github.com/knitdev/knit/protocols/webshell"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
)

const (
	appID       = "application_1700000000000_0001"
	containerID = "container_1700000000000_0001_01_000002"
	otherID     = "container_1700000000000_0001_01_000003"
	origin      = "http://rm.example:8088"
)

// world is the RM as the shell sees it, changeable while sessions run.
type world struct {
	mu         sync.Mutex
	containers map[string]Container
	pods       map[string]*corev1.Pod
}

func (w *world) ShellContainer(_ context.Context, user string, id yarnid.ContainerID) (Container, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.containers[id.String()]
	if !ok {
		return Container{}, fmt.Errorf("%w: %s", ErrNoContainer, id)
	}
	// alice owns every application; bob may view them; carol is an admin.
	c.Access = Access{Owner: user == "alice", Modify: user == "alice" && c.Access.Modify, View: user != "mallory", Admin: user == "carol"}
	return c, nil
}

func (w *world) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pods[id.String()]
	return p, ok
}

func (w *world) set(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

func knitPod(container string) *corev1.Pod {
	id, _ := yarnid.ParseContainerID(container)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-" + container, UID: "uid-1", Labels: map[string]string{
			launch.LabelContainer: container, launch.LabelApplication: id.Attempt.App.String(), launch.LabelRole: launch.RoleTask,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: launch.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

func newWorld() *world {
	app, _ := yarnid.ParseApplicationID(appID)
	w := &world{containers: map[string]Container{}, pods: map[string]*corev1.Pod{}}
	for _, id := range []string{containerID, otherID} {
		w.containers[id] = Container{App: app, Access: Access{Modify: true}}
		w.pods[id] = knitPod(id)
	}
	return w
}

// fakeExec runs a command of its own: it echoes each stdin line back in
// upper case, reports "size CxR" for each terminal size, and exits with
// the code of a line "exit N", or 0 at the end of its input.
type fakeExec struct {
	mu    sync.Mutex
	calls []ExecRequest
}

type exitError int

func (e exitError) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(e)) }
func (e exitError) ExitStatus() int { return int(e) }

func (f *fakeExec) Exec(ctx context.Context, r ExecRequest) error {
	f.mu.Lock()
	f.calls = append(f.calls, r)
	f.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out sync.Mutex
	if r.TTY {
		wg.Add(1)
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
					out.Lock()
					fmt.Fprintf(r.Stdout, "size %dx%d\n", s.Cols, s.Rows)
					out.Unlock()
				}
			}
		}()
	}
	// Like client-go's, the stdin copy is not waited for: a read of
	// stdin returns once the session closes it after Exec.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r.Stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			var code int
			if _, err := fmt.Sscanf(l, "exit %d", &code); err == nil {
				if code == 0 {
					return nil
				}
				return exitError(code)
			}
			out.Lock()
			fmt.Fprintln(r.Stdout, strings.ToUpper(l))
			out.Unlock()
		}
	}
}

type fixture struct {
	world  *world
	exec   *fakeExec
	events *events.FakeRecorder
	clock  *testingclock.FakeClock
	server *Server
	http   *httptest.Server
}

func newFixture(t *testing.T, settings Settings) *fixture {
	t.Helper()
	f := &fixture{world: newWorld(), exec: &fakeExec{}, events: events.NewFakeRecorder(100), clock: testingclock.NewFakeClock(time.Unix(1700000000, 0))}
	settings.Enabled = true
	settings.Origins = []string{origin}
	s, err := New(Config{
		Apps: f.world, Pods: f.world, Exec: f.exec, Events: f.events, Settings: settings, LaunchDir: "/var/lib/knit/launch", Clock: f.clock,
		Logger: slog.New(slog.DiscardHandler),
		Caller: func(c echo.Context) (string, bool) { u := c.QueryParam("user.name"); return u, u != "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	s.Register(e)
	f.server, f.http = s, httptest.NewServer(e)
	t.Cleanup(func() {
		f.http.Close()
		s.Close()
	})
	return f
}

func (f *fixture) socketURL(container, query string) string {
	return f.http.URL + wire.SocketPath(container) + "?" + query
}

// dial opens a session; it fails the test on a refusal.
func (f *fixture) dial(t *testing.T, container, query string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(context.Background(), f.socketURL(container, query), &websocket.DialOptions{Subprotocols: []string{wire.Subprotocol}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func send(t *testing.T, c *websocket.Conn, fr wire.Frame) {
	t.Helper()
	b, err := fr.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(context.Background(), websocket.MessageBinary, b); err != nil {
		t.Fatal(err)
	}
}

// readUntilExit returns the output and the Exit frame.
func readUntilExit(t *testing.T, c *websocket.Conn) (string, wire.Frame) {
	t.Helper()
	var out strings.Builder
	for {
		_, msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("read after %q: %v", out.String(), err)
		}
		fr, err := wire.Decode(msg)
		if err != nil {
			t.Fatal(err)
		}
		switch fr.Type {
		case wire.Stdout, wire.Stderr:
			out.Write(fr.Data)
		case wire.Exit:
			return out.String(), fr
		}
	}
}

// readUntil reads output until it contains want.
func readUntil(t *testing.T, c *websocket.Conn, want string) {
	t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		_, msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("read after %q: %v", out.String(), err)
		}
		fr, err := wire.Decode(msg)
		if err != nil {
			t.Fatal(err)
		}
		if fr.Type == wire.Exit {
			t.Fatalf("exit %d %q before %q in %q", fr.Code, fr.Reason, want, out.String())
		}
		out.Write(fr.Data)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		container string
		query     string
		origin    string
		change    func(w *world)
		status    int
		reason    string
	}{
		{"an anonymous caller", containerID, "", "", nil, http.StatusUnauthorized, "needs an authenticated user"},
		{"a malformed container id", "container_x", "user.name=alice", "", nil, http.StatusBadRequest, "Invalid container id"},
		{"an unknown container", "container_1700000000000_0009_01_000002", "user.name=alice", "", nil, http.StatusNotFound, "is unknown"},
		{"a user without MODIFY_APP", containerID, "user.name=bob", "", nil, http.StatusForbidden, "needs MODIFY_APP on application " + appID},
		{"a page of another site", containerID, "user.name=alice", "http://evil.example", nil, http.StatusForbidden, `Origin "http://evil.example" may not open a shell`},
		{"a bad terminal size", containerID, "user.name=alice&tty=true&cols=0", "", nil, http.StatusBadRequest, "terminal size"},
		{"an ended container", containerID, "user.name=alice", "", func(w *world) {
			c := w.containers[containerID]
			c.Ended = true
			w.containers[containerID] = c
		}, http.StatusConflict, "has ended"},
		{"a container without a pod", containerID, "user.name=alice", "", func(w *world) { delete(w.pods, containerID) }, http.StatusConflict, "has no pod"},
		{"a pod that is not the container's", containerID, "user.name=alice", "", func(w *world) { w.pods[containerID] = knitPod(otherID) }, http.StatusForbidden, "is not the Knit pod of container"},
		{"a pod without Knit's role label", containerID, "user.name=alice", "", func(w *world) { delete(w.pods[containerID].Labels, launch.LabelRole) }, http.StatusForbidden, "is not the Knit pod"},
		{"a pod with another role", containerID, "user.name=alice", "", func(w *world) { w.pods[containerID].Labels[launch.LabelRole] = "system" }, http.StatusForbidden, "is not the Knit pod"},
		{"a pod without Knit's container", containerID, "user.name=alice", "", func(w *world) { w.pods[containerID].Spec.Containers[0].Name = "sidecar" }, http.StatusForbidden, `has no container "container"`},
		{"a pod that has finished", containerID, "user.name=alice", "", func(w *world) { w.pods[containerID].Status.Phase = corev1.PodSucceeded }, http.StatusConflict, "its pod is Succeeded"},
		{"a pod being deleted", containerID, "user.name=alice", "", func(w *world) { w.pods[containerID].DeletionTimestamp = &metav1.Time{} }, http.StatusConflict, "being deleted"},
		{"a container process that is not running", containerID, "user.name=alice", "", func(w *world) {
			w.pods[containerID].Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
		}, http.StatusConflict, "its process is not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Settings{})
			if tc.change != nil {
				f.world.set(func() { tc.change(f.world) })
			}
			req, err := http.NewRequest(http.MethodGet, f.socketURL(tc.container, tc.query), nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
				"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": wire.Subprotocol} {
				req.Header.Set(k, v)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.reason) {
				t.Fatalf("answer %d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.reason)
			}
			if len(f.exec.calls) != 0 {
				t.Fatalf("a refused shell ran %v", f.exec.calls)
			}
			// The page refuses with the same status and says why (the
			// origin and the terminal are the WebSocket's to check).
			resp, err = http.Get(f.http.URL + wire.PagePath(tc.container) + "?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.origin == "" && !strings.Contains(tc.query, "tty") && (resp.StatusCode != tc.status || !strings.Contains(string(page), `id="refused"`)) {
				t.Fatalf("page answer %d, want %d and the refusal:\n%s", resp.StatusCode, tc.status, page)
			}
		})
	}
}

func TestPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  Policy
		user    string
		allowed bool
	}{
		{PolicyModify, "alice", true},
		{PolicyModify, "bob", false},
		{PolicyModify, "carol", true},
		{PolicyOwner, "alice", true},
		{PolicyOwner, "bob", false},
		{PolicyOwner, "carol", true},
		{PolicyView, "bob", true},
		{PolicyView, "mallory", false},
	} {
		t.Run(fmt.Sprintf("%s lets %s in: %v", tc.policy, tc.user, tc.allowed), func(t *testing.T) {
			f := newFixture(t, Settings{Policy: tc.policy})
			got := f.server.Link(context.Background(), tc.user, containerID)
			want := ""
			if tc.allowed {
				want = "/shell/" + containerID + "?user.name=" + tc.user
			}
			if got != want {
				t.Fatalf("Link = %q, want %q", got, want)
			}
		})
	}
}

func TestSessionRunsTheCommandInTheContainerAndAuditsIt(t *testing.T) {
	f := newFixture(t, Settings{})
	c := f.dial(t, containerID, url.Values{"user.name": {"alice"}, "command": {"ls", "-l"}}.Encode())
	send(t, c, wire.Frame{Type: wire.Stdin, Data: []byte("hello\n")})
	readUntil(t, c, "HELLO\n")
	send(t, c, wire.Frame{Type: wire.Stdin, Data: []byte("exit 3\n")})
	out, exit := readUntilExit(t, c)
	if exit.Code != 3 || exit.Reason != "" || out != "" {
		t.Fatalf("exit %d %q after %q, want code 3 alone", exit.Code, exit.Reason, out)
	}
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the exit frame: %v, want a normal close", err)
	}
	f.server.Close()

	r := f.exec.calls[0]
	wantCmd := append([]string{"/bin/sh", "-c", shellScript, "/var/lib/knit/launch"}, "ls", "-l")
	if r.Namespace != "default" || r.Pod != "pod-"+containerID || r.Container != launch.ContainerName || r.TTY || r.Stderr == nil ||
		strings.Join(r.Command, "\x00") != strings.Join(wantCmd, "\x00") {
		t.Fatalf("exec request %+v", r)
	}
	events := drain(f.events)
	if len(events) != 2 ||
		events[0] != "Normal ShellOpened User alice opened a command into container "+containerID ||
		!strings.HasPrefix(events[1], "Normal ShellClosed User alice closed a command into container "+containerID) ||
		!strings.HasSuffix(events[1], "(exit code 3): 13 bytes in, 6 bytes out") {
		t.Fatalf("events %q", events)
	}
}

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestTerminalSizesAndEndOfInputReachTheCommand(t *testing.T) {
	f := newFixture(t, Settings{})
	c := f.dial(t, containerID, "user.name=alice&tty=true&cols=100&rows=30")
	readUntil(t, c, "size 100x30\n")
	send(t, c, wire.Frame{Type: wire.Resize, Size: wire.Size{Cols: 132, Rows: 43}})
	readUntil(t, c, "size 132x43\n")
	send(t, c, wire.Frame{Type: wire.CloseStdin})
	if _, exit := readUntilExit(t, c); exit.Code != 0 || exit.Reason != "" {
		t.Fatalf("exit %+v, want 0 at the end of input", exit)
	}
	if r := f.exec.calls[0]; !r.TTY || r.Stderr != nil {
		t.Fatalf("a terminal session's request %+v", r)
	}
}

func TestSessionsEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixture)
		reason string
	}{
		{"when the user's access is revoked", func(f *fixture) {
			f.world.set(func() {
				c := f.world.containers[containerID]
				c.Access.Modify = false
				f.world.containers[containerID] = c
			})
			f.clock.Step(DefaultRecheck)
		}, "User alice may not open a shell into container " + containerID},
		{"when the container ends", func(f *fixture) {
			f.world.set(func() { f.world.pods[containerID].Status.Phase = corev1.PodFailed })
			f.clock.Step(DefaultRecheck)
		}, "its pod is Failed"},
		{"when idle too long", func(f *fixture) { f.clock.Step(DefaultIdleTimeout) }, errIdle.Error()},
		{"when the server closes", func(f *fixture) { go f.server.Close() }, errShutdown.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Settings{})
			c := f.dial(t, containerID, "user.name=alice")
			send(t, c, wire.Frame{Type: wire.Stdin, Data: []byte("ready\n")})
			readUntil(t, c, "READY\n")
			// The session's watch has its ticker once the clock has a waiter.
			eventually.True(t, 10*time.Second, "the session's ticker", f.clock.HasWaiters)
			tc.change(f)
			if _, exit := readUntilExit(t, c); exit.Code != wire.ExitClosed || !strings.Contains(exit.Reason, tc.reason) {
				t.Fatalf("exit %d %q, want %d with %q", exit.Code, exit.Reason, wire.ExitClosed, tc.reason)
			}
		})
	}
}

func TestSessionLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second string
		user   string
		reason string
	}{
		{"per user", otherID, "alice", "User alice has 1 shells open, the most allowed"},
		{"per container", containerID, "carol", "Container " + containerID + " has 1 shells open, the most allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Settings{MaxPerUser: 1, MaxPerContainer: 1})
			c := f.dial(t, containerID, "user.name=alice")
			send(t, c, wire.Frame{Type: wire.Stdin, Data: []byte("ready\n")})
			readUntil(t, c, "READY\n")
			_, resp, err := websocket.Dial(context.Background(), f.socketURL(tc.second, "user.name="+tc.user), &websocket.DialOptions{Subprotocols: []string{wire.Subprotocol}})
			if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("second session: %v %v, want 429", err, resp)
			}
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), tc.reason) {
				t.Fatalf("refusal %q, want %q", body, tc.reason)
			}
			// Once the first ends, its place is free again.
			send(t, c, wire.Frame{Type: wire.Stdin, Data: []byte("exit 0\n")})
			readUntilExit(t, c)
			c.Close(websocket.StatusNormalClosure, "")
			eventually.True(t, 10*time.Second, "the first session released", func() bool {
				f.server.mu.Lock()
				defer f.server.mu.Unlock()
				return len(f.server.perUser) == 0
			})
			c2 := f.dial(t, tc.second, "user.name="+tc.user)
			send(t, c2, wire.Frame{Type: wire.Stdin, Data: []byte("exit 0\n")})
			readUntilExit(t, c2)
		})
	}
}

func TestAClientThatBreaksTheProtocolIsDisconnected(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		typ  websocket.MessageType
	}{
		{"a server frame", []byte("\x10out"), websocket.MessageBinary},
		{"an unknown frame", []byte{0x7f}, websocket.MessageBinary},
		{"a text message", []byte("ls"), websocket.MessageText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Settings{})
			c := f.dial(t, containerID, "user.name=alice")
			if err := c.Write(context.Background(), tc.typ, tc.msg); err != nil {
				t.Fatal(err)
			}
			for {
				_, _, err := c.Read(context.Background())
				if err == nil {
					continue
				}
				if websocket.CloseStatus(err) != websocket.StatusProtocolError {
					t.Fatalf("read: %v, want a protocol error close", err)
				}
				return
			}
		})
	}
}

func TestAClientWithoutTheSubprotocolIsClosed(t *testing.T) {
	f := newFixture(t, Settings{})
	c, _, err := websocket.Dial(context.Background(), f.socketURL(containerID, "user.name=alice"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("read: %v, want a policy violation close", err)
	}
}

func TestExitOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		cause  error
		code   int32
		reason string
	}{
		{"a clean exit", nil, nil, 0, ""},
		{"the command's code", exitError(7), nil, 7, ""},
		{"an exec failure", errors.New("upgrade refused"), nil, wire.ExitClosed, "exec: upgrade refused"},
		{"a refusal that ended it", context.Canceled, refuse(http.StatusConflict, "gone"), wire.ExitClosed, "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, reason := exitOf(tc.err, tc.cause)
			if code != tc.code || reason != tc.reason {
				t.Fatalf("exitOf = %d %q, want %d %q", code, reason, tc.code, tc.reason)
			}
		})
	}
}
