package main

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/knitdev/knit/daemonsets/metrics"
)

// serveNodeMetrics serves Prometheus /metrics on the node's web port: its
// containers' use (daemonsets/metrics) and the Go runtime of knit-node, on
// a registry of its own.
func serveNodeMetrics(e *echo.Echo, pods metrics.Pods, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	col, err := metrics.NewCollector(metrics.Config{Pods: pods, Logger: log})
	if err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return nil
}
