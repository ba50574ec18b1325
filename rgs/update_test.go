package rgs

import (
	"testing"

	"github.com/knitdev/knit/rks/launch"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResizeOutcomeReadsTheNodesAnswer(t *testing.T) {
	res := func(mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	pod := func(generation, observed int64, running string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName, Resources: corev1.ResourceRequirements{Requests: res("512Mi"), Limits: res("512Mi")}}}},
			Status: corev1.PodStatus{ObservedGeneration: observed, Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{{
				Name: launch.ContainerName, Resources: &corev1.ResourceRequirements{Requests: res(running), Limits: res(running)},
			}}},
		}
	}
	pending := func(reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want resizeState
	}{
		{"running at the new size", pod(2, 2, "512Mi"), resizeDone},
		{"a node that tracks no generation, at the new size", pod(2, 0, "512Mi"), resizeDone},
		{"a status older than the resize", pod(2, 1, "512Mi"), resizeWaiting},
		{"still at the old size", pod(2, 2, "256Mi"), resizeWaiting},
		{"deferred for room", pod(2, 2, "256Mi", pending(corev1.PodReasonDeferred)), resizeWaiting},
		{"in progress", pod(2, 2, "512Mi", corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}), resizeWaiting},
		{"beyond the node", pod(2, 2, "256Mi", pending(corev1.PodReasonInfeasible)), resizeInfeasible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resizeOutcome(tt.pod); got != tt.want {
				t.Errorf("resizeOutcome = %d, want %d", got, tt.want)
			}
		})
	}
}
