package rgs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/scheduling"
)

// TestAdmittedPodsCountUntilTheyAreContainers syncs one pod of root.a
// (2 GiB, 1 vcore, user u) through the states given, each seen by the
// cache and synced in turn, and checks what the admitted index counts
// for it after the last: what admission counts as used and the RM does
// not yet hold as a container.
func TestAdmittedPodsCountUntilTheyAreContainers(t *testing.T) {
	gated := func() *corev1.Pod { return gatedPod("p", "root.a", 1, false) }
	lifted := func() *corev1.Pod { return gatedPod("p", "root.a", 1, true) }
	bound := func() *corev1.Pod {
		p := lifted()
		p.Spec.NodeName = "n1"
		return p
	}
	ended := func() *corev1.Pod {
		p := lifted()
		p.Status.Phase = corev1.PodSucceeded
		return p
	}
	deleting := func() *corev1.Pod {
		p := lifted()
		p.DeletionTimestamp = &metav1.Time{}
		return p
	}
	container := func() *corev1.Pod { return runningPod("p", "root.a", 1, 2) }
	volcano := func() *corev1.Pod {
		p := lifted()
		p.Annotations = map[string]string{VolcanoQueueAnnotation: "a"}
		return p
	}
	pod := admission.Resource{MemoryMB: 2048, Vcores: 1}
	tests := []struct {
		name string
		// states are the pod's in the cache, nil for gone.
		states []func() *corev1.Pod
		want   admission.Resource
	}{
		{"a gated pod is not used", []func() *corev1.Pod{gated}, admission.Resource{}},
		{"a lifted pod waiting for the scheduler is used", []func() *corev1.Pod{gated, lifted}, pod},
		{"a lifted pod's sync that makes it a container hands it to the RM", []func() *corev1.Pod{lifted, bound}, admission.Resource{}},
		{"a container is the RM's", []func() *corev1.Pod{lifted, container}, admission.Resource{}},
		{"a lifted pod that ended is not used", []func() *corev1.Pod{lifted, ended}, admission.Resource{}},
		{"a lifted pod being deleted is not used", []func() *corev1.Pod{lifted, deleting}, admission.Resource{}},
		{"a lifted pod gone is not used", []func() *corev1.Pod{lifted, nil}, admission.Resource{}},
		{"a pod seen twice counts once", []func() *corev1.Pod{lifted, lifted}, pod},
		{"a delegated queue's waiting pod is its batch scheduler's to admit", []func() *corev1.Pod{volcano}, admission.Resource{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := podRig(t, sinkFunc(func(scheduling.Allocation) error { return nil }), bound())
			c.policy = policy{}
			store := c.factory.Core().V1().Pods().Informer().GetIndexer()
			nn := types.NamespacedName{Namespace: "ns", Name: "p"}
			for _, state := range tt.states {
				if old, ok, _ := store.GetByKey("ns/p"); ok {
					if err := store.Delete(old); err != nil {
						t.Fatal(err)
					}
				}
				if state != nil {
					if err := store.Add(state()); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.syncPod(t.Context(), nn); err != nil {
					t.Fatal(err)
				}
			}
			for _, path := range []string{"root.a", "root"} {
				if got := c.AdmittedUnbound(path); got != tt.want {
					t.Errorf("%s counts %+v admitted, want %+v", path, got, tt.want)
				}
			}
			if got := c.AdmittedUnboundOf("root.a", "u"); got != tt.want {
				t.Errorf("user u of root.a counts %+v admitted, want %+v", got, tt.want)
			}
			if got := c.AdmittedUnbound("root.b"); got != (admission.Resource{}) {
				t.Errorf("root.b counts %+v admitted, want none", got)
			}
			// None of these states is bound and not yet a container.
			if got := c.AdmittedUnplaced(); got != tt.want {
				t.Errorf("%+v counts as on no node yet, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdmittedPodsBoundToANodeCountAsPlaced(t *testing.T) {
	x := newAdmittedIndex()
	pod := func(placed bool) admittedPod {
		return admittedPod{queue: "root.a", user: "u", resource: admission.Resource{MemoryMB: 2048, Vcores: 1}, placed: placed}
	}
	steps := []struct {
		name         string
		a            admittedPod
		counts       bool
		wantUnplaced int64
	}{
		{"admitted, on no node", pod(false), true, 2048},
		{"bound to a node", pod(true), true, 0},
		{"a container, no longer admitted", admittedPod{}, false, 0},
	}
	nn := types.NamespacedName{Namespace: "ns", Name: "p"}
	for _, s := range steps {
		x.set(nn, s.a, s.counts)
		if got := x.notPlaced().MemoryMB; got != s.wantUnplaced {
			t.Errorf("%s: %d MB on no node, want %d", s.name, got, s.wantUnplaced)
		}
		if s.counts {
			if got := x.queue("root").MemoryMB; got != 2048 {
				t.Errorf("%s: root counts %d MB admitted, want 2048 whether placed or not", s.name, got)
			}
		}
	}
}
