package main

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/localizer"
	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/metrics"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
)

// serveNodeMetrics serves Prometheus /metrics on the node's web port: its
// containers' use (daemonsets/metrics), the MapReduce and Spark shuffles'
// figures when they run here, and the Go runtime of knit-node, on a registry of its
// own. It returns the containers' collector, which the utilization
// publisher measures with too.
func serveNodeMetrics(e *echo.Echo, pods metrics.Pods, svc nodeServices, cgroupRoot string, log *slog.Logger) (*metrics.Collector, error) {
	reg := prometheus.NewRegistry()
	col, err := registerNodeMetrics(reg, pods, svc, cgroupRoot, log)
	if err != nil {
		return nil, err
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return col, nil
}

// nodeServices are the services whose figures /metrics publishes; a nil
// one is not running.
type nodeServices struct {
	aux        []auxservice.Service
	localizer  *localizer.Localizer
	aggregator *logs.Aggregator
}

// registerNodeMetrics registers what knit-node serves on /metrics on reg.
func registerNodeMetrics(reg prometheus.Registerer, pods metrics.Pods, svc nodeServices, cgroupRoot string, log *slog.Logger) (*metrics.Collector, error) {
	col, err := metrics.NewCollector(metrics.Config{Pods: pods, CgroupRoot: cgroupRoot, Logger: log})
	if err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if svc.localizer != nil {
		if err := registerLocalizer(reg, svc.localizer); err != nil {
			return nil, err
		}
	}
	if svc.aggregator != nil {
		if err := registerAggregator(reg, svc.aggregator); err != nil {
			return nil, err
		}
	}
	for _, s := range svc.aux {
		switch sh := s.(type) {
		case *shuffle.Service:
			if err := registerShuffle(reg, sh); err != nil {
				return nil, err
			}
		case *sparkshuffle.Service:
			if err := registerSparkShuffle(reg, sh); err != nil {
				return nil, err
			}
		}
	}
	return col, nil
}

// figure is one number of a service's Stats: a gauge, or a counter when
// counter is set.
type figure[S any] struct {
	name, help string
	counter    bool
	value      func(S) float64
}

// registerStats publishes figures of the Stats that stats returns, read at
// each scrape.
func registerStats[S any](reg prometheus.Registerer, stats func() S, figures []figure[S]) error {
	for _, f := range figures {
		read := func() float64 { return f.value(stats()) }
		var c prometheus.Collector
		if f.counter {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: f.name, Help: f.help}, read)
		} else {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: f.name, Help: f.help}, read)
		}
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// registerShuffle publishes the MapReduce shuffle's figures.
func registerShuffle(reg prometheus.Registerer, svc *shuffle.Service) error {
	return registerStats(reg, svc.Stats, []figure[shuffle.Stats]{
		{"knit_shuffle_connections", "Reducers' connections open to the MapReduce shuffle.", false, func(s shuffle.Stats) float64 { return float64(s.Connections) }},
		{"knit_shuffle_open_files", "Map output files the MapReduce shuffle has open.", false, func(s shuffle.Stats) float64 { return float64(s.OpenFiles) }},
		{"knit_shuffle_open_files_max", "Most map output files the MapReduce shuffle has had open at once.", false, func(s shuffle.Stats) float64 { return float64(s.MaxOpenFiles) }},
		{"knit_shuffle_jobs", "Jobs whose shuffle tokens the MapReduce shuffle holds.", false, func(s shuffle.Stats) float64 { return float64(s.Jobs) }},
	})
}

