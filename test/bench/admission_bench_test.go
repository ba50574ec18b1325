package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// admissionScene is 100 leaf queues under root, equal guarantees and
// maximum 100%, on a cluster of 1,000 nodes of 16 GiB and 8 vcores.
func admissionScene(queues int) (admission.Resource, []admission.Queue) {
	qs := []admission.Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}}
	for i := range queues {
		qs = append(qs, admission.Queue{Path: fmt.Sprintf("root.q%03d", i), AbsoluteCapacity: 1 / float64(queues),
			AbsoluteMaximumCapacity: 1, UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1})
	}
	return admission.Resource{MemoryMB: 1000 * 16384, Vcores: 1000 * 8}, qs
}

// pendingPods spreads n gated 2 GiB, 1-vcore pods over the queues, ten
// applications each, with as many admitted as half the cluster holds.
func pendingPods(n, queues int, rng *rand.Rand) []admission.Pod {
	pods := make([]admission.Pod, 0, n+4000)
	for i := range 4000 {
		q := i % queues
		pods = append(pods, admission.Pod{Key: fmt.Sprintf("run-%d", i), Queue: fmt.Sprintf("root.q%03d", q), User: "u",
			App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: int32(q*10 + i%10)}, Resource: admission.Resource{MemoryMB: 2048, Vcores: 1},
			Seq: int64(i), Admitted: true, Running: true})
	}
	for i := range n {
		q := rng.IntN(queues)
		pods = append(pods, admission.Pod{Key: fmt.Sprintf("p-%d", i), Queue: fmt.Sprintf("root.q%03d", q), User: fmt.Sprintf("u%d", rng.IntN(3)),
			App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: int32(q*10 + rng.IntN(10))}, AppPriority: int32(rng.IntN(3)),
			Resource: admission.Resource{MemoryMB: 2048, Vcores: 1}, Seq: int64(4000 + i)})
	}
	return pods
}

// BenchmarkAdmissionPass: one admission pass (rgs/admission.Admit) over
// 10,000 pending pods across 100 queues with 4,000 running, against the
// least any ordering of them costs, a sort of the same pods by creation,
// in the same run. Reports the pass's CPU time (a pass runs at most once a
// second, so it is also the fraction of a core admission takes) and the
// ratio to the sort.
func BenchmarkAdmissionPass(b *testing.B) {
	cluster, queues := admissionScene(100)
	pods := pendingPods(10_000, 100, rand.New(rand.NewPCG(1, 2)))
	snap := admission.Snapshot{Cluster: cluster, Queues: queues, Pods: pods}
	var admitted int
	var pass, sorting time.Duration
	for range b.N {
		start := time.Now()
		admitted = len(admission.Admit(snap))
		pass += time.Since(start)
		start = time.Now()
		sorted := slices.Clone(pods)
		slices.SortFunc(sorted, func(x, y admission.Pod) int { return int(y.Seq - x.Seq) })
		sorting += time.Since(start)
	}
	b.ReportMetric(float64(pass.Microseconds())/float64(b.N)/1000, "pass_ms")
	b.ReportMetric(float64(pass.Microseconds())/float64(b.N)/1e6, "core_fraction_at_1_pass/s")
	b.ReportMetric(float64(pass)/float64(sorting), "pass/sort")
	b.ReportMetric(float64(admitted), "admitted")
}

// BenchmarkAdmissionFairness: four queues (10%, 20%, 30%, 40%) whose
// applications keep asking for more than the cluster (100 containers)
// holds while containers end at random, 500 rounds. After each round it
// measures how far each queue's use is from YARN's ideal share (its
// guarantee, as every queue wants more), as the mean absolute error in
// containers, for Knit's admission and for what the Kubernetes scheduler
// alone would do (first come, first served by creation), in the same
// run. Reports both and the ratio.
func BenchmarkAdmissionFairness(b *testing.B) {
	guarantees := []float64{0.1, 0.2, 0.3, 0.4}
	var qs []admission.Queue
	qs = append(qs, admission.Queue{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1})
	for i, g := range guarantees {
		qs = append(qs, admission.Queue{Path: fmt.Sprintf("root.q%d", i), AbsoluteCapacity: g, AbsoluteMaximumCapacity: 1,
			UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1})
	}
	cluster := admission.Resource{MemoryMB: 100 * 1024, Vcores: 100}
	var knitErr, fifoErr float64
	for range b.N {
		knitErr = churn(qs, cluster, guarantees, true)
		fifoErr = churn(qs, cluster, guarantees, false)
	}
	b.ReportMetric(knitErr, "knit_error_containers")
	b.ReportMetric(fifoErr, "fifo_error_containers")
	b.ReportMetric(knitErr/fifoErr, "knit/fifo")
}

