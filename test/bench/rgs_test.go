package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/tokens"
	"github.com/knitdev/knit/scheduling"
	"github.com/knitdev/knit/test/controlplane"
)

// The RGS benchmarks run against a real control plane (etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager from
// test/controlplane) with no kubelets: the pods they make never start.
const (
	// kubeQPS and kubeBurst are the client-side rate limits of every
	// Kubernetes client in these benchmarks, RGS's and the baselines'
	// alike, and RGS's CreateQPS and CreateBurst too. They are set above
	// what the local API server achieves, so that the API server, not a
	// limiter, is what both sides measure.
	kubeQPS   = 1000
	kubeBurst = 2000
	// createConcurrency is RGS's CreateConcurrency (its default) and the
	// number of client-go workers of the baseline.
	createConcurrency = 32

	// unscheduled is the schedulerName of benchmark pods: no scheduler
	// owns it, so kube-scheduler leaves them alone (no status writes, no
	// bindings) and they stay pending until the benchmark binds them.
	unscheduled = "knit-bench-unscheduled"

	// amHeartbeat is the AM heartbeat BenchmarkRGSBoundToContainer reports
	// against: the AM sees a container on its first allocate after RGS
	// handed it to the Sink, so the target for bind → container
	// returned is p99 within amHeartbeat + 50 ms.
	amHeartbeat = time.Second
)

var benchLauncher = rgs.Launcher{
	Image:       "knit.dev/bench-launcher:0",
	InitCommand: []string{"cp", "/knit-launcher", "/knit/knit-launcher"},
	Command:     []string{"/knit/knit-launcher", "--launch-dir", "/knit/launch"},
}

// kubeEnv is a control plane and a client of it.
type kubeEnv struct {
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
}

func startKube(b *testing.B) *kubeEnv {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	env := &kubeEnv{cp: cp}
	if env.client, err = env.newClient(); err != nil {
		_ = cp.Stop()
		b.Fatal(err)
	}
	return env
}

// newClient is a client of its own (its own rate limiter and connections)
// with the benchmarks' QPS and burst.
func (e *kubeEnv) newClient() (kubernetes.Interface, error) {
	cfg := e.cp.RESTConfig()
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	return kubernetes.NewForConfig(cfg)
}

func (e *kubeEnv) stop(b *testing.B) {
	if err := e.cp.Stop(); err != nil {
		b.Error(err)
	}
}

// namespace creates a namespace and waits for its default service account,
// without which the API server refuses pods.
func (e *kubeEnv) namespace(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	ns := "bench-" + rand.String(6)
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("service account of %s: %v", ns, err)
	}
	return ns
}

// clearPods deletes every pod of ns (none is bound: each goes at once) and
// waits until none is left.
func (e *kubeEnv) clearPods(b *testing.B, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := e.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("pods of %s not gone: %v", ns, err)
	}
}

// podWatch watches the pods of one namespace from its own informer (the
// observer a user or a test has, not RGS's): when each was first seen and
// when it was first seen bound to a node.
type podWatch struct {
	mu      sync.Mutex
	added   map[string]time.Time
	bound   map[string]time.Time
	want    int
	allSeen chan time.Time // the moment the want-th pod was seen
	stop    chan struct{}
}

func watchNamespace(b *testing.B, client kubernetes.Interface, ns string, want int) *podWatch {
	b.Helper()
	w := &podWatch{
		added: map[string]time.Time{}, bound: map[string]time.Time{}, want: want,
		allSeen: make(chan time.Time, 1), stop: make(chan struct{}),
	}
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.added[p.Name]; !ok {
			w.added[p.Name] = now
			if len(w.added) == w.want {
				w.allSeen <- now
			}
		}
		if _, ok := w.bound[p.Name]; !ok && p.Spec.NodeName != "" {
			w.bound[p.Name] = now
		}
	}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, obj any) { observe(obj) },
		},
	})
	go inf.Run(w.stop)
	if !cache.WaitForCacheSync(b.Context().Done(), inf.HasSynced) {
		b.Fatal("pod watch not synced")
	}
	return w
}

// waitAll waits for the want-th pod, at most d.
func (w *podWatch) waitAll(b *testing.B, d time.Duration) time.Time {
	b.Helper()
	select {
	case t := <-w.allSeen:
		return t
	case <-time.After(d):
		w.mu.Lock()
		n := len(w.added)
		w.mu.Unlock()
		b.Fatalf("saw %d pods in %v, want %d", n, d, w.want)
		return time.Time{}
	}
}

// rgsRun is one RGS controller, started and running.
type rgsRun struct {
	c      *rgs.Controller
	cancel context.CancelFunc
	done   chan error
}

// activeTokens is a token manager activated as the RM of clusterTimestamp,
// its keys in memory.
func activeTokens(ctx context.Context) (*tokens.Manager, error) {
	tm, err := tokens.New(tokens.Config{})
	if err != nil {
		return nil, err
	}
	return tm, tm.Activate(ctx, clusterTimestamp)
}

