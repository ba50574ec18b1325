package rgs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// A queue delegated to Volcano (knit.queue.<path>.delegate=volcano) puts
// each application's pods in one PodGroup of Volcano's
// (scheduling.volcano.sh/v1beta1), which RGS makes before the
// application's first pod and deletes when the application ends. Without
// it, Volcano's controller would make a PodGroup per pod, and Volcano
// would see each container as a job of its own. YARN containers are not
// gang-scheduled, each being of use alone: minMember is 1 and there are no
// minResources, so Volcano admits the group at once and queues its pods
// one by one in the PodGroup's queue, the queue's delegate-queue.
//
// The PodGroup is written as unstructured through the dynamic client,
// which the RM builds on the same fenced configuration as its other
// clients: Knit takes no dependency on Volcano's module.

// PodGroupResource is Volcano's PodGroup.
var PodGroupResource = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}

const (
	// PodGroupCRD names the CustomResourceDefinition Volcano installs.
	PodGroupCRD = "podgroups.scheduling.volcano.sh"
	// PodGroupKind is the PodGroup's kind.
	PodGroupKind = "PodGroup"
	// crdRecheck is how long RGS trusts that the PodGroup CRD is missing
	// before it tries a create again (Volcano may be installed meanwhile).
	crdRecheck = time.Minute
)

// PodGroupName is the name of an application's PodGroup: its id as a DNS
// label, e.g. application-1700000000000-0007.
func PodGroupName(app yarnid.ApplicationID) string {
	return strings.ReplaceAll(app.String(), "_", "-")
}

// newPodGroup is the PodGroup of the application of pod, as RGS creates
// it: Knit's application, queue and user labels of the pod, the pod's
// Volcano queue and priority class, minMember 1, phase Pending (as
// Volcano's own controllers create theirs: the CRD has no status
// subresource, and Volcano's enqueue picks up Pending groups).
func newPodGroup(pod *corev1.Pod, name string) *unstructured.Unstructured {
	labels := map[string]any{}
	for _, k := range []string{launch.LabelApplication, launch.LabelQueue, launch.LabelUser} {
		if v, ok := pod.Labels[k]; ok {
			labels[k] = v
		}
	}
	spec := map[string]any{
		"minMember": int64(1),
		"queue":     pod.Annotations[VolcanoQueueAnnotation],
	}
	if pc := pod.Spec.PriorityClassName; pc != "" {
		spec["priorityClassName"] = pc
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": PodGroupResource.GroupVersion().String(),
		"kind":       PodGroupKind,
		"metadata": map[string]any{
			"name":      name,
			"namespace": pod.Namespace,
			"labels":    labels,
		},
		"spec":   spec,
		"status": map[string]any{"phase": "Pending"},
	}}
}

// podGroups is what RGS knows of the PodGroups it made.
type podGroups struct {
	mu sync.Mutex
	// made are the PodGroups of each application that RGS created or found
	// (the list at Start, an AlreadyExists), deleted when it ends.
	made map[yarnid.ApplicationID]map[types.NamespacedName]bool
	// missing is when a create last found no PodGroup CRD; zero when it
	// is not known missing.
	missing time.Time
	// told are the queues whose pods went without a PodGroup, each told
	// once in the log until a PodGroup of theirs is made.
	told map[string]bool
}

func newPodGroups() *podGroups {
	return &podGroups{made: map[yarnid.ApplicationID]map[types.NamespacedName]bool{}, told: map[string]bool{}}
}

func (g *podGroups) record(app yarnid.ApplicationID, nn types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.made[app] == nil {
		g.made[app] = map[types.NamespacedName]bool{}
	}
	g.made[app][nn] = true
}

func (g *podGroups) known(app yarnid.ApplicationID, nn types.NamespacedName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.made[app][nn]
}

// crdMissing says whether err means the API server serves no PodGroups:
// a NotFound for the resource rather than for the namespace, or a client's
// "no matches for kind".
func crdMissing(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	if !apierrors.IsNotFound(err) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if d := st.Status().Details; d != nil && d.Kind == "namespaces" {
			return false
		}
	}
	return true
}

// listPodGroups records the PodGroups of Knit's applications that exist,
// so that those of applications ending after a restart go too.
func (c *Controller) listPodGroups(ctx context.Context) {
	if c.cfg.Dynamic == nil {
		return
	}
	opts := metav1.ListOptions{LabelSelector: launch.LabelApplication, Limit: 500}
	for {
		list, err := c.cfg.Dynamic.Resource(PodGroupResource).Namespace(metav1.NamespaceAll).List(ctx, opts)
		if crdMissing(err) {
			return // no Volcano: nothing to find
		}
		if err != nil {
			c.log.WarnContext(ctx, "listing Knit's Volcano PodGroups: those of applications that end before their next pod is created stay", "err", err)
			return
		}
		for _, pg := range list.Items {
			app, err := yarnid.ParseApplicationID(pg.GetLabels()[launch.LabelApplication])
			if err != nil || pg.GetName() != PodGroupName(app) {
				continue // not one RGS made
			}
			c.groups.record(app, types.NamespacedName{Namespace: pg.GetNamespace(), Name: pg.GetName()})
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return
		}
	}
}

