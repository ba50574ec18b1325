package rgs

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks/launch"
)

// wholePod is a pod as the API server returns one for a container that was
// started and ran: what BuildPod made, the binding, the launch context, the
// API server's and the kubelet's additions, and the queue's extra
// annotations.
func wholePod(t *testing.T) *corev1.Pod {
	t.Helper()
	r := testRequest()
	r.LogAggregation = &yarnpb.LogAggregationContextProto{IncludePattern: proto.String(".*")}
	p, err := BuildPod(r)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	p.UID, p.ResourceVersion, p.Generation, p.CreationTimestamp = "uid-1", "4711", 2, now
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "knit-rm", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat(`{"f:x":{}}`, 50))}}}
	app, err := yarnid.ParseApplicationID(testApp)
	if err != nil {
		t.Fatal(err)
	}
	p.Labels[launch.LabelContainer] = yarnid.ContainerID{Attempt: yarnid.AttemptID{App: app, ID: 1}, Sequence: 2}.String()
	p.Annotations[launch.AnnotationContext] = strings.Repeat(`{"launch":"context"}`, 200)
	p.Annotations[launch.AnnotationVersion] = "3"
	p.Annotations[launch.AnnotationNodeVersion] = "2"
	p.Annotations[launch.AnnotationThreadDumps] = "1"
	p.Annotations[launch.AnnotationExecutionType] = yarnpb.ExecutionTypeProto_OPPORTUNISTIC.String()
	p.Annotations[launch.LabelUser] = "alice@EXAMPLE.COM"
	p.Annotations["scheduling.example.com/batch"] = "true"
	p.Spec.NodeName = "node-1"
	p.Spec.NodeSelector = map[string]string{launch.NodeLabelPartition: "gpu"}
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true)}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsGroup: ptr.To[int64](3000), Privileged: ptr.To(false)}
		p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "10.96.0.1"})
	}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.0.0.1", StartTime: &now, QOSClass: corev1.PodQOSGuaranteed,
		ObservedGeneration: 2,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "knit-init", Image: "ghcr.io/knitdev/knit:1.0", ImageID: "sha256:0", ContainerID: "containerd://1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: launch.ContainerName, Image: "ghcr.io/knitdev/knit:1.0", ImageID: "sha256:0", ContainerID: "containerd://2",
			Ready: true, RestartCount: 0, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			Resources: &corev1.ResourceRequirements{Requests: mainRequests(p)}}},
	}
	return p
}

// readers is every reading of a cached pod the RM makes, by RGS, the node
// view and RKS (whose readings of the spec and metadata are repeated
// here field for field: rgs does not import rks).
func readers(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	attempt, role, ok := attemptOf(p)
	out["attemptOf"] = fmt.Sprint(attempt, role, ok)
	id, ok := containerOf(p)
	out["containerOf"] = fmt.Sprint(id, ok)
	done, exit, diag, preempted := ended(p)
	out["ended"] = fmt.Sprint(done, exit, diag, preempted)
	out["resourceOf"] = resourceOf(p, Resources{MillicoresPerVcore: 1000}).String()
	out["executionTypeOf"] = executionTypeOf(p).String()
	for _, k := range []string{launch.AnnotationVersion, launch.AnnotationNodeVersion, launch.AnnotationThreadDumps} {
		out["intAnnotation "+k] = fmt.Sprint(intAnnotation(p, k))
	}
	_, increasing := p.Annotations[launch.AnnotationIncreaseFrom]
	out["increasing"] = fmt.Sprint(increasing, p.Annotations[launch.AnnotationIncreaseFrom])
	out["resizeOutcome"] = fmt.Sprint(resizeOutcome(p))
	out["disrupted"] = fmt.Sprint(disrupted(p), preemptedDiagnostics(p))
	out["stoppedByAM"] = fmt.Sprint(stoppedByAM(p))
	out["delegated"] = fmt.Sprint(delegated(p))
	out["user"] = annotationOrLabel(p, launch.LabelUser)
	out["partition"] = p.Spec.NodeSelector[launch.NodeLabelPartition]
	out["labels"] = fmt.Sprint(p.Labels)
	out["logAggregation"] = p.Annotations[launch.AnnotationLogAggregationContext]
	out["identity"] = fmt.Sprint(p.Namespace, p.Name, p.UID, p.ResourceVersion, p.Generation, p.CreationTimestamp, p.DeletionTimestamp)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out["bound"] = c.LastTransitionTime.String()
		}
	}
	node, use, ok := nodes.UseOf(p)
	out["nodes.UseOf"] = fmt.Sprint(node, use, ok)
	// RKS: started (the launch context's presence, and its value is not
	// empty), the node, and runAs's fields.
	lc, started := p.Annotations[launch.AnnotationContext]
	out["rks started"] = fmt.Sprint(started, lc != "")
	out["rks node"] = p.Spec.NodeName
	if sc := p.Spec.SecurityContext; sc != nil {
		out["rks pod runAs"] = fmt.Sprint(ptr.Deref(sc.RunAsUser, -1), ptr.Deref(sc.RunAsGroup, -1), ptr.Deref(sc.FSGroup, -1))
	}
	for _, c := range p.Spec.Containers {
		if sc := c.SecurityContext; sc != nil {
			out["rks runAs "+c.Name] = fmt.Sprint(ptr.Deref(sc.RunAsUser, -1), ptr.Deref(sc.RunAsGroup, -1))
		}
	}
	return out
}