// startRGS starts RGS with every queue's pods in namespace ns.
func startRGS(b *testing.B, cfg rgs.Config, sink scheduling.Sink, ns string) *rgsRun {
	b.Helper()
	cfg.Logger = quiet
	cfg.CreateQPS, cfg.CreateBurst = kubeQPS, kubeBurst
	cfg.CreateConcurrency = createConcurrency
	c, err := rgs.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), time.Minute)
	defer cancelStart()
	if _, err := c.Start(startCtx, rgs.StartConfig{Epoch: 1, Sink: sink, Mapping: func(string) rgs.Mapping { return benchMapping(ns) }}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rgsRun{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	return r
}

func (r *rgsRun) stop() {
	r.cancel()
	<-r.done
}

// nullSink takes every container and ignores the rest.
type nullSink struct{}

func (nullSink) Allocated(context.Context, scheduling.Allocation) error { return nil }
func (nullSink) Completed(context.Context, scheduling.Completion)       {}
func (nullSink) Preempting(context.Context, scheduling.Preemption)      {}
func (nullSink) Updated(context.Context, scheduling.UpdateResult)       {}

// noNodes is an rgs.Nodes of an empty cluster and an rgs.Signer that signs
// nothing, for pods that are never bound.
type noNodes struct{}

func (noNodes) NodeID(string) (*yarnpb.NodeIdProto, string, bool) { return nil, "", false }
func (noNodes) NodeName(string) (string, bool)                    { return "", false }
func (noNodes) Sign(*yarnpb.ContainerProto, string, string, bool, *yarnpb.LogAggregationContextProto) (*commonpb.TokenProto, error) {
	return nil, errors.New("bench: no signer")
}

// benchAsk is an ask as the RM passes it to RGS: capability normalised
// (rgs.Resource), relaxed locality, GUARANTEED.
func benchAsk(priority int32, name string, n int32) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority:             &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ResourceName:         proto.String(name),
		Capability:           yarnpb.NewResource(1024, 1),
		NumContainers:        proto.Int32(n),
		RelaxLocality:        proto.Bool(true),
		ExecutionTypeRequest: &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum(), EnforceExecutionType: proto.Bool(false)},
		AllocationRequestId:  proto.Int64(0),
	}
}

func benchSpec(app int32, ns string) scheduling.AttemptSpec {
	return scheduling.AttemptSpec{
		Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: clusterTimestamp, ID: app}, ID: 1},
		Role:    launch.RoleTask,
		Queue:   "root.default",
		User:    "bench",
	}
}

// benchMapping places pods in ns, where no scheduler binds them.
func benchMapping(ns string) rgs.Mapping {
	return rgs.Mapping{Namespace: ns, HostNetwork: true, SchedulerName: unscheduled}
}

// Sizes of BenchmarkRGSCreatesPodsVersusClientGo.
const (
	createPodsN  = 500
	createWithin = time.Minute
)

// createOrder is one iteration's rounds, ABBA so that neither side always
// runs on the warmer API server.
var createOrder = []string{"client-go", "rgs", "rgs", "client-go"}

