package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/rmtest"
)

// Sizes of BenchmarkRMSubmitAndReport.
const (
	rmConns      = 32     // concurrent client connections
	rmFewConns   = 8      // connections of the reads at a load that leaves the CPU room
	rmApps       = 10_000 // applications submitted before the reads
	rmReports    = 20_000 // getApplicationReport calls measured
	rmLists      = 200    // getApplications calls measured, per variant
	rmNoopCalls  = 20_000 // baseline calls measured
	rmCallWithin = 30 * time.Second
)

// startRM serves a ResourceManager with one queue, default, on a loopback
// port and returns its address and a function that stops it.
func startRM(b *testing.B) (string, func()) {
	b.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range map[string]string{
		"yarn.scheduler.capacity.root.queues":           "default",
		"yarn.scheduler.capacity.root.default.capacity": "100",
		"yarn.scheduler.capacity.maximum-applications":  "100000",
	} {
		c.Set(k, v)
	}
	var nodes rmtest.NodeList
	for i := range 8 {
		nodes = append(nodes, rm.NodeInfo{
			Name: fmt.Sprintf("n%d", i), Host: fmt.Sprintf("node%d", i), NMPort: 8041,
			HTTPAddress: fmt.Sprintf("node%d:8042", i), Rack: "/default-rack",
			State:        yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 65536, CapabilityVcores: 32,
		})
	}
	r := newRM(b, c, queues.Options{AdminACL: acl.Parse("*")}, rm.Config{Nodes: nodes})
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Register(srv); err != nil {
		b.Fatal(err)
	}
	return serveIPC(b, srv)
}

