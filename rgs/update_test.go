package rgs

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
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
			if got := resizeOutcome(record(tt.pod)); got != tt.want {
				t.Errorf("resizeOutcome = %d, want %d", got, tt.want)
			}
		})
	}
}

// failingPatches fails the first n patches of pods with err (n < 0: every
// one), calling each failure's hook, and counts every patch tried.
func failingPatches(client *fake.Clientset, n int, err error, hook func()) *int {
	tried := 0
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		tried++
		if n >= 0 && tried > n {
			return false, nil, nil
		}
		if hook != nil {
			hook()
		}
		return true, nil, err
	})
	return &tried
}

// allocatedPod is a controller with one running container's pod, known
// as container 1 of application 7.
func allocatedPod(t *testing.T) (*Controller, *fake.Clientset, yarnid.ContainerID) {
	t.Helper()
	p := gatedPod("p", "root.a", 7, true)
	p.Spec.NodeName = "n1"
	c, cs := podRig(t, sinkFunc(func(scheduling.Allocation) error { return nil }), p)
	id := yarnid.ContainerID{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 7}, ID: 1}, Sequence: 1}
	c.containers[id] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	return c, cs, id
}

func TestARequestPathsWriteIsTriedAgainUnlessNoRetryCanMendIt(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd leader changing")
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	tests := []struct {
		name     string
		failures int // the first patches that fail; -1 every one
		err      error
		cancel   bool // the caller goes away at the first failure
		// wantTries is the patches tried; wantTerminal whether the error
		// says no retry can mend it.
		wantTries    int
		wantErr      bool
		wantTerminal bool
	}{
		{name: "a write that succeeds is tried once", wantTries: 1},
		{name: "a transient failure is tried again", failures: 2, err: unavailable, wantTries: 3},
		{name: "a pod gone is tried once", failures: 1, err: gone, wantTries: 1, wantErr: true, wantTerminal: true},
		{name: "an API server away through every try is given up after the bound", failures: -1, err: unavailable,
			wantTries: requestTries, wantErr: true},
		{name: "a caller gone ends the tries", failures: -1, err: unavailable, cancel: true, wantTries: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			c, cs, id := allocatedPod(t)
			var hook func()
			if tt.cancel {
				hook = cancel
			}
			tried := failingPatches(cs, tt.failures, tt.err, hook)
			err := c.RequestThreadDump(ctx, id)
			if (err != nil) != tt.wantErr || err != nil && terminal(err) != tt.wantTerminal {
				t.Errorf("thread dump: %v, want an error %v, terminal %v", err, tt.wantErr, tt.wantTerminal)
			}
			if tt.cancel && !errors.Is(err, context.Canceled) {
				t.Errorf("thread dump: %v, want the caller's end", err)
			}
			if *tried != tt.wantTries {
				t.Errorf("%d patches tried, want %d", *tried, tt.wantTries)
			}
		})
	}
}

func TestADecreasesResizeAndVersionEachRideOutAFailure(t *testing.T) {
	c, cs, id := allocatedPod(t)
	// Every other patch fails: the resize's first try, then the version's.
	tried := 0
	cs.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		tried++
		if tried%2 == 1 {
			return true, nil, apierrors.NewTimeoutError("slow", 1)
		}
		return false, nil, nil
	})
	got, err := c.UpdateContainer(t.Context(), scheduling.Update{Container: id, Type: yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE,
		Capability: yarnpb.NewResource(1024, 1)})
	if err != nil {
		t.Fatalf("decrease: %v", err)
	}
	if tried != 4 {
		t.Errorf("%d patches tried, want 4 (the resize and the version, each twice)", tried)
	}
	if got.GetVersion() != 1 || got.GetResource().GetMemory() != 1024 {
		t.Errorf("decreased container version %d, %d MB; want version 1, 1024 MB", got.GetVersion(), got.GetResource().GetMemory())
	}
}