// BenchmarkRGSCreatesPodsVersusClientGo measures pod creation throughput:
// RGS turning one ask for createPodsN containers into pending pods, timed
// from Controller.Ask until a separate informer on the namespace has seen
// every pod, against createConcurrency client-go workers creating the same
// number of pods (built beforehand by rgs.BuildPod from the same ask, so
// the objects differ only in name and ask-hash label) timed from the first
// Create until the same kind of informer has seen every pod. Both sides use
// the same control plane, namespace and client settings (QPS kubeQPS,
// burst kubeBurst; RGS's CreateQPS/CreateBurst equal, CreateConcurrency
// createConcurrency); the pods name a scheduler that does not exist, so
// nothing else writes to them. Each RGS round starts a new controller
// (Start and its informer sync are not timed), and the namespace is
// emptied between rounds. It reports both rates and rgs/client-go (the
// issue's target is >= 0.9).
func BenchmarkRGSCreatesPodsVersusClientGo(b *testing.B) {
	env := startKube(b)
	defer env.stop(b)
	ns := env.namespace(b)
	var rgsTime, directTime time.Duration
	var rgsPods, directPods int
	app := int32(0)
	for range b.N {
		for _, side := range createOrder {
			app++
			spec := benchSpec(app, ns)
			ask := benchAsk(1, "*", createPodsN)
			w := watchNamespace(b, env.client, ns, createPodsN)
			var took time.Duration
			switch side {
			case "rgs":
				client, err := env.newClient()
				if err != nil {
					b.Fatal(err)
				}
				r := startRGS(b, rgs.Config{Client: client, Signer: noNodes{}, Nodes: noNodes{}, Launcher: benchLauncher}, nullSink{}, ns)
				began := time.Now()
				r.c.Ask(spec, []*yarnpb.ResourceRequestProto{ask})
				took = w.waitAll(b, createWithin).Sub(began)
				r.stop()
				rgsTime += took
				rgsPods += createPodsN
			default:
				client, err := env.newClient()
				if err != nil {
					b.Fatal(err)
				}
				pods := make([]*corev1.Pod, createPodsN)
				for i := range pods {
					pods[i], err = rgs.BuildPod(rgs.PodRequest{
						Name:     fmt.Sprintf("app-%d-%04d-01-task-%08d", clusterTimestamp, app, i),
						App:      spec.Attempt.App.String(),
						Attempt:  spec.Attempt.ID,
						Role:     spec.Role,
						Queue:    spec.Queue,
						User:     spec.User,
						Ask:      ask,
						Mapping:  benchMapping(ns),
						Launcher: benchLauncher,
						AskHash:  "bench",
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				began := time.Now()
				createDirect(b, client, ns, pods)
				took = w.waitAll(b, createWithin).Sub(began)
				directTime += took
				directPods += createPodsN
			}
			close(w.stop)
			b.Logf("%s: %d pods in %v", side, createPodsN, took)
			b.StopTimer()
			env.clearPods(b, ns)
			b.StartTimer()
		}
	}
	rgsRate := float64(rgsPods) / rgsTime.Seconds()
	directRate := float64(directPods) / directTime.Seconds()
	b.ReportMetric(rgsRate, "rgs-pods/s")
	b.ReportMetric(directRate, "client-go-pods/s")
	b.ReportMetric(rgsRate/directRate, "rgs/client-go")
	b.ReportMetric(0, "ns/op")
}

// createDirect creates pods from createConcurrency workers, each taking the
// next pod.
func createDirect(b *testing.B, client kubernetes.Interface, ns string, pods []*corev1.Pod) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, createConcurrency)
	for range createConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(pods) {
					return
				}
				if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pods[i], metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// Sizes of BenchmarkRGSBoundToContainer.
const (
	boundNodes = 2
	// burstPods are bound by burstBinders goroutines back to back, as fast
	// as the API server takes them (a scheduler placing a large job).
	burstPods    = 200
	burstBinders = 8
	// pacedPods are bound one at a time, pacedGap apart: no queue anywhere.
	pacedPods   = 50
	pacedGap    = 20 * time.Millisecond
	boundWithin = time.Minute
)

// allocSink records when each pod's container reached the Sink.
type allocSink struct {
	// pods finds a container's pod (RGS, set before the first ask).
	pods interface {
		ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool)
	}
	mu sync.Mutex
	at map[string]time.Time // by pod name
}

func (s *allocSink) Allocated(_ context.Context, a scheduling.Allocation) error {
	now := time.Now()
	if a.Container.GetContainerToken() == nil || a.Container.GetNodeId().GetHost() == "" {
		return fmt.Errorf("bench: container %v without token or node", a.Container.GetId())
	}
	id, err := yarnid.ContainerIDFromProto(a.Container.GetId())
	if err != nil {
		return err
	}
	pod, ok := s.pods.ContainerPod(id)
	if !ok {
		return fmt.Errorf("bench: no pod for container %s", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[pod.Name]; !ok {
		s.at[pod.Name] = now
	}
	return nil
}
func (*allocSink) Completed(context.Context, scheduling.Completion)  {}
func (*allocSink) Preempting(context.Context, scheduling.Preemption) {}
func (*allocSink) Updated(context.Context, scheduling.UpdateResult)  {}

// boundLatencies are, per pod, the time from the start of its Binding call
// to RGS's Sink.Allocated and to the watch seeing it bound.
type boundLatencies struct {
	rgs, watch []time.Duration
	wall       time.Duration // first Binding call to last return
}

// BenchmarkRGSBoundToContainer measures how long RGS takes to turn a bound
// pod into a YARN container. RGS (signing with rm/tokens' ContainerTokens,
// mapping nodes with rgs/nodes' Lister, as knit-rm does) makes
// burstPods+pacedPods pending pods from one ask; once all exist, the
// benchmark binds them itself through the pods/binding subresource to
// boundNodes Node objects (no kubelets; the pods name a scheduler that does
// not exist, so nobody else binds them): first burstPods from burstBinders
// goroutines back to back, then, once those are containers, pacedPods one
// at a time pacedGap apart. A pod's latency runs from the start of its
// Binding call to RGS's Sink.Allocated for it (pod seen bound, container id
// assigned and recorded on the pod by a patch, ContainerToken signed). The
// baseline, from the same bindings, is when a plain client-go informer on
// the namespace sees the pod bound: what any watcher of pods waits. It
// reports p50 and p99 of both, for both phases, p99 rgs/watch, and p99
// against the target: the AM sees a container on its first
// heartbeat after Allocated, so bind → container returned is at most
// p99 + one heartbeat (amHeartbeat), and the target is amHeartbeat + 50 ms:
// (p99+hb)/target <= 1 meets it, and p99/1050ms is p99 over that target.
func BenchmarkRGSBoundToContainer(b *testing.B) {
	ctx := context.Background()
	env := startKube(b)
	defer env.stop(b)
	ns := env.namespace(b)
	var nodeNames []string
	for i := range boundNodes {
		name := fmt.Sprintf("bench-node-%d", i)
		createNode(b, env.client, name, fmt.Sprintf("10.11.0.%d", i+1))
		nodeNames = append(nodeNames, name)
	}
	tm, err := activeTokens(ctx)
	if err != nil {
		b.Fatal(err)
	}
	lister := startNodeLister(b, env.client, nil)
	defer lister.stop()

	var burst, paced boundLatencies
	for i := range b.N {
		client, err := env.newClient()
		if err != nil {
			b.Fatal(err)
		}
		sink := &allocSink{at: map[string]time.Time{}}
		r := startRGS(b, rgs.Config{Client: client, Signer: tm.ContainerTokens(), Nodes: lister.l, Launcher: benchLauncher}, sink, ns)
		sink.pods = r.c
		w := watchNamespace(b, env.client, ns, burstPods+pacedPods)
		spec := benchSpec(int32(i+1), ns)
		r.c.Ask(spec, []*yarnpb.ResourceRequestProto{benchAsk(1, "*", burstPods+pacedPods)})
		w.waitAll(b, boundWithin)
		list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: launch.LabelApplication + "=" + spec.Attempt.App.String()})
		if err != nil {
			b.Fatal(err)
		}
		if len(list.Items) != burstPods+pacedPods {
			b.Fatalf("%d pending pods, want %d", len(list.Items), burstPods+pacedPods)
		}
		bind := func(p *corev1.Pod, k int) error {
			return env.client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: nodeNames[k%len(nodeNames)]},
			}, metav1.CreateOptions{})
		}
		burst = burst.add(bindAndWait(b, sink, w, list.Items[:burstPods], burstBinders, 0, bind))
		paced = paced.add(bindAndWait(b, sink, w, list.Items[burstPods:], 1, pacedGap, bind))
		close(w.stop)
		r.stop()
	}
	target := amHeartbeat + 50*time.Millisecond
	report := func(prefix string, l boundLatencies) {
		slices.Sort(l.rgs)
		slices.Sort(l.watch)
		rl, wl := latencies{d: l.rgs}, latencies{d: l.watch}
		b.ReportMetric(ms(rl.q(0.50)), prefix+"p50-ms")
		b.ReportMetric(ms(rl.q(0.99)), prefix+"p99-ms")
		b.ReportMetric(ms(wl.q(0.50)), prefix+"watch-p50-ms")
		b.ReportMetric(ms(wl.q(0.99)), prefix+"watch-p99-ms")
		b.ReportMetric(float64(rl.q(0.99))/float64(wl.q(0.99)), prefix+"p99-rgs/watch")
		b.ReportMetric(float64(rl.q(0.99))/float64(target), prefix+"p99/1050ms")
		b.ReportMetric(float64(rl.q(0.99)+amHeartbeat)/float64(target), prefix+"(p99+hb)/target")
	}
	report("", burst)
	report("paced-", paced)
	b.ReportMetric(float64(len(burst.rgs))/burst.wall.Seconds(), "burst-binds/s")
	b.ReportMetric(0, "ns/op")
}

