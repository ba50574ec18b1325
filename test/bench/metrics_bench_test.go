package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/rm/queues"
)

// Sizes of BenchmarkRMMetricsScrape.
const (
	scrapeApps    = 10_000
	scrapeNodes   = viewNodes // 1,000
	scrapeQueues  = 20
	scrapeUsers   = 50 // one connection each
	scrapeRounds  = 20 // scrapes of each registry per iteration
	scrapeKillOne = 3  // every third application is killed
)

// appsRM is a ResourceManager holding scrapeApps applications of
// scrapeUsers users in scrapeQueues queues, its nodes from rgs/nodes'
// Lister over a fake API server holding scrapeNodes nodes, and a registry
// with what knit-rm registers.
type appsRM struct {
	rm      *rm.ResourceManager
	nodes   *nodeLister
	stop    func()
	clients []*ipc.Client
	reg     *prometheus.Registry
}

func startAppsRM(b *testing.B) *appsRM {
	b.Helper()
	objs := make([]kruntime.Object, 0, scrapeNodes)
	for i := range scrapeNodes {
		objs = append(objs, viewNode(i))
	}
	nl := startNodeLister(b, fake.NewClientset(objs...), nil)
	c := hadoopconf.New(hadoopconf.Options{})
	var leaves []string
	for q := range scrapeQueues {
		leaves = append(leaves, fmt.Sprintf("q%d", q))
		c.Set(fmt.Sprintf("yarn.scheduler.capacity.root.q%d.capacity", q), fmt.Sprint(100/scrapeQueues))
	}
	c.Set("yarn.scheduler.capacity.root.queues", strings.Join(leaves, ","))
	c.Set("yarn.scheduler.capacity.maximum-applications", "100000")
	c.Set(hadoopconf.KeyRMMaxCompletedApplications, fmt.Sprint(scrapeApps)) // the RM keeps every killed one
	r := newRM(b, c, queues.Options{AdminACL: acl.Parse("*")}, rm.Config{Nodes: nl.l})
	// The registry as knit-rm fills it (cmd/knit-rm/metrics.go), the RPC
	// figures observed from the same server the applications go through.
	reg := prometheus.NewRegistry()
	if err := metrics.Runtime(reg); err != nil {
		b.Fatal(err)
	}
	rpcMetrics, err := metrics.NewRPC(reg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := metrics.NewRGS(reg); err != nil {
		b.Fatal(err)
	}
	if _, err := metrics.NewContainers(reg); err != nil {
		b.Fatal(err)
	}
	reg.MustRegister(metrics.NewHadoopCollector(metrics.SourceFunc(r.MetricsSnapshot), 0, quiet))
	if err := metrics.RegisterPending(reg, func() []rgs.Pending { return nil }); err != nil {
		b.Fatal(err)
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Observer: rpcMetrics, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Register(srv); err != nil {
		b.Fatal(err)
	}
	addr, stop := serveIPC(b, srv)
	s := &appsRM{rm: r, nodes: nl, stop: stop, reg: reg}
	for i := range scrapeUsers {
		cl, err := ipc.Dial(context.Background(), addr, ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: fmt.Sprintf("user%d", i), MaxIdleTime: benchIdle, Logger: quiet,
		})
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		s.clients = append(s.clients, cl)
	}
	s.submit(b)
	return s
}

// submit has each user submit its share of scrapeApps round the queues,
// and kill every scrapeKillOne-th of them, so that the RM holds running
// (ACCEPTED) and ended applications.
func (s *appsRM) submit(b *testing.B) {
	b.Helper()
	run(b, s.clients, scrapeApps, func(c *ipc.Client, i int) error {
		ctx, cancel := callCtx()
		defer cancel()
		var na yarnpb.GetNewApplicationResponseProto
		if err := c.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &na); err != nil {
			return fmt.Errorf("getNewApplication: %w", err)
		}
		sc := &yarnpb.ApplicationSubmissionContextProto{
			ApplicationId:   na.GetApplicationId(),
			ApplicationName: proto.String(fmt.Sprintf("bench app %d", i)),
			Queue:           proto.String(fmt.Sprintf("q%d", i%scrapeQueues)),
			ApplicationType: proto.String("MAPREDUCE"),
			AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 1"}},
			Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
		}
		if err := c.Call(ctx, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc},
			new(yarnpb.SubmitApplicationResponseProto)); err != nil {
			return fmt.Errorf("submitApplication: %w", err)
		}
		if i%scrapeKillOne != 0 {
			return nil
		}
		if err := c.Call(ctx, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: na.GetApplicationId()},
			new(yarnpb.KillApplicationResponseProto)); err != nil {
			return fmt.Errorf("forceKillApplication: %w", err)
		}
		return nil
	})
}

