package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/localcluster"
)

const (
	// kwokPodsEnv overrides how many pods BenchmarkRMMemoryWithKwokPods
	// runs; the figure is 100,000.
	kwokPodsEnv = "KNIT_BENCH_KWOK_PODS"
	// kwokBinEnv is where `make kwok` put the kwok binary; unset means
	// the user's cache folder under knit/kwok-<kwokVersion>/bin, as there.
	kwokBinEnv  = "KNIT_KWOK_BIN"
	kwokVersion = "v0.8.0"
	// kwokHeapEnv, when set, names a file the benchmark writes knit-rm's
	// heap profile to once every pod runs (knit-rm --pprof).
	kwokHeapEnv = "KNIT_BENCH_KWOK_HEAP"
	// kwokCPUEnv, when set, names a file the benchmark writes a 20 s CPU
	// profile of knit-rm to, taken with no calls once every pod runs: what
	// the RM does on its own at that size; and, with the method's name
	// added, one over each call's first rounds at that size (and with
	// ".small" before the method, at the small size, to compare with).
	kwokCPUEnv = "KNIT_BENCH_KWOK_CPU"
	// kwokLabel marks the nodes kwok simulates.
	kwokLabel = "knit.io/bench-kwok"
	// benchBinder is the schedulerName of the benchmark's queue: its pods
	// are placed by kwokBinder, not by kube-scheduler.
	benchBinder = "knit-bench-binder"
	// podsPerKwokNode is how many containers each simulated node gets (its
	// capacity, set in testdata/kwok.yaml, is 128 pods).
	podsPerKwokNode = 100
	// containersPerApp is each application's ask.
	containersPerApp = 1000
	// kwokNamespace holds the benchmark's pods.
	kwokNamespace = "knit-bench"
)