func (l boundLatencies) add(o boundLatencies) boundLatencies {
	return boundLatencies{rgs: slices.Concat(l.rgs, o.rgs), watch: slices.Concat(l.watch, o.watch), wall: l.wall + o.wall}
}

// bindAndWait binds pods from binders goroutines, each waiting gap between
// its calls, then waits until RGS has allocated and the watch has seen
// every one of them bound.
func bindAndWait(b *testing.B, sink *allocSink, w *podWatch, pods []corev1.Pod, binders int, gap time.Duration, bind func(*corev1.Pod, int) error) boundLatencies {
	b.Helper()
	ctx := context.Background()
	boundAt := make([]time.Time, len(pods))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, binders)
	began := time.Now()
	for range binders {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(pods) {
					return
				}
				if k >= binders && gap > 0 {
					time.Sleep(gap)
				}
				boundAt[k] = time.Now()
				if err := bind(&pods[k], k); err != nil {
					errs <- fmt.Errorf("bind %s: %w", pods[k].Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(began)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	done := func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range pods {
			if _, ok := sink.at[p.Name]; !ok {
				return false
			}
			if _, ok := w.bound[p.Name]; !ok {
				return false
			}
		}
		return true
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, boundWithin, true, func(context.Context) (bool, error) {
		return done(), nil
	}); err != nil {
		b.Fatalf("%d bound pods not all allocated and seen within %v", len(pods), boundWithin)
	}
	out := boundLatencies{wall: wall}
	sink.mu.Lock()
	w.mu.Lock()
	for k, p := range pods {
		out.rgs = append(out.rgs, sink.at[p.Name].Sub(boundAt[k]))
		out.watch = append(out.watch, w.bound[p.Name].Sub(boundAt[k]))
	}
	w.mu.Unlock()
	sink.mu.Unlock()
	return out
}

// createNode registers a Node object as a kubelet would, ready, with room
// for the benchmark's pods; no kubelet ever heartbeats for it.
func createNode(b *testing.B, client kubernetes.Interface, name, ip string) {
	b.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	n.Status = corev1.NodeStatus{
		Capacity:    room,
		Allocatable: room,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: name},
		},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// nodeLister is rgs/nodes' Lister with its informers running, as knit-rm
// starts it.
type nodeLister struct {
	l     *nodes.Lister
	close chan struct{}
}

// startNodeLister starts the Lister on podFactory's pod informer (nil: one
// of its own).
func startNodeLister(b *testing.B, client kubernetes.Interface, podFactory informers.SharedInformerFactory) *nodeLister {
	b.Helper()
	if podFactory == nil {
		podFactory = rgs.NewPodInformerFactory(client, "")
	}
	l, nodeFactory, err := nodes.New(client, podFactory, nodes.Config{NMPort: 8041, NMWebPort: 8042})
	if err != nil {
		b.Fatal(err)
	}
	nl := &nodeLister{l: l, close: make(chan struct{})}
	for _, f := range []informers.SharedInformerFactory{nodeFactory, podFactory} {
		f.Start(nl.close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	return nl
}

func (n *nodeLister) stop() { close(n.close) }

// Sizes of BenchmarkAllocateWith10000OutstandingAsks.
const (
	allocPriorities = 100
	allocNames      = 100 // per priority: allocHosts hosts, one rack, "*"
	allocHosts      = allocNames - 2
	allocFullCalls  = 10  // allocate calls carrying every ask, per scheduler
	allocSmallCalls = 200 // allocate calls carrying one ask or none, per scheduler
	allocPacedCalls = 40  // allocate calls carrying one ask, allocPacedGap apart
	allocPacedGap   = 50 * time.Millisecond
	allocMapPasses  = 200 // passes of the map baseline
)

// noopScheduler is an rm.Scheduler that does nothing.
type noopScheduler struct{}

func (noopScheduler) Ask(scheduling.AttemptSpec, []*yarnpb.ResourceRequestProto) {}
func (noopScheduler) Blacklist(scheduling.AttemptSpec, []string, []string)       {}
func (noopScheduler) ForgetAttempt(yarnid.AttemptID)                             {}
func (noopScheduler) DeleteContainer(yarnid.ContainerID)                         {}
func (noopScheduler) RemoveApplication(yarnid.ApplicationID)                     {}
func (noopScheduler) CurrentContainer(yarnid.ContainerID) (scheduling.Current, bool) {
	return scheduling.Current{}, false
}
func (noopScheduler) UpdateContainer(context.Context, scheduling.Update) (*yarnpb.ContainerProto, error) {
	return nil, nil
}

// allocAsks are the AM's 10,000 outstanding asks: allocPriorities
// priorities, each with allocHosts host asks, a rack ask and the "*" ask,
// one container per priority (host asks of 1 overlap, as a MapReduce AM's
// do: each map names three hosts). RGS keeps one pending pod per priority.
func allocAsks() []*yarnpb.ResourceRequestProto {
	var asks []*yarnpb.ResourceRequestProto
	for p := range int32(allocPriorities) {
		for h := range allocHosts {
			asks = append(asks, benchAsk(p+1, fmt.Sprintf("bench-host-%03d", h), 1))
		}
		asks = append(asks, benchAsk(p+1, "/default-rack", 1), benchAsk(p+1, "*", 1))
	}
	return asks
}

// allocRM is a ResourceManager serving the client protocol (SIMPLE) and
// ApplicationMasterProtocol (AMRMToken), with one unmanaged AM registered.
type allocRM struct {
	rm         *rm.ResourceManager
	am         *ipc.Client
	responseID int32
	stops      []func()
}

func (a *allocRM) stop() {
	_ = a.am.Close()
	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
}

// startAllocRM builds a ResourceManager as knit-rm does (queues, tokens,
// the node Lister), with sched as its Scheduler, serves it on loopback,
// submits an unmanaged AM and registers it.
func startAllocRM(b *testing.B, ns string, lister *nodes.Lister, sched rm.Scheduler, tm *tokens.Manager) *allocRM {
	b.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range map[string]string{
		"yarn.scheduler.capacity.root.queues":           "default",
		"yarn.scheduler.capacity.root.default.capacity": "100",
	} {
		c.Set(k, v)
	}
	r := newRM(b, c, queues.Options{DefaultNamespace: ns, AdminACL: acl.Parse("*")},
		rm.Config{Tokens: tm, Nodes: lister, Scheduler: sched})
	a := &allocRM{rm: r}
	clientSrv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Register(clientSrv); err != nil {
		b.Fatal(err)
	}
	clientAddr, stopClient := serveIPC(b, clientSrv)
	a.stops = append(a.stops, stopClient)
	amSrv, err := ipc.NewServer(ipc.Config{Tokens: tm.AMRM().SecretLookup(), IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.RegisterAM(amSrv); err != nil {
		b.Fatal(err)
	}
	amAddr, stopAM := serveIPC(b, amSrv)
	a.stops = append(a.stops, stopAM)

	yc, err := ipc.NewClient(clientAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "bench", MaxIdleTime: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer yc.Close()
	a.am, _, _ = startUnmanagedAM(b, yc, amAddr, "bench-am", "default")
	return a
}

// startUnmanagedAM submits an unmanaged AM named name to queue through yc
// (submitUnmanagedAM) and registers it over ApplicationMasterProtocol at
// amAddr with its token (SASL DIGEST-MD5). It returns the registered
// AM's client, its token and the application's id.
func startUnmanagedAM(b *testing.B, yc *ipc.Client, amAddr, name, queue string) (*ipc.Client, *commonpb.TokenProto, *yarnpb.ApplicationIdProto) {
	b.Helper()
	token, app := submitUnmanagedAM(b, yc, name, queue)
	am, err := ipc.NewClient(amAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: token, MaxIdleTime: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	req := &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String(name), RpcPort: proto.Int32(-1), TrackingUrl: proto.String("")}
	if err := am.Call(context.Background(), "registerApplicationMaster", req, &yarnpb.RegisterApplicationMasterResponseProto{}); err != nil {
		b.Fatal(err)
	}
	return am, token, app
}

// submitUnmanagedAM submits an unmanaged AM named name to queue through yc
// (as yc's user) and reads its AMRMToken from the application's report as
// its submitter may. It returns the token and the application's id.
func submitUnmanagedAM(b *testing.B, yc *ipc.Client, name, queue string) (*commonpb.TokenProto, *yarnpb.ApplicationIdProto) {
	b.Helper()
	ctx := context.Background()
	var na yarnpb.GetNewApplicationResponseProto
	if err := yc.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &na); err != nil {
		b.Fatal(err)
	}
	if err := yc.Call(ctx, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   na.GetApplicationId(),
		ApplicationName: proto.String(name),
		Queue:           proto.String(queue),
		UnmanagedAm:     proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}, &yarnpb.SubmitApplicationResponseProto{}); err != nil {
		b.Fatal(err)
	}
	var token *commonpb.TokenProto
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var rep yarnpb.GetApplicationReportResponseProto
		if err := yc.Call(ctx, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: na.GetApplicationId()}, &rep); err != nil {
			return false, err
		}
		token = rep.GetApplicationReport().GetAmRmToken()
		return token != nil, nil
	})
	if err != nil {
		b.Fatalf("AMRMToken of the unmanaged AM: %v", err)
	}
	return token, na.GetApplicationId()
}

// allocate makes one heartbeat with asks and returns its duration as the
// AM sees it.
func (a *allocRM) allocate(b *testing.B, asks []*yarnpb.ResourceRequestProto) time.Duration {
	b.Helper()
	req := &yarnpb.AllocateRequestProto{
		Ask: asks, ResponseId: proto.Int32(a.responseID),
		BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{}, Progress: proto.Float32(0.1),
	}
	var resp yarnpb.AllocateResponseProto
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	if err := a.am.Call(ctx, "allocate", req, &resp); err != nil {
		b.Fatal(err)
	}
	took := time.Since(began)
	a.responseID = resp.GetResponseId()
	return took
}

// allocTimes are the mean durations of the kinds of heartbeat.
type allocTimes struct{ full, one, onePaced, empty time.Duration }

// measure runs the heartbeats: allocFullCalls re-stating every ask (as
// AMRMClient does after a resync, or an AM on the heartbeat that first
// states them), allocSmallCalls changing one host ask (1 ↔ 2 on the last
// host of the last priority, which changes no pending pod) back to back,
// allocPacedCalls changing it allocPacedGap apart (time for any background
// work the previous call started to finish), then allocSmallCalls with no
// ask.
func (a *allocRM) measure(b *testing.B, asks []*yarnpb.ResourceRequestProto) allocTimes {
	b.Helper()
	var t allocTimes
	for range allocFullCalls {
		t.full += a.allocate(b, asks)
	}
	t.full /= allocFullCalls
	last := asks[len(asks)-3] // bench-host-097 at the last priority
	n := 0
	oneAsk := func() []*yarnpb.ResourceRequestProto {
		n++
		one := proto.CloneOf(last)
		one.NumContainers = proto.Int32(int32(1 + n%2))
		return []*yarnpb.ResourceRequestProto{one}
	}
	for range allocSmallCalls {
		t.one += a.allocate(b, oneAsk())
	}
	t.one /= allocSmallCalls
	for range allocPacedCalls {
		time.Sleep(allocPacedGap)
		t.onePaced += a.allocate(b, oneAsk())
	}
	t.onePaced /= allocPacedCalls
	for range allocSmallCalls {
		t.empty += a.allocate(b, nil)
	}
	t.empty /= allocSmallCalls
	return t
}

// BenchmarkAllocateWith10000OutstandingAsks measures the RM's allocate
// handling with 10,000 outstanding asks (allocAsks: 100 priorities × 100
// resource names), end to end over Knit's Hadoop RPC: an unmanaged AM
// authenticated with its AMRMToken (SASL DIGEST-MD5) calls allocate on a
// real ResourceManager (in-memory store, rm/tokens, rgs/nodes' Lister) whose
// Scheduler is the real RGS controller over a real control plane (it keeps
// the 100 pending pods the asks resolve to), against the same RM with a
// Scheduler that does nothing. Per RM, after one allocate stating all the
// asks (and, for RGS, once its 100 pods exist), the AM calls allocate (see
// allocRM.measure): full re-states all 10,000 asks, one changes one ask
// back to back, onepaced changes one ask allocPacedGap apart, empty carries
// none. Each metric is the mean time of one call as the AM sees it:
// marshalling, loopback, the RM's checks and normalisation, Scheduler.Ask,
// the answer. Scheduler.Ask in RGS records the asks under the controller's
// lock and queues a reconcile; the reconcile (desired pods over all 10,000
// keys) runs on a worker after the call has returned, holding the same
// lock, so a back-to-back call waits for the previous call's reconcile:
// one-rgs is in effect the reconcile's cost per heartbeat, onepaced-rgs the
// call alone. ns/op is the full heartbeat with RGS. The baseline in the
// same run is a Go map update of the same 10,000 keys (priority, name) →
// count, the least any bookkeeping could cost; the ratios are the full
// heartbeat over it and RGS over the no-op Scheduler.
func BenchmarkAllocateWith10000OutstandingAsks(b *testing.B) {
	ctx := context.Background()
	env := startKube(b)
	defer env.stop(b)
	ns := env.namespace(b)
	lister := startNodeLister(b, env.client, nil)
	defer lister.stop()
	asks := allocAsks()
	var noop, withRGS allocTimes
	var mapPass time.Duration
	for range b.N {
		// The no-op Scheduler first, before any RGS work exists.
		tm, err := activeTokens(ctx)
		if err != nil {
			b.Fatal(err)
		}
		a := startAllocRM(b, ns, lister.l, noopScheduler{}, tm)
		a.allocate(b, asks)
		noop = a.measure(b, asks)
		a.stop()

		tm, err = activeTokens(ctx)
		if err != nil {
			b.Fatal(err)
		}
		client, err := env.newClient()
		if err != nil {
			b.Fatal(err)
		}
		c, err := rgs.New(rgs.Config{
			Client: client, Signer: tm.ContainerTokens(), Nodes: lister.l, Launcher: benchLauncher,
			CreateQPS: kubeQPS, CreateBurst: kubeBurst, CreateConcurrency: createConcurrency, Logger: quiet,
		})
		if err != nil {
			b.Fatal(err)
		}
		a = startAllocRM(b, ns, lister.l, c, tm)
		if _, err := c.Start(ctx, rgs.StartConfig{Epoch: 1, Sink: a.rm.SchedulerSink(), Mapping: a.rm.QueueMapping}); err != nil {
			b.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- c.Run(runCtx) }()
		a.allocate(b, asks)
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == allocPriorities, nil
		})
		if err != nil {
			b.Fatalf("RGS's pending pods: %v", err)
		}
		withRGS = a.measure(b, asks)
		a.stop()
		cancel()
		<-ran
		b.StopTimer()
		env.clearPods(b, ns)
		b.StartTimer()

		mapPass = mapBaseline(asks)
	}
	req := &yarnpb.AllocateRequestProto{Ask: asks}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(float64(withRGS.full.Nanoseconds()), "ns/op")
	b.ReportMetric(us(withRGS.full), "full-rgs-µs")
	b.ReportMetric(us(noop.full), "full-noop-µs")
	b.ReportMetric(us(withRGS.one), "one-rgs-µs")
	b.ReportMetric(us(noop.one), "one-noop-µs")
	b.ReportMetric(us(withRGS.onePaced), "onepaced-rgs-µs")
	b.ReportMetric(us(noop.onePaced), "onepaced-noop-µs")
	b.ReportMetric(us(withRGS.empty), "empty-rgs-µs")
	b.ReportMetric(us(noop.empty), "empty-noop-µs")
	b.ReportMetric(us(mapPass), "map10k-µs")
	b.ReportMetric(float64(withRGS.full)/float64(mapPass), "full-rgs/map10k")
	b.ReportMetric(float64(withRGS.full)/float64(noop.full), "full-rgs/noop")
	b.ReportMetric(float64(withRGS.one)/float64(noop.one), "one-rgs/noop")
	b.ReportMetric(float64(withRGS.onePaced)/float64(noop.onePaced), "onepaced-rgs/noop")
	b.ReportMetric(float64(proto.Size(req))/1024, "full-req-KiB")
}

