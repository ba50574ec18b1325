package metrics

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/rks/launch"
)

// machine is the node as /proc shows it at one moment, read as Hadoop's
// SysInfoLinux reads it for the NodeResourceMonitor.
type machine struct {
	// physicalKB is MemTotal less corrupted RAM and reserved huge pages;
	// availableKB is MemFree plus Inactive(file) (Inactive on kernels
	// without it).
	physicalKB, availableKB int64
	swapKB, swapFreeKB      int64
	// busyTicks is user + nice + system of /proc/stat's cpu line.
	busyTicks uint64
	// processors counts /proc/stat's cpuN lines, as /proc/cpuinfo's
	// processor entries.
	processors int
}

func readMachine(procRoot string) (machine, error) {
	var m machine
	meminfo, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	kb := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			kb[k] = n
		}
	}
	if kb["MemTotal"] <= 0 {
		return m, fmt.Errorf("metrics: no MemTotal in %s", filepath.Join(procRoot, "meminfo"))
	}
	m.physicalKB = kb["MemTotal"] - kb["HardwareCorrupted"] - kb["HugePages_Total"]*kb["Hugepagesize"]
	inactive, ok := kb["Inactive(file)"]
	if !ok {
		inactive = kb["Inactive"]
	}
	m.availableKB = kb["MemFree"] + inactive
	m.swapKB, m.swapFreeKB = kb["SwapTotal"], kb["SwapFree"]

	stat, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	found := false
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			m.processors++
			continue
		}
		if len(f) < 4 {
			return m, fmt.Errorf("metrics: short cpu line in %s: %q", filepath.Join(procRoot, "stat"), line)
		}
		for _, v := range f[1:4] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return m, fmt.Errorf("metrics: cpu line of %s: %w", filepath.Join(procRoot, "stat"), err)
			}
			m.busyTicks += n
		}
		found = true
	}
	if !found || m.processors == 0 {
		return m, fmt.Errorf("metrics: no cpu lines in %s", filepath.Join(procRoot, "stat"))
	}
	return m, nil
}

// sampler turns successive readings of the machine and of the containers
// into YARN's ResourceUtilization figures. CPU is a rate, so a sample
// compares with the one before: the first says 0 for CPU, as the
// NodeManager's first CPU reading is unavailable.
type sampler struct {
	col *Collector

	at   time.Time
	busy uint64
	cpu  map[string]float64 // container → CPU seconds at the last sample
}

func newSampler(col *Collector) *sampler {
	return &sampler{col: col, cpu: map[string]float64{}}
}

// sample measures at now. vcores is the node's vcores for containers
// (its allocatable CPU); 0 takes the processors.
//
// The figures are those a NodeManager sends in its heartbeat:
//   - node (NodeResourceMonitorImpl): physical memory in use, virtual
//     memory in use (physical plus swap), and the processors busy
//     (SysInfoLinux.getNumVCoresUsed: CPU time per wall time).
//   - containers (ContainersMonitorImpl): the sum of their resident and
//     virtual memory, and their CPU as vcores: the share of all
//     processors they keep busy times the node's vcores (with
//     yarn.nodemanager.resource.percentage-physical-cpu-limit at 100).
//   - physical (the NodeManager's physicalResource, sent when it
//     registers): the machine's memory in MiB and its processors, which
//     the RM's REST nodes divide the node's figures by.
func (s *sampler) sample(now time.Time, vcores int) (launch.NodeUtilization, error) {
	m, err := readMachine(s.col.cfg.ProcRoot)
	if err != nil {
		return launch.NodeUtilization{}, err
	}
	all, _, _ := s.col.measure()
	var u launch.NodeUtilization
	used := max(m.physicalKB-m.availableKB, 0)
	u.Node.PmemMB = mb(used << 10)
	u.Node.VmemMB = mb((used + max(m.swapKB-m.swapFreeKB, 0)) << 10)
	var rss, virtual int64
	var containerCPU float64
	cpu := make(map[string]float64, len(all))
	elapsed := now.Sub(s.at).Seconds()
	for _, c := range all {
		rss += c.RSSBytes
		virtual += c.VirtualBytes
		cpu[c.container] = c.CPUSeconds
		// A container new since the last sample, or one whose count went
		// back (its processes were replaced), has no rate yet.
		if prev, ok := s.cpu[c.container]; ok && elapsed > 0 && c.CPUSeconds >= prev {
			containerCPU += (c.CPUSeconds - prev) / elapsed
		}
	}
	u.Containers.PmemMB, u.Containers.VmemMB = mb(rss), mb(virtual)
	if !s.at.IsZero() && elapsed > 0 && m.busyTicks >= s.busy {
		u.Node.CPU = float32(float64(m.busyTicks-s.busy) / clockTicks / elapsed)
	}
	if vcores <= 0 {
		vcores = m.processors
	}
	u.Containers.CPU = float32(containerCPU / float64(m.processors) * float64(vcores))
	u.Physical = launch.PhysicalResource{
		MemoryMB: max(m.physicalKB, 0) >> 10,
		Vcores:   int32(min(m.processors, math.MaxInt32)),
	}
	s.at, s.busy, s.cpu = now, m.busyTicks, cpu
	return u, nil
}

// mb is bytes in whole MiB, as an int32 of a ResourceUtilization holds it.
func mb(bytes int64) int32 {
	return int32(min(max(bytes>>20, 0), math.MaxInt32))
}

// The smallest changes worth a write to the API server, below which a
// figure that moves by less than Threshold of itself is not published
// either: a node's memory moves by a few MiB and its CPU by hundredths of
// a core all the time.
const (
	minMemoryChangeMB = 32
	minCPUChange      = 0.05
)

// changed reports whether now differs from published enough to publish:
// the machine differs (its memory or processors changed, or what is
// published came from a knit-node that published none), a figure turned
// zero or non-zero (containers started on an idle node, or all ended), or
// one moved by more than threshold of its published value and more than
// the floor above.
func changed(published, now launch.NodeUtilization, threshold float64) bool {
	if published.Physical != now.Physical {
		return true
	}
	pairs := []struct {
		was, is, floor float64
	}{
		{float64(published.Node.PmemMB), float64(now.Node.PmemMB), minMemoryChangeMB},
		{float64(published.Node.VmemMB), float64(now.Node.VmemMB), minMemoryChangeMB},
		{float64(published.Node.CPU), float64(now.Node.CPU), minCPUChange},
		{float64(published.Containers.PmemMB), float64(now.Containers.PmemMB), minMemoryChangeMB},
		{float64(published.Containers.VmemMB), float64(now.Containers.VmemMB), minMemoryChangeMB},
		{float64(published.Containers.CPU), float64(now.Containers.CPU), minCPUChange},
	}
	for _, p := range pairs {
		if (p.was == 0) != (p.is == 0) {
			return true
		}
		if d := math.Abs(p.is - p.was); d > p.floor && d > threshold*p.was {
			return true
		}
	}
	return false
}
