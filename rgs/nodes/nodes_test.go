package nodes

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func node(name string, ready corev1.ConditionStatus, unschedulable bool, zone string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name + ".example"}},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("16Gi"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Message: "kubelet is posting ready status"}},
		},
	}
	if zone != "" {
		n.Labels[zoneLabel] = zone
	}
	return n
}

func TestStateFollowsTheReadyConditionAndCordon(t *testing.T) {
	tests := []struct {
		name          string
		ready         corev1.ConditionStatus
		unschedulable bool
		want          yarnpb.NodeStateProto
	}{
		{"ready node runs", corev1.ConditionTrue, false, yarnpb.NodeStateProto_NS_RUNNING},
		{"cordoned node decommissions", corev1.ConditionTrue, true, yarnpb.NodeStateProto_NS_DECOMMISSIONING},
		{"silent kubelet is lost", corev1.ConditionUnknown, false, yarnpb.NodeStateProto_NS_LOST},
		{"not ready is unhealthy", corev1.ConditionFalse, false, yarnpb.NodeStateProto_NS_UNHEALTHY},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := State(node("n", tt.ready, tt.unschedulable, "")); got != tt.want {
				t.Errorf("State = %v, want %v", got, tt.want)
			}
		})
	}
	if got := State(&corev1.Node{}); got != yarnpb.NodeStateProto_NS_NEW {
		t.Errorf("a node with no Ready condition yet: %v, want NEW", got)
	}
}

func TestNodesReportCapabilityUseAndRack(t *testing.T) {
	knitPod := func(name, nodeName string, phase corev1.PodPhase, mem, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{launch.LabelApplication: "application_1_0001"}},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
				Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	other := knitPod("other", "a", corev1.PodRunning, "4Gi", "4")
	delete(other.Labels, launch.LabelApplication)
	client := fake.NewClientset(
		node("a", corev1.ConditionTrue, false, "zone-1"),
		node("b", corev1.ConditionTrue, false, ""),
		knitPod("p1", "a", corev1.PodRunning, "1Gi", "1"),
		knitPod("p2", "a", corev1.PodPending, "2Gi", "2"),
		knitPod("done", "a", corev1.PodSucceeded, "8Gi", "1"),
		knitPod("unbound", "", corev1.PodPending, "8Gi", "1"),
		other,
	)
	ctx := t.Context()
	l := syncedLister(t, client, Config{NMPort: 8041, NMWebPort: 8042})
	got, err := l.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, n := range got {
		byName[n.Name] = i
	}
	a, b := got[byName["a"]], got[byName["b"]]
	if a.Host != "10.0.0.1" || a.NMPort != 8041 || a.HTTPAddress != "10.0.0.1:8042" || a.Rack != "/zone-1" {
		t.Errorf("node a id: host %q port %d http %q rack %q", a.Host, a.NMPort, a.HTTPAddress, a.Rack)
	}
	if a.CapabilityMB != 16384 || a.CapabilityVcores != 8 {
		t.Errorf("node a capability %d MB %d vcores, want 16384 and 8", a.CapabilityMB, a.CapabilityVcores)
	}
	// Only Knit's live pods count: the finished one, the unbound one and
	// the pod that is not Knit's do not.
	if a.UsedMB != 3072 || a.UsedVcores != 3 || a.Containers != 2 {
		t.Errorf("node a use %d MB %d vcores %d containers, want 3072, 3, 2", a.UsedMB, a.UsedVcores, a.Containers)
	}
	if b.Rack != defaultRack || b.Containers != 0 {
		t.Errorf("node b rack %q containers %d", b.Rack, b.Containers)
	}
}

