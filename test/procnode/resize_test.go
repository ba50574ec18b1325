package procnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// res builds a resource list from name/quantity pairs.
func res(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// sized is a pod whose containers request (and are limited to) the given
// lists, one container each.
func sized(name string, lists ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 2}}
	for i, l := range lists {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: "c" + string(rune('0'+i)), Resources: corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}})
	}
	return p
}

func TestDecideResize(t *testing.T) {
	t.Parallel()
	node := res("cpu", "8", "memory", "16Gi", "pods", "3", "example.com/fpga", "2")
	others := []*corev1.Pod{
		sized("a", res("cpu", "4", "memory", "4Gi")),
		sized("b", res("cpu", "2", "example.com/fpga", "1")),
	}
	cases := []struct {
		name    string
		desired *corev1.Pod
		others  []*corev1.Pod
		want    resizeDecision
	}{
		{"fits beside the others", sized("p", res("cpu", "2", "memory", "1Gi")), others,
			resizeDecision{Outcome: resizeAccepted, Generation: 2}},
		{"exactly fills the room", sized("p", res("cpu", "1", "memory", "6Gi"), res("cpu", "1", "memory", "6Gi")), others,
			resizeDecision{Outcome: resizeAccepted, Generation: 2}},
		{"cpu over allocatable", sized("p", res("cpu", "9")), nil,
			resizeDecision{Outcome: resizeInfeasible, Generation: 2,
				Message: "Node didn't have enough capacity: cpu, requested: 9000, capacity: 8000"}},
		{"memory over allocatable wins over cpu", sized("p", res("cpu", "9"), res("memory", "17Gi")), nil,
			resizeDecision{Outcome: resizeInfeasible, Generation: 2,
				Message: "Node didn't have enough capacity: memory, requested: 18253611008, capacity: 17179869184"}},
		{"cpu over the free room", sized("p", res("cpu", "3")), others,
			resizeDecision{Outcome: resizeDeferred, Generation: 2,
				Message: "Node didn't have enough resource: cpu, requested: 3000, used: 6000, capacity: 8000"}},
		{"memory over the free room", sized("p", res("memory", "13Gi")), others,
			resizeDecision{Outcome: resizeDeferred, Generation: 2,
				Message: "Node didn't have enough resource: memory, requested: 13958643712, used: 4294967296, capacity: 17179869184"}},
		{"advertised extended resource used up", sized("p", res("cpu", "1", "example.com/fpga", "2")), others,
			resizeDecision{Outcome: resizeDeferred, Generation: 2,
				Message: "Node didn't have enough resource: example.com/fpga, requested: 2, used: 1, capacity: 2"}},
		{"extended resource the node does not advertise is not counted", sized("p", res("cpu", "1", "yarn.io/gpu", "4")), others,
			resizeDecision{Outcome: resizeAccepted, Generation: 2}},
		{"no pod slot left", sized("p", res("cpu", "1")), append(others, sized("c")),
			resizeDecision{Outcome: resizeDeferred, Generation: 2,
				Message: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"}},
		// The same resize once pod a has ended: the room it held is free.
		{"deferred fits once another pod ended", sized("p", res("cpu", "3")), others[1:],
			resizeDecision{Outcome: resizeAccepted, Generation: 2}},
	}
	for _, tc := range cases {
		if got := decideResize(tc.desired, tc.others, node); got != tc.want {
			t.Errorf("%s: decideResize = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPodRequests(t *testing.T) {
	t.Parallel()
	sidecar := func(name string, l corev1.ResourceList) corev1.Container {
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: l}}
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return c
	}
	initC := func(name string, l corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: l}}
	}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		inits []corev1.Container
		level corev1.ResourceList // pod-level requests
		over  corev1.ResourceList // overhead
		want  corev1.ResourceList
	}{
		{"containers add up", sized("p", res("cpu", "1", "memory", "1Gi"), res("cpu", "500m")), nil, nil, nil,
			res("cpu", "1500m", "memory", "1Gi")},
		{"a big init container sets the floor", sized("p", res("cpu", "1")),
			[]corev1.Container{initC("i", res("cpu", "3"))}, nil, nil, res("cpu", "3")},
		{"sidecars add up and count for later init containers", sized("p", res("cpu", "1")),
			[]corev1.Container{sidecar("s", res("cpu", "1")), initC("i", res("cpu", "3"))}, nil, nil, res("cpu", "4")},
		{"a small init container changes nothing", sized("p", res("cpu", "1")),
			[]corev1.Container{sidecar("s", res("cpu", "1")), initC("i", res("cpu", "100m"))}, nil, nil, res("cpu", "2")},
		{"pod-level requests replace the sum", sized("p", res("cpu", "1", "memory", "1Gi")), nil,
			res("cpu", "3"), nil, res("cpu", "3", "memory", "1Gi")},
		{"overhead is added", sized("p", res("cpu", "1")), nil, nil, res("cpu", "250m", "memory", "64Mi"),
			res("cpu", "1250m", "memory", "64Mi")},
	}
	for _, tc := range cases {
		tc.pod.Spec.InitContainers = tc.inits
		tc.pod.Spec.Overhead = tc.over
		if tc.level != nil {
			tc.pod.Spec.Resources = &corev1.ResourceRequirements{Requests: tc.level}
		}
		if got := podRequests(tc.pod); !apiequality.Semantic.DeepEqual(got, tc.want) {
			t.Errorf("%s: podRequests = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAllocationApply(t *testing.T) {
	t.Parallel()
	pod := sized("p", res("cpu", "1"), res("cpu", "2"))
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "init", Resources: corev1.ResourceRequirements{Requests: res("cpu", "5")}},
		{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: res("cpu", "1")}},
	}
	alloc := allocationFromSpec(pod)
	if len(alloc) != 3 || alloc["init"].Requests != nil {
		t.Errorf("allocation covers %v, want c0, c1 and the sidecar only", alloc)
	}
	if got, changed := alloc.applyTo(pod); changed || got != pod {
		t.Error("the spec's own allocation changed the pod")
	}

	// A resize of c1: the running pod keeps c1's old allocation.
	resized := pod.DeepCopy()
	resized.Spec.Containers[1].Resources = corev1.ResourceRequirements{Requests: res("cpu", "3"), Limits: res("cpu", "3")}
	got, changed := alloc.applyTo(resized)
	if !changed || got == resized {
		t.Fatal("a pending resize went unnoticed")
	}
	if q := got.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU]; q.String() != "2" {
		t.Errorf("c1 runs with cpu %s, want its allocated 2", q.String())
	}
	if q := resized.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU]; q.String() != "3" {
		t.Error("applyTo modified its argument")
	}
	if r := alloc.resourcesOf(&pod.Spec.InitContainers[0]); r.Requests.Cpu().String() != "5" {
		t.Errorf("a regular init container reports %v, want its spec", r)
	}
	if r := podAllocation(nil).resourcesOf(&resized.Spec.Containers[1]); r.Requests.Cpu().String() != "3" {
		t.Errorf("without an allocation the spec is reported, got %v", r)
	}

	// A status written before the node kept allocations seeds one.
	resized.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c1",
		Resources: &corev1.ResourceRequirements{Requests: res("cpu", "2"), Limits: res("cpu", "2")}}}
	seeded := seedAllocation(resized)
	if q := seeded["c1"].Requests[corev1.ResourceCPU]; q.String() != "2" {
		t.Errorf("seeded c1 = %v, want the status' cpu 2", seeded["c1"])
	}
	if q := seeded["c0"].Requests[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("seeded c0 = %v, want its spec", seeded["c0"])
	}
}

