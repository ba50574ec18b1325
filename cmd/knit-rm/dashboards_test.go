package main

import (
	"context"
	"testing"

	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/test/dashboards"
)

// TestTheRMAndQueueDashboardsUseOnlyMetricsKnitRMServes: every metric the
// RM's and the queues' dashboards select is one knit-rm's /metrics
// registry (registerMetrics and registerState, as newMetrics and register
// wire them) can serve.
func TestTheRMAndQueueDashboardsUseOnlyMetricsKnitRMServes(t *testing.T) {
	served := dashboards.NewServed()
	if _, err := registerMetrics(served); err != nil {
		t.Fatal(err)
	}
	src := metrics.SourceFunc(func(context.Context) (metrics.Snapshot, error) { return metrics.Snapshot{}, nil })
	if err := registerState(served, src, func() []rgs.Pending { return nil }); err != nil {
		t.Fatal(err)
	}
	used, err := dashboards.MetricNames(dashboards.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"knit-rm.json", "knit-queues.json"} {
		names, ok := used[file]
		if !ok || len(names) == 0 {
			t.Errorf("no %s dashboard in %s", file, dashboards.Dir)
			continue
		}
		if missing := served.Missing(names); len(missing) > 0 {
			t.Errorf("%s uses metrics knit-rm does not serve: %v (it serves %d names)", file, missing, served.Len())
		}
	}
	if len(used) != 3 {
		t.Errorf("dashboards %v: each must be checked against the binary it shows (here or in cmd/knit-node)", used)
	}
}
