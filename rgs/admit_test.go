package rgs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rks/launch"
)

// policy is a fixed Policy: two leaves of 25% (max 100%) and 75% (max
// 75%) of a 16 GiB, 8-vcore cluster.
type policy struct {
	priorities map[yarnid.ApplicationID]int32
	preemption Preemption
}

func (policy) AdmissionQueues() []admission.Queue {
	leaf := func(path string, c, m float64) admission.Queue {
		return admission.Queue{Path: path, AbsoluteCapacity: c, AbsoluteMaximumCapacity: m, UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1}
	}
	return []admission.Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}, leaf("root.a", 0.25, 1), leaf("root.b", 0.75, 0.75)}
}

func (policy) ClusterResource() admission.Resource {
	return admission.Resource{MemoryMB: 16384, Vcores: 8}
}

func (policy) MinimumAllocation() admission.Resource {
	return admission.Resource{MemoryMB: 1024, Vcores: 1}
}

func (p policy) AppPriority(app yarnid.ApplicationID) int32 { return p.priorities[app] }

func (p policy) Preemption() Preemption { return p.preemption }

type noSigner struct{}

func (noSigner) Sign(*yarnpb.ContainerProto, string, string, bool, *yarnpb.LogAggregationContextProto) (*commonpb.TokenProto, error) {
	return &commonpb.TokenProto{}, nil
}

type noNodes struct{}

func (noNodes) NodeID(string) (*yarnpb.NodeIdProto, string, bool) { return nil, "", false }
func (noNodes) NodeName(string) (string, bool)                    { return "", false }

// gatedPod is a task pod of application app in queue, 2 GiB and 1 vcore,
// gated unless lifted.
func gatedPod(name, queue string, app int32, lifted bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0).Add(time.Duration(len(name)) * time.Second)),
			Labels: map[string]string{launch.LabelApplication: yarnid.ApplicationID{ClusterTimestamp: 1, ID: app}.String(),
				launch.LabelAttempt: "1", launch.LabelRole: launch.RoleTask, launch.LabelQueue: queue, launch.LabelUser: "u"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName, Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	if !lifted {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "someone-else"}, {Name: launch.SchedulingGate}}
	}
	return p
}

// admitOnce runs one admission pass over pods and returns the pods it
// patched, with each patch.
func admitOnce(t *testing.T, pods ...*corev1.Pod) map[string]string {
	t.Helper()
	patched, _ := passOnce(t, policy{}, pods...)
	return patched
}

// passOnce runs one admission pass under pol and returns the pods it
// patched (name → patch; a status patch's name ends in /status) and those
// it deleted.
func passOnce(t *testing.T, pol policy, pods ...*corev1.Pod) (map[string]string, []string) {
	t.Helper()
	return passPolicy(t, pol, pods...)
}

// passPolicy is passOnce under any Policy.
func passPolicy(t *testing.T, pol Policy, pods ...*corev1.Pod) (map[string]string, []string) {
	t.Helper()
	c, client := admitController(t, pol, pods...)
	if err := c.admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	patched := map[string]string{}
	var deleted []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name := a.GetName()
			if a.GetSubresource() == "status" {
				name += "/status"
			} else if a.GetPatchType() != types.JSONPatchType {
				t.Errorf("patch type %s", a.GetPatchType())
			}
			patched[name] = string(a.GetPatch())
		case k8stesting.DeleteAction:
			deleted = append(deleted, a.GetName())
		default:
			t.Errorf("unexpected action %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	return patched, deleted
}

// admitController is a Controller under pol whose pod cache and API
// server hold pods, its API server's actions cleared.
func admitController(t *testing.T, pol Policy, pods ...*corev1.Pod) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Client: client, Signer: noSigner{}, Nodes: noNodes{}, PodFactory: factory})
	if err != nil {
		t.Fatal(err)
	}
	c.policy = pol
	// Run is not called: its queues are shut down here.
	t.Cleanup(func() {
		c.podQueue.ShutDown()
		c.bookQueue.ShutDown()
		c.admitQueue.ShutDown()
		c.removeQueue.ShutDown()
	})
	for _, p := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return c, client
}

