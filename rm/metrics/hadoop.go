package metrics

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Snapshot is the RM's state at one scrape, as the Hadoop figures need it.
type Snapshot struct {
	Nodes  []Node
	Queues []Queue
	// Sums are the applications added up per leaf queue and user; the RM
	// keeps them as its applications change, so that a scrape costs the
	// same at any number of applications.
	Sums []AppSums
	// Pending is what waits for the Kubernetes scheduler, per queue and
	// user (RGS's pending pods).
	Pending []Pending
}

// Node is one node of the cluster.
type Node struct {
	State                        yarnpb.NodeStateProto
	CapabilityMB, UsedMB         int64
	CapabilityVCores, UsedVCores int64
}

// Queue is one queue of the tree, with its configured capacities as
// fractions.
type Queue struct {
	Path                                  string
	Capacity, MaximumCapacity             float64
	AbsoluteCapacity, AbsoluteMaxCapacity float64
	MaxAMResourcePercent                  float64
}

// AppSums are the applications of one user in one queue added up: how
// many are in each state clients see (and of those, how many have an
// unmanaged AM), and the live resources of their current attempts.
type AppSums struct {
	Queue, User       string
	States, Unmanaged map[yarnpb.YarnApplicationStateProto]int64
	// Live resources of their current attempts.
	UsedContainers, UsedMB, UsedVCores             int64
	ReservedContainers, ReservedMB, ReservedVCores int64
	// AMUsedMB and AMUsedVCores are their running AM containers'.
	AMUsedMB, AMUsedVCores int64
}

// Pending is the pending pods of one user in one queue.
type Pending struct {
	Queue, User            string
	Containers, MB, VCores int64
}

