package rgs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// Update reasons, as YARN's UpdateContainerError carries them.
const (
	// ReasonOutstanding is UPDATE_OUTSTANDING_ERROR: an increase of the
	// container is still being carried out.
	ReasonOutstanding = "UPDATE_OUTSTANDING_ERROR"
	// ReasonOutsideRange is RESOURCE_OUTSIDE_ALLOWED_RANGE: here, the node
	// cannot hold the container at the size asked.
	ReasonOutsideRange = "RESOURCE_OUTSIDE_ALLOWED_RANGE"
)

// cachedPod is an allocated container's pod, from the informer's cache.
func (c *Controller) cachedPod(id yarnid.ContainerID) (types.NamespacedName, *podrecord.Pod, error) {
	c.mu.Lock()
	nn, ok := c.containers[id]
	c.mu.Unlock()
	if !ok {
		return nn, nil, fmt.Errorf("%s: no such container", id)
	}
	p, err := c.pods.Get(nn.Namespace, nn.Name)
	if err != nil {
		return nn, nil, fmt.Errorf("pod of %s: %w", id, err)
	}
	return nn, p, nil
}

// CurrentContainer reads an allocated, unfinished container's version,
// resources and execution type from its pod.
func (c *Controller) CurrentContainer(id yarnid.ContainerID) (scheduling.Current, bool) {
	_, p, err := c.cachedPod(id)
	if err != nil || p.DeletionTimestamp != nil {
		return scheduling.Current{}, false
	}
	if done, _, _, _ := ended(p); done {
		return scheduling.Current{}, false
	}
	_, increasing := p.Annotations[launch.AnnotationIncreaseFrom]
	return scheduling.Current{
		Version:       intAnnotation(p, launch.AnnotationVersion),
		Resource:      resourceOf(p, c.cfg.Resources),
		ExecutionType: executionTypeOf(p),
		Increasing:    increasing,
	}, true
}

// UpdateContainer carries out a granted update. A decrease and an execution
// type change take effect at once and return the container at its next
// version; an increase asks the node to resize the pod and returns nil: the
// result reaches the Sink's Updated once the node took it or could not.
func (c *Controller) UpdateContainer(ctx context.Context, u scheduling.Update) (*yarnpb.ContainerProto, error) {
	nn, p, err := c.cachedPod(u.Container)
	if err != nil {
		return nil, fmt.Errorf("rgs: update: %w", err)
	}
	next := strconv.Itoa(int(intAnnotation(p, launch.AnnotationVersion)) + 1)
	switch u.Type {
	case yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE:
		from, err := json.Marshal(mainRequests(p))
		if err != nil {
			return nil, fmt.Errorf("rgs: update of %s: %w", u.Container, err)
		}
		// Resize first: a pod marked while its spec still had the old size
		// would read as resized already.
		if err := c.resizeNow(ctx, nn, u.Capability); err != nil {
			return nil, fmt.Errorf("rgs: increase of %s: %w", u.Container, err)
		}
		if _, err := c.annotateNow(ctx, nn, map[string]*string{launch.AnnotationIncreaseFrom: ptr.To(string(from))}); err != nil {
			return nil, fmt.Errorf("rgs: increase of %s: %w", u.Container, err)
		}
		return nil, nil
	case yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE:
		if err := c.resizeNow(ctx, nn, u.Capability); err != nil {
			return nil, fmt.Errorf("rgs: decrease of %s: %w", u.Container, err)
		}
		// The RM pushes a decrease to the node itself (YARN's NM heartbeat
		// carries it): the node side holds the new version at once.
		p, err = c.annotateNow(ctx, nn, map[string]*string{launch.AnnotationVersion: &next, launch.AnnotationNodeVersion: &next})
	default:
		exec := u.ExecutionType.String()
		p, err = c.annotateNow(ctx, nn, map[string]*string{launch.AnnotationVersion: &next, launch.AnnotationExecutionType: &exec})
	}
	if err != nil {
		return nil, fmt.Errorf("rgs: update of %s: %w", u.Container, err)
	}
	return c.containerProto(p, u.Container)
}

