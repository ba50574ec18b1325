package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/test/controlplane"
	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/procnode"
)

func TestMain(m *testing.M) {
	// Pods on process nodes run under a shim that is this test binary.
	procnode.RunShimIfRequested()
	// The web proxy's benchmark runs the AM and the proxy as this test
	// binary too.
	runWebPartyIfRequested()
	// BenchmarkRMCallsVersusNoOp's load generator is this test binary too.
	runRPCLoadIfRequested()
	// BenchmarkFederationVersusDirectRM's hops of their own too.
	runFedHopsIfRequested()
	os.Exit(m.Run())
}

// BenchmarkControlPlaneStart measures a cold start (a new, empty folder:
// certificates, etcd bootstrap, RBAC bootstrap, service accounts) and a warm
// start (the same folder again), each until the API server is ready and the
// default service account exists. It reports both and warm/cold.
func BenchmarkControlPlaneStart(b *testing.B) {
	ctx := context.Background()
	var cold, warm time.Duration
	for range b.N {
		dir := b.TempDir()
		began := time.Now()
		cp, err := controlplane.Start(ctx, controlplane.Config{Dir: dir, Keep: true})
		if err != nil {
			b.Fatal(err)
		}
		cold += time.Since(began)
		if err := cp.Stop(); err != nil {
			b.Fatal(err)
		}
		began = time.Now()
		cp, err = controlplane.Start(ctx, controlplane.Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		warm += time.Since(began)
		if err := cp.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(cold.Seconds()/float64(b.N), "cold-s")
	b.ReportMetric(warm.Seconds()/float64(b.N), "warm-s")
	b.ReportMetric(warm.Seconds()/cold.Seconds(), "warm/cold")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPodsRunningVersusBound creates pods on a cluster of process nodes
// and reports, from one watch over the same pods, how many per second the
// scheduler bound (the baseline: the control plane alone) and how many per
// second reached Running (binding plus the process nodes starting them).
func BenchmarkPodsRunningVersusBound(b *testing.B) {
	const nodes, pods = 4, 200
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: nodes})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	var boundRate, runningRate float64
	for range b.N {
		ns := "bench-" + rand.String(6)
		if err := c.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		bound, running, stopWatch := watchPods(ctx, c, ns, pods)
		began := time.Now()
		createPods(b, c, ns, pods)
		lastBound, lastRunning := <-bound, <-running
		stopWatch()
		boundRate += pods / lastBound.Sub(began).Seconds()
		runningRate += pods / lastRunning.Sub(began).Seconds()
		b.StopTimer()
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(boundRate/float64(b.N), "bound-pods/s")
	b.ReportMetric(runningRate/float64(b.N), "running-pods/s")
	b.ReportMetric(runningRate/boundRate, "running/bound")
	b.ReportMetric(0, "ns/op")
}

// createPods creates n long-running pods from a few concurrent clients, as
// RGS does.
func createPods(b *testing.B, c *localcluster.Cluster, ns string, n int) {
	b.Helper()
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%04d", i)},
					Spec: corev1.PodSpec{
						RestartPolicy:                 corev1.RestartPolicyNever,
						TerminationGracePeriodSeconds: ptr.To[int64](1),
						Containers: []corev1.Container{{
							Name: "main", Image: "busybox:1", Command: []string{"sleep", "600"},
						}},
					},
				}
				if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// watchPods reports, on each channel, the moment the n-th pod of ns was
// bound to a node and the moment the n-th reached Running.
// stop ends the watch.
func watchPods(ctx context.Context, c *localcluster.Cluster, ns string, n int) (bound, running <-chan time.Time, stop func()) {
	boundC, runningC := make(chan time.Time, 1), make(chan time.Time, 1)
	var mu sync.Mutex
	seenBound, seenRunning := map[string]bool{}, map[string]bool{}
	observe := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if pod.Spec.NodeName != "" && !seenBound[pod.Name] {
			seenBound[pod.Name] = true
			if len(seenBound) == n {
				boundC <- now
			}
		}
		if pod.Status.Phase == corev1.PodRunning && !seenRunning[pod.Name] {
			seenRunning[pod.Name] = true
			if len(seenRunning) == n {
				runningC <- now
			}
		}
	}
	lw := cache.NewListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, obj any) { observe(obj) },
		},
	})
	done := make(chan struct{})
	go informer.Run(done)
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return boundC, runningC, func() { close(done) }
}