func TestComputePodStatusResources(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	long := metav1.NewTime(now.Add(-time.Hour))
	pod := planTestPod(corev1.RestartPolicyAlways, nil, []string{"a", "b"})
	pod.Generation = 4
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res("cpu", "2"), Limits: res("cpu", "2")}
	alloc := podAllocation{"a": {Requests: res("cpu", "1"), Limits: res("cpu", "1")}, "b": {}}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
			Message: "older", ObservedGeneration: 3, LastTransitionTime: long, LastProbeTime: long},
		{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue},
	}
	deferred := &resizeDecision{Outcome: resizeDeferred, Message: "no room", Generation: 4}
	in := statusInput{Pod: pod, Now: now, Address: "127.0.1.1", SandboxReady: true,
		Obs: map[string]containerObs{"a": {Latest: running(0, "img")}}, Allocated: alloc, ResizePending: deferred}
	s := computePodStatus(in)

	a, b := s.ContainerStatuses[0], s.ContainerStatuses[1]
	if a.Resources == nil || !apiequality.Semantic.DeepEqual(*a.Resources, alloc["a"]) ||
		!apiequality.Semantic.DeepEqual(a.AllocatedResources, res("cpu", "1")) {
		t.Errorf("a reports resources %v, allocated %v; want its allocation", a.Resources, a.AllocatedResources)
	}
	if b.Resources != nil || b.AllocatedResources != nil {
		t.Errorf("b never ran, yet reports resources %v, allocated %v", b.Resources, b.AllocatedResources)
	}
	if condition(s, corev1.PodResizeInProgress) != nil {
		t.Error("PodResizeInProgress kept: nothing is ever in progress on a process node")
	}
	c := condition(s, corev1.PodResizePending)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonDeferred || c.Message != "no room" ||
		c.ObservedGeneration != 4 || !c.LastTransitionTime.Equal(&long) || !c.LastProbeTime.Time.Equal(now) {
		t.Errorf("PodResizePending = %+v, want Deferred since long ago, probed now, generation 4", c)
	}

	// Infeasible now: a new transition.
	in.ResizePending = &resizeDecision{Outcome: resizeInfeasible, Message: "too big", Generation: 4}
	if c := condition(computePodStatus(in), corev1.PodResizePending); c == nil || c.Reason != corev1.PodReasonInfeasible ||
		!c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("PodResizePending = %+v, want Infeasible from now", c)
	}

	// Accepted, or the pod ended: no resize condition left.
	in.ResizePending = nil
	if c := condition(computePodStatus(in), corev1.PodResizePending); c != nil {
		t.Errorf("accepted resize still pending: %+v", c)
	}
	in.ResizePending, in.Terminal = deferred, true
	if c := condition(computePodStatus(in), corev1.PodResizePending); c != nil {
		t.Errorf("terminal pod keeps a resize condition: %+v", c)
	}
}

