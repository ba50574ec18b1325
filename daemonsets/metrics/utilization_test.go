package metrics

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
)

// fakeMachine writes /proc/meminfo and /proc/stat: memory in kB, CPU busy
// ticks split over user, nice and system, and 4 processors.
func fakeMachine(t *testing.T, root string, totalKB, freeKB, inactiveFileKB, swapKB, swapFreeKB int64, busy int) {
	t.Helper()
	write(t, filepath.Join(root, "meminfo"), fmt.Sprintf(
		"MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   1 kB\nInactive:       99999999 kB\nInactive(file): %d kB\n"+
			"SwapTotal:      %d kB\nSwapFree:       %d kB\nHardwareCorrupted: 1024 kB\nHugePages_Total:       2\nHugepagesize:       2048 kB\n",
		totalKB, freeKB, inactiveFileKB, swapKB, swapFreeKB))
	u, n := busy/2, busy/4
	write(t, filepath.Join(root, "stat"), fmt.Sprintf("cpu  %d %d %d 123456 50 0 7 0 0 0\ncpu0 1 0 0 1\ncpu1 1 0 0 1\ncpu2 1 0 0 1\ncpu3 1 0 0 1\nintr 1\n",
		u, n, busy-u-n))
}

func TestMachineIsReadAsHadoopsSysInfoLinuxReadsIt(t *testing.T) {
	root := t.TempDir()
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 1<<20, 1<<19, 1000)
	m, err := readMachine(root)
	if err != nil {
		t.Fatal(err)
	}
	// MemTotal less corrupted RAM and the huge pages; MemFree plus
	// Inactive(file), not MemAvailable nor Inactive.
	if m.physicalKB != 16<<20-1024-2*2048 || m.availableKB != 6<<20 || m.swapKB != 1<<20 || m.swapFreeKB != 1<<19 {
		t.Errorf("memory %+v", m)
	}
	if m.busyTicks != 1000 || m.processors != 4 {
		t.Errorf("cpu: busy %d ticks, %d processors", m.busyTicks, m.processors)
	}
	for name, files := range map[string]map[string]string{
		"no meminfo":   {"stat": "cpu 1 2 3 4\ncpu0 1 2 3 4\n"},
		"no MemTotal":  {"meminfo": "MemFree: 1 kB\n", "stat": "cpu 1 2 3 4\ncpu0 1 2 3 4\n"},
		"no cpu line":  {"meminfo": "MemTotal: 1 kB\n", "stat": "intr 1\n"},
		"garbled cpu":  {"meminfo": "MemTotal: 1 kB\n", "stat": "cpu 1 x 3 4\ncpu0 1 2 3 4\n"},
		"no processor": {"meminfo": "MemTotal: 1 kB\n", "stat": "cpu 1 2 3 4\n"},
	} {
		dir := t.TempDir()
		for f, c := range files {
			write(t, filepath.Join(dir, f), c)
		}
		if _, err := readMachine(dir); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// TestSamplesGiveTheFiguresANodeManagerSends: node memory in use, its
// processors busy, and the containers' memory and CPU in vcores, CPU as a
// rate between two samples.
func TestSamplesGiveTheFiguresANodeManagerSends(t *testing.T) {
	root := t.TempDir()
	page := int64(os.Getpagesize())
	const id = "container_1700000000000_0001_01_000002"
	// 64 MiB resident and 1 GiB of address space, from 100 CPU ticks.
	rssPages, sizePages := int((64<<20)/page), int((1<<30)/page)
	writeContainer := func(ticks int) {
		fakeProc(t, root, 500, 1, "S", [4]int{ticks, 0, 0, 0}, rssPages, "CONTAINER_ID="+id)
		write(t, filepath.Join(root, "500", "statm"), strconv.Itoa(sizePages)+" "+strconv.Itoa(rssPages)+" 10 1 0 100 0\n")
	}
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 1<<20, 1<<19, 1000)
	writeContainer(100)
	col, err := NewCollector(Config{Pods: fixedPods{pod("u1", id, corev1.PodRunning)}, ProcRoot: root, CgroupRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := newSampler(col)
	t0 := time.Unix(1700000000, 0)
	first, err := s.sample(t0, 8)
	if err != nil {
		t.Fatal(err)
	}
	usedMB := int32((16<<20 - 1024 - 2*2048 - 6<<20) >> 10)
	if first.Node.PmemMB != usedMB || first.Node.VmemMB != usedMB+512 || first.Node.CPU != 0 {
		t.Errorf("first node sample %+v, want %d MB, %d MB with swap, no CPU rate yet", first.Node, usedMB, usedMB+512)
	}
	if first.Containers != (launch.ResourceUtilization{PmemMB: 64, VmemMB: 1024}) {
		t.Errorf("first containers sample %+v", first.Containers)
	}

	// 10 s later: the node kept 2 processors busy (2000 ticks), the
	// container one (1000 ticks). One processor of 4 is a quarter of the
	// node's 8 vcores.
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 1<<20, 1<<19, 3000)
	writeContainer(1100)
	second, err := s.sample(t0.Add(10*time.Second), 8)
	if err != nil {
		t.Fatal(err)
	}
	if second.Node.CPU != 2 || second.Containers.CPU != 2 {
		t.Errorf("CPU: node %v processors, containers %v vcores; want 2 and 2", second.Node.CPU, second.Containers.CPU)
	}
	// Without the node's vcores, the processors stand for them.
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 1<<20, 1<<19, 3000)
	writeContainer(2100)
	third, err := s.sample(t0.Add(20*time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	if third.Node.CPU != 0 || third.Containers.CPU != 1 {
		t.Errorf("CPU: node %v processors, containers %v vcores; want 0 and 1", third.Node.CPU, third.Containers.CPU)
	}
}

// TestSamplesCarryTheMachinesPhysicalResource: every sample, the first
// among them, carries the machine as a NodeManager registers it:
// SysInfoLinux's physical memory (MemTotal less corrupted RAM and huge
// pages) in whole MiB, and its processors.
func TestSamplesCarryTheMachinesPhysicalResource(t *testing.T) {
	tests := []struct {
		name    string
		meminfo string
		cpus    int
		want    launch.PhysicalResource
	}{
		{"MemTotal in MiB and two processors", "MemTotal: 24681472 kB\nMemFree: 20000000 kB\n", 2,
			launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}},
		{"a part of a MiB is dropped", "MemTotal: 24682495 kB\nMemFree: 20000000 kB\n", 2,
			launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}},
		{"corrupted RAM and huge pages are not the node's", "MemTotal: 24681472 kB\nMemFree: 20000000 kB\n" +
			"HardwareCorrupted: 1024 kB\nHugePages_Total: 512\nHugepagesize: 2048 kB\n", 16,
			launch.PhysicalResource{MemoryMB: 24103 - 1 - 1024, Vcores: 16}},
		{"huge pages over MemTotal leave no memory", "MemTotal: 1048576 kB\nHugePages_Total: 1024\nHugepagesize: 2048 kB\n", 1,
			launch.PhysicalResource{MemoryMB: 0, Vcores: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, filepath.Join(root, "meminfo"), tt.meminfo)
			stat := "cpu  100 0 50 123456 0 0 0 0 0 0\n"
			for i := range tt.cpus {
				stat += fmt.Sprintf("cpu%d 1 0 0 1\n", i)
			}
			write(t, filepath.Join(root, "stat"), stat)
			col, err := NewCollector(Config{Pods: fixedPods{}, ProcRoot: root, CgroupRoot: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			s := newSampler(col)
			t0 := time.Unix(1700000000, 0)
			for i, at := range []time.Time{t0, t0.Add(10 * time.Second)} {
				u, err := s.sample(at, 0)
				if err != nil {
					t.Fatal(err)
				}
				if u.Physical != tt.want {
					t.Errorf("sample %d: physical %+v, want %+v", i, u.Physical, tt.want)
				}
			}
		})
	}
}

func TestOnlyChangesBeyondTheThresholdArePublished(t *testing.T) {
	base := launch.NodeUtilization{
		Node:       launch.ResourceUtilization{PmemMB: 4000, VmemMB: 4000, CPU: 1},
		Containers: launch.ResourceUtilization{PmemMB: 1000, VmemMB: 3000, CPU: 0.5},
		Physical:   launch.PhysicalResource{MemoryMB: 16000, Vcores: 4},
	}
	with := func(f func(u *launch.NodeUtilization)) launch.NodeUtilization {
		u := base
		f(&u)
		return u
	}
	tests := []struct {
		name string
		now  launch.NodeUtilization
		want bool
	}{
		{"the same figures", base, false},
		{"node memory moved 1%", with(func(u *launch.NodeUtilization) { u.Node.PmemMB = 4040 }), false},
		{"node memory moved 10%", with(func(u *launch.NodeUtilization) { u.Node.PmemMB = 4400 }), true},
		{"containers' memory moved 5% but under the floor", with(func(u *launch.NodeUtilization) { u.Containers.PmemMB = 1030 }), false},
		{"containers' CPU moved a hundredth", with(func(u *launch.NodeUtilization) { u.Containers.CPU = 0.51 }), false},
		{"containers' CPU doubled", with(func(u *launch.NodeUtilization) { u.Containers.CPU = 1 }), true},
		{"node CPU fell by half", with(func(u *launch.NodeUtilization) { u.Node.CPU = 0.5 }), true},
		{"the containers ended", with(func(u *launch.NodeUtilization) { u.Containers = launch.ResourceUtilization{} }), true},
		{"the machine's memory changed by a MiB", with(func(u *launch.NodeUtilization) { u.Physical.MemoryMB = 15999 }), true},
		{"the machine gained processors", with(func(u *launch.NodeUtilization) { u.Physical.Vcores = 8 }), true},
		{"the published figures have no machine", with(func(u *launch.NodeUtilization) { u.Physical = launch.PhysicalResource{} }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changed(base, tt.now, DefaultPublishThreshold); got != tt.want {
				t.Errorf("changed = %v, want %v", got, tt.want)
			}
		})
	}
	// A tiny container on an idle node is news, however small.
	idle := launch.NodeUtilization{Node: base.Node}
	if !changed(idle, with(func(u *launch.NodeUtilization) { u.Containers = launch.ResourceUtilization{PmemMB: 3, VmemMB: 5} }), DefaultPublishThreshold) {
		t.Error("the first container's few MiB were not published")
	}
}

func TestPublisherWritesTheNodeOnlyWhenItsFiguresMove(t *testing.T) {
	root := t.TempDir()
	const id = "container_1700000000000_0001_01_000002"
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 0, 0, 1000)
	fakeProc(t, root, 500, 1, "S", [4]int{100, 0, 0, 0}, int((64<<20)/int64(os.Getpagesize())), "CONTAINER_ID="+id)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
	client := fake.NewClientset(node)
	col, err := NewCollector(Config{Pods: fixedPods{pod("u1", id, corev1.PodRunning)}, ProcRoot: root, CgroupRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(PublisherConfig{Client: client, NodeName: "node-1", Collector: col})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1700000000, 0)
	annotation := func() launch.NodeUtilization {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := launch.DecodeUtilization(n.Annotations[launch.AnnotationUtilization])
		if err != nil {
			t.Fatalf("annotation %q: %v", n.Annotations[launch.AnnotationUtilization], err)
		}
		return u
	}
	steps := []struct {
		name      string
		at        time.Duration
		nodeBusy  int
		container int // CPU ticks of the container
		wrote     bool
	}{
		{"the first sample only starts the CPU rate", 0, 1000, 100, false},
		{"the first figures are written", 10 * time.Second, 2000, 600, true},
		{"the same rates are not written again", 20 * time.Second, 3000, 1100, false},
		{"the container's CPU doubled", 30 * time.Second, 4000, 2100, true},
	}
	for _, s := range steps {
		fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 0, 0, s.nodeBusy)
		fakeProc(t, root, 500, 1, "S", [4]int{s.container, 0, 0, 0}, int((64<<20)/int64(os.Getpagesize())), "CONTAINER_ID="+id)
		wrote, err := p.tick(ctx, t0.Add(s.at))
		if err != nil || wrote != s.wrote {
			t.Fatalf("%s: wrote %v, %v; want %v", s.name, wrote, err, s.wrote)
		}
	}
	// 1000 ticks in 10 s of one container: one processor of 4, a quarter
	// of the node's 8 vcores.
	// The machine: MemTotal less corrupted RAM and huge pages, and its 4
	// processors.
	if u := annotation(); u.Containers.PmemMB != 64 || u.Containers.CPU != 2 || u.Node.CPU != 1 ||
		u.Physical != (launch.PhysicalResource{MemoryMB: (16<<20 - 1024 - 2*2048) >> 10, Vcores: 4}) {
		t.Errorf("published %+v", u)
	}
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 2 {
		t.Errorf("%d writes to the Node, want 2", patches)
	}

	// A restarted publisher does not write again what the Node holds.
	again, err := NewPublisher(PublisherConfig{Client: client, NodeName: "node-1", Collector: col})
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Duration{40 * time.Second, 50 * time.Second} {
		fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 0, 0, 5000+1000*i)
		fakeProc(t, root, 500, 1, "S", [4]int{3100 + 1000*i, 0, 0, 0}, int((64<<20)/int64(os.Getpagesize())), "CONTAINER_ID="+id)
		if wrote, err := again.tick(ctx, t0.Add(at)); err != nil || wrote {
			t.Fatalf("after a restart, sample %d: wrote %v, %v", i, wrote, err)
		}
	}

	// What an older knit-node published, without the machine, is written
	// again once the CPU rate is known, though no figure moved.
	old := annotation()
	old.Physical = launch.PhysicalResource{}
	v, err := launch.EncodeUtilization(old)
	if err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations[launch.AnnotationUtilization] = v
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	upgraded, err := NewPublisher(PublisherConfig{Client: client, NodeName: "node-1", Collector: col})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []struct {
		at    time.Duration
		wrote bool
	}{{60 * time.Second, false}, {70 * time.Second, true}} {
		fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 0, 0, 7000+1000*i)
		fakeProc(t, root, 500, 1, "S", [4]int{5100 + 1000*i, 0, 0, 0}, int((64<<20)/int64(os.Getpagesize())), "CONTAINER_ID="+id)
		if wrote, err := upgraded.tick(ctx, t0.Add(s.at)); err != nil || wrote != s.wrote {
			t.Fatalf("after an upgrade, sample %d: wrote %v, %v; want %v", i, wrote, err, s.wrote)
		}
	}
	if u := annotation(); u.Physical.Vcores != 4 || u.Containers.CPU != old.Containers.CPU {
		t.Errorf("after an upgrade, published %+v", u)
	}
}

func TestPublisherRunsUntilItsContextEnds(t *testing.T) {
	root := t.TempDir()
	fakeMachine(t, root, 16<<20, 4<<20, 2<<20, 0, 0, 1000)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	col, err := NewCollector(Config{Pods: fixedPods{}, ProcRoot: root, CgroupRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(PublisherConfig{Client: client, NodeName: "node-1", Collector: col, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = p.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	eventually.True(t, 30*time.Second, "the node's memory published", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		u, err := launch.DecodeUtilization(n.Annotations[launch.AnnotationUtilization])
		return err == nil && u.Node.PmemMB > 0
	})
	if _, err := NewPublisher(PublisherConfig{NodeName: "node-1", Collector: col}); err == nil {
		t.Error("a publisher without a client was made")
	}
}
