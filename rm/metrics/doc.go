// Package metrics is the ResourceManager's Prometheus metrics: the cluster
// and queue figures Hadoop's RM publishes (ClusterMetrics, and QueueMetrics
// per queue and per user of a queue), named as Hadoop's
// PrometheusMetricsSink names them (HadoopName: "QueueMetrics" +
// "AllocatedVCores" → queue_metrics_allocated_v_cores) and typed as it types
// them (gauges, its counters included), plus Knit's own: RPC calls per
// protocol and method with their queue and processing times (an
// ipc.CallObserver), RGS's pod work (an rgs.Observer and its pending pods),
// containers allocated and released per queue (a scheduling.Sink wrapper).
//
// Queue series carry the labels queue (the path, "root.default") and user
// ("" for the queue's own totals, which Prometheus stores without the
// label); a parent queue's figures are the sum of its children's, as
// Hadoop's QueueMetrics propagate to parents.
//
// Every metric lives in the prometheus.Registerer the caller passes in; the
// package keeps no state of its own and never touches the default registry.
//
// Imports: the standard library, client_golang, protocols, rgs and
// scheduling (for the interfaces it implements).
package metrics