func (s *appsRM) close() {
	closeClients(s.clients)
	s.stop()
	s.nodes.stop()
}

// scrapeOnce GETs url as Prometheus does (gzip accepted) and returns the
// time to the last byte and the samples in the answer.
func scrapeOnce(b *testing.B, c *http.Client, url string) (time.Duration, int) {
	b.Helper()
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	samples := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Bytes(); len(line) > 0 && line[0] != '#' {
			samples++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s", url, resp.Status)
	}
	return d, samples
}

// BenchmarkRMMetricsScrape measures knit-rm's /metrics (the registry
// cmd/knit-rm fills: Go runtime and process, RPC, RGS, containers, and the
// Hadoop ClusterMetrics and QueueMetrics read from a real ResourceManager)
// with 10,000 applications of 50 users in 20 queues (a third killed, the
// rest ACCEPTED) and 1,000 nodes in rgs/nodes' view, against a scrape of
// an empty registry behind the same server, alternating in the same run.
// It reports the median and p99 of each, the ratio of the medians, the
// median time of the RM's MetricsSnapshot alone, the process's CPU per
// scrape (client and server share the process; the
// client's part is the same for both), and the samples a full scrape
// carries.
func BenchmarkRMMetricsScrape(b *testing.B) {
	s := startAppsRM(b)
	defer s.close()
	e := echo.New()
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})))
	empty := prometheus.NewRegistry()
	e.GET("/empty", echo.WrapHandler(promhttp.HandlerFor(empty, promhttp.HandlerOpts{Registry: empty})))
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var full, base []time.Duration
	var fullCPU, baseCPU time.Duration
	samples := 0
	scrapeOnce(b, c, srv.URL+"/metrics") // warm-up
	for range b.N {
		for range scrapeRounds {
			cpu := processCPU()
			d, n := scrapeOnce(b, c, srv.URL+"/metrics")
			fullCPU += processCPU() - cpu
			full = append(full, d)
			samples = n
			cpu = processCPU()
			d, _ = scrapeOnce(b, c, srv.URL+"/empty")
			baseCPU += processCPU() - cpu
			base = append(base, d)
		}
	}
	msOf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(msOf(quantile(full, 0.5)), "scrape-p50-ms")
	b.ReportMetric(msOf(quantile(full, 0.99)), "scrape-p99-ms")
	b.ReportMetric(msOf(quantile(base, 0.5)), "empty-p50-ms")
	b.ReportMetric(msOf(quantile(base, 0.99)), "empty-p99-ms")
	b.ReportMetric(float64(quantile(full, 0.5))/float64(quantile(base, 0.5)), "scrape/empty-p50")
	// The walk of the RM's applications alone, which a scrape starts with.
	var walks []time.Duration
	for range scrapeRounds {
		start := time.Now()
		if _, err := s.rm.MetricsSnapshot(context.Background()); err != nil {
			b.Fatal(err)
		}
		walks = append(walks, time.Since(start))
	}
	b.ReportMetric(msOf(quantile(walks, 0.5)), "snapshot-p50-ms")
	b.ReportMetric(msOf(fullCPU)/float64(len(full)), "scrape-cpu-ms")
	b.ReportMetric(msOf(baseCPU)/float64(len(base)), "empty-cpu-ms")
	b.ReportMetric(float64(samples), "samples")
	b.ReportMetric(0, "ns/op")
}
