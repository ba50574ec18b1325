package rgs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// volcanoRig is a controller whose queues root.vc and root.vc2 delegate to
// Volcano (queue batch, namespace yarn, priority class yarn-high) and
// root.plain does not, on fake clients that log every write in order.
type volcanoRig struct {
	c       *Controller
	factory informers.SharedInformerFactory
	client  *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	log     *bytes.Buffer

	mu     sync.Mutex
	writes []string // "create pods/<name>", "create podgroups/<name>", ...
}

func newVolcanoRig(t *testing.T, podGroups ...runtime.Object) *volcanoRig {
	t.Helper()
	r := &volcanoRig{client: fake.NewClientset(), log: &bytes.Buffer{}}
	r.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{PodGroupResource: "PodGroupList"}, podGroups...)
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := ""
		switch a := a.(type) {
		case k8stesting.CreateAction:
			m, _ := meta.Accessor(a.GetObject())
			name = m.GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		}
		r.mu.Lock()
		r.writes = append(r.writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+name)
		r.mu.Unlock()
		return false, nil, nil
	}
	for _, verb := range []string{"create", "delete"} {
		r.client.PrependReactor(verb, "*", record)
		r.dyn.PrependReactor(verb, "*", record)
	}
	factory := informers.NewSharedInformerFactory(r.client, 0)
	c, err := New(Config{Client: r.client, Dynamic: r.dyn, Signer: noSigner{}, Nodes: noNodes{}, PodFactory: factory,
		Launcher: Launcher{Image: "knit", InitCommand: []string{"cp"}, Command: []string{"run"}},
		Logger:   slog.New(slog.NewTextHandler(r.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.mapping = func(queue string) Mapping {
		m := Mapping{Namespace: "yarn", PriorityClass: "yarn-high"}
		if queue != "root.plain" {
			m.Delegate, m.DelegateQueue = "volcano", "batch"
		}
		return m
	}
	// Run is not called: its queues are shut down here.
	t.Cleanup(func() {
		c.podQueue.ShutDown()
		c.bookQueue.ShutDown()
		c.admitQueue.ShutDown()
		c.removeQueue.ShutDown()
	})
	r.c, r.factory = c, factory
	return r
}

// ask asks for n containers for the attempt's role in queue and
// reconciles the book once.
func (r *volcanoRig) ask(t *testing.T, app yarnid.ApplicationID, role, queue string, n int32) {
	t.Helper()
	spec := scheduling.AttemptSpec{Attempt: yarnid.AttemptID{App: app, ID: 1}, Role: role, Queue: queue, User: "alice"}
	r.c.Ask(spec, []*yarnpb.ResourceRequestProto{req(1, "*", n, true)})
	if err := r.c.syncBook(context.Background(), bookKey{spec.Attempt, role}); err != nil {
		t.Fatal(err)
	}
}

// remove records the end of app, as the RM does, and carries the removal
// out as a removal worker would, once.
func (r *volcanoRig) remove(t *testing.T, app yarnid.ApplicationID) {
	t.Helper()
	r.c.RemoveApplication(app)
	if n := r.c.removeQueue.Len(); n != 1 {
		t.Fatalf("%d removals queued, want 1", n)
	}
	r.c.processRemoval(context.Background())
	if n := r.c.removeQueue.NumRequeues(removal{app: app}); n != 0 {
		t.Fatalf("the removal of %s was requeued %d times", app, n)
	}
}

func (r *volcanoRig) takeWrites() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

// pods are the pods created so far.
func (r *volcanoRig) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := r.client.CoreV1().Pods("yarn").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func (r *volcanoRig) podGroups(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	list, err := r.dyn.Resource(PodGroupResource).Namespace("yarn").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

var app7 = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}

func TestPodGroupNameIsTheApplicationIDAsADNSLabel(t *testing.T) {
	if got := PodGroupName(yarnid.ApplicationID{ClusterTimestamp: 1795698075606, ID: 1}); got != "application-1795698075606-0001" {
		t.Errorf("PodGroupName = %q", got)
	}
	if got := PodGroupName(yarnid.ApplicationID{ClusterTimestamp: 1795698075606, ID: 123456}); got != "application-1795698075606-123456" {
		t.Errorf("PodGroupName past 9999 = %q", got)
	}
}

func TestAVolcanoQueuesApplicationGetsOnePodGroupBeforeItsPods(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleAM, "root.vc", 1)
	r.ask(t, app7, launch.RoleTask, "root.vc", 2)

	writes := r.takeWrites()
	want := []string{"create podgroups/application-1700000000000-0007", "create pods/", "create pods/", "create pods/"}
	if len(writes) != len(want) {
		t.Fatalf("writes %q, want one PodGroup, then 3 pods", writes)
	}
	for i, w := range writes {
		if !strings.HasPrefix(w, want[i]) {
			t.Fatalf("writes %q, want the PodGroup before the pods", writes)
		}
	}
	groups := r.podGroups(t)
	if len(groups) != 1 {
		t.Fatalf("%d PodGroups, want 1", len(groups))
	}
	wantGroup := map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1",
		"kind":       "PodGroup",
		"metadata": map[string]any{
			"name":      "application-1700000000000-0007",
			"namespace": "yarn",
			"labels": map[string]any{
				launch.LabelApplication: "application_1700000000000_0007",
				launch.LabelQueue:       "root.vc",
				launch.LabelUser:        "alice",
			},
		},
		"spec":   map[string]any{"minMember": int64(1), "queue": "batch", "priorityClassName": "yarn-high"},
		"status": map[string]any{"phase": "Pending"},
	}
	if d := cmp.Diff(wantGroup, groups[0].Object); d != "" {
		t.Errorf("PodGroup (-want +got):\n%s", d)
	}
	// (The fake dynamic client drops CreateOptions: the field manager is
	// checked on a real API server, in test/integration.)
	pods := r.pods(t)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		if got := p.Annotations[VolcanoGroupAnnotation]; got != "application-1700000000000-0007" {
			t.Errorf("pod %s: group annotation %q", p.Name, got)
		}
		if got := p.Annotations[VolcanoQueueAnnotation]; got != "batch" {
			t.Errorf("pod %s: queue annotation %q", p.Name, got)
		}
		if len(p.Spec.SchedulingGates) != 0 {
			t.Errorf("pod %s is gated: %v", p.Name, p.Spec.SchedulingGates)
		}
	}

	// More asks: more pods, the PodGroup as it was.
	r.ask(t, app7, launch.RoleTask, "root.vc", 4)
	for _, w := range r.takeWrites() {
		if !strings.HasPrefix(w, "create pods/") {
			t.Errorf("a later ask wrote %q", w)
		}
	}
	if n := len(r.podGroups(t)); n != 1 {
		t.Errorf("%d PodGroups after more asks, want 1", n)
	}
}

