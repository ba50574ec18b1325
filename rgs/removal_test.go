package rgs

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// cachePods puts the pods created so far into the informer's cache, which
// the rig does not run.
func (r *volcanoRig) cachePods(t *testing.T) {
	t.Helper()
	for _, p := range r.pods(t) {
		if err := r.c.factory.Core().V1().Pods().Informer().GetIndexer().Add(&p); err != nil {
			t.Fatal(err)
		}
	}
}

// drainRemovals carries out the queued removals once each.
func (r *volcanoRig) drainRemovals() {
	for r.c.removeQueue.Len() > 0 {
		r.c.processRemoval(context.Background())
	}
}

func TestTheRMsRemovalsWriteNothingUntilAWorkerCarriesThemOut(t *testing.T) {
	attempt := yarnid.AttemptID{App: app7, ID: 1}
	tests := []struct {
		name string
		// record asks for pods, then records the RM's removal.
		record func(t *testing.T, r *volcanoRig)
		want   []string // writes, in order, pod names by prefix
	}{
		{
			name: "an application's end deletes its pods, then its PodGroup",
			record: func(t *testing.T, r *volcanoRig) {
				r.ask(t, app7, launch.RoleTask, "root.vc", 2)
				r.cachePods(t)
				r.takeWrites()
				r.c.RemoveApplication(app7)
			},
			want: []string{"delete pods/app-1700000000000-0007-", "delete pods/app-1700000000000-0007-", "delete podgroups/application-1700000000000-0007"},
		},
		{
			name: "an attempt's end deletes its pending pods",
			record: func(t *testing.T, r *volcanoRig) {
				r.ask(t, app7, launch.RoleTask, "root.plain", 2)
				r.ask(t, app7, launch.RoleAM, "root.plain", 1)
				r.takeWrites()
				r.c.ForgetAttempt(attempt)
			},
			want: []string{"delete pods/app-1700000000000-0007-", "delete pods/app-1700000000000-0007-", "delete pods/app-1700000000000-0007-"},
		},
		{
			name: "a released container's pod is deleted",
			record: func(t *testing.T, r *volcanoRig) {
				r.ask(t, app7, launch.RoleTask, "root.plain", 1)
				r.takeWrites()
				pod := r.pods(t)[0]
				id := yarnid.ContainerID{Attempt: attempt, Sequence: 1}
				r.c.mu.Lock()
				r.c.containers[id] = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
				r.c.mu.Unlock()
				r.c.DeleteContainer(id)
				// A container RGS never allocated has no pod to delete.
				r.c.DeleteContainer(yarnid.ContainerID{Attempt: attempt, Sequence: 99})
			},
			want: []string{"delete pods/app-1700000000000-0007-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newVolcanoRig(t)
			tt.record(t, r)
			if w := r.takeWrites(); len(w) != 0 {
				t.Fatalf("recording the removal wrote %q; the RM's call must not wait on the API server", w)
			}
			r.drainRemovals()
			got := r.takeWrites()
			if len(got) != len(tt.want) {
				t.Fatalf("writes %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("write %d is %q, want %q...", i, got[i], tt.want[i])
				}
			}
			if left := r.pods(t); len(left) != 0 {
				t.Errorf("%d pods left", len(left))
			}
			// Carried out again (the cache may still show what is gone),
			// it holds without a retry or a warning.
			r.c.RemoveApplication(app7)
			r.drainRemovals()
			if n := r.c.removeQueue.NumRequeues(removal{app: app7}); n != 0 {
				t.Errorf("a removal carried out again was requeued %d times", n)
			}
			if strings.Contains(r.log.String(), "level=WARN") || strings.Contains(r.log.String(), "level=ERROR") {
				t.Errorf("a removal carried out again logged:\n%s", r.log)
			}
		})
	}
}

func TestARemovalThatFailsIsRetriedByTheQueueUntilItHolds(t *testing.T) {
	failures := []struct {
		name     string
		resource string
		err      error
	}{
		{"pod delete", "pods", apierrors.NewInternalError(context.DeadlineExceeded)},
		{"PodGroup delete", "podgroups", apierrors.NewServiceUnavailable("etcd leader changed")},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			r := newVolcanoRig(t)
			r.ask(t, app7, launch.RoleTask, "root.vc", 1)
			r.cachePods(t)
			r.takeWrites()
			fail := 1
			reactor := func(k8stesting.Action) (bool, runtime.Object, error) {
				if fail > 0 {
					fail--
					return true, nil, tt.err
				}
				return false, nil, nil
			}
			if tt.resource == "pods" {
				r.client.PrependReactor("delete", "pods", reactor)
			} else {
				r.dyn.PrependReactor("delete", "podgroups", reactor)
			}
			r.c.RemoveApplication(app7)
			r.c.processRemoval(context.Background())
			key := removal{app: app7}
			if n := r.c.removeQueue.NumRequeues(key); n != 1 {
				t.Fatalf("requeued %d times after a failure, want 1", n)
			}
			// The rate limiter gives it back after its delay; Get waits.
			r.c.processRemoval(context.Background())
			if n := r.c.removeQueue.NumRequeues(key); n != 0 {
				t.Errorf("still requeued %d times after it held", n)
			}
			if left := r.pods(t); len(left) != 0 {
				t.Errorf("%d pods left", len(left))
			}
			if left := r.podGroups(t); len(left) != 0 {
				t.Errorf("%d PodGroups left", len(left))
			}
		})
	}
}

func TestARemovalRefusedForGoodIsLoggedAndNotRetried(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleTask, "root.plain", 1)
	r.cachePods(t)
	r.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", nil)
	})
	r.c.RemoveApplication(app7)
	r.c.processRemoval(context.Background())
	if n := r.c.removeQueue.NumRequeues(removal{app: app7}); n != 0 {
		t.Errorf("a forbidden delete was requeued %d times", n)
	}
	if r.c.removeQueue.Len() != 0 {
		t.Errorf("%d removals left in the queue", r.c.removeQueue.Len())
	}
	lines := slices.DeleteFunc(strings.Split(r.log.String(), "\n"), func(l string) bool { return !strings.Contains(l, "level=ERROR") })
	if len(lines) != 1 || !strings.Contains(lines[0], "forbidden") {
		t.Errorf("errors logged %q, want the refusal once", lines)
	}
}

func TestAnAMsStopMarksThePodThenDeletesItInTheBackground(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleTask, "root.plain", 1)
	pod := r.pods(t)[0]
	id := yarnid.ContainerID{Attempt: yarnid.AttemptID{App: app7, ID: 1}, Sequence: 1}
	r.c.mu.Lock()
	r.c.containers[id] = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	r.c.mu.Unlock()
	r.client.ClearActions()

	r.c.StopContainer(id)
	if a := r.client.Actions(); len(a) != 0 {
		t.Fatalf("stopping wrote %v before a worker carried it out", a)
	}
	r.drainRemovals()
	var got []string
	for _, a := range r.client.Actions() {
		if a.GetVerb() == "patch" {
			p := a.(k8stesting.PatchAction)
			if !strings.Contains(string(p.GetPatch()), `"`+launch.AnnotationStoppedBy+`":"`+launch.StoppedByAppMaster+`"`) {
				t.Errorf("patch %s does not mark the pod stopped by its AM", p.GetPatch())
			}
		}
		got = append(got, a.GetVerb())
	}
	if !slices.Equal(got, []string{"patch", "delete"}) {
		t.Errorf("actions %v, want the mark, then the delete", got)
	}
}
