package main

import (
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/localizer"
	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/test/dashboards"
)

type noPods struct{}

func (noPods) Pods() []*corev1.Pod { return nil }

// TestTheNodesDashboardUsesOnlyMetricsKnitNodeServes: every metric the
// nodes dashboard's PromQL selects is one knit-node's /metrics registry
// (registerNodeMetrics, with both shuffle services running) can serve.
func TestTheNodesDashboardUsesOnlyMetricsKnitNodeServes(t *testing.T) {
	mr, err := shuffle.New(shuffle.Config{Address: "127.0.0.1:0", LocalDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	spark, err := sparkshuffle.New(sparkshuffle.Config{Address: "127.0.0.1:0", LocalDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spark.Close() })
	served := dashboards.NewServed()
	loc, err := localizer.New(localizer.Config{LocalDirs: []string{t.TempDir()}, LogDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	agg, err := logs.NewAggregator(logs.AggregatorConfig{Dirs: logs.Dirs{t.TempDir()}, NodeID: "n:1", Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registerNodeMetrics(served, noPods{}, nodeServices{aux: []auxservice.Service{mr, spark}, localizer: loc, aggregator: agg}, t.TempDir(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	used, err := dashboards.MetricNames(dashboards.Dir)
	if err != nil {
		t.Fatal(err)
	}
	names, ok := used["knit-nodes.json"]
	if !ok || len(names) == 0 {
		t.Fatalf("no knit-nodes.json dashboard in %s: %v", dashboards.Dir, used)
	}
	if missing := served.Missing(names); len(missing) > 0 {
		t.Errorf("knit-nodes.json uses metrics knit-node does not serve: %v (it serves %d names)", missing, served.Len())
	}
}