// BenchmarkRMMemoryWithKwokPods measures knit-rm's memory with 100,000
// containers' pods known (KNIT_BENCH_KWOK_PODS changes the number), on
// nodes simulated by kwok against the local control plane: 1,000 nodes,
// 100 unmanaged AMs each asking for 1,000 containers through the real
// ApplicationMasterProtocol, RGS creating the pods, a binder placing them
// on the simulated nodes (kube-scheduler binds at its client's 50 QPS,
// which would take the benchmark over half an hour), kwok running them.
// Once every AM holds all its containers and every pod runs, it reads the
// resident memory of knit-rm and, as the baseline in the same run, of
// kube-scheduler, which caches the same bound pods and nodes. It reports
// both, their ratio, the ratios of their means and of their peaks over
// 30 s of readings every half second, and knit-rm's growth per pod from
// its idle size.
func BenchmarkRMMemoryWithKwokPods(b *testing.B) {
	pods := containersPerApp * 100
	if v := os.Getenv(kwokPodsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < containersPerApp {
			b.Fatalf("%s=%q: want a number of pods ≥ %d", kwokPodsEnv, v, containersPerApp)
		}
		pods = n / containersPerApp * containersPerApp
	}
	kwok := os.Getenv(kwokBinEnv)
	if cache, err := os.UserCacheDir(); kwok == "" && err == nil {
		kwok = filepath.Join(cache, "knit", "kwok-"+kwokVersion, "bin", "kwok")
	}
	if _, err := os.Stat(kwok); err != nil {
		b.Skipf("kwok is not built (%v): run make kwok", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	bin := buildKnit(b)
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Stop(context.Background()) })
	cfg := c.ControlPlane.RESTConfig()
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	kwokCtx := startKwok(ctx, b, kwok, c.ControlPlane.Kubeconfig)
	nodes := createKwokNodes(kwokCtx, b, kube, pods/podsPerKwokNode)

	// The small AMs heartbeat before the pods arrive and again after
	// they all run, which on a busy machine has taken over an hour.
	hours := strconv.Itoa(int((6 * time.Hour).Milliseconds()))
	// The lease's default deadlines (a renewal within 3 s) are for
	// failover in seconds; creating pods at 1,000 a second on these two
	// cores has kept the API server from answering a renewal in time,
	// and a knit-rm that lost its Lease and came back would be another
	// process than the one measured.
	if _, err := c.StartRM(ctx, []string{filepath.Join(bin, "knit-rm"), "--pprof",
		"--lease-duration", "60s", "--lease-renew-deadline", "45s",
		"--kube-api-qps", "2000", "--kube-api-burst", "4000", "--pod-create-qps", "1000", "--pod-create-burst", "2000"},
		// Nothing starts these containers and the AMs stop heartbeating
		// once served: neither may be taken back while they are measured.
		hadoopconf.Property{Name: hadoopconf.KeyAMExpiryInterval, Value: hours},
		hadoopconf.Property{Name: hadoopconf.KeyContainerAllocationExpiry, Value: hours},
		hadoopconf.Property{Name: "knit.queue.root.default.scheduler-name", Value: benchBinder},
		hadoopconf.Property{Name: "knit.queue.root.default.namespace", Value: kwokNamespace},
	); err != nil {
		b.Fatal(err)
	}
	if err := c.CreateNamespace(ctx, kwokNamespace); err != nil {
		b.Fatal(err)
	}
	// The controller manager, needed only for the namespace's service
	// account, would hold a fourth copy of every pod (with the API server,
	// kube-scheduler and knit-rm), which 24 GiB cannot hold at 100,000.
	if err := c.ControlPlane.StopComponent("kube-controller-manager"); err != nil {
		b.Fatal(err)
	}
	rmPID, _ := c.RMPID()
	schedulerPID, _ := c.ControlPlane.PID("kube-scheduler")
	time.Sleep(5 * time.Second) // knit-rm's start-up garbage is collected
	idleRM, idleScheduler := mustResident(b, rmPID), mustResident(b, schedulerPID)

	bindCtx, stopBinding := context.WithCancel(ctx)
	defer stopBinding()
	go kwokBinder(bindCtx, kube, nodes, func() string {
		rm, err1 := residentBytes(rmPID)
		scheduler, err2 := residentBytes(schedulerPID)
		if err := errors.Join(err1, err2); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("knit-rm %d MiB, kube-scheduler %d MiB resident", rm>>20, scheduler>>20)
	})
	// The calls first on a small cluster: flatAMs applications of
	// flatContainers running containers each.
	load := startRCLoad(b)
	defer func() {
		if err := load.stop(); err != nil {
			b.Errorf("load generator: %v", err)
		}
	}()
	small := allocateAll(ctx, b, c.RM, flatAMs, flatContainers)
	waitAllRunning(ctx, b, kube, flatAMs*flatContainers)
	costsSmall := measureCalls(ctx, b, load, rmPID, c.RM, small, smallProfile(os.Getenv(kwokCPUEnv)))

	began := time.Now()
	allocateAll(ctx, b, c.RM, pods/containersPerApp, containersPerApp)
	allocated := time.Since(began)
	waitAllRunning(ctx, b, kube, pods+flatAMs*flatContainers)
	running := time.Since(began)
	stopBinding()
	if now, _ := c.RMPID(); now != rmPID {
		b.Fatalf("knit-rm restarted during the run (pid %d, now %d): its memory would be another process's", rmPID, now)
	}
	// Let knit-rm handle the running pods' events and collect garbage,
	// noting its CPU in each of three 10 s windows: work that catches up
	// fades, work that walks every pod does not. Both processes' resident
	// memory is read every half second meanwhile: a Go process's swings
	// with its collection cycle, so one reading lands anywhere in the
	// swing, and the mean and the peak over the windows say more.
	var rmRSS, schedulerRSS rssSamples
	for i := range 3 {
		before, err := processCPUOf(rmPID)
		if err != nil {
			b.Fatal(err)
		}
		for range 20 {
			time.Sleep(500 * time.Millisecond)
			rmRSS.add(mustResident(b, rmPID))
			schedulerRSS.add(mustResident(b, schedulerPID))
		}
		after, err := processCPUOf(rmPID)
		if err != nil {
			b.Fatal(err)
		}
		kwokLog(b, "knit-rm's CPU %d–%d s after every pod ran, no calls: %.1f ms a second", 10*i, 10*(i+1), float64((after-before).Milliseconds())/10)
	}
	kwokLog(b, "resident over 30 s, every 0.5 s: knit-rm mean %d MiB (%d–%d), kube-scheduler mean %d MiB (%d–%d); mean ratio %.3f, peak ratio %.3f",
		rmRSS.mean()>>20, rmRSS.low>>20, rmRSS.high>>20, schedulerRSS.mean()>>20, schedulerRSS.low>>20, schedulerRSS.high>>20,
		float64(rmRSS.mean())/float64(schedulerRSS.mean()), float64(rmRSS.high)/float64(schedulerRSS.high))
	b.ReportMetric(float64(rmRSS.mean())/float64(schedulerRSS.mean()), "rm/scheduler-mean")
	b.ReportMetric(float64(rmRSS.high)/float64(schedulerRSS.high), "rm/scheduler-peak")
	if path := os.Getenv(kwokCPUEnv); path != "" {
		saveProfile(ctx, b, "http://"+c.RM.Web+"/debug/pprof/profile?seconds=20", path)
	}
	rm, scheduler := mustResident(b, rmPID), mustResident(b, schedulerPID)
	if path := os.Getenv(kwokHeapEnv); path != "" {
		saveProfile(ctx, b, "http://"+c.RM.Web+"/debug/pprof/heap", path)
	}
	// Where knit-rm's resident memory goes, as its runtime counts it.
	ms := memStatsOf(ctx, b, "http://"+c.RM.Web+"/debug/pprof/heap?debug=1")
	kwokLog(b, "knit-rm's runtime: heap in use %d MiB (next GC at %d MiB), heap idle not returned %d MiB, stacks %d MiB, from the OS %d MiB",
		ms["HeapInuse"]>>20, ms["NextGC"]>>20, (ms["HeapIdle"]-ms["HeapReleased"])>>20, ms["StackInuse"]>>20, ms["Sys"]>>20)
	b.ReportMetric(float64(ms["HeapInuse"])/(1<<20), "rm-heap-inuse-MiB")
	costsLarge := measureCalls(ctx, b, load, rmPID, c.RM, small, os.Getenv(kwokCPUEnv))
	for _, call := range rcCalls {
		m := call.method
		kwokLog(b, "%s: %.1f µs a call at %d pods, %.1f at %d (%.2f×)", m, costsSmall.perCall[m], flatAMs*flatContainers,
			costsLarge.perCall[m], pods+flatAMs*flatContainers, costsLarge.perCall[m]/costsSmall.perCall[m])
		b.ReportMetric(costsLarge.perCall[m]/costsSmall.perCall[m], m+"-cpu-large/small")
	}
	kwokLog(b, "knit-rm's CPU with no calls: %.1f ms a second at %d pods, %.1f at %d", costsSmall.idle, flatAMs*flatContainers,
		costsLarge.idle, pods+flatAMs*flatContainers)
	b.ReportMetric(costsLarge.idle, "idle-cpu-ms/s-large")
	kwokLog(b, "%d pods on %d kwok nodes: all allocated after %s, all running after %s", pods, len(nodes), allocated.Round(time.Second), running.Round(time.Second))
	kwokLog(b, "knit-rm resident %d MiB (idle %d MiB); kube-scheduler %d MiB (idle %d MiB)", rm>>20, idleRM>>20, scheduler>>20, idleScheduler>>20)
	b.ReportMetric(float64(pods), "pods")
	b.ReportMetric(float64(rm)/(1<<20), "rm-MiB")
	b.ReportMetric(float64(scheduler)/(1<<20), "scheduler-MiB")
	b.ReportMetric(float64(rm)/float64(scheduler), "rm/scheduler")
	b.ReportMetric((float64(rm)-float64(idleRM))/float64(pods), "rm-B/pod")
	b.ReportMetric((float64(scheduler)-float64(idleScheduler))/float64(pods), "scheduler-B/pod")
	b.ReportMetric(float64(pods)/running.Seconds(), "pods-running/s")
	b.ReportMetric(0, "ns/op")
}

