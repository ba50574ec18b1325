package rgs

import (
	"strings"

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
//     every label (the informer's selectors and the pod contract), and the
//     pod contract's annotations (launch.AnnotationContext as StartedMark);
//   - spec: the node, the node selector (the partition a token names), the
//     run-as user and groups of the pod and of each container, and each
//     container's name and requests (capability, node use, resizes);
//   - status: phase, reason, message, conditions (binding time,
//     disruption, resize), ObservedGeneration, and each container's and
//     init container's name, state and resources (exit codes, termination
//     messages, resize outcome).
//
// Readers: RGS (controller.go, update.go), the node view (rgs/nodes.UseOf),
// RKS through Controller.ContainerPod (started, runAs, the node), and the web
// UI (the pod's name). knit-node's services watch pods with informers of
// their own and see whole pods. A non-pod passes unchanged; stripping a
// stripped pod changes nothing.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            p.Labels,
			Annotations:       knitAnnotations(p.Annotations),
		},
		Spec: corev1.PodSpec{
			NodeName:        p.Spec.NodeName,
			NodeSelector:    p.Spec.NodeSelector,
			SecurityContext: runAsOfPod(p.Spec.SecurityContext),
			Containers:      make([]corev1.Container, len(p.Spec.Containers)),
		},
		Status: corev1.PodStatus{
			Phase:              p.Status.Phase,
			Reason:             p.Status.Reason,
			Message:            p.Status.Message,
			Conditions:         p.Status.Conditions,
			ObservedGeneration: p.Status.ObservedGeneration,
		},
	}
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{
			Name:            c.Name,
			Resources:       corev1.ResourceRequirements{Requests: c.Resources.Requests},
			SecurityContext: runAsOfContainer(c.SecurityContext),
		}
	}
	out.Status.ContainerStatuses = statesOf(p.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = statesOf(p.Status.InitContainerStatuses)
	return out, nil
}

func knitAnnotations(in map[string]string) map[string]string {
	n := 0
	for k := range in {
		if strings.HasPrefix(k, knitPrefix) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range in {
		if strings.HasPrefix(k, knitPrefix) {
			out[k] = v
		}
	}
	if _, ok := out[launch.AnnotationContext]; ok {
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

func statesOf(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, State: s.State, Resources: s.Resources}
	}
	return out
}
