package metrics

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/rks/launch"
)

type fixedPods []*corev1.Pod

func (f fixedPods) Pods() []*corev1.Pod { return f }

func pod(uid, container string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "knit", Name: "p-" + uid, UID: types.UID(uid),
			Labels: map[string]string{
				launch.LabelApplication: "application_1700000000000_0001",
				launch.LabelContainer:   container,
				launch.LabelQueue:       "root.default",
				launch.LabelUser:        "alice",
			},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeProc writes a process into a /proc tree.
func fakeProc(t *testing.T, root string, pid, ppid int, state string, ticks [4]int, rssPages int, env string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	// Fields after "(comm)": state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime ...
	write(t, filepath.Join(dir, "stat"), strconv.Itoa(pid)+" (a (b) c) "+state+" "+strconv.Itoa(ppid)+" 1 1 0 -1 0 0 0 0 0 "+
		strconv.Itoa(ticks[0])+" "+strconv.Itoa(ticks[1])+" "+strconv.Itoa(ticks[2])+" "+strconv.Itoa(ticks[3])+" 20 0 1 0 100 0\n")
	write(t, filepath.Join(dir, "statm"), "1000 "+strconv.Itoa(rssPages)+" 10 1 0 100 0\n")
	write(t, filepath.Join(dir, "environ"), strings.ReplaceAll(env, " ", "\x00"))
	write(t, filepath.Join(dir, "io"), "rchar: 5\nwchar: 6\nread_bytes: 4096\nwrite_bytes: 8192\n")
}

// gather collects c and returns each sample as "name{labels} value".
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				if l.GetName() == "container" || l.GetName() == "source" {
					ls = append(ls, l.GetValue())
				}
			}
			var v float64
			if c := m.GetCounter(); c != nil {
				v = c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				v = g.GetValue()
			}
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