func TestAPodGroupThatExistsIsTakenAsMade(t *testing.T) {
	// After a restart: the PodGroup is there, and RGS does not know it.
	existing := newPodGroup(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "yarn",
		Annotations: map[string]string{VolcanoQueueAnnotation: "batch"}}}, PodGroupName(app7))
	r := newVolcanoRig(t, existing)
	r.ask(t, app7, launch.RoleTask, "root.vc", 2)
	pods := r.pods(t)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2: AlreadyExists is success", len(pods))
	}
	for _, p := range pods {
		if p.Annotations[VolcanoGroupAnnotation] != PodGroupName(app7) {
			t.Errorf("pod %s has no group annotation: %v", p.Name, p.Annotations)
		}
	}
	if strings.Contains(r.log.String(), "level=ERROR") {
		t.Errorf("an existing PodGroup was logged as an error:\n%s", r.log)
	}
}

func TestAQueueWithoutVolcanoGetsNoPodGroup(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleTask, "root.plain", 2)
	if a := r.dyn.Actions(); len(a) != 0 {
		t.Errorf("dynamic client actions %v, want none", a)
	}
	for _, p := range r.pods(t) {
		if _, ok := p.Annotations[VolcanoGroupAnnotation]; ok {
			t.Errorf("pod %s names a PodGroup", p.Name)
		}
	}
	r.remove(t, app7)
	if a := r.dyn.Actions(); len(a) != 0 {
		t.Errorf("removing the application: dynamic client actions %v, want none", a)
	}
}

