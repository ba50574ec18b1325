package rgs

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
type policy struct{ priorities map[yarnid.ApplicationID]int32 }

func (policy) AdmissionQueues() []admission.Queue {
	leaf := func(path string, c, m float64) admission.Queue {
		return admission.Queue{Path: path, AbsoluteCapacity: c, AbsoluteMaximumCapacity: m, UserLimitFactor: -1, MinimumUserLimitPercent: 100, MaxAMResourcePercent: 1}
	}
	return []admission.Queue{{Path: "root", AbsoluteCapacity: 1, AbsoluteMaximumCapacity: 1}, leaf("root.a", 0.25, 1), leaf("root.b", 0.75, 0.75)}
}

func (policy) ClusterResource() admission.Resource { return admission.Resource{MemoryMB: 16384, Vcores: 8} }

func (p policy) AppPriority(app yarnid.ApplicationID) int32 { return p.priorities[app] }

type noSigner struct{}

func (noSigner) Sign(*yarnpb.ContainerProto, string, string, bool, *yarnpb.LogAggregationContextProto) (*commonpb.TokenProto, error) {
	return &commonpb.TokenProto{}, nil
}

type noNodes struct{}

func (noNodes) NodeID(string) (*yarnpb.NodeIdProto, string, bool) { return nil, "", false }
func (noNodes) NodeName(string) (string, bool)                     { return "", false }

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
	c.policy = policy{}
	// Run is not called: its queues are shut down here.
	t.Cleanup(func() {
		c.podQueue.ShutDown()
		c.bookQueue.ShutDown()
		c.goneQueue.ShutDown()
		c.admitQueue.ShutDown()
	})
	for _, p := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	if err := c.admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	patched := map[string]string{}
	for _, a := range client.Actions() {
		pa, ok := a.(k8stesting.PatchAction)
		if !ok {
			t.Errorf("unexpected action %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if pa.GetPatchType() != types.JSONPatchType {
			t.Errorf("patch type %s", pa.GetPatchType())
		}
		patched[pa.GetName()] = string(pa.GetPatch())
	}
	return patched
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
