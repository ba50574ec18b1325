package rgs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/rks/launch"
)

func TestEndedReadsYARNExitStatusFromThePod(t *testing.T) {
	terminated := func(code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: launch.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}},
		}}}}
	}
	stopped := terminated(143, "")
	stopped.Annotations = map[string]string{launch.AnnotationStoppedBy: "appmaster"}
	evicted := terminated(137, "")
	evicted.Status.Reason, evicted.Status.Message = "Evicted", "The node was low on resource: memory."
	tests := []struct {
		name      string
		pod       *corev1.Pod
		exit      int32
		diag      string
		preempted bool
	}{
		{"a command's exit code", terminated(3, "Exception from container-launch."), 3, "Exception from container-launch.", false},
		{"a command exiting 255", terminated(255, "Exception from container-launch."), 255, "Exception from container-launch.", false},
		{"a localization failure is INVALID", terminated(launch.ExitLocalizationFailed, launch.LocalizationFailureMessage("Resource x changed on src filesystem")),
			ExitInvalid, "Resource x changed on src filesystem", false},
		{"a stop by the AM", stopped, ExitKilledByAppMaster, killedByAMDiagnostics(143), false},
		{"an eviction", evicted, ExitPreempted, "Container preempted by Kubernetes: Evicted: The node was low on resource: memory.", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, exit, diag, preempted := ended(tt.pod)
			if !done || exit != tt.exit || diag != tt.diag || preempted != tt.preempted {
				t.Errorf("ended = %v, %d, %q, %v; want true, %d, %q, %v", done, exit, diag, preempted, tt.exit, tt.diag, tt.preempted)
			}
		})
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if done, _, _, _ := ended(running); done {
		t.Error("a running pod reads as ended")
	}
}