func TestWithoutThePodGroupCRDPodsGoWithTheQueueAnnotationAndOneErrorPerQueue(t *testing.T) {
	missing := []struct {
		name string
		err  error
	}{
		// What an API server without the CRD answers for the path, as
		// client-go reads it.
		{"a NotFound for the path", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "404 page not found"}}}}}},
		{"a NotFound for the resource", apierrors.NewNotFound(schema.GroupResource{Group: "scheduling.volcano.sh", Resource: "podgroups"}, "")},
		{"no matches for kind", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "scheduling.volcano.sh", Kind: "PodGroup"}, SearchedVersions: []string{"v1beta1"}}},
	}
	for _, tt := range missing {
		t.Run(tt.name, func(t *testing.T) {
			r := newVolcanoRig(t)
			r.dyn.PrependReactor("create", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			r.ask(t, app7, launch.RoleAM, "root.vc", 1)
			r.ask(t, app7, launch.RoleTask, "root.vc", 2)
			r.ask(t, yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 8}, launch.RoleTask, "root.vc", 1)
			r.ask(t, yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 9}, launch.RoleTask, "root.vc2", 1)

			pods := r.pods(t)
			if len(pods) != 5 {
				t.Fatalf("%d pods, want all 5", len(pods))
			}
			for _, p := range pods {
				if _, ok := p.Annotations[VolcanoGroupAnnotation]; ok {
					t.Errorf("pod %s names a PodGroup that was not made", p.Name)
				}
				if p.Annotations[VolcanoQueueAnnotation] != "batch" {
					t.Errorf("pod %s lost Volcano's queue annotation: %v", p.Name, p.Annotations)
				}
			}
			// Once a create found the CRD missing, the next asks do not
			// ask the API server again.
			creates := 0
			for _, a := range r.dyn.Actions() {
				if a.GetVerb() == "create" {
					creates++
				}
			}
			if creates != 1 {
				t.Errorf("%d PodGroup creates, want 1", creates)
			}
			var errs []string
			for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
				if strings.Contains(line, "level=ERROR") {
					errs = append(errs, line)
				}
			}
			if len(errs) != 2 || !strings.Contains(errs[0], "queue=root.vc ") || !strings.Contains(errs[1], "queue=root.vc2 ") {
				t.Fatalf("errors logged %q, want one for root.vc and one for root.vc2", errs)
			}
			for _, e := range errs {
				if !strings.Contains(e, "the PodGroup CRD podgroups.scheduling.volcano.sh is not installed") {
					t.Errorf("error %q does not name the missing CRD", e)
				}
			}
			// The end of an application without a PodGroup deletes none.
			r.remove(t, app7)
		})
	}
}

func TestAPodGroupRefusedForGoodLeavesThePodsAsBefore(t *testing.T) {
	r := newVolcanoRig(t)
	r.dyn.PrependReactor("create", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.volcano.sh", Resource: "podgroups"}, "", nil)
	})
	r.ask(t, app7, launch.RoleTask, "root.vc", 2)
	pods := r.pods(t)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	for _, p := range pods {
		if _, ok := p.Annotations[VolcanoGroupAnnotation]; ok {
			t.Errorf("pod %s names a PodGroup that was not made", p.Name)
		}
	}
	if !strings.Contains(r.log.String(), "level=ERROR") || !strings.Contains(r.log.String(), "forbidden") {
		t.Errorf("the refusal is not logged:\n%s", r.log)
	}
}