// kwokLog logs to the benchmark and, since a benchmark's log keeps only
// its first lines and shows only once it ends, to stderr as it goes.
func kwokLog(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// saveProfile writes the profile url serves to path.
func saveProfile(ctx context.Context, b *testing.B, url, path string) {
	b.Helper()
	if err := writeProfile(ctx, url, path); err != nil {
		b.Fatal(err)
	}
	kwokLog(b, "knit-rm's profile is in %s", path)
}

// writeProfile is saveProfile's work, for a goroutine of the benchmark's,
// which may not end the benchmark itself.
func writeProfile(ctx context.Context, url, path string) error {
	body, err := getRMPage(ctx, url)
	if err != nil {
		return err
	}
	defer body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, body); err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
}

// rmPage is the answer of knit-rm's web port at url: a profile, or its
// /metrics.
func rmPage(ctx context.Context, b *testing.B, url string) io.ReadCloser {
	b.Helper()
	body, err := getRMPage(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// getRMPage is rmPage for a caller that may not end the benchmark.
func getRMPage(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Go's client asks for gzip unless told otherwise, and promhttp's
	// compressor would cost knit-rm hundreds of KB of allocation a scrape.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// memStatsOf reads the runtime.MemStats figures ("# Name = value" lines)
// at the end of the debug=1 heap profile url serves.
func memStatsOf(ctx context.Context, b *testing.B, url string) map[string]uint64 {
	b.Helper()
	out := map[string]uint64{}
	eachLine(ctx, b, url, func(line string) {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok || !strings.HasPrefix(line, "# ") {
			return
		}
		if n, err := strconv.ParseUint(value, 10, 64); err == nil {
			out[name] = n
		}
	})
	return out
}

// eachLine calls f with each line of the answer at url, in order.
func eachLine(ctx context.Context, b *testing.B, url string, f func(line string)) {
	b.Helper()
	body := rmPage(ctx, b, url)
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

// promRuntimeStats are the Go collector's figures runtimeStatsOf reads,
// by the runtime.MemStats field each stands for.
var promRuntimeStats = map[string]string{
	"go_gc_duration_seconds_count":  "NumGC",
	"go_memstats_alloc_bytes_total": "TotalAlloc",
	"go_memstats_heap_inuse_bytes":  "HeapInuse",
}

// runtimeStatsOf reads knit-rm's collections, bytes allocated and heap in
// use from its /metrics at url, under memStatsOf's names. Between a call's
// rounds this scrape stands in for the heap profile's MemStats: with
// 100,000 pods' informers behind it, that profile prints thousands of
// stack records, about 50 ms of knit-rm's CPU and 2.5 MB of allocation
// each time, which over 90 rounds started collections of the whole heap
// that the rounds' few getClusterNodes calls were then charged with.
func runtimeStatsOf(ctx context.Context, b *testing.B, url string) map[string]uint64 {
	b.Helper()
	out := map[string]uint64{}
	eachLine(ctx, b, url, func(line string) {
		name, value, ok := strings.Cut(line, " ")
		key, known := promRuntimeStats[name]
		if !ok || !known {
			return
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("%s: %s: %v", url, line, err)
		}
		out[key] = uint64(f)
	})
	if len(out) != len(promRuntimeStats) {
		b.Fatalf("%s: found %v of the Go collector's %v", url, out, promRuntimeStats)
	}
	return out
}

// startKwok runs kwok against the cluster, simulating the nodes labelled
// kwokLabel with testdata/kwok.yaml's stages, until the benchmark ends. The
// context it returns ends with ctx or when kwok exits.
func startKwok(ctx context.Context, b *testing.B, kwok, kubeconfig string) context.Context {
	b.Helper()
	config, err := filepath.Abs(filepath.Join("testdata", "kwok.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	logPath := filepath.Join(b.TempDir(), "kwok.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(kwok, "--kubeconfig", kubeconfig, "--config", config,
		"--manage-nodes-with-label-selector", kwokLabel+"=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	kwokCtx, exited := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		exited(fmt.Errorf("kwok exited: %w", cmd.Wait()))
		close(done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if b.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				b.Logf("kwok's log:\n%s", out[max(0, len(out)-4000):])
			}
		}
	})
	return kwokCtx
}

// createKwokNodes creates n nodes for kwok to run and waits until all are
// Ready; it returns their names.
func createKwokNodes(ctx context.Context, b *testing.B, kube kubernetes.Interface, n int) []string {
	b.Helper()
	names := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-%05d", i)
		g.Go(func() error {
			_, err := kube.CoreV1().Nodes().Create(gctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        names[i],
				Labels:      map[string]string{kwokLabel: "true", corev1.LabelHostname: names[i]},
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			}}, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	for {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwokLabel})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, node := range list.Items {
			if localcluster.Schedulable(&node) {
				ready++
			}
		}
		if ready == n {
			return names
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d kwok nodes ready: %v", ready, n, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// kwokBinder binds the pods of benchBinder's queue to nodes in turn, as a
// scheduler with nothing to weigh would, until ctx ends. Its informer
// holds only unbound pods, without managed fields, and its handler only
// queues their keys, so a backlog of pods to bind never stalls the watch.
func kwokBinder(ctx context.Context, kube kubernetes.Interface, nodes []string, rss func() string) {
	queue := workqueue.NewTyped[types.NamespacedName]()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	selector := fields.AndSelectors(fields.OneTermEqualSelector("spec.schedulerName", benchBinder),
		fields.OneTermEqualSelector("spec.nodeName", "")).String()
	lw := cache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = selector })
	store, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Transform: func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.ManagedFields = nil
			}
			return obj, nil
		},
		// As kube-scheduler, it sees a pod only once queue admission has
		// lifted its scheduling gate.
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { enqueueUngated(queue, obj) },
			UpdateFunc: func(_, obj any) { enqueueUngated(queue, obj) },
		},
	})
	go inf.Run(ctx.Done())
	var next, bound atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				obj, ok, _ := store.GetByKey(key.String())
				if p, isPod := obj.(*corev1.Pod); ok && isPod && len(p.Spec.SchedulingGates) == 0 {
					node := nodes[int(next.Add(1))%len(nodes)]
					err := kube.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
						ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
						Target:     corev1.ObjectReference{Kind: "Node", Name: node},
					}, metav1.CreateOptions{})
					if err != nil && ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "bind %s: %v\n", key, err)
					}
					// Progress goes straight to stderr: a benchmark's own
					// log shows only once it ends.
					if n := bound.Add(1); n%10000 == 0 {
						fmt.Fprintf(os.Stderr, "%s bound %d; %s\n", time.Now().Format(time.TimeOnly), n, rss())
					}
				}
				queue.Done(key)
			}
		})
	}
	wg.Wait()
}

