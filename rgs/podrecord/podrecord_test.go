package podrecord

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/rks/launch"
)

const batchQueue = "scheduling.example.com/queue"

var now = metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))

func requests(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// wholePod is a started, running container's pod as the API server returns
// it: what the RM reads of it and much that it does not.
func wholePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "app-1-1-task-3", Namespace: "spark", UID: "uid-1", ResourceVersion: "4711", Generation: 2, CreationTimestamp: now,
			Labels: map[string]string{launch.LabelApplication: "application_1_0001", launch.LabelAttempt: "1", launch.LabelRole: launch.RoleTask,
				launch.LabelQueue: "default", launch.LabelUser: "alice", launch.LabelContainer: "container_1_0001_01_000002"},
			Annotations: map[string]string{
				launch.AnnotationContext: strings.Repeat(`{"launch":"context"}`, 200), launch.AnnotationVersion: "3",
				launch.AnnotationExecutionType: "OPPORTUNISTIC", batchQueue: "root.default", "example.com/unread": "x",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "knit-rm", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat(`{"f:x":{}}`, 50))}}},
		},
		Spec: corev1.PodSpec{
			NodeName:        "node-1",
			NodeSelector:    map[string]string{launch.NodeLabelPartition: "gpu"},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true)},
			InitContainers:  []corev1.Container{{Name: "knit-init", Image: "knit:1.0"}},
			Containers: []corev1.Container{{Name: launch.ContainerName, Image: "knit:1.0",
				Env:             []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.96.0.1"}},
				Resources:       corev1.ResourceRequirements{Requests: requests("1", "1Gi"), Limits: requests("1", "1Gi")},
				SecurityContext: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](3000), Privileged: ptr.To(false)}}},
			Volumes:     []corev1.Volume{{Name: "knit"}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.0.0.1", StartTime: &now, QOSClass: corev1.PodQOSGuaranteed,
			ObservedGeneration: 2,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "knit-init", Image: "knit:1.0", ContainerID: "containerd://1",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: launch.ContainerName, Image: "knit:1.0", ContainerID: "containerd://2", Ready: true,
				State:     corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
				Resources: &corev1.ResourceRequirements{Requests: requests("1", "1Gi")}}},
		},
	}
}

// readFields is pod with only what a record keeps, written out field by
// field: the test's own statement of what the RM reads.
func readFields(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Labels: p.Labels, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, NodeSelector: p.Spec.NodeSelector, SchedulingGates: p.Spec.SchedulingGates},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
			ObservedGeneration: p.Status.ObservedGeneration},
	}
	for k, v := range p.Annotations {
		switch {
		case k == launch.AnnotationContext:
			out.Annotations[k] = StartedMark
		case strings.HasPrefix(k, "knit.io/") || k == batchQueue:
			out.Annotations[k] = v
		}
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	if sc := p.Spec.SecurityContext; sc != nil {
		out.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup, FSGroup: sc.FSGroup}
	}
	for _, c := range p.Spec.Containers {
		k := corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
		if sc := c.SecurityContext; sc != nil {
			k.SecurityContext = &corev1.SecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup}
		}
		out.Spec.Containers = append(out.Spec.Containers, k)
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady {
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status,
				Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		}
	}
	state := func(s corev1.ContainerState) corev1.ContainerState {
		var o corev1.ContainerState
		if s.Running != nil {
			o.Running = &corev1.ContainerStateRunning{}
		}
		if t := s.Terminated; t != nil {
			o.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: t.Message}
		}
		return o
	}
	for _, s := range p.Status.ContainerStatuses {
		k := corev1.ContainerStatus{Name: s.Name, State: state(s.State)}
		if s.Resources != nil {
			k.Resources = &corev1.ResourceRequirements{Requests: s.Resources.Requests}
		}
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, k)
	}
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			out.Status.InitContainerStatuses = append(out.Status.InitContainerStatuses, corev1.ContainerStatus{Name: s.Name, State: state(s.State)})
		}
	}
	return out
}

