// Package bench holds Knit's benchmarks. They report; they never fail on
// speed. `make bench` runs them all.
//
// rpc_bench_test.go measures the Hadoop RPC engine (protocols/ipc) against a
// grpc-go server answering the same protobuf payload over the same number of
// loopback TCP connections, one goroutine per connection calling back to
// back. BenchmarkRPC reports each engine on its own; BenchmarkRPCVersusGRPC
// runs both in alternating rounds within the same run and reports the
// throughput ratio ours/grpc, with a summary table.
//
// At 1,000 connections a run holds about 2,000 file descriptors per engine
// (both ends of each connection); the benchmarks raise the soft RLIMIT_NOFILE
// towards the hard limit when needed and skip a level the hard limit cannot
// hold.
//
// webproxy_bench_test.go measures the RM's web application proxy against
// direct requests to the same AM web server, with the CPU per page of each
// path: once in this process, and once with the AM and the proxy in
// processes of their own (this test binary again, pinned to a CPU each
// way, Linux only). metrics_bench_test.go measures knit-rm's /metrics on a
// ResourceManager holding 10,000 applications with 1,000 nodes in its node
// view, against a scrape of an empty registry; webui_bench_test.go the REST
// and UI answers from that RM and the UI pages alone over a fixed list,
// against a no-op handler.
//
// nodeview_bench_test.go measures the RM's cost per pod:
// BenchmarkClusterMetricsFlatInPods serves getClusterMetrics to 64
// connections, each its own user, from two RMs in the same run whose node
// view (rgs/nodes over informers of a fake API server with 1,000 nodes)
// holds no pods and 100,000 pods, and reports calls/s and process CPU per
// call for each and their ratios (flat is 1). BenchmarkPodCacheBytesPerPod
// reports the heap each of 100,000 started pods costs as the RM's record
// of it (package podrecord), against the whole decoded pod and the whole pod without managed
// fields.
//
// rmcalls_bench_test.go measures the RM's cost per call against the
// engine's own: BenchmarkRMCallsVersusNoOp serves getClusterMetrics,
// getApplicationReport, getClusterNodes and allocate (an AM's heartbeat
// that changes nothing, over TOKEN with its AMRMToken) from a real
// ResourceManager (1,000 nodes in the node view, 641 applications) and
// from the same engine answering the smallest valid message, and the RM's
// own answer made once, to a Go client in a process of its own (this test
// binary again) at 8, 64 and 256 connections, each its own user or AM, in
// alternating rounds. It prints calls/s and the server process's CPU per
// call of each, and the ratios RM/no-op and RM/same-answer;
// KNIT_BENCH_RMCALLS=method[/conns],… runs only the cases named (to
// profile one with -cpuprofile, which then sees the servers alone).
//
// federation_bench_test.go measures issue 23's goals against a real
// ResourceManager (rmcalls_bench_test.go's scene and load generator):
// BenchmarkFederationVersusDirectRM makes submissions and
// getApplicationReport calls to the RM directly and through a Router
// whose one sub-cluster it is, and an AM's allocate heartbeat directly and
// through a node's AMRMProxy (the default pipeline, and the
// FederationInterceptor in front of it), in alternating rounds
// at 1 and 16 connections, and prints calls/s, p50, p99 and this
// process's CPU per call of each side and the ratios hop/direct.
//
// queueindex_bench_test.go measures the RM's cost per application:
// BenchmarkQueueInfoAndHeadroomFlatInApps calls getQueueInfo of root
// (recursively, 16 leaves) and an AM's allocate that refreshes the cluster
// view and answers the headroom, on two RMs in the same run holding 100 and
// 10,000 applications, and reports µs per call for each and the ratios
// (flat is 1).
//
// webshell_bench_test.go measures a keystroke's round trip (a byte typed
// into cat on a terminal until its echo) through the RM's web shell
// (WebSocket, rm/webshell, pods/exec to a process node) against client-go's
// remotecommand exec straight to the same pod, in alternating rounds, and
// reports each p50 and p99 and the p99 ratio webshell/exec.
//
// failover_bench_test.go kills the active knit-rm of a local cluster with
// two replicas twenty times and reports the time from each kill to the
// first client call an RM answers, p50 and p99 in milliseconds, and p99
// over the Lease's duration (the floor a dead leader's Lease sets), with
// the default Lease settings of rm/ha.
//
// admission_bench_test.go measures queue admission (rgs/admission, rgs's
// gate lifting): BenchmarkAdmissionPass one pass over 10,000 pending pods in
// 100 queues with 4,000 running, against a sort of the same pods;
// BenchmarkAdmissionFairness the mean distance of four queues' use from
// YARN's ideal shares while containers churn, against first come first
// served (what the Kubernetes scheduler alone does); BenchmarkAdmissionLatency
// the time from capacity freed to the waiting pod's gate lifted, against
// pod creation to the informer's sight of it, over a fake API server.
//
// Allowed imports: anything (test/ is the room for benchmarks).
package bench
