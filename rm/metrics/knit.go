package metrics

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/scheduling"
)

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}

// latencyBuckets span a fast RPC to a slow API server, in seconds.
func latencyBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// RPC counts the calls of the RM's Hadoop RPC servers per protocol and
// method, as Hadoop's RpcMetrics and RpcDetailedMetrics do, with
// Prometheus histograms for the times.
type RPC struct {
	calls      *prometheus.CounterVec
	queue      *prometheus.HistogramVec
	processing *prometheus.HistogramVec
	// answered holds each method's series of a call answered without
	// error, looked up once (methodKey → *methodSeries): finding them by
	// hashing their label values took some 7% of the servers' CPU in a
	// profile of small calls. Only methods a handler serves answer without
	// error, so it holds no more keys than the servers register.
	answered sync.Map
}

type methodKey struct{ protocol, method string }

// methodSeries are one method's series of a call answered without error.
type methodSeries struct {
	ok                prometheus.Counter
	queue, processing prometheus.Observer
}

var _ ipc.CallObserver = (*RPC)(nil)

// NewRPC registers the RPC metrics with reg.
func NewRPC(reg prometheus.Registerer) (*RPC, error) {
	labels := []string{"protocol", "method"}
	r := &RPC{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knit_rpc_calls_total", Help: "Hadoop RPC calls answered, by protocol, method and outcome (ok, or the error's Java class)",
		}, append(labels, "outcome")),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "knit_rpc_queue_time_seconds", Help: "Time a Hadoop RPC call waited for a free handler slot", Buckets: latencyBuckets(),
		}, labels),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "knit_rpc_processing_time_seconds", Help: "Time a Hadoop RPC call's handler took", Buckets: latencyBuckets(),
		}, labels),
	}
	for _, c := range []prometheus.Collector{r.calls, r.queue, r.processing} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ObserveCall implements ipc.CallObserver. A failed call's outcome is the
// class the client was answered with: that of the first error in err's
// chain that knows its Java class, else java.io.IOException, as the
// engine answers (yarnerr.ClassOf).
func (r *RPC) ObserveCall(protocol, method string, queued, processing time.Duration, err error) {
	if err != nil {
		r.calls.WithLabelValues(protocol, method, string(yarnerr.ClassOf(err))).Inc()
		r.queue.WithLabelValues(protocol, method).Observe(queued.Seconds())
		r.processing.WithLabelValues(protocol, method).Observe(processing.Seconds())
		return
	}
	k := methodKey{protocol, method}
	v, ok := r.answered.Load(k)
	if !ok {
		v, _ = r.answered.LoadOrStore(k, &methodSeries{
			ok:         r.calls.WithLabelValues(protocol, method, "ok"),
			queue:      r.queue.WithLabelValues(protocol, method),
			processing: r.processing.WithLabelValues(protocol, method),
		})
	}
	s := v.(*methodSeries)
	s.ok.Inc()
	s.queue.Observe(queued.Seconds())
	s.processing.Observe(processing.Seconds())
}

// RGS counts RGS's pod work.
type RGS struct {
	created, createErrors, bound *prometheus.CounterVec
	bindToContainer              *prometheus.HistogramVec
}

var _ rgs.Observer = (*RGS)(nil)

// NewRGS registers RGS's counters with reg.
func NewRGS(reg prometheus.Registerer) (*RGS, error) {
	r := &RGS{
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knit_rgs_pods_created_total", Help: "Pods RGS created for containers asked for, by queue",
		}, []string{"queue"}),
		createErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knit_rgs_pod_create_errors_total", Help: "Pod creations that failed for good, by queue",
		}, []string{"queue"}),
		bound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "knit_rgs_pods_bound_total", Help: "Bound pods RGS turned into YARN containers, by queue",
		}, []string{"queue"}),
		bindToContainer: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "knit_rgs_bind_to_container_seconds", Help: "Time from the scheduler binding a pod (to the second) to RGS handing its container to the RM",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{"queue"}),
	}
	for _, c := range []prometheus.Collector{r.created, r.createErrors, r.bound, r.bindToContainer} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// RegisterPending registers knit_rgs_pods_pending, read from pending at