func TestRecordKeepsWhatTheRMReadsOfAPodAndNothingElse(t *testing.T) {
	terminated := func(p *corev1.Pod, code int32, msg string) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}
	}
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"running", func(*corev1.Pod) {}},
		{"pending, gated, not a container yet", func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "knit.io/admission"}}
			delete(p.Annotations, launch.AnnotationContext)
			delete(p.Labels, launch.LabelContainer)
		}},
		{"exited with a code", func(p *corev1.Pod) { terminated(p, 3, "Exception from container-launch.") }},
		{"setup failed", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.ContainerStatuses = corev1.PodFailed, nil
			p.Status.InitContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Message: "no such file"}
		}},
		{"evicted", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		}},
		{"about to be preempted", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "higher priority"})
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(5 * time.Minute)}
		}},
		{"an increase done", func(p *corev1.Pod) {
			p.Annotations[launch.AnnotationIncreaseFrom] = `{"cpu":"1","memory":"1Gi"}`
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: requests("2", "2Gi")}
		}},
		{"no annotation read", func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/unread": "x"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := wholePod()
			tt.change(whole)
			keep := whole.DeepCopy()
			s := NewStripper(batchQueue)
			r := s.Record(whole)
			if !equality.Semantic.DeepEqual(whole, keep) {
				t.Error("Record changed the pod it was given")
			}
			if got, want := r.AsPod(), readFields(whole); !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("the record as a pod is\n%+v\nwant\n%+v", got, want)
			}
			if again := s.Record(r.AsPod()); !equality.Semantic.DeepEqual(again, r) {
				t.Errorf("the record of a record's pod is\n%+v\nwant\n%+v", again, r)
			}
			if c, ok := r.Label(launch.LabelContainer); c != whole.Labels[launch.LabelContainer] || ok != (c != "") {
				t.Errorf("the container label reads %q, %v", c, ok)
			}
			if _, ok := r.Labels[launch.LabelContainer]; ok {
				t.Error("the record's shared labels hold the container's")
			}
			if obj, err := s.Strip(r); err != nil || obj != r {
				t.Errorf("Strip of a record = %v, %v; want it unchanged", obj, err)
			}
		})
	}
	s := NewStripper()
	if obj, err := s.Strip(&corev1.Node{}); err != nil || obj == nil {
		t.Errorf("Strip of a node = %v, %v; want it unchanged", obj, err)
	}
}

func TestRecordsOfPodsAlikeShareTheirMapsAndNoOthers(t *testing.T) {
	s := NewStripper(batchQueue)
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	p1 := wholePod()
	p2 := wholePod()
	p2.Name, p2.UID, p2.Labels[launch.LabelContainer] = "app-1-1-task-4", "uid-2", "container_1_0001_01_000003"
	p2.Spec.Containers[0].Resources.Requests = requests("1000m", "1024Mi") // the same quantities
	p3 := wholePod()
	p3.Labels[launch.LabelQueue] = "other"
	p3.Annotations[launch.AnnotationVersion] = "4"
	p3.Spec.NodeSelector = map[string]string{launch.NodeLabelPartition: "cpu"}
	p3.Spec.Containers[0].Resources.Requests = requests("2", "1Gi")
	r1, r2, r3 := s.Record(p1), s.Record(p2), s.Record(p3)
	for _, c := range []struct {
		name      string
		a, b, c   any
		container string
	}{
		{"labels", r1.Labels, r2.Labels, r3.Labels, ""},
		{"annotations", r1.Annotations, r2.Annotations, r3.Annotations, ""},
		{"node selector", r1.Spec.NodeSelector, r2.Spec.NodeSelector, r3.Spec.NodeSelector, ""},
		{"requests", r1.Spec.Containers[0].Resources.Requests, r2.Spec.Containers[0].Resources.Requests, r3.Spec.Containers[0].Resources.Requests, ""},
	} {
		if !same(c.a, c.b) {
			t.Errorf("two pods alike hold two maps of %s", c.name)
		}
		if same(c.a, c.c) {
			t.Errorf("pods of different %s share a map", c.name)
		}
	}
	if r1.Container == r2.Container {
		t.Error("two pods share a container id")
	}
	if !same(r1.Spec.Containers[0].Resources.Requests, r1.Status.ContainerStatuses[0].Resources.Requests) {
		t.Error("a running container's status holds a map of its own for the spec's requests")
	}
	if got := r3.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("the third pod's CPU is %s, want 2", got.String())
	}
	// A full set starts again: later pods share new maps, earlier records
	// keep theirs.
	for i := len(s.shared[labelMaps]); i < maxShared; i++ {
		s.shareStrings(labelMaps, map[string]string{"n": strings.Repeat("x", i+1)})
	}
	third := func() *corev1.Pod {
		p := wholePod()
		p.Labels[launch.LabelQueue] = "third"
		return p
	}
	r4, r5 := s.Record(third()), s.Record(third())
	r6 := s.Record(wholePod())
	if len(s.shared[labelMaps]) != 2 || !same(r4.Labels, r5.Labels) || same(r6.Labels, r1.Labels) || r1.Labels[launch.LabelQueue] != "default" {
		t.Errorf("past the bound: %d kept, later pods share %v, share the first's %v", len(s.shared[labelMaps]), same(r4.Labels, r5.Labels), same(r6.Labels, r1.Labels))
	}
}

