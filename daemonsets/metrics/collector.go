package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/knitdev/knit/rks/launch"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Knit runs on (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// Pods lists the container pods bound to the node (logs.PodSource).
type Pods interface {
	Pods() []*corev1.Pod
}

// Config configures a Collector.
type Config struct {
	// Pods lists the node's container pods. Required.
	Pods Pods
	// ProcRoot is where /proc is mounted. If empty, "/proc".
	ProcRoot string
	// CgroupRoot is where the cgroup v2 hierarchy is mounted. If empty,
	// "/sys/fs/cgroup".
	CgroupRoot string
	// Logger logs files that could not be read. If nil, slog.Default().
	Logger *slog.Logger
}

// Usage is what one container used, from either source.
type Usage struct {
	// CPUSeconds is the CPU time used so far.
	CPUSeconds float64
	// RSSBytes is resident memory (anon in a cgroup); CacheBytes is page
	// cache, known only from a cgroup (-1 otherwise).
	RSSBytes, CacheBytes int64
	// VirtualBytes is virtual memory: the processes' address space from
	// /proc, anon and swap from a cgroup (which measures no address
	// space, as YARN's cgroup v2 calculator says).
	VirtualBytes int64
	// ReadBytes and WriteBytes are the bytes read from and written to
	// storage; -1 where unknown.
	ReadBytes, WriteBytes int64
	// Processes counts the container's processes (-1 from a cgroup).
	Processes int
	// Source is "cgroup" or "proc".
	Source string
}