// churn runs the fairness simulation and returns the mean absolute error.
func churn(qs []admission.Queue, cluster admission.Resource, guarantees []float64, knit bool) float64 {
	rng := rand.New(rand.NewPCG(7, 9))
	var pods []admission.Pod
	seq := int64(0)
	// Queue i asks in bursts; a busy queue creates more pods at once, as
	// a big job does, so creation order alone favours it.
	add := func(q, n int) {
		for range n {
			seq++
			pods = append(pods, admission.Pod{Key: fmt.Sprint(seq), Queue: fmt.Sprintf("root.q%d", q), User: "u",
				App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: int32(q)}, Resource: admission.Resource{MemoryMB: 1024, Vcores: 1}, Seq: seq})
		}
	}
	var sum float64
	var samples int
	for round := range 500 {
		for q := range guarantees {
			if pending(pods, q) < 50 {
				add(q, 10*(len(guarantees)-q))
			}
		}
		var admit []string
		if knit {
			admit = admission.Admit(admission.Snapshot{Cluster: cluster, Queues: qs, Pods: pods})
		} else {
			admit = firstComeFirstServed(pods, int(cluster.Vcores))
		}
		set := map[string]bool{}
		for _, k := range admit {
			set[k] = true
		}
		for i := range pods {
			if set[pods[i].Key] {
				pods[i].Admitted, pods[i].Running = true, true
			}
		}
		if round >= 50 {
			for q, g := range guarantees {
				sum += math.Abs(float64(running(pods, q)) - g*float64(cluster.Vcores))
				samples++
			}
		}
		// A tenth of the running containers end.
		kept := pods[:0]
		for _, p := range pods {
			if p.Running && rng.IntN(10) == 0 {
				continue
			}
			kept = append(kept, p)
		}
		pods = kept
	}
	return sum / float64(samples)
}

func pending(pods []admission.Pod, q int) int {
	n := 0
	for _, p := range pods {
		if !p.Admitted && p.Queue == fmt.Sprintf("root.q%d", q) {
			n++
		}
	}
	return n
}

func running(pods []admission.Pod, q int) int {
	n := 0
	for _, p := range pods {
		if p.Running && p.Queue == fmt.Sprintf("root.q%d", q) {
			n++
		}
	}
	return n
}

// firstComeFirstServed admits the oldest gated pods while room is left,
// as the Kubernetes scheduler alone places pods in creation order.
func firstComeFirstServed(pods []admission.Pod, slots int) []string {
	used := 0
	for _, p := range pods {
		if p.Admitted {
			used++
		}
	}
	var out []string
	for _, p := range pods {
		if !p.Admitted && used < slots {
			out = append(out, p.Key)
			used++
		}
	}
	return out
}

// admissionPolicy is one queue, root.default, on a cluster of eight 2 GiB
// containers.
type admissionPolicy struct{}

func (admissionPolicy) AdmissionQueues() []admission.Queue {
	return []admission.Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1},
		{Path: "root.default", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1, UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1}}
}
func (admissionPolicy) ClusterResource() admission.Resource {
	return admission.Resource{MemoryMB: 8 * 2048, Vcores: 8}
}
func (admissionPolicy) MinimumAllocation() admission.Resource {
	return admission.Resource{MemoryMB: 1024, Vcores: 1}
}
func (admissionPolicy) AppPriority(yarnid.ApplicationID) int32 { return 0 }
func (admissionPolicy) Preemption() rgs.Preemption             { return rgs.Preemption{} }

// BenchmarkAdmissionLatency: RGS over a fake API server holds a full
// queue (8 of 8) and one pod waiting behind its gate; each round deletes
// an admitted pod (capacity freed) and times until the waiting pod's gate
// is lifted, then creates the next waiting pod and times until RGS's
// informer shows it (pod creation itself, the baseline), 200 rounds.
// Reports both p99s and their ratio.
func BenchmarkAdmissionLatency(b *testing.B) {
	for range b.N {
		freed, created := admissionLatency(b, admissionLatencyRounds)
		b.ReportMetric(float64(quantile(freed, 0.5).Microseconds())/1000, "freed_to_ungated_p50_ms")
		b.ReportMetric(float64(quantile(freed, 0.99).Microseconds())/1000, "freed_to_ungated_p99_ms")
		b.ReportMetric(float64(quantile(created, 0.99).Microseconds())/1000, "create_to_seen_p99_ms")
		b.ReportMetric(float64(quantile(freed, 0.99))/float64(quantile(created, 0.99)), "ungate/create_p99")
	}
}

// admissionLatencyRounds is BenchmarkAdmissionLatency's rounds.
var admissionLatencyRounds = 200

func admissionLatency(b *testing.B, rounds int) (freed, created []time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := rgs.NewPodInformerFactory(client, "")
	c, err := rgs.New(rgs.Config{Client: client, Signer: noNodes{}, Nodes: noNodes{}, PodFactory: factory,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	seen := make(chan string, 16)
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen <- obj.(*podrecord.Pod).Name },
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Start(ctx, rgs.StartConfig{Sink: nullSink{}, Mapping: func(string) rgs.Mapping { return benchMapping("bench") }, Policy: admissionPolicy{}}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	pod := func(i int, gated bool) *corev1.Pod {
		// The fake API server gives no uids; RGS's expectations key on them.
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{launch.LabelApplication: "application_1_0001", launch.LabelAttempt: "1", launch.LabelRole: launch.RoleTask,
				launch.LabelQueue: "root.default", launch.LabelUser: "u"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceCPU: resource.MustParse("1")}}}}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: launch.SchedulingGate}}
		}
		return p
	}
	create := func(p *corev1.Pod) time.Duration {
		start := time.Now()
		if _, err := client.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for name := range seen {
			if name == p.Name {
				break
			}
		}
		return time.Since(start)
	}
	for i := range 8 {
		create(pod(i, false))
	}
	next := 8
	create(pod(next, true))
	admitted := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for range rounds {
		victim := admitted[0]
		admitted = admitted[1:]
		start := time.Now()
		if err := client.CoreV1().Pods("bench").Delete(ctx, fmt.Sprintf("p%d", victim), metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		for {
			p, err := client.CoreV1().Pods("bench").Get(ctx, fmt.Sprintf("p%d", next), metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Spec.SchedulingGates) == 0 {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		freed = append(freed, time.Since(start))
		admitted = append(admitted, next)
		next++
		created = append(created, create(pod(next, true)))
	}
	return freed, created
}