// ApplyNodeUpdate is the NodeManager's side of an update the AM brings with
// the container's new token: the pod takes the token's resources and the
// node side its version.
func (c *Controller) ApplyNodeUpdate(ctx context.Context, id yarnid.ContainerID, version int32, r *yarnpb.ResourceProto) error {
	nn, p, err := c.cachedPod(id)
	if err != nil {
		return fmt.Errorf("rgs: node update: %w", err)
	}
	want, err := podResources(r, c.cfg.Resources)
	if err != nil {
		return fmt.Errorf("rgs: node update of %s: %w", id, err)
	}
	if !sameCPUAndMemory(mainRequests(p), want) {
		if err := c.resizeNow(ctx, nn, r); err != nil {
			return fmt.Errorf("rgs: node update of %s: %w", id, err)
		}
	}
	v := strconv.Itoa(int(version))
	if _, err := c.annotateNow(ctx, nn, map[string]*string{launch.AnnotationNodeVersion: &v}); err != nil {
		return fmt.Errorf("rgs: node update of %s: %w", id, err)
	}
	return nil
}

// syncIncrease finishes an increase the node has decided on: the next
// version and a new token when it took the new size, the old size back when
// it never can. A deferred resize waits for room on the node.
func (c *Controller) syncIncrease(ctx context.Context, p *podrecord.Pod, id yarnid.ContainerID) error {
	from, pending := p.Annotations[launch.AnnotationIncreaseFrom]
	if !pending {
		return nil
	}
	nn := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	switch resizeOutcome(p) {
	case resizeWaiting:
		return nil
	case resizeInfeasible:
		var old corev1.ResourceList
		if err := json.Unmarshal([]byte(from), &old); err != nil {
			return fmt.Errorf("rgs: increase of %s: the size to go back to: %w", id, err)
		}
		if err := c.resizeTo(ctx, nn, old); err != nil {
			return fmt.Errorf("rgs: undo increase of %s: %w", id, err)
		}
		if _, err := c.patchAnnotations(ctx, nn, map[string]*string{launch.AnnotationIncreaseFrom: nil}); err != nil {
			return fmt.Errorf("rgs: undo increase of %s: %w", id, err)
		}
		c.sink.Updated(ctx, scheduling.UpdateResult{Container: id, Reason: ReasonOutsideRange})
		return nil
	}
	next := strconv.Itoa(int(intAnnotation(p, launch.AnnotationVersion)) + 1)
	p, err := c.patchAnnotations(ctx, nn, map[string]*string{launch.AnnotationVersion: &next, launch.AnnotationIncreaseFrom: nil})
	if err != nil {
		return fmt.Errorf("rgs: increase of %s: %w", id, err)
	}
	cp, err := c.containerProto(p, id)
	if err != nil {
		return err
	}
	c.sink.Updated(ctx, scheduling.UpdateResult{Container: id, Updated: cp})
	return nil
}

type resizeState int

const (
	resizeWaiting resizeState = iota
	resizeDone
	resizeInfeasible
)

// resizeOutcome reads the kubelet's answer to a resize of the main
// container: done when the running container's resources are the spec's
// with no resize pending or in progress, infeasible when the node can never
// hold it, else still waiting (in progress, or deferred for room).
func resizeOutcome(p *podrecord.Pod) resizeState {
	// A status written before the resize says nothing of it; a node that
	// does not track generations leaves the field at 0.
	if g := p.Status.ObservedGeneration; g != 0 && g < p.Generation {
		return resizeWaiting
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case corev1.PodResizePending:
			if cond.Reason == corev1.PodReasonInfeasible {
				return resizeInfeasible
			}
			return resizeWaiting
		case corev1.PodResizeInProgress:
			return resizeWaiting
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == launch.ContainerName && s.Resources != nil && sameCPUAndMemory(s.Resources.Requests, mainRequests(p)) {
			return resizeDone
		}
	}
	return resizeWaiting
}

// resize sets the main container's requests and limits to a capability
// through the pod's resize subresource.
func (c *Controller) resize(ctx context.Context, nn types.NamespacedName, r *yarnpb.ResourceProto) error {
	res, err := podResources(r, c.cfg.Resources)
	if err != nil {
		return err
	}
	return c.resizeTo(ctx, nn, res)
}