// ensurePodGroups makes the PodGroup each pod to be created names
// (VolcanoGroupAnnotation), before the pods exist. A pod whose PodGroup
// cannot be made for good (no PodGroup CRD, no right to create one, a
// refusal) loses the annotation and is created as before, with Volcano's
// queue annotation only, and the queue's trouble is logged once. A
// PodGroup that fails otherwise is an error: its pods are returned in
// failed, not to be created now, and the book's queue retries the sync.
func (c *Controller) ensurePodGroups(ctx context.Context, pods []podToCreate) (failed map[string]bool, err error) {
	type group struct {
		app  yarnid.ApplicationID
		pods []*corev1.Pod
	}
	groups := map[types.NamespacedName]*group{}
	var order []types.NamespacedName
	for _, p := range pods {
		name := p.pod.Annotations[VolcanoGroupAnnotation]
		if name == "" {
			continue
		}
		nn := types.NamespacedName{Namespace: p.pod.Namespace, Name: name}
		g := groups[nn]
		if g == nil {
			attempt, _, _ := attemptOf(c.strip.Record(p.pod))
			g = &group{app: attempt.App}
			groups[nn] = g
			order = append(order, nn)
		}
		g.pods = append(g.pods, p.pod)
	}
	var errs []error
	for _, nn := range order {
		g := groups[nn]
		if c.groups.known(g.app, nn) {
			continue
		}
		first := g.pods[0]
		queue := annotationOrLabel(c.strip.Record(first), launch.LabelQueue)
		gerr := c.createPodGroup(ctx, first, nn)
		switch {
		case gerr == nil:
			c.groups.record(g.app, nn)
			c.groups.mu.Lock()
			c.groups.missing = time.Time{}
			delete(c.groups.told, queue)
			c.groups.mu.Unlock()
			continue
		case errors.Is(gerr, errPodGroupsUnavailable) || crdMissing(gerr):
			c.withoutPodGroup(ctx, queue, g.pods, fmt.Sprintf("the PodGroup CRD %s is not installed", PodGroupCRD), nil)
		case isPermanent(gerr):
			c.withoutPodGroup(ctx, queue, g.pods, "Volcano's PodGroup "+nn.String()+" cannot be created", gerr)
		default:
			if failed == nil {
				failed = map[string]bool{}
			}
			for _, p := range g.pods {
				failed[p.Name] = true
			}
			errs = append(errs, fmt.Errorf("rgs: create PodGroup %s: %w", nn, gerr))
		}
	}
	return failed, errors.Join(errs...)
}

// errPodGroupsUnavailable: the CRD was missing a moment ago.
var errPodGroupsUnavailable = errors.New("PodGroups known unavailable")

// createPodGroup creates the PodGroup of pod's application with one call;
// one that exists already is success. A missing CRD is
// remembered for crdRecheck, so a queue's pods do not each ask.
func (c *Controller) createPodGroup(ctx context.Context, pod *corev1.Pod, nn types.NamespacedName) error {
	c.groups.mu.Lock()
	missing := !c.groups.missing.IsZero() && time.Since(c.groups.missing) < crdRecheck
	c.groups.mu.Unlock()
	if missing {
		return errPodGroupsUnavailable
	}
	obj := newPodGroup(pod, nn.Name)
	_, err := c.cfg.Dynamic.Resource(PodGroupResource).Namespace(nn.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if crdMissing(err) {
		c.groups.mu.Lock()
		c.groups.missing = time.Now()
		c.groups.mu.Unlock()
	}
	return err
}

// withoutPodGroup drops the PodGroup from pods not yet created, and logs
// why once per queue.
func (c *Controller) withoutPodGroup(ctx context.Context, queue string, pods []*corev1.Pod, why string, err error) {
	for _, p := range pods {
		delete(p.Annotations, VolcanoGroupAnnotation)
	}
	c.groups.mu.Lock()
	told := c.groups.told[queue]
	c.groups.told[queue] = true
	c.groups.mu.Unlock()
	if told {
		return
	}
	args := []any{"queue", queue, "delegate", "volcano"}
	if err != nil {
		args = append(args, "err", err)
	}
	c.log.ErrorContext(ctx, why+": the queue's pods are created with Volcano's queue annotation only, and Volcano puts each in a PodGroup of its own", args...)
}