func TestAnAdmissionPassLiftsOnlyKnitsGateOfThePodsTheQueuesAdmit(t *testing.T) {
	var pods []*corev1.Pod
	for _, n := range []string{"a1", "a22", "a333"} {
		pods = append(pods, gatedPod(n, "root.a", 1, false))
	}
	for _, n := range []string{"b1", "b22", "b333", "b4444", "b55555", "b666666", "b7777777"} {
		pods = append(pods, gatedPod(n, "root.b", 2, false))
	}
	patched := admitOnce(t, pods...)
	// 8 slots: root.a's 25% is 2, root.b's 75% is 6.
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range patched {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"a1", "a22", "b1", "b22", "b333", "b4444", "b55555", "b666666"}
	if !slices.Equal(got, want) {
		t.Errorf("lifted %v, want %v", got, want)
	}
	var ops []map[string]any
	if err := json.Unmarshal([]byte(patched["a1"]), &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0]["op"] != "test" || ops[0]["path"] != "/spec/schedulingGates/1/name" || ops[0]["value"] != launch.SchedulingGate ||
		ops[1]["op"] != "remove" || ops[1]["path"] != "/spec/schedulingGates/1" {
		t.Errorf("patch %s, want a test and a remove of Knit's gate only", patched["a1"])
	}
}

// oneAppPerUser is policy under a UserPolicy that runs one application
// of each user at a time.
type oneAppPerUser struct{ policy }

func (oneAppPerUser) MaxParallelAppsOfUser(string) int { return 1 }

func TestAnAdmissionPassHoldsEachUsersApplicationsToItsUserPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  Policy
		want []string
	}{
		{"without a UserPolicy both of the user's applications run", policy{}, []string{"a1", "b1"}},
		// root.a, first among the leaves at an even use, has the first.
		{"under one application a user, the second waits", oneAppPerUser{}, []string{"a1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patched, _ := passPolicy(t, tc.pol, gatedPod("a1", "root.a", 1, false), gatedPod("b1", "root.b", 2, false))
			if got := slices.Sorted(maps.Keys(patched)); !slices.Equal(got, tc.want) {
				t.Errorf("lifted %v, want %v", got, tc.want)
			}
		})
	}
}

// A pass that fails is tried again after the queue's backoff, which a
// pass that succeeds resets: failures over the RM's life do not add up to
// a long wait after the next one.
func TestAFailedAdmissionPassIsRetriedByTheQueueAndItsBackoffResetBySuccess(t *testing.T) {
	c, client := admitController(t, policy{}, gatedPod("a1", "root.a", 1, false))
	failures := 2
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(errors.New("etcd timeout"))
	})
	c.queueAdmission()
	for pass, want := range []int{1, 2, 0} {
		if !c.processAdmission(t.Context()) {
			t.Fatal("the admission queue was shut down")
		}
		if got := c.admitQueue.NumRequeues(admitKey); got != want {
			t.Errorf("after pass %d: %d requeues, want %d", pass+1, got, want)
		}
	}
	lifted := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			lifted++
		}
	}
	if lifted != 3 {
		t.Errorf("%d patches, want the two that failed and the one that lifted the gate", lifted)
	}
}

func TestAdmissionRestsWhileNoPodWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		// waiting is whether a pod still waits after the pass: then
		// passes go on every admitPeriod and on every pod event.
		waiting bool
	}{
		{name: "every pod lifted", pods: []*corev1.Pod{runningPod("a1", "root.a", 1, 1), runningPod("b1", "root.b", 2, 1)}},
		{name: "a pod the pass lifts", pods: []*corev1.Pod{runningPod("a1", "root.a", 1, 1), gatedPod("a22", "root.a", 1, false)}},
		{name: "a pod the queues hold back", waiting: true, pods: []*corev1.Pod{
			// root.b's maximum is 6 of the 8 slots.
			runningPod("b1", "root.b", 2, 1), runningPod("b22", "root.b", 2, 2), runningPod("b333", "root.b", 2, 3),
			runningPod("b4444", "root.b", 2, 4), runningPod("b55555", "root.b", 2, 5), runningPod("b666666", "root.b", 2, 6),
			gatedPod("b7777777", "root.b", 2, false),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := admitController(t, policy{}, tc.pods...)
			if err := c.admit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := c.waiting.Load(); got != tc.waiting {
				t.Fatalf("after the pass waiting = %v, want %v", got, tc.waiting)
			}
			// A running pod's change matters only while another waits.
			c.podChanged(runningPod("a9", "root.a", 1, 9))
			if got, want := c.admitQueue.Len(), map[bool]int{false: 0, true: 1}[tc.waiting]; got != want {
				t.Errorf("a running pod's change queued %d passes, want %d", got, want)
			}
			// A new gated pod always asks for one.
			c.podChanged(gatedPod("a99", "root.a", 1, false))
			if got := c.admitQueue.Len(); got != 1 {
				t.Errorf("a gated pod's arrival left %d passes queued, want 1", got)
			}
		})
	}
}

