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
)

// serveNodeMetrics serves Prometheus /metrics on the node's web port: its
// containers' use (daemonsets/metrics), the MapReduce shuffle's figures
// when it runs here, and the Go runtime of knit-node, on a registry of its
// own.
func serveNodeMetrics(e *echo.Echo, pods metrics.Pods, aux []auxservice.Service, cgroupRoot string, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	col, err := metrics.NewCollector(metrics.Config{Pods: pods, CgroupRoot: cgroupRoot, Logger: log})
	if err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, s := range aux {
		if sh, ok := s.(*shuffle.Service); ok {
			if err := registerShuffle(reg, sh); err != nil {
				return err
			}
		}
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return nil
}

// registerShuffle publishes the MapReduce shuffle's figures, read at each
// scrape.
func registerShuffle(reg prometheus.Registerer, svc *shuffle.Service) error {
	gauges := []struct {
		name, help string
		value      func(shuffle.Stats) float64
	}{
		{"knit_shuffle_connections", "Reducers' connections open to the MapReduce shuffle.", func(s shuffle.Stats) float64 { return float64(s.Connections) }},
		{"knit_shuffle_open_files", "Map output files the MapReduce shuffle has open.", func(s shuffle.Stats) float64 { return float64(s.OpenFiles) }},
		{"knit_shuffle_open_files_max", "Most map output files the MapReduce shuffle has had open at once.", func(s shuffle.Stats) float64 { return float64(s.MaxOpenFiles) }},
		{"knit_shuffle_jobs", "Jobs whose shuffle tokens the MapReduce shuffle holds.", func(s shuffle.Stats) float64 { return float64(s.Jobs) }},
	}
	for _, g := range gauges {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 { return g.value(svc.Stats()) })); err != nil {
			return err
		}
	}
	return nil
}