// enqueueUngated queues a pod for binding once it has no scheduling gate.
func enqueueUngated(queue workqueue.TypedInterface[types.NamespacedName], obj any) {
	if p, ok := obj.(*corev1.Pod); ok && len(p.Spec.SchedulingGates) == 0 {
		queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
}

// allocateAll runs apps unmanaged AMs at once; each asks for
// containersPerApp containers and heartbeats once a second until it holds
// them all.
func allocateAll(ctx context.Context, b *testing.B, addrs *localcluster.RMAddresses, apps, containers int) []benchAM {
	b.Helper()
	out := make([]benchAM, apps)
	g, gctx := errgroup.WithContext(ctx)
	for i := range apps {
		g.Go(func() error {
			rmc, err := client.NewRMClient(addrs.Client, client.RMConfig{User: "bench"})
			if err != nil {
				return err
			}
			defer rmc.Close()
			am, app, err := unmanagedAM(gctx, rmc, addrs.Scheduler)
			if err != nil {
				return err
			}
			defer am.Close()
			report, err := rmc.GetApplicationReport(gctx, app)
			if err != nil {
				return err
			}
			token, err := proto.Marshal(report.GetAmRmToken())
			if err != nil {
				return err
			}
			req := &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{{
				Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}, ResourceName: proto.String("*"),
				Capability:    &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
				NumContainers: proto.Int32(int32(containers)), RelaxLocality: proto.Bool(true),
			}}}
			var last int32
			for got := 0; got < containers; {
				resp, err := am.Allocate(gctx, req)
				if err != nil {
					return err
				}
				got += len(resp.GetAllocatedContainers())
				last = resp.GetResponseId()
				req = &yarnpb.AllocateRequestProto{}
				if got == containers {
					break
				}
				select {
				case <-gctx.Done():
					return fmt.Errorf("%d of %d containers: %w", got, containers, gctx.Err())
				case <-time.After(time.Second):
				}
			}
			out[i] = benchAM{app: app, token: token, responseID: last}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return out
}

// The small cluster the calls are first measured on: flatAMs applications
// of flatContainers running containers each, 100 pods, as the issue's
// baseline. Each call then runs on flatAMs connections (a user each, an
// AM each for allocate), after a warm-up, in flatRounds rounds of
// flatRound.
const (
	flatAMs        = 10
	flatContainers = 10
	flatWarm       = 300 * time.Millisecond
	flatRound      = time.Second
	flatRounds     = 3
	// flatGCCycles is how many of knit-rm's collections a call's rounds
	// must span, up to flatMaxRounds: at 100,000 pods its heap's cycle is
	// hundreds of MiB of allocation apart and costs the marking of the
	// whole heap, so three rounds hold none or one of them, and a call's
	// CPU is either without its share of collection or with several
	// seconds' share at once. Over whole cycles it is the call's amortized
	// cost at both sizes.
	flatGCCycles  = 5
	flatMaxRounds = 90
)

// benchAM is an unmanaged AM allocateAll served: its application, its
// AMRMToken (a marshalled TokenProto) and the response id its next
// heartbeat names.
type benchAM struct {
	app        *yarnpb.ApplicationIdProto
	token      []byte
	responseID int32
}

// callCosts is what measureCalls found: knit-rm's CPU per call of each
// method in µs, with its CPU without calls taken out, and that CPU in ms
// per second.
type callCosts struct {
	perCall map[string]float64
	idle    float64
}

// measureCalls measures knit-rm's CPU time (process pid, all its threads)
// per call of each of rcCalls, made by the load generator on one
// connection per AM of ams: the metrics, the running nodes, the report of
// an AM's application (each connection another user), an AM's heartbeat
// that changes nothing. Before each call's rounds it reads knit-rm's CPU
// over a round without calls, and takes that rate out of the rounds'.
// Each call's rounds start after a collection (the heap profile's gc=1)
// and go on until they span flatGCCycles more, so that they carry their
// share of collection at any heap size; the collections between rounds
// are counted from /metrics (runtimeStatsOf), whose scrape allocates
// little, so that the counting starts few of its own. With profile set,
// a CPU profile of knit-rm over each call's first rounds goes to
// profile.<method>.
// ams's response ids advance with the heartbeats made.
func measureCalls(ctx context.Context, b *testing.B, load *rcLoad, pid int, addrs *localcluster.RMAddresses, ams []benchAM, profile string) callCosts {
	b.Helper()
	cpu := func() time.Duration {
		d, err := processCPUOf(pid)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	out := callCosts{perCall: map[string]float64{}}
	var idleCPU, idleWall time.Duration
	for _, call := range rcCalls {
		load.sets++
		cmd := rcCmd{Op: "dial", Set: load.sets, Addr: addrs.Client, Method: call.method}
		for i, am := range ams {
			req := call.newReq()
			switch r := req.(type) {
			case *yarnpb.GetApplicationReportRequestProto:
				r.ApplicationId = am.app
			case *yarnpb.AllocateRequestProto:
				req = rcHeartbeat(am.responseID)
				cmd.Addr = addrs.Scheduler
				cmd.Tokens = append(cmd.Tokens, am.token)
			}
			raw, err := proto.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			cmd.Requests = append(cmd.Requests, raw)
			cmd.Users = append(cmd.Users, fmt.Sprintf("user%d", i))
		}
		set := cmd.Set
		load.do(b, cmd)
		load.do(b, rcCmd{Op: "run", Set: set, Conns: len(ams), For: flatWarm})
		memStatsOf(ctx, b, "http://"+addrs.Web+"/debug/pprof/heap?debug=1&gc=1")
		stats := "http://" + addrs.Web + "/metrics"
		before, start := cpu(), time.Now()
		time.Sleep(flatRound)
		idle, wall := cpu()-before, time.Since(start)
		idleCPU, idleWall = idleCPU+idle, idleWall+wall
		var profiled sync.WaitGroup
		var profileErr error
		if profile != "" {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addrs.Web, 10*flatRound/time.Second)
			profiled.Go(func() { profileErr = writeProfile(ctx, url, profile+"."+call.method) })
		}
		first := runtimeStatsOf(ctx, b, stats)
		var calls int64
		var busy, busyWall time.Duration
		rounds, last := 0, first
		for ; rounds < flatRounds || last["NumGC"]-first["NumGC"] < flatGCCycles && rounds < flatMaxRounds; rounds++ {
			before := cpu()
			r := load.do(b, rcCmd{Op: "run", Set: set, Conns: len(ams), For: flatRound})
			busy += cpu() - before
			busyWall += r.Wall
			calls += r.Calls
			last = runtimeStatsOf(ctx, b, stats)
		}
		profiled.Wait()
		if profileErr != nil {
			b.Fatal(profileErr)
		}
		if profile != "" {
			kwokLog(b, "knit-rm's profile is in %s", profile+"."+call.method)
		}
		kwokLog(b, "%s: %d calls in %d rounds, over %d of knit-rm's collections, %d B allocated a call (heap in use %d MiB)", call.method, calls, rounds,
			last["NumGC"]-first["NumGC"], (last["TotalAlloc"]-first["TotalAlloc"])/uint64(max(calls, 1)), last["HeapInuse"]>>20)
		// The CPU knit-rm would have spent over the rounds without them.
		background := time.Duration(float64(idle) * busyWall.Seconds() / wall.Seconds())
		out.perCall[call.method] = micros(max(busy-background, 0)) / float64(calls)
		closed := load.do(b, rcCmd{Op: "close", Set: set})
		if call.am {
			for i := range ams {
				ams[i].responseID = closed.ResponseIDs[i]
			}
		}
	}
	out.idle = float64(idleCPU.Milliseconds()) / idleWall.Seconds()
	return out
}

// smallProfile is where the small cluster's call profiles go when the
// large one's go to path: beside them, so the two sizes read side by side.
func smallProfile(path string) string {
	if path == "" {
		return ""
	}
	return path + ".small"
}

// waitAllRunning waits until n Knit pods run: no Knit pod is left in any
// other phase and the count of running ones is n.
func waitAllRunning(ctx context.Context, b *testing.B, kube kubernetes.Interface, n int) {
	b.Helper()
	count := func(selector string, limit int64) (int, error) {
		total, cont := 0, ""
		for {
			list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
				LabelSelector: launch.LabelApplication, FieldSelector: selector, Limit: limit, Continue: cont,
			})
			if err != nil {
				return 0, err
			}
			total += len(list.Items)
			if cont = list.Continue; cont == "" || limit == 1 {
				return total, nil
			}
		}
	}
	for {
		other, err := count("status.phase!=Running", 1)
		if err != nil {
			b.Fatal(err)
		}
		if other == 0 {
			running, err := count("status.phase=Running", 5000)
			if err != nil {
				b.Fatal(err)
			}
			if running == n {
				return
			}
			if running > n {
				b.Fatalf("%d pods running, want %d", running, n)
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("waiting for %d running pods: %v", n, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// residentBytes is a process's resident memory, from /proc.
func residentBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.Join(fmt.Errorf("no VmRSS in /proc/%d/status", pid), s.Err())
}

// rssSamples are readings of a process's resident memory.
type rssSamples struct {
	n, sum, low, high int64
}

func (r *rssSamples) add(v int64) {
	if r.n == 0 || v < r.low {
		r.low = v
	}
	r.high = max(r.high, v)
	r.n++
	r.sum += v
}

func (r *rssSamples) mean() int64 { return r.sum / max(r.n, 1) }

// mustResident is residentBytes for the benchmark's own goroutine.
func mustResident(b *testing.B, pid int) int64 {
	b.Helper()
	n, err := residentBytes(pid)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