func TestLiftedPodsCountAsUsedWhetherBoundOrNot(t *testing.T) {
	// root.b has its 6 lifted (none bound), so only root.a's 2 go.
	var pods []*corev1.Pod
	for _, n := range []string{"b1", "b22", "b333", "b4444", "b55555", "b666666"} {
		pods = append(pods, gatedPod(n, "root.b", 2, true))
	}
	pods = append(pods, gatedPod("b7777777", "root.b", 2, false), gatedPod("a1", "root.a", 1, false), gatedPod("a22", "root.a", 1, false), gatedPod("a333", "root.a", 1, false))
	patched := admitOnce(t, pods...)
	if len(patched) != 2 || patched["a1"] == "" || patched["a22"] == "" {
		t.Errorf("lifted %v, want a1 and a22", patched)
	}
}

func TestADelegatedQueuesPodsCountAsUsedOnlyOnceBound(t *testing.T) {
	delegatedPods := func(bound bool) []*corev1.Pod {
		var pods []*corev1.Pod
		for _, n := range []string{"b1", "b22", "b333", "b4444", "b55555", "b666666"} {
			p := gatedPod(n, "root.b", 2, true)
			p.Annotations = map[string]string{VolcanoQueueAnnotation: "b"}
			if bound {
				p.Spec.NodeName = "n1"
			}
			pods = append(pods, p)
		}
		return append(pods, gatedPod("a1", "root.a", 1, false), gatedPod("a22", "root.a", 1, false), gatedPod("a333", "root.a", 1, false))
	}
	// Waiting in Volcano's queue, root.b's pods hold nothing: root.a's
	// three go, as with root.b idle.
	idle := admitOnce(t, gatedPod("a1", "root.a", 1, false), gatedPod("a22", "root.a", 1, false), gatedPod("a333", "root.a", 1, false))
	if got := admitOnce(t, delegatedPods(false)...); len(got) != len(idle) || len(got) == 0 {
		t.Errorf("with root.b's delegated pods waiting, lifted %v; with root.b idle %v", got, idle)
	}
	for name, patch := range admitOnce(t, delegatedPods(false)...) {
		if !strings.HasPrefix(name, "a") {
			t.Errorf("patched the delegated pod %s: %s", name, patch)
		}
	}
	// Bound, they are used as lifted pods are: only root.a's 2 go.
	if got := admitOnce(t, delegatedPods(true)...); len(got) != 2 || got["a1"] == "" || got["a22"] == "" {
		t.Errorf("with root.b's delegated pods bound, lifted %v, want a1 and a22", got)
	}
}

// runningPod is gatedPod lifted, bound and allocated as a container.
func runningPod(name, queue string, app int32, seq int) *corev1.Pod {
	p := gatedPod(name, queue, app, true)
	p.Spec.NodeName = "n1"
	p.Labels[launch.LabelContainer] = yarnid.ContainerID{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: app}, ID: 1}, Epoch: 0, Sequence: int64(seq)}.String()
	return p
}

func TestAPreemptionRoundMarksTheContainersItTakesAndDeletesThemAfterTheWait(t *testing.T) {
	// A round may take 15% of the cluster, one 2 GiB pod: YARN's default
	// 10% is less than one, and YARN takes no container larger than what
	// is left of the round's budget.
	p := admission.DefaultPreemption
	p.TotalPreemptionPerRound = 0.15
	pol := policy{preemption: Preemption{Enabled: true, Policy: p, MaxWaitBeforeKill: time.Minute}}
	var pods []*corev1.Pod
	for i, n := range []string{"a1", "a22", "a333", "a4444", "a55555", "a666666", "a7777777", "a88888888"} {
		pods = append(pods, runningPod(n, "root.a", 1, i+1))
	}
	pods = append(pods, gatedPod("b1", "root.b", 2, false))

	// root.a holds the cluster and root.b waits: the newest container is
	// marked, not yet deleted.
	patched, deleted := passOnce(t, pol, pods...)
	requireOnlyMarked(t, patched, deleted, "a88888888")

	// Marked past the wait, it is deleted.
	markedLongAgo(pods[7])
	_, deleted = passOnce(t, pol, pods...)
	if !slices.Contains(deleted, "a88888888") {
		t.Errorf("deleted %v, want a88888888 after its wait", deleted)
	}

	// root.b gone: the mark is let go.
	patched, deleted = passOnce(t, pol, pods[:8]...)
	if c := patched["a88888888/status"]; len(deleted) != 0 || !strings.Contains(c, `"status":"False"`) {
		t.Errorf("patched %v, deleted %v; want the mark let go", patched, deleted)
	}
}

