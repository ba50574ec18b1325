package controlplane

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVersionMatchesTheToolsModule(t *testing.T) {
	gomod, err := os.ReadFile("../../tools/k8s/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require k8s.io/kubernetes (v\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("tools/k8s/go.mod does not require k8s.io/kubernetes on one line")
	}
	if got := string(m[1]); got != Version {
		t.Errorf("tools/k8s pins k8s.io/kubernetes %s, controlplane.Version is %s", got, Version)
	}
	staging := "v0." + strings.TrimPrefix(Version, "v1.")
	for _, line := range regexp.MustCompile(`(?m)^\s+k8s.io/\S+ => k8s.io/\S+ (\S+)$`).FindAllSubmatch(gomod, -1) {
		if string(line[1]) != staging {
			t.Errorf("replace line %q does not pin %s", line[0], staging)
		}
	}
}

func TestMissingBinariesNameTheMakeTarget(t *testing.T) {
	_, err := Start(context.Background(), Config{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start with an empty bin folder: %v, want an error naming `make tools`", err)
	}
}

// TestStartStopAndWarmRestart starts a control plane, checks the API and
// the controller manager's service accounts, stops it keeping the data,
// starts it again on the same folder (a warm start: objects survive), and
// finally stops it without Keep: no process, port or folder is left.
func TestStartStopAndWarmRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	dir := t.TempDir()
	cp, err := Start(ctx, Config{Dir: dir, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespaceObject("kept"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "get", "serviceaccount", "default", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "serviceaccount/default" {
		t.Fatalf("kubectl get serviceaccount: %v %s", err, out)
	}
	pids := cp.pids()
	server := cp.Server
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids, server)
	if _, err := os.Stat(cp.Kubeconfig); err != nil {
		t.Fatalf("Keep removed the data: %v", err)
	}

	warm, err := Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Server != server {
		t.Errorf("warm start moved the API server from %s to %s", server, warm.Server)
	}
	client, err = warm.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace made before the restart: %v", err)
	}
	pids = warm.pids()
	if err := warm.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids, server)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data folder left after Stop without Keep: %v", err)
	}
}

func (c *ControlPlane) pids() []int {
	var pids []int
	for _, p := range c.processes {
		pids = append(pids, p.sp.PID())
	}
	return pids
}

func assertGone(t *testing.T, pids []int, server string) {
	t.Helper()
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d still there after Stop", pid)
		}
	}
	addr := strings.TrimPrefix(server, "https://")
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("API server port %s still answers after Stop", addr)
	}
}

func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