// mapKey is an ask's key in the map baseline.
type mapKey struct {
	priority int32
	name     string
}

// mapBaseline is the mean time of setting all the asks' counts in a Go map
// keyed by (priority, resource name), the map already holding every key.
func mapBaseline(asks []*yarnpb.ResourceRequestProto) time.Duration {
	m := make(map[mapKey]int32, len(asks))
	keys := make([]mapKey, len(asks))
	for i, r := range asks {
		keys[i] = mapKey{r.GetPriority().GetPriority(), r.GetResourceName()}
		m[keys[i]] = r.GetNumContainers()
	}
	began := time.Now()
	for pass := range allocMapPasses {
		for i, k := range keys {
			m[k] = int32(pass + i)
		}
	}
	return time.Since(began) / allocMapPasses
}

// Sizes of BenchmarkRGSHeapPerPod.
const (
	heapPods = 5000
	// heapScale is the number of pods known, which the benchmark
	// extrapolates to (this machine's API server cannot hold that many).
	heapScale = 100_000
)

// BenchmarkRGSHeapPerPod measures the RM's memory per pod it knows:
// heapPods pending Knit pods (built by rgs.BuildPod, one application) are
// created, then the live heap (after two collections) is read around
// starting, in turn, a plain client-go informer over the same pods (the
// baseline: the pods' cache alone, with RGS's label selector), the RGS
// controller (its informer, without managed fields, and the books and
// pending-pod entries Start rebuilds from the pods; Run then handles every
// pod's event), and rgs/nodes' Lister on the same pod informer, as knit-rm
// shares it. The plain informer is stopped before RGS starts. It reports bytes per
// pod of each, rgs/informer, and the MiB RGS and the Lister together would
// hold at heapScale pods if memory grows linearly.
func BenchmarkRGSHeapPerPod(b *testing.B) {
	env := startKube(b)
	defer env.stop(b)
	ns := env.namespace(b)
	spec := benchSpec(1, ns)
	ask := benchAsk(1, "*", heapPods)
	pods := make([]*corev1.Pod, heapPods)
	for i := range pods {
		var err error
		pods[i], err = rgs.BuildPod(rgs.PodRequest{
			Name: fmt.Sprintf("app-%d-0001-01-task-%08d", clusterTimestamp, i), App: spec.Attempt.App.String(),
			Attempt: spec.Attempt.ID, Role: spec.Role, Queue: spec.Queue, User: spec.User, Ask: ask,
			Mapping: benchMapping(ns), Launcher: benchLauncher, AskHash: "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	createDirect(b, env.client, ns, pods)
	pods = nil

	var informerPerPod, rgsPerPod, listerPerPod float64
	for range b.N {
		client, err := env.newClient()
		if err != nil {
			b.Fatal(err)
		}
		informerPerPod = informerHeap(b, client) / heapPods
		time.Sleep(200 * time.Millisecond) // the informer's goroutines end
		h0 := heapInUse()
		podFactory := rgs.NewPodInformerFactory(client, "")
		r := startRGS(b, rgs.Config{Client: client, Signer: noNodes{}, Nodes: noNodes{}, Launcher: benchLauncher, PodFactory: podFactory}, nullSink{}, ns)
		time.Sleep(time.Second) // Run's workers handle the pods' events
		h1 := heapInUse()
		lister := startNodeLister(b, client, podFactory)
		h2 := heapInUse()
		lister.stop()
		r.stop()
		rgsPerPod = (float64(h1) - float64(h0)) / heapPods
		listerPerPod = (float64(h2) - float64(h1)) / heapPods
	}
	b.ReportMetric(informerPerPod, "informer-B/pod")
	b.ReportMetric(rgsPerPod, "rgs-B/pod")
	b.ReportMetric(listerPerPod, "lister-B/pod")
	b.ReportMetric(rgsPerPod/informerPerPod, "rgs/informer")
	b.ReportMetric((rgsPerPod+listerPerPod)*heapScale/(1<<20), "rgs+lister-MiB@100k")
	b.ReportMetric(0, "ns/op")
}

// informerHeap is the heap a plain informer over the Knit pods holds once
// synced; it is stopped on return.
func informerHeap(b *testing.B, client kubernetes.Interface) float64 {
	b.Helper()
	before := heapInUse()
	stop := make(chan struct{})
	defer close(stop)
	lw := cache.NewFilteredListWatchFromClient(client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = launch.LabelApplication })
	store, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{}, Handler: cache.ResourceEventHandlerFuncs{},
	})
	go inf.Run(stop)
	if !cache.WaitForCacheSync(b.Context().Done(), inf.HasSynced) {
		b.Fatal("informer not synced")
	}
	if n := len(store.ListKeys()); n != heapPods {
		b.Fatalf("informer holds %d pods, want %d", n, heapPods)
	}
	return float64(heapInUse()) - float64(before)
}