// Source gives the Snapshot at scrape time.
type Source interface {
	MetricsSnapshot(ctx context.Context) (Snapshot, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) (Snapshot, error)

// MetricsSnapshot calls f.
func (f SourceFunc) MetricsSnapshot(ctx context.Context) (Snapshot, error) { return f(ctx) }

// family is one Hadoop metric: its record, its name in that record and
// Hadoop's description, and how to read it.
type family struct {
	metric, help string
	cluster      func(c *clusterFigures) float64
	queue        func(q *queueFigures) float64
	desc         *prometheus.Desc
	// counter is set for the figures Hadoop's sink types as counters. Here
	// they count the applications the RM holds, so a restart or the
	// removal of old completed applications shows as a counter reset.
	counter bool
}

func (f *family) valueType() prometheus.ValueType {
	if f.counter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// clusterFigures are ClusterMetrics'.
type clusterFigures struct {
	active, decommissioned, decommissioning, lost, unhealthy, rebooted, shutdown int64
	capabilityMB, capabilityVCores, utilizedMB, utilizedVCores                   int64
}

// appCounts are the applications of a queue by the state clients see.
type appCounts struct {
	submitted, running, pending, completed, failed, killed int64
}

func (c *appCounts) add(state yarnpb.YarnApplicationStateProto) { c.addN(state, 1) }

// addN counts n applications in state.
func (c *appCounts) addN(state yarnpb.YarnApplicationStateProto, n int64) {
	c.submitted += n
	switch state {
	case yarnpb.YarnApplicationStateProto_RUNNING:
		c.running += n
	case yarnpb.YarnApplicationStateProto_FINISHED:
		c.completed += n
	case yarnpb.YarnApplicationStateProto_FAILED:
		c.failed += n
	case yarnpb.YarnApplicationStateProto_KILLED:
		c.killed += n
	default:
		c.pending += n
	}
}

// activeState is whether the leaf queue has activated an application in
// state (LeafQueue's active applications).
func activeState(state yarnpb.YarnApplicationStateProto) bool {
	return state == yarnpb.YarnApplicationStateProto_ACCEPTED || state == yarnpb.YarnApplicationStateProto_RUNNING
}

// queueFigures are QueueMetrics' for one queue, or one user of it.
type queueFigures struct {
	apps, unmanaged                                   appCounts
	allocatedMB, allocatedVCores, allocatedContainers int64
	availableMB, availableVCores                      int64
	pendingMB, pendingVCores, pendingContainers       int64
	reservedMB, reservedVCores, reservedContainers    int64
	activeApplications                                int64
	usedAMMB, usedAMVCores                            int64
	activeUsers                                       map[string]bool

	// Queue totals only.
	q                                  *Queue
	guaranteedMB, guaranteedVCores     int64
	maxMB, maxVCores                   int64
	amLimitMB, amLimitVCores           int64
	usedCapacity, absoluteUsedCapacity float64
}

func clusterFamilies() []*family {
	f := func(metric, help string, get func(c *clusterFigures) int64) *family {
		return &family{metric: metric, help: help, cluster: func(c *clusterFigures) float64 { return float64(get(c)) }}
	}
	return []*family{
		f("NumActiveNMs", "# of active NMs", func(c *clusterFigures) int64 { return c.active }),
		f("NumDecommissionedNMs", "# of decommissioned NMs", func(c *clusterFigures) int64 { return c.decommissioned }),
		f("NumDecommissioningNMs", "# of decommissioning NMs", func(c *clusterFigures) int64 { return c.decommissioning }),
		f("NumLostNMs", "# of lost NMs", func(c *clusterFigures) int64 { return c.lost }),
		f("NumUnhealthyNMs", "# of unhealthy NMs", func(c *clusterFigures) int64 { return c.unhealthy }),
		f("NumRebootedNMs", "# of Rebooted NMs", func(c *clusterFigures) int64 { return c.rebooted }),
		f("NumShutdownNMs", "# of Shutdown NMs", func(c *clusterFigures) int64 { return c.shutdown }),
		f("CapabilityMB", "Memory Capability", func(c *clusterFigures) int64 { return c.capabilityMB }),
		f("CapabilityVirtualCores", "Vcore Capability", func(c *clusterFigures) int64 { return c.capabilityVCores }),
		f("UtilizedMB", "Memory Utilization", func(c *clusterFigures) int64 { return c.utilizedMB }),
		f("UtilizedVirtualCores", "Vcore Utilization", func(c *clusterFigures) int64 { return c.utilizedVCores }),
	}
}

// queueFamilies are the QueueMetrics figures; totalsOnly marks those of a
// queue and not of its users (capacities).
func queueFamilies() (all, totalsOnly []*family) {
	f := func(metric, help string, get func(q *queueFigures) int64) *family {
		return &family{metric: metric, help: help, queue: func(q *queueFigures) float64 { return float64(get(q)) }}
	}
	ff := func(metric, help string, get func(q *queueFigures) float64) *family {
		return &family{metric: metric, help: help, queue: get}
	}
	counter := func(f *family) *family { f.counter = true; return f }
	all = []*family{
		counter(f("AppsSubmitted", "# of apps submitted", func(q *queueFigures) int64 { return q.apps.submitted })),
		f("AppsRunning", "# of running apps", func(q *queueFigures) int64 { return q.apps.running }),
		f("AppsPending", "# of pending apps", func(q *queueFigures) int64 { return q.apps.pending }),
		counter(f("AppsCompleted", "# of apps completed", func(q *queueFigures) int64 { return q.apps.completed })),
		counter(f("AppsKilled", "# of apps killed", func(q *queueFigures) int64 { return q.apps.killed })),
		counter(f("AppsFailed", "# of apps failed", func(q *queueFigures) int64 { return q.apps.failed })),
		counter(f("UnmanagedAppsSubmitted", "# of Unmanaged apps submitted", func(q *queueFigures) int64 { return q.unmanaged.submitted })),
		f("UnmanagedAppsRunning", "# of Unmanaged running apps", func(q *queueFigures) int64 { return q.unmanaged.running }),
		f("UnmanagedAppsPending", "# of Unmanaged pending apps", func(q *queueFigures) int64 { return q.unmanaged.pending }),
		counter(f("UnmanagedAppsCompleted", "# of Unmanaged apps completed", func(q *queueFigures) int64 { return q.unmanaged.completed })),
		counter(f("UnmanagedAppsKilled", "# of Unmanaged apps killed", func(q *queueFigures) int64 { return q.unmanaged.killed })),
		counter(f("UnmanagedAppsFailed", "# of Unmanaged apps failed", func(q *queueFigures) int64 { return q.unmanaged.failed })),
		f("AllocatedMB", "Allocated memory in MB", func(q *queueFigures) int64 { return q.allocatedMB }),
		f("AllocatedVCores", "Allocated CPU in virtual cores", func(q *queueFigures) int64 { return q.allocatedVCores }),
		f("AllocatedContainers", "# of allocated containers", func(q *queueFigures) int64 { return q.allocatedContainers }),
		f("AvailableMB", "Available memory in MB", func(q *queueFigures) int64 { return q.availableMB }),
		f("AvailableVCores", "Available CPU in virtual cores", func(q *queueFigures) int64 { return q.availableVCores }),
		f("PendingMB", "Pending memory allocation in MB", func(q *queueFigures) int64 { return q.pendingMB }),
		f("PendingVCores", "Pending CPU allocation in virtual cores", func(q *queueFigures) int64 { return q.pendingVCores }),
		f("PendingContainers", "# of pending containers", func(q *queueFigures) int64 { return q.pendingContainers }),
		f("ReservedMB", "# of reserved memory in MB", func(q *queueFigures) int64 { return q.reservedMB }),
		f("ReservedVCores", "Reserved CPU in virtual cores", func(q *queueFigures) int64 { return q.reservedVCores }),
		f("ReservedContainers", "# of reserved containers", func(q *queueFigures) int64 { return q.reservedContainers }),
		f("ActiveUsers", "# of active users", func(q *queueFigures) int64 { return int64(len(q.activeUsers)) }),
		f("ActiveApplications", "# of active applications", func(q *queueFigures) int64 { return q.activeApplications }),
		f("UsedAMResourceMB", "Used AM memory limit in MB", func(q *queueFigures) int64 { return q.usedAMMB }),
		f("UsedAMResourceVCores", "Used AM CPU limit in virtual cores", func(q *queueFigures) int64 { return q.usedAMVCores }),
	}
	totalsOnly = []*family{
		f("GuaranteedMB", "Guaranteed memory in MB", func(q *queueFigures) int64 { return q.guaranteedMB }),
		f("GuaranteedVCores", "Guaranteed CPU in virtual cores", func(q *queueFigures) int64 { return q.guaranteedVCores }),
		f("MaxCapacityMB", "Maximum memory in MB", func(q *queueFigures) int64 { return q.maxMB }),
		f("MaxCapacityVCores", "Maximum CPU in virtual cores", func(q *queueFigures) int64 { return q.maxVCores }),
		f("AMResourceLimitMB", "AM memory limit in MB", func(q *queueFigures) int64 { return q.amLimitMB }),
		f("AMResourceLimitVCores", "AM CPU limit in virtual cores", func(q *queueFigures) int64 { return q.amLimitVCores }),
		ff("GuaranteedCapacity", "Guaranteed capacity in percentage relative to parent", func(q *queueFigures) float64 { return q.q.Capacity }),
		ff("GuaranteedAbsoluteCapacity", "Guaranteed capacity in percentage relative to total partition", func(q *queueFigures) float64 { return q.q.AbsoluteCapacity }),
		ff("MaxCapacity", "Maximum capacity in percentage relative to parent", func(q *queueFigures) float64 { return q.q.MaximumCapacity }),
		ff("MaxAbsoluteCapacity", "Maximum capacity in percentage relative to total partition", func(q *queueFigures) float64 { return q.q.AbsoluteMaxCapacity }),
		ff("UsedCapacity", "Percent of Capacity Used", func(q *queueFigures) float64 { return q.usedCapacity }),
		ff("AbsoluteUsedCapacity", "Percent of Absolute Capacity Used", func(q *queueFigures) float64 { return q.absoluteUsedCapacity }),
	}
	return all, totalsOnly
}

// Hadoop record names.
const (
	recordCluster = "ClusterMetrics"
	recordQueue   = "QueueMetrics"
)

// HadoopCollector collects the ClusterMetrics and QueueMetrics families
// from a Source at every scrape.
type HadoopCollector struct {
	src           Source
	timeout       time.Duration
	log           *slog.Logger
	cluster       []*family
	queue, totals []*family
	up            *prometheus.Desc
}

var _ prometheus.Collector = (*HadoopCollector)(nil)

// NewHadoopCollector returns the collector; a scrape waits at most timeout
// for the Source (zero: 10s). log receives Source failures (nil:
// slog.Default()).
func NewHadoopCollector(src Source, timeout time.Duration, log *slog.Logger) *HadoopCollector {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	h := &HadoopCollector{src: src, timeout: timeout, log: log, cluster: clusterFamilies()}
	h.queue, h.totals = queueFamilies()
	for _, f := range h.cluster {
		f.desc = prometheus.NewDesc(HadoopName(recordCluster, f.metric), f.help, nil, nil)
	}
	for _, f := range append(append([]*family{}, h.queue...), h.totals...) {
		f.desc = prometheus.NewDesc(HadoopName(recordQueue, f.metric), f.help, []string{"queue", "user"}, nil)
	}
	h.up = prometheus.NewDesc("knit_rm_metrics_source_up", "1 when the last scrape read the RM's state, 0 when it failed", nil, nil)
	return h
}

// Describe implements prometheus.Collector.
func (h *HadoopCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range h.cluster {
		ch <- f.desc
	}
	for _, f := range h.queue {
		ch <- f.desc
	}
	for _, f := range h.totals {
		ch <- f.desc
	}
	ch <- h.up
}

// Collect implements prometheus.Collector.
func (h *HadoopCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	s, err := h.src.MetricsSnapshot(ctx)
	if err != nil {
		h.log.Warn("metrics: reading the RM's state", "err", err)
		ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 1)
	c := clusterOf(s.Nodes)
	for _, f := range h.cluster {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, f.cluster(&c))
	}
	totals, users := queuesOf(s, &c)
	// A queue's own figures come just before its users', in the order the
	// registry sorts each family's samples (queue, then user, "" first), so
	// its sort finds them in place.
	keys := make([]seriesKey, 0, len(totals)+len(users))
	for path := range totals {
		keys = append(keys, seriesKey{queue: path})
	}
	for k := range users {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b seriesKey) int {
		if c := strings.Compare(a.queue, b.queue); c != 0 {
			return c
		}
		return strings.Compare(a.user, b.user)
	})
	for _, k := range keys {
		// One pair of labels for every family of the series.
		labels := []*dto.LabelPair{{Name: proto.String("queue"), Value: proto.String(k.queue)}, {Name: proto.String("user"), Value: proto.String(k.user)}}
		if k.user == "" {
			q := totals[k.queue]
			for _, f := range h.queue {
				ch <- &sample{desc: f.desc, counter: f.counter, value: f.queue(q), labels: labels}
			}
			for _, f := range h.totals {
				ch <- &sample{desc: f.desc, counter: f.counter, value: f.queue(q), labels: labels}
			}
			continue
		}
		q := users[k]
		for _, f := range h.queue {
			ch <- &sample{desc: f.desc, counter: f.counter, value: f.queue(q), labels: labels}
		}
	}
}

