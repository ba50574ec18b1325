package rgs

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/scheduling"
)

// holds is what a fake RM holds: the applications it knows (true: ended),
// the attempts and containers that live.
type holds struct {
	apps       map[yarnid.ApplicationID]bool
	attempts   map[yarnid.AttemptID]bool
	containers map[yarnid.ContainerID]bool
}

func (h holds) ApplicationEnded(app yarnid.ApplicationID) (ended, known bool) {
	ended, known = h.apps[app]
	return ended, known
}
func (h holds) AttemptLive(a yarnid.AttemptID) bool      { return h.attempts[a] }
func (h holds) ContainerLive(id yarnid.ContainerID) bool { return h.containers[id] }

func appID(n int32) yarnid.ApplicationID { return yarnid.ApplicationID{ClusterTimestamp: 1, ID: n} }

func firstAttempt(n int32) yarnid.AttemptID { return yarnid.AttemptID{App: appID(n), ID: 1} }

// containerOfPod is the container runningPod labels its pod with.
func containerOfPod(t *testing.T, p *corev1.Pod) yarnid.ContainerID {
	t.Helper()
	id, ok := containerOf(record(p))
	if !ok {
		t.Fatalf("pod %s has no container", p.Name)
	}
	return id
}

// writes are the client's actions as "verb name", in order.
func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch x := a.(type) {
		case k8stesting.DeleteAction:
			out = append(out, "delete "+x.GetName())
		case k8stesting.PatchAction:
			out = append(out, "patch "+x.GetName())
		default:
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func TestAPodsSyncCollectsWhatTheRMHoldsNothingOf(t *testing.T) {
	running := runningPod("run", "root.a", 7, 2)
	otherRunning := runningPod("run2", "root.a", 7, 3)
	pending := gatedPod("pend", "root.a", 7, true)
	bound := gatedPod("bound", "root.a", 7, true)
	bound.Spec.NodeName = "n1"
	finished := runningPod("done", "root.a", 7, 4)
	finished.Status.Phase = corev1.PodSucceeded
	going := runningPod("going", "root.a", 7, 5)
	going.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_700_000_100, 0)}
	going.Finalizers = []string{"x"}
	live := holds{apps: map[yarnid.ApplicationID]bool{appID(7): false}, attempts: map[yarnid.AttemptID]bool{firstAttempt(7): true},
		containers: map[yarnid.ContainerID]bool{containerOfPod(t, running): true, containerOfPod(t, otherRunning): true}}
	ended := holds{apps: map[yarnid.ApplicationID]bool{appID(7): true}}
	// liveApp holds application 7 live and none of its attempts or
	// containers.
	liveApp := holds{apps: map[yarnid.ApplicationID]bool{appID(7): false}}

	tests := []struct {
		name    string
		desired Desired
		seeded  []*corev1.Pod
		synced  string
		// afterGrace syncs the pod again once the orphan grace is over.
		afterGrace bool
		want       []string
	}{
		{name: "a running container the RM holds stays", desired: live, seeded: []*corev1.Pod{running}, synced: "run", afterGrace: true},
		{name: "a pending pod of a live attempt stays", desired: live, seeded: []*corev1.Pod{pending}, synced: "pend", afterGrace: true},
		{name: "an ended application's pods all go at its first pod's sync", desired: ended,
			seeded: []*corev1.Pod{running, otherRunning, pending, finished}, synced: "run",
			want: []string{"delete done", "delete pend", "delete run", "delete run2"}},
		{name: "a pod already going is left to go", desired: ended, seeded: []*corev1.Pod{going}, synced: "going"},
		{name: "a container the RM does not hold stays within the grace", desired: liveApp, seeded: []*corev1.Pod{running}, synced: "run"},
		{name: "a container the RM does not hold goes after the grace", desired: liveApp, seeded: []*corev1.Pod{running, otherRunning},
			synced: "run", afterGrace: true, want: []string{"delete run"}},
		{name: "a pending pod of an attempt over goes after the grace", desired: liveApp, seeded: []*corev1.Pod{pending},
			synced: "pend", afterGrace: true, want: []string{"delete pend"}},
		{name: "an ended container's pod stays with its application", desired: liveApp, seeded: []*corev1.Pod{finished},
			synced: "done", afterGrace: true},
		{name: "a bound pod not yet a container is allocate's to settle", desired: liveApp, seeded: []*corev1.Pod{bound},
			synced: "bound", want: []string{"patch bound"}},
		{name: "a pod of an application the RM does not hold stays", desired: holds{}, seeded: []*corev1.Pod{running, pending},
			synced: "run", afterGrace: true},
		{name: "without the RM's desired state nothing is collected", seeded: []*corev1.Pod{running}, synced: "run", afterGrace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := podRig(t, sinkFunc(func(scheduling.Allocation) error { return nil }), tt.seeded...)
			if tt.desired != nil {
				c.desired = tt.desired
			}
			now := time.Unix(1_700_001_000, 0)
			c.orphans.now = func() time.Time { return now }
			nn := types.NamespacedName{Namespace: "ns", Name: tt.synced}
			sync := func() {
				t.Helper()
				if err := c.syncPod(t.Context(), nn); err != nil {
					t.Fatal(err)
				}
				for c.removeQueue.Len() > 0 {
					c.processRemoval(t.Context())
				}
			}
			sync()
			if tt.afterGrace {
				if len(client.Actions()) == 0 {
					now = now.Add(orphanGrace)
					sync()
				}
			}
			got := writes(client.Actions())
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTheSweepFindsOrphansWithoutAnEventOfTheirs(t *testing.T) {
	orphan := runningPod("orphan", "root.a", 7, 2)
	kept := runningPod("kept", "root.a", 7, 3)
	ofEnded := runningPod("ended", "root.a", 8, 2)
	c, client := podRig(t, completions(new([]scheduling.Completion)), orphan, kept, ofEnded)
	c.desired = holds{apps: map[yarnid.ApplicationID]bool{appID(7): false, appID(8): true},
		containers: map[yarnid.ContainerID]bool{containerOfPod(t, kept): true}}
	now := time.Unix(1_700_001_000, 0)
	c.orphans.now = func() time.Time { return now }
	sweep := func() []string {
		c.sweep(t.Context())
		for c.removeQueue.Len() > 0 {
			c.processRemoval(t.Context())
		}
		got := writes(client.Actions())
		client.ClearActions()
		slices.Sort(got)
		return got
	}
	if got := sweep(); !slices.Equal(got, []string{"delete ended"}) {
		t.Errorf("first sweep wrote %q, want the ended application's pod deleted", got)
	}
	now = now.Add(orphanGrace)
	if got := sweep(); !slices.Equal(got, []string{"delete orphan"}) {
		t.Errorf("sweep after the grace wrote %q, want the orphan deleted", got)
	}
	// The informer's cache still shows both: the deletes are expected, and
	// no sweep deletes them again.
	if got := sweep(); len(got) != 0 {
		t.Errorf("a later sweep wrote %q, want nothing", got)
	}
}

func TestADoubtIsClearedWhenTheRMHoldsTheContainerAgain(t *testing.T) {
	pod := runningPod("run", "root.a", 7, 2)
	c, client := podRig(t, completions(new([]scheduling.Completion)), pod)
	h := holds{apps: map[yarnid.ApplicationID]bool{appID(7): false}, containers: map[yarnid.ContainerID]bool{}}
	c.desired = h
	now := time.Unix(1_700_001_000, 0)
	c.orphans.now = func() time.Time { return now }
	// Labelled before the Sink heard of it: not held yet.
	c.collect(t.Context(), record(pod))
	h.containers[containerOfPod(t, pod)] = true
	now = now.Add(orphanGrace / 2)
	c.collect(t.Context(), record(pod))
	delete(h.containers, containerOfPod(t, pod))
	now = now.Add(orphanGrace / 2)
	if c.collect(t.Context(), record(pod)) {
		t.Fatal("collected at the end of a grace that began again when the RM held it")
	}
	now = now.Add(orphanGrace)
	if !c.collect(t.Context(), record(pod)) {
		t.Fatal("not collected after a whole grace not held")
	}
	if a := client.Actions(); len(a) != 0 {
		t.Errorf("collect wrote %v; the removal workers write", a)
	}
}