// With observe_only a round chooses containers but neither marks nor
// deletes any, and one marked past its wait before observe_only was
// turned on is let go rather than deleted.
func TestAnObserveOnlyRoundTakesNothingBack(t *testing.T) {
	p := admission.DefaultPreemption
	p.TotalPreemptionPerRound = 0.15
	pol := policy{preemption: Preemption{Enabled: true, Policy: p, MaxWaitBeforeKill: time.Minute, ObserveOnly: true}}
	var pods []*corev1.Pod
	for i, n := range []string{"a1", "a22", "a333", "a4444", "a55555", "a666666", "a7777777", "a88888888"} {
		pods = append(pods, runningPod(n, "root.a", 1, i+1))
	}
	patched, deleted := passOnce(t, pol, append(pods, gatedPod("b1", "root.b", 2, false))...)
	if len(patched) != 0 || len(deleted) != 0 {
		t.Errorf("patched %v, deleted %v; want nothing", patched, deleted)
	}
	markedLongAgo(pods[7])
	patched, deleted = passOnce(t, pol, append(pods, gatedPod("b1", "root.b", 2, false))...)
	if c := patched["a88888888/status"]; len(deleted) != 0 || len(patched) != 1 || !strings.Contains(c, `"status":"False"`) {
		t.Errorf("patched %v, deleted %v; want only the earlier mark let go", patched, deleted)
	}
}

// intraQueuePolicy takes containers back within root.a for its
// higher-priority applications: application 3 has priority 5, the others
// 0. priority_first, since every pod's user is "u" and, with no
// user-limit factor, its limit is the cluster: userlimit_first would never
// take it below. A round may take half the cluster: its default 10% is
// less than a 2 GiB pod, and YARN takes no container larger than what is
// left of the round's budget.
func intraQueuePolicy() policy {
	p := admission.DefaultPreemption
	p.TotalPreemptionPerRound = 0.5
	p.IntraQueue.Enabled, p.IntraQueue.Order = true, admission.PriorityFirst
	return policy{priorities: map[yarnid.ApplicationID]int32{{ClusterTimestamp: 1, ID: 3}: 5},
		preemption: Preemption{Enabled: true, Policy: p, MaxWaitBeforeKill: time.Minute}}
}

func TestIntraQueuePreemptionMarksTheContainersAHigherPriorityApplicationWaitsFor(t *testing.T) {
	var pods []*corev1.Pod
	for i, n := range []string{"a1", "a22", "a333", "a4444", "a55555", "a666666", "a7777777", "a88888888"} {
		pods = append(pods, runningPod(n, "root.a", 1, i+1))
	}
	pods = append(pods, gatedPod("h1", "root.a", 3, false))

	// Off, as in YARN by default: nothing is marked.
	off := intraQueuePolicy()
	off.preemption.Policy.IntraQueue.Enabled = false
	if patched, deleted := passOnce(t, off, pods...); len(patched) != 0 || len(deleted) != 0 {
		t.Fatalf("patched %v, deleted %v; want nothing without intra-queue preemption", patched, deleted)
	}

	// root.a holds the cluster (400% of its 4 GiB guarantee) and alone
	// wants more: its 16 GiB go first to application 3's 2 GiB, and a
	// round takes at most int(4096 * 0.2) = 819 MB within it, so
	// application 1 gives its newest pod, marked as between queues.
	patched, deleted := passOnce(t, intraQueuePolicy(), pods...)
	requireOnlyMarked(t, patched, deleted, "a88888888")

	// Marked past the wait, it is deleted.
	markedLongAgo(pods[7])
	if _, deleted = passOnce(t, intraQueuePolicy(), pods...); !slices.Equal(deleted, []string{"a88888888"}) {
		t.Errorf("deleted %v, want a88888888 after its wait", deleted)
	}
}