// every scrape (RGS's Controller.Pending).
func RegisterPending(reg prometheus.Registerer, pending func() []rgs.Pending) error {
	desc := prometheus.NewDesc("knit_rgs_pods_pending", "Pods created for asks and not yet bound, by queue", []string{"queue"}, nil)
	return reg.Register(collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		byQueue := map[string]int{}
		for _, p := range pending() {
			byQueue[p.Queue] += p.Pods
		}
		for _, q := range sortedKeys(byQueue) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(byQueue[q]), q)
		}
	}})
}

// PendingOf converts RGS's pending pods for a Snapshot: those of the
// default partition, the only one QueueMetrics count.
func PendingOf(ps []rgs.Pending) []Pending {
	out := make([]Pending, 0, len(ps))
	for _, p := range ps {
		if p.Partition != "" {
			continue
		}
		out = append(out, Pending{Queue: p.Queue, User: p.User, Containers: int64(p.Pods), MB: p.MemoryMB, VCores: p.VCores})
	}
	return out
}

// PodCreated implements rgs.Observer.
func (r *RGS) PodCreated(queue string) { r.created.WithLabelValues(queue).Inc() }

// PodCreateFailed implements rgs.Observer.
func (r *RGS) PodCreateFailed(queue string) { r.createErrors.WithLabelValues(queue).Inc() }

// ContainerAllocated implements rgs.Observer.
func (r *RGS) ContainerAllocated(queue string, bindToContainer time.Duration) {
	r.bound.WithLabelValues(queue).Inc()
	r.bindToContainer.WithLabelValues(queue).Observe(bindToContainer.Seconds())
}

// collectorFunc is a collector of one family read at scrape time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// Containers counts containers allocated and released per queue and user
// (QueueMetrics' AggregateContainersAllocated and
// AggregateContainersReleased, for the queue and every queue above it), as
// a scheduling.Sink between the scheduler and the RM. They are counters
// named without _total, as Hadoop's sink writes them.
type Containers struct {
	allocated, released *prometheus.CounterVec
}

// NewContainers registers the two families with reg.
func NewContainers(reg prometheus.Registerer) (*Containers, error) {
	labels := []string{"queue", "user"}
	c := &Containers{
		allocated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: HadoopName(recordQueue, "AggregateContainersAllocated"), Help: "Aggregate # of allocated containers",
		}, labels),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: HadoopName(recordQueue, "AggregateContainersReleased"), Help: "Aggregate # of released containers",
		}, labels),
	}
	for _, m := range []prometheus.Collector{c.allocated, c.released} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Containers) add(v *prometheus.CounterVec, queue, user string) {
	if queue == "" {
		return
	}
	for _, path := range ancestors(queue) {
		v.WithLabelValues(path, "").Inc()
		v.WithLabelValues(path, user).Inc()
	}
}

// Sink wraps inner so that containers it takes and releases are counted;
// queueOf finds the queue and user of a container's application.
func (c *Containers) Sink(inner scheduling.Sink, queueOf func(ctx context.Context, app yarnid.ApplicationID) (queue, user string, ok bool)) scheduling.Sink {
	return countingSink{Sink: inner, c: c, queueOf: queueOf}
}

type countingSink struct {
	scheduling.Sink
	c       *Containers
	queueOf func(ctx context.Context, app yarnid.ApplicationID) (queue, user string, ok bool)
}

func (s countingSink) Allocated(ctx context.Context, a scheduling.Allocation) error {
	if err := s.Sink.Allocated(ctx, a); err != nil {
		return err
	}
	app, err := yarnid.ApplicationIDFromProto(a.Container.GetId().GetAppAttemptId().GetApplicationId())
	if err != nil {
		return nil
	}
	if q, u, ok := s.queueOf(ctx, app); ok {
		s.c.add(s.c.allocated, q, u)
	}
	return nil
}

func (s countingSink) Completed(ctx context.Context, done scheduling.Completion) {
	q, u, ok := s.queueOf(ctx, done.Container.Attempt.App)
	s.Sink.Completed(ctx, done)
	if ok {
		s.c.add(s.c.released, q, u)
	}
}

// Runtime registers the Go runtime and process collectors with reg.
func Runtime(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