// resizeTo sets the main container's CPU and memory, requests equal to
// limits so the pod stays Guaranteed. Kubernetes resizes CPU and memory
// only: other resources keep their amounts.
func (c *Controller) resizeTo(ctx context.Context, nn types.NamespacedName, res corev1.ResourceList) error {
	keep := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := res[name]; ok {
			keep[name] = q
		}
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": launch.ContainerName, "resources": map[string]any{"requests": keep, "limits": keep},
	}}}})
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Pods(nn.Namespace).Patch(ctx, nn.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}, "resize")
	return err
}

// resizeNow is resize on a request path, retried in place (retryRequest):
// the same size asked again is the same write.
func (c *Controller) resizeNow(ctx context.Context, nn types.NamespacedName, r *yarnpb.ResourceProto) error {
	return c.retryRequest(ctx, "resize "+nn.String(), func(ctx context.Context) error { return c.resize(ctx, nn, r) })
}

// annotateNow is patchAnnotations on a request path, retried in place
// (retryRequest): a merge patch of the same values is the same write.
func (c *Controller) annotateNow(ctx context.Context, nn types.NamespacedName, set map[string]*string) (*podrecord.Pod, error) {
	var p *podrecord.Pod
	err := c.retryRequest(ctx, "annotate "+nn.String(), func(ctx context.Context) error {
		var err error
		p, err = c.patchAnnotations(ctx, nn, set)
		return err
	})
	return p, err
}

// patchAnnotations sets (or, for nil, removes) annotations of a pod and
// returns the record of the pod as patched.
func (c *Controller) patchAnnotations(ctx context.Context, nn types.NamespacedName, set map[string]*string) (*podrecord.Pod, error) {
	return c.patchMetadata(ctx, nn, "annotations", set)
}

// patchMetadata sets (or, for nil, removes) labels or annotations of a pod
// with one merge patch and returns the record of the pod as patched; a pod
// that is gone gives NotFound.
func (c *Controller) patchMetadata(ctx context.Context, nn types.NamespacedName, field string, set map[string]*string) (*podrecord.Pod, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{field: set}})
	if err != nil {
		return nil, err
	}
	p, err := c.cfg.Client.CoreV1().Pods(nn.Namespace).Patch(ctx, nn.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	return c.strip.Record(p), nil
}

// mainRequests are the main container's requests in the pod's spec.
func mainRequests(p *podrecord.Pod) corev1.ResourceList {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name == launch.ContainerName {
			return ctr.Resources.Requests
		}
	}
	return nil
}

func sameCPUAndMemory(a, b corev1.ResourceList) bool {
	return a.Cpu().Cmp(*b.Cpu()) == 0 && a.Memory().Cmp(*b.Memory()) == 0
}

// intAnnotation reads a count annotation (a version, thread dumps asked);
// none is 0.
func intAnnotation(p *podrecord.Pod, key string) int32 {
	v, err := strconv.ParseInt(p.Annotations[key], 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

// NodeVersion is the version of a container the NodeManager side holds.
func (c *Controller) NodeVersion(id yarnid.ContainerID) int32 {
	_, p, err := c.cachedPod(id)
	if err != nil {
		return 0
	}
	return intAnnotation(p, launch.AnnotationNodeVersion)
}

func executionTypeOf(p *podrecord.Pod) yarnpb.ExecutionTypeProto {
	if p.Annotations[launch.AnnotationExecutionType] == yarnpb.ExecutionTypeProto_OPPORTUNISTIC.String() {
		return yarnpb.ExecutionTypeProto_OPPORTUNISTIC
	}
	return yarnpb.ExecutionTypeProto_GUARANTEED
}

// RequestThreadDump asks for one more thread dump of a container: its pod's
// count goes up, and the node signals the process.
func (c *Controller) RequestThreadDump(ctx context.Context, id yarnid.ContainerID) error {
	nn, p, err := c.cachedPod(id)
	if err != nil {
		return fmt.Errorf("rgs: thread dump: %w", err)
	}
	next := strconv.Itoa(int(intAnnotation(p, launch.AnnotationThreadDumps)) + 1)
	if _, err := c.annotateNow(ctx, nn, map[string]*string{launch.AnnotationThreadDumps: &next}); err != nil {
		return fmt.Errorf("rgs: thread dump of %s: %w", id, err)
	}
	return nil
}
