package rgs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

func TestAPodCreatedButNotYetSeenIsDeletedOnlyOnceTheCacheShowsIt(t *testing.T) {
	r := newVolcanoRig(t)
	spec := scheduling.AttemptSpec{Attempt: yarnid.AttemptID{App: app7, ID: 1}, Role: launch.RoleTask, Queue: "root.plain", User: "alice"}
	k := bookKey{spec.Attempt, spec.Role}
	r.ask(t, app7, launch.RoleTask, "root.plain", 2)
	r.takeWrites()
	// The ask drops before the cache shows the pods: the scheduler may
	// have bound them already, and the sync leaves them.
	r.c.Ask(spec, []*yarnpb.ResourceRequestProto{req(1, "*", 0, true)})
	if err := r.c.syncBook(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if w := r.takeWrites(); len(w) != 0 {
		t.Fatalf("the sync wrote %q for pods the cache does not show", w)
	}
	// Seen by their worker, they queue the book again, once.
	r.cachePods(t)
	for _, p := range r.pods(t) {
		if err := r.c.syncPod(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.c.bookQueue.Len(); n != 1 {
		t.Fatalf("%d books queued, want the book once", n)
	}
	r.client.ClearActions()
	if err := r.c.syncBook(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	var deletes int
	for _, a := range r.client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			deletes++
			if d.DeleteOptions.Preconditions == nil || d.DeleteOptions.Preconditions.ResourceVersion == nil {
				t.Errorf("delete of %s without the cached resource version", d.Name)
			}
		}
	}
	if deletes != 2 {
		t.Errorf("%d deletes, want the 2 pods'", deletes)
	}
}

func TestAnApplicationsEndDeletesItsPodsTheCacheDoesNotShowYet(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleTask, "root.plain", 2)
	r.takeWrites()
	r.c.RemoveApplication(app7)
	r.drainRemovals()
	got := r.takeWrites()
	if len(got) != 2 || !slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "delete pods/app-1700000000000-0007-") }) {
		t.Errorf("writes %q, want the 2 unseen pods deleted", got)
	}
	if left := r.pods(t); len(left) != 0 {
		t.Errorf("%d pods left", len(left))
	}
}

func TestAdmissionNeitherCountsNorLiftsAPodDeletedButStillCached(t *testing.T) {
	big := gatedPod("a1", "root.a", 1, false)
	deleted := gatedPod("a22", "root.a", 2, false)
	c, client := podRig(t, completions(new([]scheduling.Completion)), big, deleted)
	c.policy = policy{}
	c.expect.expectDelete(types.NamespacedName{Namespace: "ns", Name: "a22"})
	if err := c.admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			patched = append(patched, p.Name)
		}
	}
	if !slices.Equal(patched, []string{"a1"}) {
		t.Errorf("lifted %v, want a1 alone", patched)
	}
}

func TestAnExpectationWhoseEventWasLostLapsesAfterItsTTL(t *testing.T) {
	now := time.Unix(0, 0)
	e := newPodExpectations(func() time.Time { return now })
	nn := types.NamespacedName{Namespace: "ns", Name: "p"}
	e.expectCreate(nn, app7)
	e.expectDelete(nn)
	if !e.unseen(nn) || !e.deleting(nn) {
		t.Fatal("fresh expectations not held")
	}
	now = now.Add(expectationTTL + time.Second)
	if e.unseen(nn) || e.deleting(nn) {
		t.Error("expectations held past their TTL")
	}
}
