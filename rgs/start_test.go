package rgs

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// started runs Start on a rig seeded with pods and stops its informer when
// the test ends.
func started(t *testing.T, pods ...*corev1.Pod) (*Controller, []scheduling.Allocation) {
	t.Helper()
	c, client := podRig(t, nil, pods...)
	running, err := c.Start(t.Context(), StartConfig{Epoch: 4, Sink: completions(new([]scheduling.Completion))})
	t.Cleanup(func() {
		close(c.stop)
		c.factory.Shutdown()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "list" && v != "watch" {
			t.Errorf("Start wrote %v; it only reads", a)
		}
	}
	return c, running
}

func TestStartReturnsTheRunningContainersAndRebuildsTheBooksOfPendingPods(t *testing.T) {
	attempt := yarnid.AttemptID{App: appID(7), ID: 1}
	am := runningPod("am", "root.a", 7, 1)
	am.Labels[launch.LabelRole] = launch.RoleAM
	task := runningPod("task", "root.a", 7, 5)
	pending := gatedPod("pending", "root.a", 7, false)
	pending.Labels[launch.LabelAsk] = "h1"
	bound := gatedPod("bound", "root.a", 7, true)
	bound.Spec.NodeName = "n1"
	deleting := gatedPod("deleting", "root.a", 7, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_700_000_100, 0)}
	deleting.Finalizers = []string{"x"}
	lost := runningPod("lost", "root.a", 7, 9)
	lost.Spec.NodeName = "gone-node"
	notKnits := gatedPod("other", "root.a", 7, true)
	delete(notKnits.Labels, launch.LabelAttempt)

	c, running := started(t, am, task, pending, bound, deleting, lost, notKnits)

	var got []string
	for _, a := range running {
		id, err := yarnid.ContainerIDFromProto(a.Container.GetId())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Role+" "+id.String())
		if a.Container.GetNodeId().GetHost() != "n1" || a.Created.IsZero() {
			t.Errorf("%s on %v created %v, want its pod's node and creation", id, a.Container.GetNodeId(), a.Created)
		}
	}
	slices.Sort(got)
	want := []string{"am " + containerOfPod(t, am).String(), "task " + containerOfPod(t, task).String()}
	if !slices.Equal(got, want) {
		t.Errorf("running %q, want %q: containers on known nodes only", got, want)
	}

	// Every labelled container is kept, the one on an unknown node too: its
	// pod's worker and removals still find it.
	for _, p := range []*corev1.Pod{am, task, lost} {
		id := containerOfPod(t, p)
		if nn := c.containers[id]; nn != (types.NamespacedName{Namespace: "ns", Name: p.Name}) {
			t.Errorf("container %s kept as pod %v, want %s", id, nn, p.Name)
		}
		if c.byPod[p.UID] != id {
			t.Errorf("pod %s mapped to %v, want %s", p.Name, c.byPod[p.UID], id)
		}
	}
	if len(c.containers) != 3 || len(c.byPod) != 3 {
		t.Errorf("%d containers and %d pods kept, want 3", len(c.containers), len(c.byPod))
	}
	// The next container of the attempt follows the highest one seen.
	if c.seq[attempt] != 9 {
		t.Errorf("attempt's sequence %d, want 9", c.seq[attempt])
	}

	// Only the unbound pod not being deleted is pending, in a book the AM
	// has not restated: kept, not reconciled to nothing.
	if len(c.books) != 1 {
		t.Fatalf("%d books, want the task book alone", len(c.books))
	}
	b := c.books[bookKey{attempt, launch.RoleTask}]
	if b == nil {
		t.Fatal("no task book")
	}
	if b.known {
		t.Error("a rebuilt book is known before the AM states its asks")
	}
	p, ok := b.pending["pending"]
	if len(b.pending) != 1 || !ok || p.hash != "h1" || p.namespace != "ns" {
		t.Errorf("pending %+v, want the pending pod with its ask's hash", b.pending)
	}
	if err := c.syncBook(t.Context(), bookKey{attempt, launch.RoleTask}); err != nil {
		t.Fatal(err)
	}
	if len(b.pending) != 1 {
		t.Error("a sync of a rebuilt book dropped its pending pod before the AM's asks")
	}
}

func TestStartWithNoPodsReturnsNothing(t *testing.T) {
	c, running := started(t)
	if len(running) != 0 || len(c.books) != 0 || len(c.containers) != 0 {
		t.Errorf("running %v, %d books, %d containers; want none", running, len(c.books), len(c.containers))
	}
}
