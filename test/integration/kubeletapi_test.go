package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/knitdev/knit/test/eventually"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// TestKubectlExecAndLogsReachAPodOnAProcessNode drives the kubelet API of
// a process node through the API server as kubectl and client-go do:
// exec with and without a terminal, in the container's working directory
// and environment, with its exit code; logs with timestamps, limits and
// follow until the container ends.
func TestKubectlExecAndLogsReachAPodOnAProcessNode(t *testing.T) {
	ns := namespace(t)
	pod := shellPod("web", corev1.RestartPolicyNever,
		`echo started; sleep 1; echo to-stderr >&2; while [ ! -e stop ]; do sleep 0.1; done; echo bye`)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MARKER", Value: "from-the-pod-spec"}}
	createPod(t, ns, pod)
	running := waitPod(t, ns, "web", "running", phaseIs(corev1.PodRunning))
	workDir := filepath.Join(cluster.ControlPlane.Dir, "nodes", running.Spec.NodeName, "pods",
		ns+"_web_"+string(running.UID), "_work", "main")
	if real, err := filepath.EvalSymlinks(workDir); err == nil {
		workDir = real
	}
	kubectl := func(args ...string) *exec.Cmd {
		return cluster.ControlPlane.Kubectl(context.Background(), append([]string{"-n", ns}, args...)...)
	}

	t.Run("exec without a terminal runs in the container's directory and environment and exits with its code", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		cmd := kubectl("exec", "web", "--", "sh", "-c", `echo "$MARKER"; pwd; echo oops >&2; exit 3`)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
			t.Fatalf("kubectl exec: %v, want exit code 3\nstdout: %s\nstderr: %s", err, &stdout, &stderr)
		}
		if want := "from-the-pod-spec\n" + workDir + "\n"; stdout.String() != want {
			t.Errorf("stdout %q, want %q", &stdout, want)
		}
		if !strings.Contains(stderr.String(), "oops") {
			t.Errorf("stderr %q does not hold the command's stderr", &stderr)
		}
	})

	t.Run("exec passes stdin through to its end", func(t *testing.T) {
		cmd := kubectl("exec", "-i", "web", "--", "sh", "-c", `tr a-z A-Z; echo done`)
		cmd.Stdin = strings.NewReader("hello\n")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "HELLO\ndone\n" {
			t.Fatalf("kubectl exec -i: %v, output %q, want %q", err, out, "HELLO\ndone\n")
		}
	})

	t.Run("exec on a terminal sees a terminal of the client's size, follows a resize and exits with its code", func(t *testing.T) {
		cmd := kubectl("exec", "-it", "web", "--", "sh", "-c", `tty; stty size; while read x; do stty size; done; exit 4`)
		term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 101})
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		lines := make(chan string, 64)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(term)
			for sc.Scan() {
				lines <- strings.TrimRight(sc.Text(), "\r")
			}
		}()
		expect := func(what string, match func(string) bool, poke func()) {
			t.Helper()
			deadline := time.After(time.Minute)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("terminal closed before %s", what)
					}
					if match(l) {
						return
					}
				case <-tick.C:
					if poke != nil {
						poke()
					}
				case <-deadline:
					t.Fatalf("no %s on the terminal", what)
				}
			}
		}
		expect("tty name", func(l string) bool { return strings.HasPrefix(l, "/dev/pts/") }, nil)
		// kubectl sends even the first size on the resize stream, which
		// may reach the terminal after the command's first stty (as with
		// any kubelet): press Enter until it shows.
		expect("initial size 33 101", func(l string) bool { return l == "33 101" }, func() { _, _ = term.Write([]byte("\n")) })
		if err := pty.Setsize(term, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		// The resize and the keystrokes travel on different streams:
		// press Enter until the new size shows.
		expect("resized size 40 120", func(l string) bool { return l == "40 120" }, func() { _, _ = term.Write([]byte("\n")) })
		_, _ = term.Write([]byte{4}) // Ctrl-D: EOF for read
		for range lines {
		}
		err = cmd.Wait()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 4 {
			t.Fatalf("kubectl exec -it: %v, want exit code 4", err)
		}
	})

	t.Run("client-go exec over SPDY and over WebSocket reports the exit code", func(t *testing.T) {
		req := cluster.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("web").
			SubResource("exec").VersionedParams(&corev1.PodExecOptions{
			Container: "main", Command: []string{"sh", "-c", `cat; echo " $MARKER"; exit 7`},
			Stdin: true, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
		cfg := cluster.ControlPlane.RESTConfig()
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			t.Fatal(err)
		}
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range map[string]remotecommand.Executor{"SPDY": spdy, "WebSocket": ws} {
			var stdout, stderr bytes.Buffer
			err := e.StreamWithContext(context.Background(), remotecommand.StreamOptions{
				Stdin: strings.NewReader("in:" + name), Stdout: &stdout, Stderr: &stderr})
			var code utilexec.CodeExitError
			if !errors.As(err, &code) || code.Code != 7 {
				t.Errorf("%s: %v, want exit code 7 (stderr %q)", name, err, &stderr)
			}
			if want := "in:" + name + " from-the-pod-spec\n"; stdout.String() != want {
				t.Errorf("%s: stdout %q, want %q", name, &stdout, want)
			}
		}
	})

	t.Run("logs hold stdout and stderr, with timestamps and a byte limit", func(t *testing.T) {
		// The two streams are two pipes: the container writes stderr a
		// second after stdout so their order in the log is known, and the
		// test waits for both.
		eventually.WithinEvery(t, 30*time.Second, 200*time.Millisecond, func(context.Context) error {
			if out, _ := kubectl("logs", "web").CombinedOutput(); !strings.Contains(string(out), "to-stderr") {
				return fmt.Errorf("logs so far %q", out)
			}
			return nil
		})
		out, err := kubectl("logs", "web").CombinedOutput()
		if err != nil || string(out) != "started\nto-stderr\n" {
			t.Errorf("kubectl logs: %v, %q, want %q", err, out, "started\nto-stderr\n")
		}
		out, err = kubectl("logs", "web", "--timestamps").CombinedOutput()
		stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z started\n\S+Z to-stderr\n$`)
		if err != nil || !stamped.Match(out) {
			t.Errorf("kubectl logs --timestamps: %v, %q", err, out)
		}
		out, err = kubectl("logs", "web", "--limit-bytes=3").CombinedOutput()
		if err != nil || string(out) != "sta" {
			t.Errorf("kubectl logs --limit-bytes=3: %v, %q, want %q", err, out, "sta")
		}
		out, err = kubectl("logs", "web", "--tail=1").CombinedOutput()
		if err != nil || string(out) != "to-stderr\n" {
			t.Errorf("kubectl logs --tail=1: %v, %q, want %q", err, out, "to-stderr\n")
		}
	})

	t.Run("logs follow the container until it ends", func(t *testing.T) {
		follow := kubectl("logs", "-f", "web")
		stdout, err := follow.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		follow.Stderr = os.Stderr
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		if l, err := r.ReadString('\n'); err != nil || l != "started\n" {
			t.Fatalf("first followed line %q, %v", l, err)
		}
		if out, err := kubectl("exec", "web", "--", "touch", "stop").CombinedOutput(); err != nil {
			t.Fatalf("kubectl exec touch stop: %v\n%s", err, out)
		}
		rest, err := io.ReadAll(r)
		if err != nil || string(rest) != "to-stderr\nbye\n" {
			t.Errorf("rest of the followed log %q, %v; want %q", rest, err, "to-stderr\nbye\n")
		}
		if err := follow.Wait(); err != nil {
			t.Errorf("kubectl logs -f: %v", err)
		}
		waitPod(t, ns, "web", "succeeded", phaseIs(corev1.PodSucceeded))
	})
}

// TestKubectlPortForwardReachesAPodsPort forwards a local port to an HTTP
// server in a pod on a process node, through the API server, as kubectl
// does (WebSocket, with SPDY as its fallback).
func TestKubectlPortForwardReachesAPodsPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	ns := namespace(t)
	pod := shellPod("pf", corev1.RestartPolicyNever, `echo forwarded-page > index.html; exec python3 -u -m http.server `+port+` --bind 127.0.0.1`)
	createPod(t, ns, pod)
	waitPod(t, ns, "pf", "running", phaseIs(corev1.PodRunning))
	// kubectl port-forward gives up on a refused connection: wait until
	// the server says it listens.
	waitFor(t, time.Minute, "the server in the pod to listen", func(ctx context.Context) (bool, error) {
		log, err := cluster.Client.CoreV1().Pods(ns).GetLogs("pf", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(log), "Serving HTTP"), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pf := cluster.ControlPlane.Kubectl(ctx, "-n", ns, "port-forward", "pod/pf", ":"+port)
	out, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pf.Stderr = os.Stderr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = pf.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> ` + port).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("kubectl port-forward said %q, %v", line, err)
	}
	var body []byte
	waitFor(t, time.Minute, "the page through the forwarded port", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+m[1]+"/index.html", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // the server in the pod may not listen yet
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK, nil
	})
	if string(body) != "forwarded-page\n" {
		t.Errorf("page %q, want %q", body, "forwarded-page\n")
	}
}