// Contents whose plain joins would read alike stay apart.
func TestSharedMapsOfContentsThatJoinAlikeStayApart(t *testing.T) {
	s := NewStripper()
	a := s.shareStrings(labelMaps, map[string]string{"a": "b=c"})
	b := s.shareStrings(labelMaps, map[string]string{"a=b": "c"})
	if a["a"] != "b=c" || b["a=b"] != "c" {
		t.Errorf("shared maps %v and %v", a, b)
	}
}

func TestListerReadsRecordsAsAPodListerReadsPods(t *testing.T) {
	s := NewStripper()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p := wholePod()
	other := wholePod()
	other.Name, other.Labels = "another", map[string]string{launch.LabelApplication: "application_1_0002"}
	for _, obj := range []any{s.Record(p), other} { // a pod put in the store as it is reads as its record
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	l := NewLister(store, s)
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"", []string{"another", p.Name}},
		{launch.LabelApplication + "=application_1_0001", []string{p.Name}},
		{launch.LabelContainer + "=container_1_0001_01_000002", []string{p.Name}},
		{launch.LabelContainer, []string{p.Name}},
		{"!" + launch.LabelContainer, []string{"another"}},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.List(sel)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range got {
			names = append(names, r.Name)
		}
		slices.Sort(names)
		if strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("List(%q) = %v, want %v", tc.selector, names, tc.want)
		}
	}
	if r, err := l.Get("spark", p.Name); err != nil || r.Container != "container_1_0001_01_000002" {
		t.Errorf("Get = %+v, %v", r, err)
	}
	if _, err := l.Get("spark", "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a pod not held = %v, want NotFound", err)
	}
	if r, ok := s.Of(cache.DeletedFinalStateUnknown{Key: "spark/" + p.Name, Obj: p}); !ok || r.Name != p.Name || r.Container == "" {
		t.Errorf("Of a tombstone = %+v, %v", r, ok)
	}
	if _, ok := s.Of(&corev1.Node{}); ok {
		t.Error("Of a node is a record")
	}
}

func TestDeepCopySharesNothing(t *testing.T) {
	r := NewStripper().Record(wholePod())
	c := r.DeepCopyObject().(*Pod)
	if !equality.Semantic.DeepEqual(c, r) {
		t.Fatalf("copy %+v, want %+v", c, r)
	}
	c.Labels[launch.LabelQueue] = "changed"
	c.Annotations[launch.AnnotationVersion] = "9"
	c.Spec.NodeSelector[launch.NodeLabelPartition] = "changed"
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	*c.Spec.SecurityContext.RunAsUser = 9
	c.Status.Conditions[0].Reason = "changed"
	c.Status.ContainerStatuses[0].State.Running = nil
	if r.Labels[launch.LabelQueue] != "default" || r.Annotations[launch.AnnotationVersion] != "3" ||
		r.Spec.NodeSelector[launch.NodeLabelPartition] != "gpu" || *r.Spec.SecurityContext.RunAsUser != 1000 ||
		r.Status.Conditions[0].Reason != "" || r.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("changing the copy changed the record: %+v", r)
	}
	if q := r.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("changing the copy's requests changed the record's: %s", q.String())
	}
}
