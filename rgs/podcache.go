package rgs

import (
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/rks/launch"
)

// knitPrefix starts every label and annotation key of the pod contract
// (package launch).
const knitPrefix = "knit.io/"

// StartedMark stands, in the RM's pod cache, for the launch context RKS
// wrote on a started container's pod: the RM only asks whether a pod has
// one (RKS's started, and its update check), and the context itself, the
// largest part of a started pod, is for the node to read.
const StartedMark = "started"

// StripPod is the pod informer's transform (cache.TransformFunc): it keeps
// of each of Knit's pods only what the RM reads of it, so the RM holds a
// fraction of every pod in memory. Everything that reads the shared pod
// informer reads only these fields (a new reader of another field adds it
// here, and to TestStrippedPodAnswersEveryReaderAsTheWholePod):
//
//   - metadata: name, namespace, UID, resource version (RGS's delete
//     precondition), generation (resizes), creation and deletion times,
//     every label (the informer's selectors and the pod contract), the
//     pod contract's annotations (launch.AnnotationContext as StartedMark),
//     and the batch schedulers' queue annotations (delegated);
//   - spec: the node, the node selector (the partition a token names), the
//     run-as user and groups of the pod and of each container, and each
//     container's name and requests (capability, node use, resizes);
//   - status: phase, reason, message, the conditions of the binding (its
//     time), a disruption and a resize, ObservedGeneration, each
//     container's name, whether it runs, its exit code and termination
//     message and the requests it runs with (resize outcome), and the
//     init containers that failed, with their exit code and message.
//
// Strings many pods share are interned (see intern).
//
// Readers: RGS (controller.go, update.go, admit.go: the scheduling gates), the node view (rgs/nodes.UseOf),
// RKS through Controller.ContainerPod (started, runAs, the node), and the web
// UI (the pod's name). knit-node's services watch pods with informers of
// their own and see whole pods. A non-pod passes unchanged; stripping a
// stripped pod changes nothing.
func StripPod(obj any) (any, error) { return stripPod(obj, nil) }

// PodStripper is StripPod with one map of requests shared by every pod
// that asks for the same quantities, as all the pods of one ask do: each
// map of two quantities is some 600 bytes, as much again as the rest of
// a container's share of its stripped pod. Safe for concurrent use.
type PodStripper struct {
	mu     sync.Mutex
	shapes map[string]corev1.ResourceList
}

// maxRequestShapes bounds the maps a PodStripper keeps; requests of
// shapes beyond it are kept per pod, as StripPod keeps them.
const maxRequestShapes = 4096

// NewPodStripper returns a PodStripper sharing no maps yet.
func NewPodStripper() *PodStripper {
	return &PodStripper{shapes: map[string]corev1.ResourceList{}}
}

// Strip is the pod informer's transform (cache.TransformFunc).
func (s *PodStripper) Strip(obj any) (any, error) { return stripPod(obj, s) }

// share returns the map kept for rl's quantities, keeping rl as that map
// if there is none yet and room for it. Maps in the informer's cache are
// only read, never written, so pods may share them.
func (s *PodStripper) share(rl corev1.ResourceList) corev1.ResourceList {
	if s == nil || len(rl) == 0 {
		return rl
	}
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var key strings.Builder
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		key.WriteString(name)
		key.WriteByte('=')
		key.WriteString(q.String())
		key.WriteByte(',')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := s.shapes[key.String()]; ok {
		return kept
	}
	if len(s.shapes) < maxRequestShapes {
		s.shapes[key.String()] = rl
	}
	return rl
}

func stripPod(obj any, shapes *PodStripper) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         intern(p.Namespace),
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            knitLabels(p.Labels),
			Annotations:       knitAnnotations(p.Annotations),
		},
		Spec: corev1.PodSpec{
			NodeName:        intern(p.Spec.NodeName),
			NodeSelector:    p.Spec.NodeSelector,
			SecurityContext: runAsOfPod(p.Spec.SecurityContext),
			Containers:      make([]corev1.Container, len(p.Spec.Containers)),
			// Admission reads whether Knit's gate is still there.
			SchedulingGates: p.Spec.SchedulingGates,
		},
		Status: corev1.PodStatus{
			Phase:              p.Status.Phase,
			Reason:             p.Status.Reason,
			Message:            p.Status.Message,
			Conditions:         readConditions(p.Status.Conditions),
			ObservedGeneration: p.Status.ObservedGeneration,
		},
	}
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{
			Name:            intern(c.Name),
			Resources:       corev1.ResourceRequirements{Requests: shapes.share(c.Resources.Requests)},
			SecurityContext: runAsOfContainer(c.SecurityContext),
		}
	}
	out.Status.ContainerStatuses = containerStates(p.Status.ContainerStatuses, out.Spec.Containers)
	out.Status.InitContainerStatuses = failedInits(p.Status.InitContainerStatuses)
	return out, nil
}

// intern shares one copy of a string that many pods repeat (namespaces,
// nodes, label keys, queues, users, application ids) instead of one per
// decoded pod; the runtime drops a copy no pod holds any more.
func intern(s string) string { return unique.Make(s).Value() }

// knitLabels are every label, each interned but the container id, which is
// the pod's own.
func knitLabels(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != launch.LabelContainer {
			v = intern(v)
		}
		out[intern(k)] = v
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
			c.LastProbeTime = metav1.Time{}
			out = append(out, c)
		}
	}
	return out
}

// readAnnotation is whether the RM reads annotation k: the pod contract's,
// and the batch schedulers' queues Knit writes on a delegated queue's pods
// (delegated: such a pod never had Knit's gate).
func readAnnotation(k string) bool {
	return strings.HasPrefix(k, knitPrefix) || k == YuniKornQueueAnnotation || k == VolcanoQueueAnnotation
}

func knitAnnotations(in map[string]string) map[string]string {
	n := 0
	for k := range in {
		if readAnnotation(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range in {
		if readAnnotation(k) && k != launch.AnnotationContext {
			out[intern(k)] = intern(v)
		}
	}
	if _, ok := in[launch.AnnotationContext]; ok {
		out[launch.AnnotationContext] = StartedMark
	}
	return out
}

func runAsOfPod(sc *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if sc == nil || (sc.RunAsUser == nil && sc.RunAsGroup == nil && sc.FSGroup == nil) {
		return nil
	}
	return &corev1.PodSecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup, FSGroup: sc.FSGroup}
}

func runAsOfContainer(sc *corev1.SecurityContext) *corev1.SecurityContext {
	if sc == nil || (sc.RunAsUser == nil && sc.RunAsGroup == nil) {
		return nil
	}
	return &corev1.SecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup}
}

// containerStates are each container's state (whether it runs, its exit
// code and termination message) and the requests it runs with: the map of
// the container's spec when they are the same, as they are but while a
// resize is under way, so a pod holds one map of requests, not two.
func containerStates(in []corev1.ContainerStatus, spec []corev1.Container) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: intern(s.Name), State: readState(s.State)}
		if s.Resources != nil {
			requests := s.Resources.Requests
			for _, c := range spec {
				if c.Name == s.Name && sameRequests(c.Resources.Requests, requests) {
					requests = c.Resources.Requests
				}
			}
			out[i].Resources = &corev1.ResourceRequirements{Requests: requests}
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
func failedInits(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range in {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			out = append(out, corev1.ContainerStatus{Name: s.Name, State: readState(s.State)})
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
