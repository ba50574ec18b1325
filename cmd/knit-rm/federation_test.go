package main

import (
	"context"
	"encoding/json"
	"testing"

	rmrest "github.com/knitdev/knit/rm/rest"
)

// metricsOnly is a REST cluster that knows its metrics only.
type metricsOnly struct {
	rmrest.Cluster
	m rmrest.ClusterMetrics
}

func (c metricsOnly) Metrics(context.Context) (rmrest.ClusterMetrics, error) { return c.m, nil }

// The capability a heartbeat carries is YARN's: the REST cluster metrics
// under "clusterMetrics", which the Router and a GPG read.
func TestTheFederationCapabilityIsTheClusterMetricsJSON(t *testing.T) {
	got, err := capability(metricsOnly{m: rmrest.ClusterMetrics{AppsSubmitted: 3, AppsRunning: 1}})(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		ClusterMetrics map[string]any `json:"clusterMetrics"`
	}
	if err := json.Unmarshal([]byte(got), &decoded); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if decoded.ClusterMetrics["appsSubmitted"] != float64(3) || decoded.ClusterMetrics["appsRunning"] != float64(1) {
		t.Errorf("capability %s", got)
	}
}
