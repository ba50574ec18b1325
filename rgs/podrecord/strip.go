package podrecord

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/rks/launch"
)

// knitPrefix starts every label and annotation key of the pod contract
// (package launch).
const knitPrefix = "knit.io/"

// StartedMark stands, in a record, for the launch context RKS wrote on a
// started container's pod: the RM only asks whether a pod has one (RKS's
// started, and its update check), and the context itself, the largest
// part of a started pod, is for the node to read.
const StartedMark = "started"

// maxShared bounds the maps a Stripper keeps of each kind (labels,
// annotations, node selectors, requests). A full set is emptied and fills
// again: records keep the maps they were given, later pods share new ones.
const maxShared = 4096

// Stripper makes records of pods (Strip, the pod informer's transform),
// giving the records of pods alike one map of labels, of annotations, of
// node selector and of requests: the pods of one ask differ in little but
// their name, UID and container id, and a map of ten labels is some 900
// bytes. Safe for concurrent use.
type Stripper struct {
	annotations map[string]bool

	mu     sync.Mutex
	shared [kinds]map[string]any
}

type kind int

const (
	labelMaps kind = iota
	annotationMaps
	selectorMaps
	requestMaps
	kinds
)

// NewStripper returns a Stripper keeping, besides the pod contract's
// (launch's "knit.io/" keys), the annotations named by keep.
func NewStripper(keep ...string) *Stripper {
	s := &Stripper{annotations: map[string]bool{}}
	for _, k := range keep {
		s.annotations[k] = true
	}
	for i := range s.shared {
		s.shared[i] = map[string]any{}
	}
	return s
}

// Strip is the pod informer's transform (cache.TransformFunc): a pod
// becomes its record; anything else (a record already) passes unchanged.
func (s *Stripper) Strip(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return s.Record(p), nil
	}
	return obj, nil
}

// Of is the record an informer's handler or store gives: a record, the
// record of a pod, either in a tombstone (cache.DeletedFinalStateUnknown).
func (s *Stripper) Of(obj any) (*Pod, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch p := obj.(type) {
	case *Pod:
		return p, p != nil
	case *corev1.Pod:
		return s.Record(p), p != nil
	}
	return nil, false
}

// Record is pod's record. It shares nothing with pod.
func (s *Stripper) Record(p *corev1.Pod) *Pod {
	if p == nil {
		return nil
	}
	labels, container := s.labels(p.Labels)
	out := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         intern(p.Namespace),
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp.DeepCopy(),
			Labels:            labels,
			Annotations:       s.knitAnnotations(p.Annotations),
		},
		Container: container,
		Spec: Spec{
			NodeName:        intern(p.Spec.NodeName),
			NodeSelector:    s.shareStrings(selectorMaps, p.Spec.NodeSelector),
			SecurityContext: runAsOfPod(p.Spec.SecurityContext),
			Containers:      make([]Container, len(p.Spec.Containers)),
			SchedulingGates: gates(p.Spec.SchedulingGates),
		},
		Status: Status{
			Phase:              p.Status.Phase,
			Reason:             p.Status.Reason,
			Message:            p.Status.Message,
			Conditions:         readConditions(p.Status.Conditions),
			ObservedGeneration: p.Status.ObservedGeneration,
		},
	}
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = Container{
			Name:            intern(c.Name),
			Resources:       Resources{Requests: s.shareRequests(c.Resources.Requests)},
			SecurityContext: runAsOfContainer(c.SecurityContext),
		}
	}
	out.Status.ContainerStatuses = s.containerStates(p.Status.ContainerStatuses, out.Spec.Containers)
	out.Status.InitContainerStatuses = failedInits(p.Status.InitContainerStatuses)
	return out
}

// intern shares one copy of a string that many pods repeat (namespaces,
// nodes, container names) instead of one per decoded pod; the runtime
// drops a copy no pod holds any more.
func intern(s string) string { return unique.Make(s).Value() }

// labels are every label but the container's, as a shared map, and the
// container label's value.
func (s *Stripper) labels(in map[string]string) (map[string]string, string) {
	container, ok := in[launch.LabelContainer]
	if !ok {
		return s.shareStrings(labelMaps, in), ""
	}
	rest := make(map[string]string, len(in)-1)
	for k, v := range in {
		if k != launch.LabelContainer {
			rest[k] = v
		}
	}
	return s.shareStrings(labelMaps, rest), container
}

// readAnnotation is whether the RM reads annotation k: the pod contract's,
// and the ones the Stripper was told to keep.
func (s *Stripper) readAnnotation(k string) bool {
	return strings.HasPrefix(k, knitPrefix) || (s != nil && s.annotations[k])
}