func TestNodeReportsCarryTheUtilizationTheNodePublishes(t *testing.T) {
	measured := launch.NodeUtilization{
		Node:       launch.ResourceUtilization{PmemMB: 3626, VmemMB: 3626, CPU: 0.25},
		Containers: launch.ResourceUtilization{PmemMB: 121, VmemMB: 2636, CPU: 0.5},
		Physical:   launch.PhysicalResource{MemoryMB: 24103, Vcores: 2},
	}
	v, err := launch.EncodeUtilization(measured)
	if err != nil {
		t.Fatal(err)
	}
	a := node("a", corev1.ConditionTrue, false, "")
	a.Annotations = map[string]string{launch.AnnotationUtilization: v}
	garbled := node("b", corev1.ConditionTrue, false, "")
	garbled.Annotations = map[string]string{launch.AnnotationUtilization: `{"node":{"pmemMB":-5}}`}
	silent := node("c", corev1.ConditionTrue, false, "")
	client := fake.NewClientset(a, garbled, silent)
	ctx := t.Context()
	l := syncedLister(t, client, Config{NMPort: 8041, NMWebPort: 8042})
	info := func(name string) Info {
		t.Helper()
		got, err := l.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range got {
			if n.Name == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return Info{}
	}
	report := func(name string) *yarnpb.NodeReportProto {
		t.Helper()
		return info(name).Report()
	}

	// The machine reaches the node's Info, for the REST nodes' shares of
	// it; a NodeReport has no field for it.
	if got := info("a").Utilization; got != measured {
		t.Errorf("node a: utilization %+v, want %+v", got, measured)
	}
	r := report("a")
	if n, c := r.GetNodeUtilization(), r.GetContainersUtilization(); n.GetPmem() != 3626 || n.GetVmem() != 3626 || n.GetCpu() != 0.25 ||
		c.GetPmem() != 121 || c.GetVmem() != 2636 || c.GetCpu() != 0.5 {
		t.Errorf("node a: node utilization %v, containers %v", n, c)
	}
	// A node that published nothing, or what does not decode, reports
	// none, as an RMNode before its NM's first heartbeat.
	for _, name := range []string{"b", "c"} {
		if r := report(name); r.NodeUtilization != nil || r.ContainersUtilization != nil {
			t.Errorf("node %s: utilization %v and %v, want none", name, r.NodeUtilization, r.ContainersUtilization)
		}
	}

	// A new measurement reaches the report through the node's update
	// event: the containers ended.
	measured.Containers = launch.ResourceUtilization{}
	v, err = launch.EncodeUtilization(measured)
	if err != nil {
		t.Fatal(err)
	}
	a.Annotations[launch.AnnotationUtilization] = v
	if _, err := client.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "the containers' end reported", func() bool {
		c := report("a").GetContainersUtilization()
		return c != nil && c.GetPmem() == 0 && c.GetCpu() == 0
	})
}

func TestASelectorKeepsTheViewToTheRMsPool(t *testing.T) {
	tests := []struct {
		name     string
		selector map[string]string
		want     []string
	}{
		{name: "no selector sees every node", want: []string{"a", "b", "c"}},
		{name: "a pool's label sees its nodes", selector: map[string]string{"pool": "sc1"}, want: []string{"a", "c"}},
		{name: "every label must match", selector: map[string]string{"pool": "sc1", "zone": "z"}, want: []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := node("a", corev1.ConditionTrue, false, ""), node("b", corev1.ConditionTrue, false, ""), node("c", corev1.ConditionTrue, false, "")
			a.Labels["pool"], b.Labels["pool"], c.Labels["pool"] = "sc1", "sc2", "sc1"
			c.Labels["zone"] = "z"
			client := fake.NewClientset(a, b, c)
			ctx := t.Context()
			l := syncedLister(t, client, Config{NMPort: 8041, NMWebPort: 8042, Selector: tt.selector})
			list, err := l.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range list {
				got = append(got, n.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("nodes %v, want %v", got, tt.want)
			}
			census, err := l.Census(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := census.Nodes(yarnpb.NodeStateProto_NS_RUNNING); int(n) != len(tt.want) {
				t.Errorf("census counts %d running nodes, want %d", n, len(tt.want))
			}
		})
	}
}

// syncedLister is a Lister of client's nodes and Knit's pods, its
// informers started until the test ends and synced.
func syncedLister(t *testing.T, client kubernetes.Interface, cfg Config) *Lister {
	t.Helper()
	podFactory := rgs.NewPodInformerFactory(client, "")
	l, nodeFactory, err := New(client, podFactory, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodeFactory.Start(t.Context().Done())
	podFactory.Start(t.Context().Done())
	t.Cleanup(func() {
		nodeFactory.Shutdown()
		podFactory.Shutdown()
	})
	if err := l.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l
}
