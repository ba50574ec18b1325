package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/rest"
	"github.com/knitdev/knit/rm/webui"
)

// uiApps is the web pages' Cluster holding n applications in 20 queues,
// answering at once: what is measured is the pages' own work.
type uiApps struct{ list []rest.App }

func newUIApps(n int) *uiApps {
	u := &uiApps{}
	for i := range n {
		u.list = append(u.list, rest.App{Report: &yarnpb.ApplicationReportProto{
			ApplicationId:        &yarnpb.ApplicationIdProto{ClusterTimestamp: proto.Int64(clusterTimestamp), Id: proto.Int32(int32(i + 1))},
			User:                 proto.String(fmt.Sprintf("user%d", i%100)),
			Name:                 proto.String(fmt.Sprintf("word count <%d>", n-i)),
			Queue:                proto.String(fmt.Sprintf("root.q%d", i%20)),
			YarnApplicationState: yarnpb.YarnApplicationStateProto_FINISHED.Enum(),
			ApplicationType:      proto.String("MAPREDUCE"),
			StartTime:            proto.Int64(int64(i) * 1000),
			FinishTime:           proto.Int64(int64(i)*1000 + 500),
			TrackingUrl:          proto.String(fmt.Sprintf("http://rm:8088/proxy/application_%d_%04d/", clusterTimestamp, i+1)),
			Diagnostics:          proto.String("Application finished"),
			Progress:             proto.Float32(1),
		}})
	}
	return u
}

func (u *uiApps) Info(context.Context) (rest.ClusterInfo, error) { return rest.ClusterInfo{}, nil }
func (u *uiApps) Metrics(context.Context) (rest.ClusterMetrics, error) {
	return rest.ClusterMetrics{AppsSubmitted: int32(len(u.list))}, nil
}
func (u *uiApps) Applications(context.Context, string, apps.Filter) ([]rest.App, error) {
	return u.list, nil
}
func (u *uiApps) Application(_ context.Context, _, id string) (rest.App, error) {
	for _, a := range u.list {
		if fmt.Sprintf("application_%d_%04d", clusterTimestamp, a.Report.GetApplicationId().GetId()) == id {
			return a, nil
		}
	}
	return rest.App{}, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
}
func (u *uiApps) Attempts(context.Context, string, string) ([]rest.Attempt, error) { return nil, nil }
func (u *uiApps) Containers(context.Context, string, string) ([]webui.Container, error) {
	return nil, nil
}
func (u *uiApps) Nodes(context.Context) ([]webui.Node, error)   { return nil, nil }
func (u *uiApps) Queues(context.Context) ([]webui.Queue, error) { return nil, nil }

// BenchmarkWebUIWith10000Applications measures the p99 time of the
// applications page (sorted by name, the first page of 500 rows) and of an
// application's page with 10,000 applications, against a handler that
// does no work behind the same server in the same run.
func BenchmarkWebUIWith10000Applications(b *testing.B) {
	ui, err := webui.New(webui.Config{Cluster: newUIApps(10_000), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	ui.Register(e)
	e.GET("/noop", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	fetch := func(path string) time.Duration {
		start := time.Now()
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s", path, resp.Status)
		}
		return time.Since(start)
	}
	const rounds = 50
	var list, one, noop []time.Duration
	for range b.N {
		for i := range rounds {
			list = append(list, fetch("/cluster/apps?sort=name&order=asc"))
			one = append(one, fetch(fmt.Sprintf("/cluster/app/application_%d_%04d", clusterTimestamp, 1+i*97)))
			noop = append(noop, fetch("/noop"))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(quantile(list, 0.99)), "apps-page-p99-ms")
	b.ReportMetric(ms(quantile(one, 0.99)), "app-page-p99-ms")
	b.ReportMetric(ms(quantile(noop, 0.99)), "noop-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRESTAndUIOnTheRM measures the p50 and p99 time of the REST and
// UI answers served from a real ResourceManager holding 10,000
// applications of 50 users in 20 queues (a third killed) and 1,000 nodes
// (the RM of BenchmarkRMMetricsScrape): every application
// (/ws/v1/cluster/apps), the first 100 that have not ended, one
// application, the applications page and an application's page, against a
// handler that does no work behind the same server, in rounds of the same
// run. It reports the size of the full applications list too.
func BenchmarkRESTAndUIOnTheRM(b *testing.B) {
	s := startAppsRM(b)
	defer s.close()
	ui, err := webui.New(webui.Config{Cluster: s.rm.WebUI(nil), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	pages := echo.New()
	ui.Register(pages)
	pages.GET("/noop", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	mux := http.NewServeMux()
	mux.Handle("/ws/", rest.New(rest.Config{Cluster: s.rm.REST(), Logger: quiet}))
	mux.Handle("/", pages)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var listBytes int64
	fetch := func(path string) time.Duration {
		start := time.Now()
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s", path, resp.Status)
		}
		if path == "/ws/v1/cluster/apps" {
			listBytes = n
		}
		return time.Since(start)
	}
	app := func(i int) string { return fmt.Sprintf("application_%d_%04d", clusterTimestamp, 1+(i*97)%scrapeApps) }
	paths := []struct {
		name string
		path func(i int) string
	}{
		{"rest-apps", func(int) string { return "/ws/v1/cluster/apps" }},
		{"rest-apps100", func(int) string { return "/ws/v1/cluster/apps?states=ACCEPTED,RUNNING&limit=100" }},
		{"rest-app", func(i int) string { return "/ws/v1/cluster/apps/" + app(i) }},
		{"ui-apps", func(int) string { return "/cluster/apps?sort=name&order=asc" }},
		{"ui-app", func(i int) string { return "/cluster/app/" + app(i) }},
		{"noop", func(int) string { return "/noop" }},
	}
	const rounds = 30
	took := make([][]time.Duration, len(paths))
	for range b.N {
		for i := range rounds {
			for k, p := range paths {
				took[k] = append(took[k], fetch(p.path(i)))
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	noop := quantile(took[len(paths)-1], 0.99)
	for k, p := range paths {
		b.ReportMetric(ms(quantile(took[k], 0.5)), p.name+"-p50-ms")
		b.ReportMetric(ms(quantile(took[k], 0.99)), p.name+"-p99-ms")
		if p.name != "noop" {
			b.ReportMetric(float64(quantile(took[k], 0.99))/float64(noop), p.name+"/noop-p99")
		}
	}
	b.ReportMetric(float64(listBytes), "rest-apps-bytes")
	b.ReportMetric(0, "ns/op")
}