// seriesKey names the series of a queue (user "") or of one user of it.
type seriesKey struct{ queue, user string }

// sample is one queue series of one family. Unlike
// prometheus.MustNewConstMetric, which builds and sorts the label pairs of
// every sample, it shares its series' pairs with the series' other
// families: a scrape of 10,000 applications carries tens of thousands of
// queue samples, and their labels were most of the collector's work.
type sample struct {
	desc    *prometheus.Desc
	counter bool
	value   float64
	labels  []*dto.LabelPair // queue, user: sorted by name, read only
}

var _ prometheus.Metric = (*sample)(nil)

// Desc implements prometheus.Metric.
func (s *sample) Desc() *prometheus.Desc { return s.desc }

// Write implements prometheus.Metric.
func (s *sample) Write(m *dto.Metric) error {
	m.Label = s.labels
	if s.counter {
		m.Counter = &dto.Counter{Value: &s.value}
	} else {
		m.Gauge = &dto.Gauge{Value: &s.value}
	}
	return nil
}

func clusterOf(nodes []Node) clusterFigures {
	var c clusterFigures
	for _, n := range nodes {
		switch n.State {
		case yarnpb.NodeStateProto_NS_RUNNING:
			c.active++
			c.capabilityMB += n.CapabilityMB
			c.capabilityVCores += n.CapabilityVCores
			c.utilizedMB += n.UsedMB
			c.utilizedVCores += n.UsedVCores
		case yarnpb.NodeStateProto_NS_DECOMMISSIONED:
			c.decommissioned++
		case yarnpb.NodeStateProto_NS_DECOMMISSIONING:
			c.decommissioning++
		case yarnpb.NodeStateProto_NS_LOST:
			c.lost++
		case yarnpb.NodeStateProto_NS_UNHEALTHY:
			c.unhealthy++
		case yarnpb.NodeStateProto_NS_REBOOTED:
			c.rebooted++
		case yarnpb.NodeStateProto_NS_SHUTDOWN:
			c.shutdown++
		}
	}
	return c
}

