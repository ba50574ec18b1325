package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
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
