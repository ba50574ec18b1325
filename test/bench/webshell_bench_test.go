package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	wire "github.com/knitdev/knit/protocols/webshell"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/webshell"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

const shellBenchContainer = "container_1700000000000_0001_01_000002"

// shellTarget is one running pod, which anyone may open a shell into.
type shellTarget struct{ pod *corev1.Pod }

func (s shellTarget) ShellContainer(_ context.Context, _ string, id yarnid.ContainerID) (webshell.Container, error) {
	return webshell.Container{App: id.Attempt.App, Access: webshell.Access{Modify: true}}, nil
}

func (s shellTarget) ContainerPod(yarnid.ContainerID) (*corev1.Pod, bool) { return s.pod, true }

// keystrokes types n single bytes into a terminal running cat and times
// each until the terminal's echo of it comes back. A first keystroke,
// not timed, waits for the terminal to be there.
func keystrokes(b *testing.B, n int, send func(byte) error, out <-chan []byte) []time.Duration {
	b.Helper()
	ds := make([]time.Duration, 0, n+1)
	for i := range n + 1 {
		key := byte('a' + i%26)
		began := time.Now()
		if err := send(key); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			select {
			case chunk, ok := <-out:
				if !ok {
					b.Fatal("the terminal closed")
				}
				got = strings.IndexByte(string(chunk), key) >= 0
			case <-time.After(time.Minute):
				b.Fatalf("no echo of %q", key)
			}
		}
		ds = append(ds, time.Since(began))
	}
	return ds[1:]
}

// chunks is a writer that hands each write on, until done.
type chunks struct {
	out  chan []byte
	done <-chan struct{}
}

func (c chunks) Write(p []byte) (int, error) {
	select {
	case c.out <- append([]byte(nil), p...):
		return len(p), nil
	case <-c.done:
		return 0, io.ErrClosedPipe
	}
}

// BenchmarkWebShellKeystrokeVersusExec measures the round trip of one
// keystroke through the RM's web shell (its WebSocket, the RM, pods/exec
// through the API server to the process node's kubelet API) against
// client-go's remotecommand exec straight to the same pod, the baseline,
// in alternating rounds of the same run, and reports the p99 of each and
// their ratio.
func BenchmarkWebShellKeystrokeVersusExec(b *testing.B) {
	const perRound = 1000
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	const ns = "bench-shell"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	id, _ := yarnid.ParseContainerID(shellBenchContainer)
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shell", Labels: map[string]string{
			launch.LabelContainer: id.String(), launch.LabelApplication: id.Attempt.App.String(), launch.LabelRole: launch.RoleTask,
		}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: launch.ContainerName, Image: "busybox:1", Command: []string{"sleep", "3600"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	eventually.Within(b, 2*time.Minute, func(ctx context.Context) error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("pod %s: %s", p.Name, p.Status.Phase)
		}
		pod = p
		return nil
	})

	exec, err := webshell.NewPodExec(c.ControlPlane.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := webshell.New(webshell.Config{
		Apps: shellTarget{pod}, Pods: shellTarget{pod}, Exec: exec, Events: &events.FakeRecorder{},
		Caller:   func(c echo.Context) (string, bool) { return "bench", true },
		Settings: webshell.Settings{Enabled: true}, LaunchDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	srv.Register(e)
	hs := httptest.NewServer(e)
	defer func() {
		hs.Close()
		srv.Close()
	}()

	var web, direct []time.Duration
	b.ResetTimer()
	for range b.N {
		web = append(web, webRound(b, hs.URL, perRound)...)
		direct = append(direct, execRound(b, exec, pod, perRound)...)
	}
	b.StopTimer()
	webP99, directP99 := quantile(web, 0.99), quantile(direct, 0.99)
	b.ReportMetric(ms(webP99), "webshell-p99-ms")
	b.ReportMetric(ms(directP99), "exec-p99-ms")
	b.ReportMetric(ms(quantile(web, 0.5)), "webshell-p50-ms")
	b.ReportMetric(ms(quantile(direct, 0.5)), "exec-p50-ms")
	b.ReportMetric(float64(webP99)/float64(directP99), "webshell/exec-p99")
	b.ReportMetric(0, "ns/op")
}

// webRound opens a terminal running cat through the web shell.
func webRound(b *testing.B, base string, n int) []time.Duration {
	b.Helper()
	q := url.Values{"user.name": {"bench"}}
	wire.Start{Command: []string{"cat"}, TTY: true, Size: wire.Size{Cols: 80, Rows: 24}}.Encode(q)
	u := strings.Replace(base, "http://", "ws://", 1) + wire.SocketPath(shellBenchContainer) + "?" + q.Encode()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{wire.Subprotocol}})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseNow()
	out := make(chan []byte, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		for {
			_, msg, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if f, err := wire.Decode(msg); err == nil && f.Type == wire.Stdout {
				out <- append([]byte(nil), f.Data...)
			}
		}
	}()
	send := func(key byte) error {
		m, err := wire.Frame{Type: wire.Stdin, Data: []byte{key}}.Append(nil)
		if err != nil {
			return err
		}
		return conn.Write(ctx, websocket.MessageBinary, m)
	}
	ds := keystrokes(b, n, send, out)
	conn.Close(websocket.StatusNormalClosure, "")
	cancel()
	for range out {
	}
	<-done
	return ds
}

// execRound opens a terminal running cat with client-go's remotecommand,
// straight to the pod.
func execRound(b *testing.B, exec *webshell.PodExec, pod *corev1.Pod, n int) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	out := chunks{out: make(chan []byte, 64), done: ctx.Done()}
	sizes := make(chan wire.Size, 1)
	sizes <- wire.Size{Cols: 80, Rows: 24}
	ended := make(chan error, 1)
	go func() {
		ended <- exec.Exec(ctx, webshell.ExecRequest{Namespace: pod.Namespace, Pod: pod.Name, Container: launch.ContainerName,
			Command: []string{"cat"}, TTY: true, Sizes: sizes, Stdin: inR, Stdout: out})
	}()
	ds := keystrokes(b, n, func(key byte) error { _, err := inW.Write([]byte{key}); return err }, out.out)
	cancel()
	inW.Close()
	<-ended
	close(sizes)
	return ds
}
