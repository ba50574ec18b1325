package main

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/metrics"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
)

// serveNodeMetrics serves Prometheus /metrics on the node's web port: its
// containers' use (daemonsets/metrics), the MapReduce and Spark shuffles'
// figures when they run here, and the Go runtime of knit-node, on a registry of its
// own. It returns the containers' collector, which the utilization
// publisher measures with too.
func serveNodeMetrics(e *echo.Echo, pods metrics.Pods, aux []auxservice.Service, cgroupRoot string, log *slog.Logger) (*metrics.Collector, error) {
	reg := prometheus.NewRegistry()
	col, err := registerNodeMetrics(reg, pods, aux, cgroupRoot, log)
	if err != nil {
		return nil, err
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return col, nil
}

// registerNodeMetrics registers what knit-node serves on /metrics on reg.
func registerNodeMetrics(reg prometheus.Registerer, pods metrics.Pods, aux []auxservice.Service, cgroupRoot string, log *slog.Logger) (*metrics.Collector, error) {
	col, err := metrics.NewCollector(metrics.Config{Pods: pods, CgroupRoot: cgroupRoot, Logger: log})
	if err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, s := range aux {
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
