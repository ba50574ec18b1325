// Package podrecord holds the RM's record of one of Knit's pods: the few
// fields of a pod that RGS, RKS, the node view and the web UI read, in the
// shape of a corev1.Pod (so that p.Spec.NodeName reads as it does on a
// pod) but a fraction of its size. The RM keeps one per pod in its pod
// informer's cache (Stripper.Strip is the informer's transform), and at
// 100,000 pods the records are most of its memory.
package podrecord

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/knitdev/knit/rks/launch"
)

// Pod is the RM's record of a pod. ObjectMeta holds the name, namespace,
// UID, resource version (RGS's delete precondition), generation
// (resizes), creation and deletion times, the labels and the annotations
// the RM reads; Labels holds every label but launch.LabelContainer, whose
// value is Container, so that the pods of one ask share one map of labels.
// A record in the informer's cache is only read: its maps are shared with
// other records.
type Pod struct {
	metav1.ObjectMeta
	// Container is the value of the pod's launch.LabelContainer label,
	// empty when it has none (the pod is not a container yet).
	Container string
	Spec      Spec
	Status    Status
}

// Spec is what the RM reads of a pod's spec: the node, the node selector
// (the partition a token names), the run-as user and groups, each
// container's name and requests, and the scheduling gates (admission).
type Spec struct {
	NodeName        string
	NodeSelector    map[string]string
	SecurityContext *corev1.PodSecurityContext
	Containers      []Container
	SchedulingGates []corev1.PodSchedulingGate
}

// Container is a container of the pod's spec: its name, requests and
// run-as user and group.
type Container struct {
	Name            string
	Resources       Resources
	SecurityContext *corev1.SecurityContext
}

// Resources are a container's requests.
type Resources struct {
	Requests corev1.ResourceList
}

// Status is what the RM reads of a pod's status: the phase, reason and
// message, the conditions of the binding (its time), a disruption and a
// resize, the generation the kubelet saw, each container's state and
// requests, and the init containers that failed.
type Status struct {
	Phase                 corev1.PodPhase
	Reason                string
	Message               string
	Conditions            []corev1.PodCondition
	ObservedGeneration    int64
	ContainerStatuses     []ContainerStatus
	InitContainerStatuses []ContainerStatus
}

// ContainerStatus is a container's name, state (whether it runs, its exit
// code and termination message) and the requests it runs with (a
// resize's outcome; nil when the kubelet did not say).
type ContainerStatus struct {
	Name      string
	State     corev1.ContainerState
	Resources *Resources
}

// Label is the value of the pod's label key, the container label's
// included.
func (p *Pod) Label(key string) (string, bool) {
	if key == launch.LabelContainer {
		return p.Container, p.Container != ""
	}
	v, ok := p.Labels[key]
	return v, ok
}

// LabelSet is the pod's labels as a selector reads them
// (labels.Selector.Matches), the container label's included, without
// building a map.
func (p *Pod) LabelSet() LabelSet { return LabelSet{p} }

// LabelSet is a pod's labels for a selector (labels.Labels).
type LabelSet struct{ p *Pod }

// Has reports whether the pod has label key.
func (l LabelSet) Has(key string) bool {
	_, ok := l.p.Label(key)
	return ok
}

// Get is the value of label key, empty when the pod has none.
func (l LabelSet) Get(key string) string {
	v, _ := l.p.Label(key)
	return v
}

// Lookup is the value of label key and whether the pod has it.
func (l LabelSet) Lookup(key string) (string, bool) { return l.p.Label(key) }

// GetObjectKind is part of runtime.Object: a record has no kind of its
// own.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopy copies the record and everything it points at.
func (p *Pod) DeepCopy() *Pod {
	if p == nil {
		return nil
	}
	out := &Pod{Container: p.Container}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = Spec{
		NodeName:        p.Spec.NodeName,
		NodeSelector:    cloneMap(p.Spec.NodeSelector),
		SecurityContext: p.Spec.SecurityContext.DeepCopy(),
		Containers:      make([]Container, len(p.Spec.Containers)),
		SchedulingGates: append([]corev1.PodSchedulingGate(nil), p.Spec.SchedulingGates...),
	}
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = Container{Name: c.Name, Resources: Resources{Requests: c.Resources.Requests.DeepCopy()},
			SecurityContext: c.SecurityContext.DeepCopy()}
	}
	out.Status = Status{
		Phase:                 p.Status.Phase,
		Reason:                p.Status.Reason,
		Message:               p.Status.Message,
		ObservedGeneration:    p.Status.ObservedGeneration,
		ContainerStatuses:     copyStatuses(p.Status.ContainerStatuses),
		InitContainerStatuses: copyStatuses(p.Status.InitContainerStatuses),
	}
	for _, c := range p.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, *c.DeepCopy())
	}
	return out
}

func copyStatuses(in []ContainerStatus) []ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]ContainerStatus, len(in))
	for i, s := range in {
		out[i] = ContainerStatus{Name: s.Name, State: *s.State.DeepCopy()}
		if s.Resources != nil {
			out[i].Resources = &Resources{Requests: s.Resources.Requests.DeepCopy()}
		}
	}
	return out
}

func cloneMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// AsPod is the record as a corev1.Pod of its own (nothing shared with the
// record), for readers outside the RM's pod cache that take pods: RKS,
// the web shell, the web UI.
func (p *Pod) AsPod() *corev1.Pod {
	c := p.DeepCopy()
	out := &corev1.Pod{
		ObjectMeta: c.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:        c.Spec.NodeName,
			NodeSelector:    c.Spec.NodeSelector,
			SecurityContext: c.Spec.SecurityContext,
			SchedulingGates: c.Spec.SchedulingGates,
		},
		Status: corev1.PodStatus{
			Phase:                 c.Status.Phase,
			Reason:                c.Status.Reason,
			Message:               c.Status.Message,
			Conditions:            c.Status.Conditions,
			ObservedGeneration:    c.Status.ObservedGeneration,
			ContainerStatuses:     podStatuses(c.Status.ContainerStatuses),
			InitContainerStatuses: podStatuses(c.Status.InitContainerStatuses),
		},
	}
	if c.Container != "" {
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[launch.LabelContainer] = c.Container
	}
	for _, k := range c.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: k.Name,
			Resources: corev1.ResourceRequirements{Requests: k.Resources.Requests}, SecurityContext: k.SecurityContext})
	}
	return out
}

func podStatuses(in []ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, State: s.State}
		if s.Resources != nil {
			out[i].Resources = &corev1.ResourceRequirements{Requests: s.Resources.Requests}
		}
	}
	return out
}