func (s *Stripper) knitAnnotations(in map[string]string) map[string]string {
	n := 0
	for k := range in {
		if s.readAnnotation(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range in {
		if s.readAnnotation(k) && k != launch.AnnotationContext {
			out[k] = v
		}
	}
	if _, ok := in[launch.AnnotationContext]; ok {
		out[launch.AnnotationContext] = StartedMark
	}
	return s.shareStrings(annotationMaps, out)
}

// shareStrings returns the kept map of m's content, keeping a copy of m
// as that map when there is none yet. Maps in records are only read, so
// records may share them.
func (s *Stripper) shareStrings(k kind, m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, key := range keys {
		writeField(&b, key)
		writeField(&b, m[key])
	}
	kept := s.share(k, b.String(), func() any {
		out := make(map[string]string, len(m))
		for key, v := range m {
			out[intern(key)] = intern(v)
		}
		return out
	})
	return kept.(map[string]string)
}

// shareRequests returns the kept map of rl's quantities (by value: "1"
// and "1000m" CPU are one shape), keeping a copy of rl when there is none
// yet. Each map of two quantities is some 600 bytes.
func (s *Stripper) shareRequests(rl corev1.ResourceList) corev1.ResourceList {
	if len(rl) == 0 {
		return nil
	}
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		writeField(&b, name)
		writeField(&b, q.String())
	}
	return s.share(requestMaps, b.String(), func() any { return rl.DeepCopy() }).(corev1.ResourceList)
}

// writeField writes one length-prefixed field of a content key, so that
// no two contents make one key whatever bytes they hold.
func writeField(b *strings.Builder, f string) {
	b.WriteString(strconv.Itoa(len(f)))
	b.WriteByte(':')
	b.WriteString(f)
}

// share returns the map kept under key, keeping build()'s when there is
// none. A nil Stripper shares nothing.
func (s *Stripper) share(k kind, key string, build func() any) any {
	if s == nil {
		return build()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.shared[k][key]; ok {
		return kept
	}
	if len(s.shared[k]) >= maxShared {
		clear(s.shared[k])
	}
	m := build()
	s.shared[k][key] = m
	return m
}

func gates(in []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.PodSchedulingGate, len(in))
	for i, g := range in {
		out[i] = corev1.PodSchedulingGate{Name: intern(g.Name)}
	}
	return out
}

// readConditions are the conditions the RM reads: the binding, a
// disruption, a resize's progress.
func readConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range in {
		switch c.Type {
		case corev1.PodScheduled, corev1.DisruptionTarget, corev1.PodResizePending, corev1.PodResizeInProgress:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
				LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

func runAsOfPod(sc *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if sc == nil || (sc.RunAsUser == nil && sc.RunAsGroup == nil && sc.FSGroup == nil) {
		return nil
	}
	c := sc.DeepCopy()
	return &corev1.PodSecurityContext{RunAsUser: c.RunAsUser, RunAsGroup: c.RunAsGroup, FSGroup: c.FSGroup}
}

func runAsOfContainer(sc *corev1.SecurityContext) *corev1.SecurityContext {
	if sc == nil || (sc.RunAsUser == nil && sc.RunAsGroup == nil) {
		return nil
	}
	c := sc.DeepCopy()
	return &corev1.SecurityContext{RunAsUser: c.RunAsUser, RunAsGroup: c.RunAsGroup}
}

// containerStates are each container's state and the requests it runs
// with: the spec's map when they are the same, as they are but while a
// resize is under way.
func (s *Stripper) containerStates(in []corev1.ContainerStatus, spec []Container) []ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]ContainerStatus, len(in))
	for i, st := range in {
		out[i] = ContainerStatus{Name: intern(st.Name), State: readState(st.State)}
		if st.Resources != nil {
			requests := st.Resources.Requests
			shared := false
			for _, c := range spec {
				if c.Name == st.Name && sameRequests(c.Resources.Requests, requests) {
					requests, shared = c.Resources.Requests, true
				}
			}
			if !shared {
				requests = s.shareRequests(requests)
			}
			out[i].Resources = &Resources{Requests: requests}
		}
	}
	return out
}

// sameRequests reports whether a and b ask for the same quantities.
func sameRequests(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if r, ok := b[name]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}

// failedInits are the init containers that exited with an error: the only
// ones whose state the RM reads (the setup failure it reports).
func failedInits(in []corev1.ContainerStatus) []ContainerStatus {
	var out []ContainerStatus
	for _, st := range in {
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			out = append(out, ContainerStatus{Name: intern(st.Name), State: readState(st.State)})
		}
	}
	return out
}

func readState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if s.Running != nil {
		out.Running = &corev1.ContainerStateRunning{}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: t.Message}
	}
	return out
}
