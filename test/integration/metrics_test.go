package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/eventually"
)

// prometheusServer runs Debian's prometheus scraping target's /metrics
// every second until the test ends, and returns its HTTP address.
func prometheusServer(t *testing.T, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (Debian's prometheus package)")
		}
		t.Skip("prometheus is not installed (Debian's prometheus package)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"+
		"  - job_name: knit-rm\n    metrics_path: /metrics\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return addr
}

// promQuery evaluates an instant query and returns the single value it
// yields.
func promQuery(ctx context.Context, addr, query string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("query answer %s: %w", b, err)
	}
	if out.Status != "success" || len(out.Data.Result) != 1 {
		return 0, fmt.Errorf("query %s: %s", query, b)
	}
	s, _ := out.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// TestPrometheusScrapesTheRMWhileAJobRuns: a real Prometheus server scrapes
// knit-rm's /metrics and sees the default queue's allocated memory while an
// application's AM runs there, and the RPC calls that submitted it.
func TestPrometheusScrapesTheRMWhileAJobRuns(t *testing.T) {
	dumpOnFailure(t)
	rm := knitRM(t)
	prom := prometheusServer(t, rm.addrs.Web)
	rmc, app := submitShellAM(t, "sleep 600", 1, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rmc.KillApplication(ctx, app, "the metrics test is over")
	})
	eventually.WithinEvery(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		r, err := rmc.GetApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if s := r.GetYarnApplicationState(); s != yarnpb.YarnApplicationStateProto_ACCEPTED && s != yarnpb.YarnApplicationStateProto_RUNNING {
			t.Fatalf("application %s", s)
		}
		mb, err := promQuery(ctx, prom, `queue_metrics_allocated_mb{job="knit-rm",queue="root.default",user=""}`)
		if err != nil {
			return err
		}
		if mb < 128 {
			return fmt.Errorf("root.default has %v MB allocated, want the AM's 128 at least", mb)
		}
		return nil
	})
	for _, q := range []string{
		`up{job="knit-rm"}`,
		`queue_metrics_allocated_mb{queue="root",user=""} >= 128`,
		`queue_metrics_allocated_containers{queue="root.default",user="dsuser"} >= 1`,
		`sum(knit_rpc_calls_total{method="submitApplication",outcome="ok"}) >= 1`,
		`sum(knit_rgs_pods_bound_total) >= 1`,
		`go_goroutines{job="knit-rm"} > 0`,
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		v, err := promQuery(ctx, prom, q)
		cancel()
		if err != nil || v == 0 {
			t.Errorf("%s: %v %v", q, v, err)
		}
	}
}
