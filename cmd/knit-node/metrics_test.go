package main

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/protocols/yarnid"
)

// The Spark shuffle service's figures are on the node's registry, read at
// each scrape.
func TestSparkShuffleMetrics(t *testing.T) {
	svc, err := sparkshuffle.New(sparkshuffle.Config{Address: "127.0.0.1:0", LocalDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	reg := prometheus.NewRegistry()
	if err := registerSparkShuffle(reg, svc); err != nil {
		t.Fatal(err)
	}
	app := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}
	if err := svc.InitializeApplication(context.Background(), auxservice.Application{User: "alice", ID: app}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		// Counts since the start are counters (named _total), the rest
		// gauges.
		if counter := strings.HasSuffix(mf.GetName(), "_total"); counter != (mf.GetType() == dto.MetricType_COUNTER) {
			t.Errorf("%s is a %s", mf.GetName(), mf.GetType())
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			got[mf.GetName()] = g.GetValue()
		} else {
			got[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"knit_spark_shuffle_connections": 0, "knit_spark_shuffle_registered_executors": 0,
		"knit_spark_shuffle_applications": 1, "knit_spark_shuffle_blocks_in_flight": 0,
		"knit_spark_shuffle_blocks_sent_total": 0, "knit_spark_shuffle_bytes_sent_total": 0,
		"knit_spark_shuffle_auth_failures_total": 0,
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
}