func TestATransientPodGroupErrorFailsTheSyncForTheQueueToRetry(t *testing.T) {
	r := newVolcanoRig(t)
	failures := 2
	r.dyn.PrependReactor("create", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
		}
		return false, nil, nil
	})
	spec := scheduling.AttemptSpec{Attempt: yarnid.AttemptID{App: app7, ID: 1}, Role: launch.RoleTask, Queue: "root.vc", User: "alice"}
	r.c.Ask(spec, []*yarnpb.ResourceRequestProto{req(1, "*", 1, true)})
	k := bookKey{spec.Attempt, spec.Role}
	// Each sync tries the PodGroup once and creates none of its pods
	// without it; the error is one the queue retries.
	for i := range 2 {
		err := r.c.syncBook(context.Background(), k)
		if err == nil || terminal(err) {
			t.Fatalf("sync %d: err %v, want one to retry", i, err)
		}
		if failures != 1-i {
			t.Fatalf("sync %d tried the PodGroup %d times, want once", i, 2-failures-i)
		}
		if w := r.takeWrites(); len(w) != 0 {
			t.Fatalf("sync %d wrote %q without its PodGroup", i, w)
		}
	}
	if err := r.c.syncBook(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if n := len(r.podGroups(t)); n != 1 {
		t.Fatalf("%d PodGroups, want 1", n)
	}
	pods := r.pods(t)
	if len(pods) != 1 || pods[0].Annotations[VolcanoGroupAnnotation] != PodGroupName(app7) {
		t.Errorf("pods %v, want one in the PodGroup", pods)
	}
}

func TestTheApplicationsEndDeletesItsPodGroup(t *testing.T) {
	r := newVolcanoRig(t)
	r.ask(t, app7, launch.RoleTask, "root.vc", 1)
	other := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 8}
	r.ask(t, other, launch.RoleTask, "root.vc", 1)
	r.takeWrites()
	// The informer is not running: the cache gets the pods by hand.
	for _, p := range r.pods(t) {
		if err := r.c.factory.Core().V1().Pods().Informer().GetIndexer().Add(&p); err != nil {
			t.Fatal(err)
		}
	}
	r.remove(t, app7)
	writes := r.takeWrites()
	if len(writes) != 2 || !strings.HasPrefix(writes[0], "delete pods/app-1700000000000-0007-") || writes[1] != "delete podgroups/application-1700000000000-0007" {
		t.Errorf("writes %q, want the pod, then the PodGroup", writes)
	}
	groups := r.podGroups(t)
	if len(groups) != 1 || groups[0].GetName() != PodGroupName(other) {
		t.Errorf("PodGroups left %v, want only the other application's", groups)
	}
	// Gone already: no error, no write.
	r.remove(t, app7)
}

func TestPodGroupsOfARestartsPredecessorAreDeletedAtTheirApplicationsEnd(t *testing.T) {
	// A PodGroup made before the restart, whose pods are all gone: the
	// list at Start finds it.
	made := newPodGroup(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "yarn",
		Labels:      map[string]string{launch.LabelApplication: app7.String()},
		Annotations: map[string]string{VolcanoQueueAnnotation: "batch"}}}, PodGroupName(app7))
	// Someone else's, with Knit's label but not a name RGS gives.
	foreign := made.DeepCopy()
	foreign.SetName("someone-elses")
	r := newVolcanoRig(t, made, foreign)
	r.c.listPodGroups(context.Background())
	r.remove(t, app7)
	groups := r.podGroups(t)
	if len(groups) != 1 || groups[0].GetName() != "someone-elses" {
		t.Errorf("PodGroups left %v, want only the one RGS did not make", groups)
	}
}

func TestListingPodGroupsWithoutTheCRDIsQuiet(t *testing.T) {
	r := newVolcanoRig(t)
	r.dyn.PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	})
	r.c.listPodGroups(context.Background())
	if r.log.Len() != 0 {
		t.Errorf("logged:\n%s", r.log)
	}
}

func TestCRDMissingIsNotANamespaceMissing(t *testing.T) {
	if crdMissing(apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "yarn")) {
		t.Error("a missing namespace reads as a missing CRD")
	}
	if crdMissing(apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.volcano.sh", Resource: "podgroups"}, "x", nil)) {
		t.Error("a refusal reads as a missing CRD")
	}
}
