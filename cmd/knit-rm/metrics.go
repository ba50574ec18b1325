package main

import (
	"context"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/scheduling"
)

// rmMetrics is knit-rm's Prometheus registry and the observers the RPC
// servers, RGS and the scheduler sink report to.
type rmMetrics struct {
	reg        *prometheus.Registry
	rpc        *metrics.RPC
	rgs        *metrics.RGS
	containers *metrics.Containers
}

func newMetrics() (*rmMetrics, error) {
	reg := prometheus.NewRegistry()
	m, err := registerMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.reg = reg
	return m, nil
}

// registerMetrics registers the Go runtime and the observers' figures on
// reg.
func registerMetrics(reg prometheus.Registerer) (*rmMetrics, error) {
	if err := metrics.Runtime(reg); err != nil {
		return nil, err
	}
	rpc, err := metrics.NewRPC(reg)
	if err != nil {
		return nil, err
	}
	g, err := metrics.NewRGS(reg)
	if err != nil {
		return nil, err
	}
	c, err := metrics.NewContainers(reg)
	if err != nil {
		return nil, err
	}
	return &rmMetrics{rpc: rpc, rgs: g, containers: c}, nil
}

// sink counts the containers the scheduler hands the RM and takes back.
func (m *rmMetrics) sink(r *rm.ResourceManager) scheduling.Sink {
	return m.containers.Sink(r.SchedulerSink(), r.ApplicationOwner)
}

// register adds the RM's and RGS's figures, read at each scrape, and
// serves /metrics on e.
func (m *rmMetrics) register(e *echo.Echo, r *rm.ResourceManager, sched *rgs.Controller) error {
	src := metrics.SourceFunc(func(ctx context.Context) (metrics.Snapshot, error) {
		s, err := r.MetricsSnapshot(ctx)
		s.Pending = metrics.PendingOf(sched.Pending())
		return s, err
	})
	if err := registerState(m.reg, src, sched.Pending); err != nil {
		return err
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})))
	return nil
}

// registerState registers the figures read from the RM's state (Hadoop's
// ClusterMetrics and QueueMetrics) and RGS's pending pods on reg.
func registerState(reg prometheus.Registerer, src metrics.Source, pending func() []rgs.Pending) error {
	if err := reg.Register(metrics.NewHadoopCollector(src, 0, nil)); err != nil {
		return err
	}
	return metrics.RegisterPending(reg, pending)
}
