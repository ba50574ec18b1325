package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/rm/webproxy"
)

type benchApps struct{ url string }

func (a benchApps) ProxyApplication(context.Context, string, yarnid.ApplicationID) (webproxy.Application, error) {
	return webproxy.Application{User: "alice", State: yarnpb.YarnApplicationStateProto_RUNNING, OriginalTrackingURL: a.url}, nil
}

// fetchRate is how many GETs of url 16 clients complete per second within d.
func fetchRate(b *testing.B, url string, d time.Duration) float64 {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := c.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("GET %s: %s", url, resp.Status)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// BenchmarkWebProxyVersusDirect measures the pages per second 16 clients
// get from an AM's web server (a 64 KiB page) through the RM's web proxy,
// against the same clients asking the AM directly, in alternating rounds of
// the same run. The goal is at least 0.8 of the direct rate.
func BenchmarkWebProxyVersusDirect(b *testing.B) {
	page := strings.Repeat("x", 64<<10)
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, page) }))
	defer am.Close()
	p, err := webproxy.New(webproxy.Config{Apps: benchApps{url: am.URL}, RMWebURL: "http://rm:8088"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	e := echo.New()
	p.Register(e)
	rm := httptest.NewServer(e)
	defer rm.Close()
	const round = 2 * time.Second
	var direct, proxied float64
	for range b.N {
		direct += fetchRate(b, am.URL+"/page", round)
		proxied += fetchRate(b, rm.URL+"/proxy/application_1_0001/page", round)
	}
	b.ReportMetric(direct/float64(b.N), "direct-pages/s")
	b.ReportMetric(proxied/float64(b.N), "proxy-pages/s")
	b.ReportMetric(proxied/direct, "proxy/direct")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMetricsScrape measures one /metrics scrape of the Hadoop figures
// with 10,000 applications in 20 queues and 1,000 nodes, against a scrape
// of the Go runtime metrics alone in the same run.
func BenchmarkMetricsScrape(b *testing.B) {
	var s metrics.Snapshot
	for i := range 1000 {
		s.Nodes = append(s.Nodes, metrics.Node{State: yarnpb.NodeStateProto_NS_RUNNING, CapabilityMB: 65536, CapabilityVCores: 32, UsedMB: int64(i % 65536)})
	}
	s.Queues = append(s.Queues, metrics.Queue{Path: "root", Capacity: 1, MaximumCapacity: 1, AbsoluteCapacity: 1, AbsoluteMaxCapacity: 1})
	for q := range 20 {
		s.Queues = append(s.Queues, metrics.Queue{Path: fmt.Sprintf("root.q%d", q), Capacity: 0.05, MaximumCapacity: 1, AbsoluteCapacity: 0.05, AbsoluteMaxCapacity: 1})
	}
	for i := range 10000 {
		state := yarnpb.YarnApplicationStateProto_FINISHED
		if i%10 == 0 {
			state = yarnpb.YarnApplicationStateProto_RUNNING
		}
		s.Apps = append(s.Apps, metrics.App{Queue: fmt.Sprintf("root.q%d", i%20), User: fmt.Sprintf("user%d", i%100), State: state, UsedContainers: 3, UsedMB: 3072, UsedVCores: 3})
	}
	scrape := func(reg *prometheus.Registry) time.Duration {
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer srv.Close()
		start := time.Now()
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	full := prometheus.NewRegistry()
	full.MustRegister(metrics.NewHadoopCollector(metrics.SourceFunc(func(context.Context) (metrics.Snapshot, error) { return s, nil }), 0, nil))
	if err := metrics.Runtime(full); err != nil {
		b.Fatal(err)
	}
	base := prometheus.NewRegistry()
	if err := metrics.Runtime(base); err != nil {
		b.Fatal(err)
	}
	var tFull, tBase time.Duration
	for range b.N {
		tFull += scrape(full)
		tBase += scrape(base)
	}
	b.ReportMetric(float64(tFull.Microseconds())/1000/float64(b.N), "scrape-ms")
	b.ReportMetric(float64(tBase.Microseconds())/1000/float64(b.N), "runtime-only-ms")
	b.ReportMetric(float64(tFull)/float64(tBase), "scrape/runtime-only")
	b.ReportMetric(0, "ns/op")
}