func TestProcessNodeContainersAreTheirProcessTrees(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	const c1, c2 = "container_1700000000000_0001_01_000001", "container_1700000000000_0001_01_000002"
	// c1: the launcher (no CONTAINER_ID) runs the script (with it), which
	// runs java; a child that cleared its environment is still c1's.
	fakeProc(t, proc, 10, 1, "S", [4]int{1, 1, 0, 0}, 100, "PATH=/bin")
	fakeProc(t, proc, 11, 10, "S", [4]int{10, 5, 30, 5}, 200, "PATH=/bin CONTAINER_ID="+c1)
	fakeProc(t, proc, 12, 11, "R", [4]int{100, 50, 0, 0}, 1000, "CONTAINER_ID="+c1+" USER=alice")
	fakeProc(t, proc, 13, 12, "S", [4]int{5, 5, 0, 0}, 10, "")
	fakeProc(t, proc, 14, 12, "Z", [4]int{500, 500, 0, 0}, 0, "")
	// c2 has ended: nothing runs for it; c3's pod is not running.
	fakeProc(t, proc, 20, 1, "S", [4]int{1, 0, 0, 0}, 1, "CONTAINER_ID=container_other")
	pods := fixedPods{
		pod("uid-1", c1, corev1.PodRunning),
		pod("uid-2", c2, corev1.PodRunning),
		pod("uid-3", "container_1700000000000_0001_01_000003", corev1.PodPending),
	}
	col, err := NewCollector(Config{Pods: pods, ProcRoot: proc, CgroupRoot: cg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	got := gather(t, col)
	page := int64(os.Getpagesize())
	want := map[string]float64{
		"knit_container_cpu_usage_seconds_total{" + c1 + "}": float64(10+5+30+5+100+50+5+5) / 100,
		"knit_container_memory_rss_bytes{" + c1 + "}":        float64((200 + 1000 + 10) * page),
		"knit_container_processes{" + c1 + "}":               3,
		"knit_container_fs_read_bytes_total{" + c1 + "}":     3 * 4096,
		"knit_container_fs_write_bytes_total{" + c1 + "}":    3 * 8192,
		"knit_node_containers_measured{proc}":                1,
		"knit_node_containers_measured{none}":                1,
		"knit_node_containers_measured{cgroup}":              0,
		"knit_node_container_scrape_errors{}":                0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["knit_container_memory_cache_bytes{"+c1+"}"]; ok {
		t.Error("a process node reported page cache")
	}
	if len(got) != len(want) {
		t.Errorf("samples: %v", got)
	}
}

func TestCgroupV2PodsAreReadFromTheKubeletsCgroups(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	const c1, c2 = "container_1700000000000_0001_01_000001", "container_1700000000000_0001_01_000002"
	uid1, uid2 := "0a1b2c3d-0000-1111-2222-333344445555", "9f8e7d6c-0000-1111-2222-333344445555"
	// systemd driver, Guaranteed; cgroupfs driver, Burstable.
	d1 := filepath.Join(cg, "kubepods.slice", "kubepods-pod"+strings.ReplaceAll(uid1, "-", "_")+".slice")
	write(t, filepath.Join(d1, "cpu.stat"), "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	write(t, filepath.Join(d1, "memory.stat"), "anon 104857600\nfile 52428800\nkernel 1000\n")
	write(t, filepath.Join(d1, "io.stat"), "8:0 rbytes=1000 wbytes=2000 rios=1 wios=2\n259:0 rbytes=10 wbytes=20 rios=1 wios=1\n")
	d2 := filepath.Join(cg, "kubepods", "burstable", "pod"+uid2)
	write(t, filepath.Join(d2, "cpu.stat"), "usage_usec 1000\n")
	write(t, filepath.Join(d2, "memory.stat"), "anon 4096\nfile 0\n")
	col, err := NewCollector(Config{Pods: fixedPods{pod(uid1, c1, corev1.PodRunning), pod(uid2, c2, corev1.PodRunning)}, ProcRoot: proc, CgroupRoot: cg})
	if err != nil {
		t.Fatal(err)
	}
	got := gather(t, col)
	want := map[string]float64{
		"knit_container_cpu_usage_seconds_total{" + c1 + "}": 2.5,
		"knit_container_memory_rss_bytes{" + c1 + "}":        104857600,
		"knit_container_memory_cache_bytes{" + c1 + "}":      52428800,
		"knit_container_fs_read_bytes_total{" + c1 + "}":     1010,
		"knit_container_fs_write_bytes_total{" + c1 + "}":    2020,
		"knit_container_cpu_usage_seconds_total{" + c2 + "}": 0.001,
		"knit_container_memory_rss_bytes{" + c2 + "}":        4096,
		"knit_container_memory_cache_bytes{" + c2 + "}":      0,
		"knit_node_containers_measured{cgroup}":              2,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["knit_container_processes{"+c1+"}"]; ok {
		t.Error("a cgroup reported a process count")
	}
}

// TestARealProcessIsMeasuredFromProc runs a process with a container's
// CONTAINER_ID, as a process node's launch script does, and reads it from
// this machine's /proc.
func TestARealProcessIsMeasuredFromProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this machine")
	}
	const id = "container_1700000000000_0042_01_000007"
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30")
	cmd.Env = []string{"CONTAINER_ID=" + id, "PATH=" + os.Getenv("PATH")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	col, err := NewCollector(Config{Pods: fixedPods{pod("uid-x", id, corev1.PodRunning)}, CgroupRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := gather(t, col)
		cpu := got["knit_container_cpu_usage_seconds_total{"+id+"}"]
		rss := got["knit_container_memory_rss_bytes{"+id+"}"]
		if cpu > 0 && rss > 0 && got["knit_container_processes{"+id+"}"] >= 1 {
			promtoolCheck(t, col)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cpu %v s, rss %v bytes: %v", cpu, rss, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promtoolCheck runs `promtool check metrics` on the exposition, where
// promtool is installed.
func promtoolCheck(t *testing.T, col prometheus.Collector) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: exposition not linted")
		return
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	cmd := exec.CommandContext(t.Context(), path, "check", "metrics")
	cmd.Stdin = rec.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