func TestPreemptionCountsWhatThePassAdmittedAsUsed(t *testing.T) {
	// Application 1 runs 4 of the 8 slots; application 3, of higher
	// priority, asks 4. The pass lifts its 4 gates into the idle room; had
	// preemption seen them still pending, root.a's 8 GiB would have gone
	// to application 3 and application 1 given a pod back.
	var pods []*corev1.Pod
	for i, n := range []string{"a1", "a22", "a333", "a4444"} {
		pods = append(pods, runningPod(n, "root.a", 1, i+1))
	}
	for _, n := range []string{"h1", "h22", "h333", "h4444"} {
		pods = append(pods, gatedPod(n, "root.a", 3, false))
	}
	patched, deleted := passOnce(t, intraQueuePolicy(), pods...)
	got := slices.Sorted(maps.Keys(patched))
	if want := []string{"h1", "h22", "h333", "h4444"}; !slices.Equal(got, want) || len(deleted) != 0 {
		t.Errorf("patched %v, deleted %v; want only %v lifted", got, deleted, want)
	}
}

// requireOnlyMarked checks that a pass marked pod name alone to be taken
// back, as RGS marks it (a DisruptionTarget condition of Knit's reason),
// and deleted nothing.
func requireOnlyMarked(t *testing.T, patched map[string]string, deleted []string, name string) {
	t.Helper()
	mark, ok := patched[name+"/status"]
	if len(patched) != 1 || !ok || len(deleted) != 0 {
		t.Fatalf("patched %v, deleted %v; want only %s marked", patched, deleted, name)
	}
	var body struct {
		Status struct{ Conditions []corev1.PodCondition } `json:"status"`
	}
	if err := json.Unmarshal([]byte(mark), &body); err != nil {
		t.Fatal(err)
	}
	if c := body.Status.Conditions; len(c) != 1 || c[0].Type != corev1.DisruptionTarget || c[0].Status != corev1.ConditionTrue || c[0].Reason != ReasonPreemptionByKnit {
		t.Errorf("mark %s", mark)
	}
}

// markedLongAgo is p as RGS marked it two minutes ago, past any test's
// wait before kill.
func markedLongAgo(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonPreemptionByKnit,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-2 * time.Minute))}}
}

// partitionPolicy is policy with a gpu partition of 8 GiB and 4 vcores
// (4 slots), of which root.a has 50% (max 100%); root.b may not use it.
type partitionPolicy struct{ policy }

func (p partitionPolicy) AdmissionQueues() []admission.Queue {
	qs := p.policy.AdmissionQueues()
	qs[0].Partitions = map[string]admission.Capacity{"gpu": {AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1, MaxAMResourcePercent: 1}}
	qs[1].Partitions = map[string]admission.Capacity{"gpu": {AbsoluteCapacity: 0.5, AbsoluteMaximumCapacity: 1, MaxAMResourcePercent: 1}}
	return qs
}

func (partitionPolicy) PartitionResources() map[string]admission.Resource {
	return map[string]admission.Resource{"gpu": {MemoryMB: 8192, Vcores: 4}}
}

var _ PartitionPolicy = partitionPolicy{}

// onGPU is gatedPod asking the gpu partition, as newPod selects it.
func onGPU(name, queue string, app int32) *corev1.Pod {
	p := gatedPod(name, queue, app, false)
	p.Spec.NodeSelector = map[string]string{launch.NodeLabelPartition: "gpu"}
	return p
}

func TestAnAdmissionPassAdmitsEachPartitionAgainstItsOwnNodes(t *testing.T) {
	var pods []*corev1.Pod
	for _, n := range []string{"ga1", "ga22", "ga333", "ga4444", "ga55555", "ga666666"} {
		pods = append(pods, onGPU(n, "root.a", 11))
	}
	pods = append(pods, onGPU("gb1", "root.b", 12), onGPU("gb22", "root.b", 12))
	for _, n := range []string{"b1", "b22", "b333"} {
		pods = append(pods, gatedPod(n, "root.b", 2, false))
	}
	tests := []struct {
		name string
		pol  Policy
		want []string
	}{
		{
			// gpu: root.a alone grows to its maximum, 100% of 4 slots, its
			// oldest pods first; root.b may not use gpu. Default
			// partition: root.b's 3 are within its 6.
			name: "a policy that knows partitions",
			pol:  partitionPolicy{},
			want: []string{"b1", "b22", "b333", "ga1", "ga22", "ga333", "ga4444"},
		},
		{
			// No partition is known: no node would take the gpu pods.
			name: "a policy that knows no partition",
			pol:  policy{},
			want: []string{"b1", "b22", "b333"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			patched, _ := passPolicy(t, tc.pol, pods...)
			if got := slices.Sorted(maps.Keys(patched)); !slices.Equal(got, tc.want) {
				t.Errorf("lifted %v, want %v", got, tc.want)
			}
		})
	}
}
