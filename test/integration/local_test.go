package integration

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKnitLocalUpStatusDown drives the knit binary as a user does: up in
// the background, up again, kubectl against the kubeconfig it wrote,
// status, down; and checks that down leaves no process and no port.
func TestKnitLocalUpStatusDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	knit := knitLocal(t, dir)

	out, err := knit("up", "--nodes", "2")
	if err != nil || !strings.Contains(out, "local cluster up") {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	out, err = knit("up")
	if err != nil || !strings.Contains(out, "already up") {
		t.Errorf("second knit local up: %v\n%s", err, out)
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	kubectl := filepath.Join(cluster.ControlPlane.BinDir, "kubectl")
	nodes, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, nodes)
	}
	if got := strings.Count(string(nodes), " Ready "); got != 2 {
		t.Errorf("kubectl get nodes shows %d Ready nodes, want 2:\n%s", got, nodes)
	}

	out, err = knit("status")
	if err != nil || !strings.Contains(out, "node node-1 127.0.1.1 Ready") || !strings.Contains(out, "node node-2 127.0.1.2 Ready") {
		t.Errorf("knit local status: %v\n%s", err, out)
	}

	var state struct {
		PID    int    `json:"pid"`
		Server string `json:"server"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	if len(processesMentioning(dir)) == 0 {
		t.Fatal("no process mentions the cluster's folder while it is up")
	}

	out, err = knit("down")
	if err != nil || !strings.Contains(out, "local cluster down") {
		t.Fatalf("knit local down: %v\n%s", err, out)
	}
	if left := processesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left after down: %v", left)
	}
	if running(state.PID) {
		t.Errorf("the cluster process %d is still there after down", state.PID)
	}
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(state.Server, "https://"), time.Second); err == nil {
		conn.Close()
		t.Errorf("the API server port still answers after down")
	}
	if out, err := knit("status"); err == nil || !strings.Contains(out, "not up") {
		t.Errorf("status after down: %v\n%s", err, out)
	}
}

// knitLocal returns a runner of `knit local ... --dir dir` with the
// binaries of knitBinaries, and makes sure the cluster is down after the test.
func knitLocal(t *testing.T, dir string) func(args ...string) (string, error) {
	t.Helper()
	if err := knitBinaries(); err != nil {
		t.Fatal(err)
	}
	knit := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "knit"), append(append([]string{"local"}, args...), "--dir", dir)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = knit("down") })
	return knit
}

// processesMentioning lists live processes whose command line names path:
// every component of a local cluster is started with its folder in its flags.
func processesMentioning(path string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), path) {
			continue
		}
		if !running(pid) {
			continue
		}
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

// running says whether pid is a live process: a zombie has ended and only
// waits for whichever process adopted it to reap it.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(stat), ") Z ")
}