// newRM builds a ResourceManager as knit-rm does: its settings and queues
// (built with opts) from c, the rest of cfg as given, with an in-memory
// store, ids at clusterTimestamp and a quiet logger unless cfg names its
// own, and recovers it from its store.
func newRM(b *testing.B, c *hadoopconf.Configuration, opts queues.Options, cfg rm.Config) *rm.ResourceManager {
	b.Helper()
	settings, err := conf.LoadRMSettings(c)
	if err != nil {
		b.Fatal(err)
	}
	tree, err := queues.Build(c, opts)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Settings, cfg.Queues = settings, tree
	if cfg.Store == nil {
		cfg.Store = rmtest.NewMemoryStore()
	}
	if cfg.IDs == nil {
		cfg.IDs = &rmtest.MemoryIDs{ClusterTimestamp: clusterTimestamp}
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	r, err := rm.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Recover(context.Background()); err != nil {
		b.Fatal(err)
	}
	return r
}

// startNoop serves the fixed getApplicationReport answer of appService (a
// handler doing no work) under the RM's protocol name.
func startNoop(b *testing.B) (string, func()) {
	b.Helper()
	svc := &appService{}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := (yarnrpc.ApplicationClientProtocolFuncs{GetApplicationReport: svc.getApplicationReport}).Register(srv); err != nil {
		b.Fatal(err)
	}
	return serveIPC(b, srv)
}

func serveIPC(b *testing.B, srv *ipc.Server) (string, func()) {
	b.Helper()
	addr, stop, err := serveIPCListener(srv)
	if err != nil {
		b.Fatal(err)
	}
	return addr, stop
}

// dialRM opens rmConns connections to addr as user bench.
func dialRM(b *testing.B, addr string) []*ipc.Client {
	b.Helper()
	var cs []*ipc.Client
	for i := range rmConns {
		c, err := ipc.Dial(context.Background(), addr, ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: "bench", MaxIdleTime: benchIdle, Logger: quiet,
		})
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	return cs
}

func closeClients(cs []*ipc.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// latencies are call durations, sorted by run.
type latencies struct {
	d    []time.Duration
	wall time.Duration
}

func (l latencies) q(p float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	i := int(p * float64(len(l.d)))
	if i >= len(l.d) {
		i = len(l.d) - 1
	}
	return l.d[i]
}

func (l latencies) perSec() float64 { return float64(len(l.d)) / l.wall.Seconds() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run makes total calls of call, spread over the clients with one goroutine
// each taking the next call number until none are left, and returns every
// call's latency.
func run(b *testing.B, cs []*ipc.Client, total int, call func(c *ipc.Client, i int) error) latencies {
	b.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	per := make([][]time.Duration, len(cs))
	var wg sync.WaitGroup
	began := time.Now()
	for k, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				t0 := time.Now()
				err := call(c, i)
				per[k] = append(per[k], time.Since(t0))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("call %d: %w", i, err)
					}
					mu.Unlock()
					next.Store(int64(total))
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(began)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	all := slices.Concat(per...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return latencies{d: all, wall: wall}
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), rmCallWithin)
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return st.HeapInuse
}

// BenchmarkRMSubmitAndReport drives a real ResourceManager (in-memory store,
// Knit's IPC server and client) from rmConns connections: rmApps
// submissions (getNewApplication then submitApplication), then
// getApplicationReport on random known ids (from all rmConns connections,
// and again from rmFewConns, a load at which the load generator, in the
// same process on this 2-core machine, leaves the server CPU) and
// getApplications, against a no-op handler answering a report-sized message
// over the same client and server at both loads. One iteration is the
// whole scenario on a new RM, so ns/op is meaningless and reported as 0;
// the metrics are those of the last iteration.
func BenchmarkRMSubmitAndReport(b *testing.B) {
	if err := ensureFDs(uint64(4*rmConns + 256)); err != nil {
		b.Skip(err)
	}
	for range b.N {
		runRMScenario(b)
	}
	b.ReportMetric(0, "ns/op")
}

func runRMScenario(b *testing.B) {
	// Baseline first, on its own server, so the RM's heap does not weigh on
	// it.
	noopAddr, stopNoop := startNoop(b)
	noopClients := dialRM(b, noopAddr)
	reportReq := func(i int) *yarnpb.GetApplicationReportRequestProto {
		return &yarnpb.GetApplicationReportRequestProto{ApplicationId: &yarnpb.ApplicationIdProto{
			Id: proto.Int32(int32(i%rmApps + 1)), ClusterTimestamp: proto.Int64(clusterTimestamp)}}
	}
	noopCall := func(c *ipc.Client, i int) error {
		ctx, cancel := callCtx()
		defer cancel()
		return c.Call(ctx, "getApplicationReport", reportReq(i), new(yarnpb.GetApplicationReportResponseProto))
	}
	run(b, noopClients, 2000, noopCall) // warm-up
	noop := run(b, noopClients, rmNoopCalls, noopCall)
	noopFew := run(b, noopClients[:rmFewConns], rmNoopCalls, noopCall)
	var noopResp yarnpb.GetApplicationReportResponseProto
	if err := noopClients[0].Call(context.Background(), "getApplicationReport", reportReq(0), &noopResp); err != nil {
		b.Fatal(err)
	}
	closeClients(noopClients)
	stopNoop()

	addr, stopRM := startRM(b)
	defer stopRM()
	clients := dialRM(b, addr)
	defer closeClients(clients)
	// The baseline holds the empty RM and its connections.
	heapBefore := heapInUse()

	// 1. Submissions.
	submit := func(c *ipc.Client, i int) error {
		ctx, cancel := callCtx()
		defer cancel()
		var na yarnpb.GetNewApplicationResponseProto
		if err := c.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &na); err != nil {
			return fmt.Errorf("getNewApplication: %w", err)
		}
		sc := &yarnpb.ApplicationSubmissionContextProto{
			ApplicationId:   na.GetApplicationId(),
			ApplicationName: proto.String(fmt.Sprintf("bench app %d", i)),
			Queue:           proto.String("default"),
			ApplicationType: proto.String("MAPREDUCE"),
			AmContainerSpec: &yarnpb.ContainerLaunchContextProto{
				Command: []string{"$JAVA_HOME/bin/java -Xmx820m org.apache.hadoop.mapreduce.v2.app.MRAppMaster 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"},
				Environment: []*yarnpb.StringStringMapProto{
					{Key: proto.String("CLASSPATH"), Value: proto.String("$PWD:$HADOOP_CONF_DIR:$HADOOP_COMMON_HOME/share/hadoop/common/*")},
				},
			},
			Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
		}
		if err := c.Call(ctx, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc},
			new(yarnpb.SubmitApplicationResponseProto)); err != nil {
			return fmt.Errorf("submitApplication: %w", err)
		}
		return nil
	}
	subs := run(b, clients, rmApps, submit)
	heapAfter := heapInUse()

	// Every application is known.
	{
		ctx, cancel := callCtx()
		var all yarnpb.GetApplicationsResponseProto
		err := clients[0].Call(ctx, "getApplications", &yarnpb.GetApplicationsRequestProto{}, &all)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if n := len(all.GetApplications()); n != rmApps {
			b.Fatalf("getApplications lists %d applications, want %d", n, rmApps)
		}
	}

	// 2. Reads.
	var realResp yarnpb.GetApplicationReportResponseProto
	if err := clients[0].Call(context.Background(), "getApplicationReport", reportReq(0), &realResp); err != nil {
		b.Fatal(err)
	}
	report := func(c *ipc.Client, _ int) error {
		ctx, cancel := callCtx()
		defer cancel()
		var resp yarnpb.GetApplicationReportResponseProto
		if err := c.Call(ctx, "getApplicationReport", reportReq(rand.IntN(rmApps)), &resp); err != nil {
			return err
		}
		if resp.GetApplicationReport().GetApplicationId().GetId() <= 0 {
			return fmt.Errorf("empty report %v", &resp)
		}
		return nil
	}
	reports := run(b, clients, rmReports, report)
	reportsFew := run(b, clients[:rmFewConns], rmReports, report)
	listWith := func(req *yarnpb.GetApplicationsRequestProto) latencies {
		return run(b, clients, rmLists, func(c *ipc.Client, _ int) error {
			ctx, cancel := callCtx()
			defer cancel()
			return c.Call(ctx, "getApplications", req, new(yarnpb.GetApplicationsResponseProto))
		})
	}
	listAll := listWith(&yarnpb.GetApplicationsRequestProto{})
	listLimited := listWith(&yarnpb.GetApplicationsRequestProto{
		Limit: proto.Int64(100),
		ApplicationStates: []yarnpb.YarnApplicationStateProto{
			yarnpb.YarnApplicationStateProto_SUBMITTED, yarnpb.YarnApplicationStateProto_ACCEPTED,
			yarnpb.YarnApplicationStateProto_RUNNING,
		},
	})

	// 3 and 4.
	b.ReportMetric(subs.perSec(), "submits/s")
	b.ReportMetric(ms(subs.q(0.50)), "submit-p50-ms")
	b.ReportMetric(ms(subs.q(0.99)), "submit-p99-ms")
	b.ReportMetric(ms(reports.q(0.50)), "report-p50-ms")
	b.ReportMetric(ms(reports.q(0.99)), "report-p99-ms")
	b.ReportMetric(reports.perSec(), "reports/s")
	b.ReportMetric(ms(listAll.q(0.50)), "list-p50-ms")
	b.ReportMetric(ms(listAll.q(0.99)), "list-p99-ms")
	b.ReportMetric(ms(listLimited.q(0.50)), "list100-p50-ms")
	b.ReportMetric(ms(listLimited.q(0.99)), "list100-p99-ms")
	b.ReportMetric(ms(noop.q(0.50)), "noop-p50-ms")
	b.ReportMetric(ms(noop.q(0.99)), "noop-p99-ms")
	b.ReportMetric(noop.perSec(), "noop-calls/s")
	b.ReportMetric(float64(reports.q(0.99))/float64(noop.q(0.99)), "report/noop-p99")
	b.ReportMetric(ms(reportsFew.q(0.99)), "report8-p99-ms")
	b.ReportMetric(ms(noopFew.q(0.99)), "noop8-p99-ms")
	b.ReportMetric(float64(reportsFew.q(0.99))/float64(noopFew.q(0.99)), "report8/noop8-p99")
	b.ReportMetric(subs.perSec()/noop.perSec(), "submits/noop-calls")
	b.ReportMetric((float64(heapAfter)-float64(heapBefore))/rmApps, "heap-bytes/app")
	b.ReportMetric(float64(proto.Size(&realResp)), "report-bytes")
	b.ReportMetric(float64(proto.Size(&noopResp)), "noop-bytes")
}