// withResources gives a container requests = limits.
func withResources(c corev1.Container, l corev1.ResourceList) corev1.Container {
	c.Resources = corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	return c
}

// TestResizeDeferredUntilAnotherPodEnds runs the resize flow on real
// processes against the fake clientset, which neither validates a resize
// nor bumps generations: the spec is updated in place.
func TestResizeDeferredUntilAnotherPodEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := fakeClient()
	runNode(t, c, t.TempDir(), func(cfg *Config) { cfg.Capacity = res("cpu", "2") })
	done := filepath.Join(t.TempDir(), "done")

	createPod(t, c, boundPod("big", corev1.RestartPolicyAlways, withResources(sh("main", "sleep 1000"), res("cpu", "1", "memory", "100Mi"))))
	short := boundPod("short", corev1.RestartPolicyNever,
		withResources(sh("main", `while [ ! -e "$DONE" ]; do sleep 0.05; done`), res("cpu", "500m")))
	short.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DONE", Value: done}}
	createPod(t, c, short)
	createPod(t, c, boundPod("small", corev1.RestartPolicyAlways, withResources(sh("main", "sleep 1000"), res("cpu", "200m"))))
	for _, name := range []string{"big", "short", "small"} {
		waitPod(t, c, name, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	got := waitPod(t, c, "big", "resources reported", func(p *corev1.Pod) bool {
		return containerStatusOf(p, "main").Resources != nil
	})
	if st := containerStatusOf(got, "main"); !apiequality.Semantic.DeepEqual(*st.Resources, got.Spec.Containers[0].Resources) ||
		!apiequality.Semantic.DeepEqual(st.AllocatedResources, got.Spec.Containers[0].Resources.Requests) {
		t.Errorf("at start: resources %v, allocated %v; want the spec's", st.Resources, st.AllocatedResources)
	}

	resize := func(cpu string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := c.CoreV1().Pods("default").Get(ctx, "big", metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Spec.Containers[0] = withResources(p.Spec.Containers[0], res("cpu", cpu, "memory", "100Mi"))
			_, err = c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	allocatedCPU := func(p *corev1.Pod) string {
		q := containerStatusOf(p, "main").AllocatedResources[corev1.ResourceCPU]
		return q.String()
	}
	pending := func(reason string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			c := condition(p.Status, corev1.PodResizePending)
			return c != nil && c.Reason == reason
		}
	}

	// 1500m does not fit beside short and small (700m of 2000m).
	resize("1500m")
	got = waitPod(t, c, "big", "resize deferred", pending(corev1.PodReasonDeferred))
	if msg := condition(got.Status, corev1.PodResizePending).Message; msg != "Node didn't have enough resource: cpu, requested: 1500, used: 700, capacity: 2000" {
		t.Errorf("deferred message = %q", msg)
	}
	if cpu := allocatedCPU(got); cpu != "1" {
		t.Errorf("deferred resize allocated cpu %s", cpu)
	}

	// short ends: the room it held is free, the resize goes through.
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, "short", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	got = waitPod(t, c, "big", "deferred resize accepted", func(p *corev1.Pod) bool {
		return condition(p.Status, corev1.PodResizePending) == nil && allocatedCPU(p) == "1500m"
	})
	if r := containerStatusOf(got, "main").Resources; r == nil || r.Limits.Cpu().String() != "1500m" {
		t.Errorf("resources after the resize = %v", r)
	}

	// More than the node has is infeasible, whatever ends.
	resize("3")
	got = waitPod(t, c, "big", "resize infeasible", pending(corev1.PodReasonInfeasible))
	if msg := condition(got.Status, corev1.PodResizePending).Message; msg != "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" {
		t.Errorf("infeasible message = %q", msg)
	}
	if cpu := allocatedCPU(got); cpu != "1500m" {
		t.Errorf("infeasible resize allocated cpu %s", cpu)
	}

	// Back within reach: accepted, the condition goes.
	resize("1")
	waitPod(t, c, "big", "resize back down accepted", func(p *corev1.Pod) bool {
		return condition(p.Status, corev1.PodResizePending) == nil && allocatedCPU(p) == "1"
	})
}