// registerSparkShuffle publishes the Spark external shuffle service's
// figures.
func registerSparkShuffle(reg prometheus.Registerer, svc *sparkshuffle.Service) error {
	return registerStats(reg, svc.Stats, []figure[sparkshuffle.Stats]{
		{"knit_spark_shuffle_connections", "Executors' connections open to the Spark shuffle service.", false, func(s sparkshuffle.Stats) float64 { return float64(s.Connections) }},
		{"knit_spark_shuffle_registered_executors", "Executors registered with the Spark shuffle service.", false, func(s sparkshuffle.Stats) float64 { return float64(s.Executors) }},
		{"knit_spark_shuffle_applications", "Applications the Spark shuffle service knows of.", false, func(s sparkshuffle.Stats) float64 { return float64(s.Applications) }},
		{"knit_spark_shuffle_blocks_in_flight", "Blocks the Spark shuffle service is sending now.", false, func(s sparkshuffle.Stats) float64 { return float64(s.ChunksInFlight) }},
		{"knit_spark_shuffle_blocks_sent_total", "Blocks the Spark shuffle service sent whole.", true, func(s sparkshuffle.Stats) float64 { return float64(s.BlocksSent) }},
		{"knit_spark_shuffle_bytes_sent_total", "Bytes of the blocks the Spark shuffle service sent whole.", true, func(s sparkshuffle.Stats) float64 { return float64(s.BytesSent) }},
		{"knit_spark_shuffle_auth_failures_total", "Connections the Spark shuffle service refused at authentication.", true, func(s sparkshuffle.Stats) float64 { return float64(s.AuthFailures) }},
	})
}

// registerLocalizer publishes the localizer's figures.
func registerLocalizer(reg prometheus.Registerer, l *localizer.Localizer) error {
	return registerStats(reg, l.Stats, []figure[localizer.Stats]{
		{"knit_localizer_containers_prepared_total", "Containers whose resources the localizer prepared.", true, func(s localizer.Stats) float64 { return float64(s.Prepared) }},
		{"knit_localizer_containers_failed_total", "Containers whose localization failed.", true, func(s localizer.Stats) float64 { return float64(s.Failed) }},
		{"knit_localizer_fetched_bytes_total", "Bytes of resources the localizer fetched.", true, func(s localizer.Stats) float64 { return float64(s.BytesFetched) }},
		{"knit_localizer_cached_bytes_total", "Bytes of resources the localizer found in its cache.", true, func(s localizer.Stats) float64 { return float64(s.BytesCached) }},
		{"knit_localizer_fetched_files_total", "Resources the localizer fetched.", true, func(s localizer.Stats) float64 { return float64(s.FilesFetched) }},
		{"knit_localizer_cached_files_total", "Resources the localizer found in its cache.", true, func(s localizer.Stats) float64 { return float64(s.FilesCached) }},
		{"knit_localizer_seconds_total", "Seconds the localizer spent preparing containers.", true, func(s localizer.Stats) float64 { return s.Seconds }},
	})
}

// registerAggregator publishes log aggregation's figures.
func registerAggregator(reg prometheus.Registerer, a *logs.Aggregator) error {
	return registerStats(reg, a.Stats, []figure[logs.AggregationStats]{
		{"knit_log_aggregation_applications_total", "Applications whose logs were aggregated.", true, func(s logs.AggregationStats) float64 { return float64(s.Aggregated) }},
		{"knit_log_aggregation_applications_failed_total", "Applications whose log aggregation was given up (FAILED).", true, func(s logs.AggregationStats) float64 { return float64(s.Failed) }},
		{"knit_log_aggregation_uploads_total", "Aggregated files written to the remote app log dir.", true, func(s logs.AggregationStats) float64 { return float64(s.Uploads) }},
		{"knit_log_aggregation_bytes_total", "Bytes of the aggregated files written.", true, func(s logs.AggregationStats) float64 { return float64(s.Bytes) }},
		{"knit_log_aggregation_upload_failures_total", "Uploads that failed (each is tried again).", true, func(s logs.AggregationStats) float64 { return float64(s.UploadFailures) }},
		{"knit_log_aggregation_seconds_total", "Seconds spent writing aggregated files.", true, func(s logs.AggregationStats) float64 { return s.Seconds }},
		{"knit_log_aggregation_queued_applications", "Applications waiting for their logs to be aggregated.", false, func(s logs.AggregationStats) float64 { return float64(s.Queued) }},
	})
}