// Collector is a prometheus.Collector of the node's containers.
type Collector struct {
	cfg                           Config
	log                           *slog.Logger
	cpu, rss, cache, read, write  *prometheus.Desc
	procs, scrapeErrors, measured *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector; register it on the node's registry.
func NewCollector(cfg Config) (*Collector, error) {
	if cfg.Pods == nil {
		return nil, errors.New("metrics: Config.Pods is required")
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	c := &Collector{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	labels := []string{"application", "container", "queue", "user"}
	c.cpu = prometheus.NewDesc("knit_container_cpu_usage_seconds_total", "CPU time the container has used.", labels, nil)
	c.rss = prometheus.NewDesc("knit_container_memory_rss_bytes", "Resident memory of the container (anonymous memory of its cgroup).", labels, nil)
	c.cache = prometheus.NewDesc("knit_container_memory_cache_bytes", "Page cache charged to the container's cgroup.", labels, nil)
	c.read = prometheus.NewDesc("knit_container_fs_read_bytes_total", "Bytes the container read from storage.", labels, nil)
	c.write = prometheus.NewDesc("knit_container_fs_write_bytes_total", "Bytes the container wrote to storage.", labels, nil)
	c.procs = prometheus.NewDesc("knit_container_processes", "Processes of the container (process nodes).", labels, nil)
	c.measured = prometheus.NewDesc("knit_node_containers_measured", "Running containers measured in the last scrape, by source (cgroup, proc, none).", []string{"source"}, nil)
	c.scrapeErrors = prometheus.NewDesc("knit_node_container_scrape_errors", "Running containers that could not be measured in the last scrape.", nil, nil)
	return c, nil
}

// Describe sends the descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.rss, c.cache, c.read, c.write, c.procs, c.measured, c.scrapeErrors} {
		ch <- d
	}
}

// measured is one container's use, with the labels of its pod.
type measured struct {
	application, container, queue, user string
	Usage
}

// measure reads every running container pod of the node: the containers
// measured, how many by source (cgroup, proc, none), and how many could
// not be read.
func (c *Collector) measure() (out []measured, counts map[string]int, failed int) {
	var procs *procTable // read once, when a container needs it
	counts = map[string]int{"cgroup": 0, "proc": 0, "none": 0}
	for _, p := range c.cfg.Pods.Pods() {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		id := labelOf(p, launch.LabelContainer)
		if id == "" {
			continue
		}
		u, ok, err := c.cgroupUsage(p)
		if err == nil && !ok {
			if procs == nil {
				procs = readProcTable(c.cfg.ProcRoot)
			}
			u, ok = procs.usage(id)
		}
		if err != nil {
			failed++
			c.log.Debug("container not measured", "container", id, "err", err)
			continue
		}
		if !ok {
			counts["none"]++
			continue
		}
		counts[u.Source]++
		out = append(out, measured{application: labelOf(p, launch.LabelApplication), container: id,
			queue: labelOf(p, launch.LabelQueue), user: labelOf(p, launch.LabelUser), Usage: u})
	}
	return out, counts, failed
}

// Collect measures every running container pod of the node.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	all, counts, failed := c.measure()
	for _, m := range all {
		u := m.Usage
		lv := []string{m.application, m.container, m.queue, m.user}
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, u.CPUSeconds, lv...)
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(u.RSSBytes), lv...)
		if u.CacheBytes >= 0 {
			ch <- prometheus.MustNewConstMetric(c.cache, prometheus.GaugeValue, float64(u.CacheBytes), lv...)
		}
		if u.ReadBytes >= 0 {
			ch <- prometheus.MustNewConstMetric(c.read, prometheus.CounterValue, float64(u.ReadBytes), lv...)
		}
		if u.WriteBytes >= 0 {
			ch <- prometheus.MustNewConstMetric(c.write, prometheus.CounterValue, float64(u.WriteBytes), lv...)
		}
		if u.Processes >= 0 {
			ch <- prometheus.MustNewConstMetric(c.procs, prometheus.GaugeValue, float64(u.Processes), lv...)
		}
	}
	for _, s := range []string{"cgroup", "proc", "none"} {
		ch <- prometheus.MustNewConstMetric(c.measured, prometheus.GaugeValue, float64(counts[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeErrors, prometheus.GaugeValue, float64(failed))
}

// labelOf is a label's exact value: the annotation of the same key when
// the label had to be sanitised, else the label.
func labelOf(p *corev1.Pod, key string) string {
	if v, ok := p.Annotations[key]; ok {
		return v
	}
	return p.Labels[key]
}

// ---- cgroup v2 ----

// podCgroupDirs are where the kubelet puts a pod's cgroup, relative to the
// cgroup root: the systemd driver's slices, then cgroupfs's folders, for
// the Guaranteed (Knit's pods: requests = limits), Burstable and
// BestEffort classes.
func podCgroupDirs(uid string) []string {
	u := strings.ReplaceAll(uid, "-", "_")
	return []string{
		"kubepods.slice/kubepods-pod" + u + ".slice",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice",
		"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + u + ".slice",
		"kubepods/pod" + uid,
		"kubepods/burstable/pod" + uid,
		"kubepods/besteffort/pod" + uid,
	}
}

// cgroupUsage reads the pod's cgroup; ok is false when the node has none
// for it (a process node).
func (c *Collector) cgroupUsage(p *corev1.Pod) (Usage, bool, error) {
	if p.UID == "" {
		return Usage{}, false, nil
	}
	for _, rel := range podCgroupDirs(string(p.UID)) {
		dir := filepath.Join(c.cfg.CgroupRoot, rel)
		cpu, err := readKeyed(filepath.Join(dir, "cpu.stat"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Usage{}, false, err
		}
		mem, err := readKeyed(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return Usage{}, false, err
		}
		u := Usage{
			CPUSeconds: float64(cpu["usage_usec"]) / 1e6,
			RSSBytes:   mem["anon"], CacheBytes: mem["file"], VirtualBytes: mem["anon"],
			ReadBytes: -1, WriteBytes: -1, Processes: -1, Source: "cgroup",
		}
		if swap, err := readSingle(filepath.Join(dir, "memory.swap.current")); err == nil {
			u.VirtualBytes += swap
		}
		if r, w, err := readIOStat(filepath.Join(dir, "io.stat")); err == nil {
			u.ReadBytes, u.WriteBytes = r, w
		}
		return u, true, nil
	}
	return Usage{}, false, nil
}

// readKeyed reads a flat keyed file ("key value" lines), as cpu.stat and
// memory.stat are.
func readKeyed(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// readSingle reads a single-value file, as memory.swap.current is.
func readSingle(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readIOStat sums rbytes and wbytes over the devices of an io.stat
// ("8:0 rbytes=1 wbytes=2 rios=3 ...").
func readIOStat(path string) (read, write int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "rbytes":
				read += n
			case "wbytes":
				write += n
			}
		}
	}
	return read, write, nil
}