func TestStrippedPodAnswersEveryReaderAsTheWholePod(t *testing.T) {
	terminated := func(p *corev1.Pod, code int32, msg string) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}
	}
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"running", func(*corev1.Pod) {}},
		{"pending, not started", func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
			delete(p.Annotations, launch.AnnotationContext)
			delete(p.Labels, launch.LabelContainer)
		}},
		{"exited with a code", func(p *corev1.Pod) { terminated(p, 3, "Exception from container-launch.") }},
		{"stopped by the AM", func(p *corev1.Pod) {
			terminated(p, 143, "")
			p.Annotations[launch.AnnotationStoppedBy] = "appmaster"
		}},
		{"setup failed", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.ContainerStatuses = corev1.PodFailed, nil
			p.Status.InitContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Message: "no such file"}
		}},
		{"evicted", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		}},
		{"about to be preempted", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "higher priority"})
			p.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC)}
		}},
		{"an increase waiting", func(p *corev1.Pod) {
			p.Annotations[launch.AnnotationIncreaseFrom] = `{"cpu":"1","memory":"1Gi"}`
			p.Generation = 3
		}},
		{"an increase infeasible", func(p *corev1.Pod) {
			p.Annotations[launch.AnnotationIncreaseFrom] = `{"cpu":"1","memory":"1Gi"}`
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
		}},
		{"delegated to YuniKorn", func(p *corev1.Pod) { p.Annotations[YuniKornQueueAnnotation] = "root.default" }},
		{"delegated to Volcano", func(p *corev1.Pod) { p.Annotations[VolcanoQueueAnnotation] = "default" }},
		{"delegated to Kueue", func(p *corev1.Pod) { p.Labels[KueueQueueLabel] = "default" }},
		{"an increase done", func(p *corev1.Pod) {
			p.Annotations[launch.AnnotationIncreaseFrom] = `{"cpu":"1","memory":"1Gi"}`
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := wholePod(t)
			tt.change(whole)
			want := readers(whole)
			keep := whole.DeepCopy()
			obj, err := StripPod(whole)
			if err != nil {
				t.Fatal(err)
			}
			stripped := obj.(*corev1.Pod)
			if !equality.Semantic.DeepEqual(whole, keep) {
				t.Error("StripPod changed the pod it was given")
			}
			got := readers(stripped)
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s reads %q of the stripped pod, %q of the whole", k, got[k], w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s reads %q of the stripped pod only", k, g)
				}
			}
			again, _ := StripPod(stripped)
			if !equality.Semantic.DeepEqual(again, stripped) {
				t.Error("stripping a stripped pod changes it")
			}
			if stripped.ManagedFields != nil || stripped.Spec.Tolerations != nil || stripped.Spec.Containers[0].Env != nil ||
				stripped.Spec.Volumes != nil || stripped.Spec.InitContainers != nil || stripped.Annotations["scheduling.example.com/batch"] != "" {
				t.Errorf("the stripped pod keeps what no reader reads: %+v", stripped)
			}
			if stripped.Size() >= whole.Size()/2 {
				t.Errorf("the stripped pod is %d bytes encoded, the whole %d", stripped.Size(), whole.Size())
			}
		})
	}
	if obj, err := StripPod(&corev1.Node{}); err != nil || obj == nil {
		t.Errorf("StripPod of a node = %v, %v; want it unchanged", obj, err)
	}
}

// A running container's status repeats its spec's requests; the stripped
// pod holds them once, and twice only while they differ (a resize).
func TestStrippedPodHoldsOneMapOfRequestsUnlessAResizeMakesTwo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status corev1.ResourceList
		shared bool
	}{
		{"the same requests", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("1Gi")}, true},
		{"a resize done", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}, false},
		{"a resource more", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("1")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := wholePod(t)
			whole.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			whole.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: tc.status}
			obj, err := StripPod(whole)
			if err != nil {
				t.Fatal(err)
			}
			p := obj.(*corev1.Pod)
			spec, status := p.Spec.Containers[0].Resources.Requests, p.Status.ContainerStatuses[0].Resources.Requests
			if !equality.Semantic.DeepEqual(status, tc.status) {
				t.Errorf("status requests %v, want %v", status, tc.status)
			}
			if shared := reflect.ValueOf(spec).UnsafePointer() == reflect.ValueOf(status).UnsafePointer(); shared != tc.shared {
				t.Errorf("one map for spec and status: %v, want %v", shared, tc.shared)
			}
		})
	}
}

func TestPodStripperSharesOneMapOfRequestsAmongPodsAskingAlike(t *testing.T) {
	s := NewPodStripper()
	strip := func(cpu, memory string) corev1.ResourceList {
		t.Helper()
		whole := wholePod(t)
		whole.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		obj, err := s.Strip(whole)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod).Spec.Containers[0].Resources.Requests
	}
	same := func(a, b corev1.ResourceList) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a, b, c := strip("1", "1Gi"), strip("1000m", "1024Mi"), strip("2", "1Gi")
	if !same(a, b) {
		t.Error("two pods asking for the same quantities hold two maps")
	}
	if same(a, c) {
		t.Error("pods asking for different quantities share a map")
	}
	if got := c[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("the third pod's CPU is %s, want 2", got.String())
	}
	// Past the bound, a new shape is kept per pod.
	for i := len(s.shapes); i < maxRequestShapes; i++ {
		s.share(corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(int64(i+1)<<30, resource.BinarySI)})
	}
	if d, e := strip("3", "3Gi"), strip("3", "3Gi"); same(d, e) || len(s.shapes) != maxRequestShapes {
		t.Errorf("shapes past the bound are shared (%v) or kept (%d kept)", same(d, e), len(s.shapes))
	}
}