// ancestors is path and every queue above it: root.a.b → root.a.b, root.a,
// root.
func ancestors(path string) []string {
	out := []string{path}
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path, '.') {
		path = path[:i]
		out = append(out, path)
	}
	return out
}

// queuesOf adds up applications and pending pods per queue (every queue
// above theirs too) and per user of each queue.
func queuesOf(s Snapshot, c *clusterFigures) (totals map[string]*queueFigures, users map[seriesKey]*queueFigures) {
	totals = map[string]*queueFigures{}
	users = map[seriesKey]*queueFigures{}
	for i := range s.Queues {
		totals[s.Queues[i].Path] = &queueFigures{q: &s.Queues[i], activeUsers: map[string]bool{}}
	}
	each := func(queue, user string, fn func(q *queueFigures)) {
		for _, path := range ancestors(queue) {
			t := totals[path]
			if t == nil {
				continue // a queue removed by a refresh while apps remain
			}
			fn(t)
			k := seriesKey{queue: path, user: user}
			u := users[k]
			if u == nil {
				u = &queueFigures{activeUsers: map[string]bool{}}
				users[k] = u
			}
			fn(u)
		}
	}
	for _, a := range s.Sums {
		each(a.Queue, a.User, func(q *queueFigures) {
			for state, n := range a.States {
				q.apps.addN(state, n)
				if activeState(state) && n > 0 {
					q.activeApplications += n
					q.activeUsers[a.User] = true
				}
			}
			for state, n := range a.Unmanaged {
				q.unmanaged.addN(state, n)
			}
			q.allocatedContainers += a.UsedContainers
			q.allocatedMB += a.UsedMB
			q.allocatedVCores += a.UsedVCores
			q.reservedContainers += a.ReservedContainers
			q.reservedMB += a.ReservedMB
			q.reservedVCores += a.ReservedVCores
			q.usedAMMB += a.AMUsedMB
			q.usedAMVCores += a.AMUsedVCores
		})
	}
	for _, p := range s.Pending {
		each(p.Queue, p.User, func(q *queueFigures) {
			q.pendingContainers += p.Containers
			q.pendingMB += p.MB
			q.pendingVCores += p.VCores
		})
	}
	freeMB, freeVC := c.capabilityMB-c.utilizedMB, c.capabilityVCores-c.utilizedVCores
	for _, t := range totals {
		share := func(total int64, f float64) int64 { return int64(float64(total) * f) }
		t.guaranteedMB, t.guaranteedVCores = share(c.capabilityMB, t.q.AbsoluteCapacity), share(c.capabilityVCores, t.q.AbsoluteCapacity)
		t.maxMB, t.maxVCores = share(c.capabilityMB, t.q.AbsoluteMaxCapacity), share(c.capabilityVCores, t.q.AbsoluteMaxCapacity)
		t.amLimitMB = share(t.guaranteedMB, t.q.MaxAMResourcePercent)
		t.amLimitVCores = share(t.guaranteedVCores, t.q.MaxAMResourcePercent)
		if t.amLimitMB > 0 && t.amLimitVCores == 0 {
			t.amLimitVCores = 1 // an AM needs a vcore: YARN rounds up to the minimum allocation
		}
		// Available: room to the maximum, within what the cluster has free.
		t.availableMB = max(0, min(t.maxMB-t.allocatedMB, freeMB))
		t.availableVCores = max(0, min(t.maxVCores-t.allocatedVCores, freeVC))
		if t.guaranteedMB > 0 {
			t.usedCapacity = float64(t.allocatedMB) / float64(t.guaranteedMB)
		}
		if c.capabilityMB > 0 {
			t.absoluteUsedCapacity = float64(t.allocatedMB) / float64(c.capabilityMB)
		}
	}
	return totals, users
}
