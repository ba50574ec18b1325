package rgs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// A pod the scheduler bound becomes a YARN container: a pod's sync gives
// it the next container id of its attempt and tells the Sink, follows an
// increase of its resources, and reports its end.

// ContainerPod returns the pod of an allocated container from the informer's
// cache (RKS reads container state from it: one watch for all of Knit's
// pods), as the fields the RM keeps of it (package podrecord). The pod is
// the caller's own.
func (c *Controller) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	_, p, err := c.cachedPod(id)
	if err != nil {
		return nil, false
	}
	return p.AsPod(), true
}

// ContainerStatus is the NodeManager's view of an allocated container, read
// from its pod: COMPLETE with YARN's exit status and diagnostics once the
// pod has ended (the same as the AM's completed statuses), RUNNING before,
// with the sub-state telling scheduled from running.
func (c *Controller) ContainerStatus(id yarnid.ContainerID) (*yarnpb.ContainerStatusProto, bool) {
	_, p, err := c.cachedPod(id)
	if err != nil {
		return nil, false
	}
	st := &yarnpb.ContainerStatusProto{
		ContainerId:   id.Proto(),
		Capability:    resourceOf(p, c.cfg.Resources),
		ExecutionType: executionTypeOf(p).Enum(),
	}
	if done, exit, diag, _ := ended(p); done {
		st.State = yarnpb.ContainerStateProto_C_COMPLETE.Enum()
		st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_DONE.Enum()
		st.ExitStatus = proto.Int32(exit)
		st.Diagnostics = proto.String(diag)
		return st, true
	}
	st.State = yarnpb.ContainerStateProto_C_RUNNING.Enum()
	st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_SCHEDULED.Enum()
	st.Diagnostics = proto.String("")
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == launch.ContainerName && s.State.Running != nil {
			st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_RUNNING.Enum()
		}
	}
	return st, true
}

// processPod handles one pod event.
func (c *Controller) processPod(ctx context.Context) bool {
	nn, quit := c.podQueue.Get()
	if quit {
		return false
	}
	defer c.podQueue.Done(nn)
	err := c.syncPod(ctx, nn)
	finish(ctx, c.log, c.podQueue, nn, err, "pod", "pod", nn.String())
	return true
}

func (c *Controller) syncPod(ctx context.Context, nn types.NamespacedName) error {
	p, err := c.pods.Get(nn.Namespace, nn.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.goneMu.Lock()
	last := c.gone[nn]
	delete(c.gone, nn)
	c.goneMu.Unlock()
	if last != nil && (p == nil || p.UID != last.UID) {
		c.podGone(ctx, last)
	}
	created := c.expect.observe(nn, p != nil)
	if p == nil {
		c.noteAdmitted(nn, nil, false)
		return nil
	}
	attempt, role, ok := attemptOf(p)
	if !ok {
		return nil
	}
	if created {
		c.mu.Lock()
		k := bookKey{attempt, role}
		b := c.books[k]
		again := b != nil && b.awaitingSeen
		if again {
			b.awaitingSeen = false
		}
		c.mu.Unlock()
		if again {
			c.bookQueue.Add(k)
		}
	}
	if c.collect(ctx, p) {
		return nil
	}
	id, allocated := c.containerOfPod(p)
	c.noteAdmitted(nn, p, allocated)
	if !allocated {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			return nil
		}
		return c.allocate(ctx, p, attempt, role)
	}
	if done, exit, diag, preempted := ended(p); done {
		c.complete(ctx, scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted})
		return nil
	}
	if err := c.syncIncrease(ctx, p, id); err != nil {
		return err
	}
	if disrupted(p) {
		c.mu.Lock()
		first := !c.warned[id]
		c.warned[id] = true
		c.mu.Unlock()
		if first {
			c.sink.Preempting(ctx, scheduling.Preemption{Container: id, Strict: !preemptedByKnit(p), Resource: resourceOf(p, c.cfg.Resources)})
		}
	}
	return nil
}

// allocate makes a bound pod a container: the next sequence number of its
// attempt (1 for the AM), the id on the pod, a signed token, the Sink told.
func (c *Controller) allocate(ctx context.Context, p *podrecord.Pod, attempt yarnid.AttemptID, role string) error {
	c.mu.Lock()
	b := c.books[bookKey{attempt, role}]
	if b != nil {
		if _, ok := b.pending[p.Name]; ok {
			delete(b.pending, p.Name)
			b.allocated(p.Labels[launch.LabelAsk])
		}
	}
	var seq int64
	if role == launch.RoleAM {
		seq = 1
	} else {
		c.seq[attempt] = max(c.seq[attempt], 1) + 1
		seq = c.seq[attempt]
	}
	id := yarnid.ContainerID{Attempt: attempt, Epoch: c.epoch, Sequence: seq}
	c.byPod[p.UID] = id
	c.mu.Unlock()

	nn := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	pod, err := c.patchMetadata(ctx, nn, "labels", map[string]*string{launch.LabelContainer: ptr.To(id.String())})
	if err != nil {
		c.mu.Lock()
		delete(c.byPod, p.UID)
		c.mu.Unlock()
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: a lowered ask won the race
	}
	if err != nil {
		return fmt.Errorf("rgs: record container %s on pod: %w", id, err)
	}
	c.mu.Lock()
	c.containers[id] = nn
	c.mu.Unlock()
	var bound time.Time
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			bound = cond.LastTransitionTime.Time
		}
	}
	cp, err := c.containerProto(pod, id)
	if err == nil {
		err = c.sink.Allocated(ctx, scheduling.Allocation{Role: role, Container: cp, Created: pod.CreationTimestamp.Time, Bound: bound,
			Partition: pod.Spec.NodeSelector[launch.NodeLabelPartition]})
	}
	if err != nil {
		// The pod goes as the RM's removals do, retried by the removal
		// queue: this pod's next sync sees a container and would not.
		c.log.InfoContext(ctx, "allocated container not taken, deleting its pod", "container", id.String(), "err", err)
		c.removeQueue.Add(removal{pod: nn})
		return nil
	}
	// The RM counts it as a container now.
	c.noteAdmitted(nn, pod, true)
	if !bound.IsZero() {
		c.cfg.Observer.ContainerAllocated(pod.Labels[launch.LabelQueue], max(time.Since(bound), 0))
	}
	if b != nil {
		c.bookQueue.Add(bookKey{attempt, role})
	}
	return nil
}

// containerProto builds the YARN Container of an allocated pod.
func (c *Controller) containerProto(p *podrecord.Pod, id yarnid.ContainerID) (*yarnpb.ContainerProto, error) {
	node, http, ok := c.cfg.Nodes.NodeID(p.Spec.NodeName)
	if !ok {
		return nil, fmt.Errorf("rgs: node %q of pod %s/%s unknown", p.Spec.NodeName, p.Namespace, p.Name)
	}
	prio, _ := strconv.ParseInt(p.Labels[launch.LabelPriority], 10, 32)
	allocID := launch.ParseIntLabelValue(p.Labels[launch.LabelAllocationRequestID])
	exec := executionTypeOf(p)
	cp := &yarnpb.ContainerProto{
		Id:                  id.Proto(),
		NodeId:              node,
		NodeHttpAddress:     proto.String(http),
		Resource:            resourceOf(p, c.cfg.Resources),
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(int32(prio))},
		ExecutionType:       exec.Enum(),
		AllocationRequestId: proto.Int64(allocID),
		Version:             proto.Int32(intAnnotation(p, launch.AnnotationVersion)),
	}
	var logs *yarnpb.LogAggregationContextProto
	if v, ok := p.Annotations[launch.AnnotationLogAggregationContext]; ok {
		// RGS wrote it; one that no longer decodes was edited by someone
		// else, and the container goes without, as a submission without.
		if lac, err := launch.DecodeLogAggregationContext(v); err == nil {
			logs = lac.Proto()
		}
	}
	tok, err := c.cfg.Signer.Sign(cp, annotationOrLabel(p, launch.LabelUser), p.Spec.NodeSelector[launch.NodeLabelPartition], p.Labels[launch.LabelRole] == launch.RoleAM, logs)
	if err != nil {
		return nil, fmt.Errorf("rgs: container token of %s: %w", id, err)
	}
	cp.ContainerToken = tok
	return cp, nil
}

// annotationOrLabel reads a string label, preferring the exact original kept
// in the annotation of the same key when the label had to be sanitised.
func annotationOrLabel(p *podrecord.Pod, key string) string {
	if v, ok := p.Annotations[key]; ok {
		return v
	}
	return p.Labels[key]
}

// resourceOf reads back the YARN capability of a pod from its main
// container's requests.
func resourceOf(p *podrecord.Pod, r Resources) *yarnpb.ResourceProto {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != launch.ContainerName {
			continue
		}
		mem := ctr.Resources.Requests.Memory().Value() >> 20
		per := r.MillicoresPerVcore
		if per <= 0 {
			per = 1000
		}
		vcores := int32(ctr.Resources.Requests.Cpu().MilliValue() / per)
		return yarnpb.NewResource(mem, vcores)
	}
	return yarnpb.NewResource(0, 0)
}

// attemptOf reads a Knit pod's attempt and role from its labels.
func attemptOf(p *podrecord.Pod) (yarnid.AttemptID, string, bool) {
	app, err := yarnid.ParseApplicationID(annotationOrLabel(p, launch.LabelApplication))
	if err != nil {
		return yarnid.AttemptID{}, "", false
	}
	n, err := strconv.ParseInt(p.Labels[launch.LabelAttempt], 10, 32)
	if err != nil {
		return yarnid.AttemptID{}, "", false
	}
	role := p.Labels[launch.LabelRole]
	if role != launch.RoleAM {
		role = launch.RoleTask
	}
	return yarnid.AttemptID{App: app, ID: int32(n)}, role, true
}

func containerOf(p *podrecord.Pod) (yarnid.ContainerID, bool) {
	if p.Container == "" {
		return yarnid.ContainerID{}, false
	}
	id, err := yarnid.ParseContainerID(p.Container)
	return id, err == nil
}

// ended reports whether a pod's container is over, with YARN's exit status
// and diagnostics: the main container's exit code and termination message.
func ended(p *podrecord.Pod) (done bool, exit int32, diag string, preempted bool) {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return false, 0, "", false
	}
	if p.Status.Reason == "Evicted" || disrupted(p) {
		return true, ExitPreempted, preemptedDiagnostics(p), true
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == launch.ContainerName && s.State.Terminated != nil {
			t := s.State.Terminated
			if stoppedByAM(p) {
				return true, ExitKilledByAppMaster, killedByAMDiagnostics(t.ExitCode), false
			}
			if failure, ok := launch.LocalizationFailure(t.ExitCode, t.Message); ok {
				return true, ExitInvalid, failure, false
			}
			return true, t.ExitCode, t.Message, false
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, ExitInvalid, fmt.Sprintf("container setup failed: %s exited with %d: %s", s.Name, t.ExitCode, t.Message), false
		}
	}
	return true, ExitInvalid, p.Status.Message, false
}

// stoppedByAM reports whether the AM stopped the pod's container.
func stoppedByAM(p *podrecord.Pod) bool {
	_, ok := p.Annotations[launch.AnnotationStoppedBy]
	return ok
}

// killedByAMDiagnostics is the NodeManager's text for a container the AM
// stopped.
func killedByAMDiagnostics(code int32) string {
	return fmt.Sprintf("Container killed by the ApplicationMaster.\nContainer killed on request. Exit code is %d\n"+
		"Container exited with a non-zero exit code %d. ", code, code)
}

// disrupted reports the DisruptionTarget condition Kubernetes sets on a pod
// it is about to preempt or evict.
func disrupted(p *podrecord.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func preemptedDiagnostics(p *podrecord.Pod) string {
	if preemptedByKnit(p) {
		return preemptedByScheduler
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return "Container preempted by Kubernetes: " + c.Reason + ": " + c.Message
		}
	}
	return "Container preempted by Kubernetes: " + p.Status.Reason + ": " + p.Status.Message
}

// preemptedByScheduler is SchedulerUtils.PREEMPTED_CONTAINER, the
// diagnostics of a container the queues took back.
const preemptedByScheduler = "Container preempted by scheduler"

// YARN's ContainerExitStatus values RGS reports.
const (
	// ExitInvalid is ContainerExitStatus.INVALID.
	ExitInvalid = -1000
	// ExitAborted is ContainerExitStatus.ABORTED.
	ExitAborted = -100
	// ExitPreempted is ContainerExitStatus.PREEMPTED.
	ExitPreempted = -102
	// ExitKilledByAppMaster is ContainerExitStatus.KILLED_BY_APPMASTER.
	ExitKilledByAppMaster = -105
)

// complete reports a container's end to the Sink once.
func (c *Controller) complete(ctx context.Context, done scheduling.Completion) {
	c.mu.Lock()
	first := !c.reported[done.Container]
	c.reported[done.Container] = true
	c.mu.Unlock()
	if first {
		c.sink.Completed(ctx, done)
	}
}

// podGone handles a deleted pod, from its last state: a pending one leaves
// its book (the next reconcile makes another if still asked for), an
// allocated one's end is reported, and what RGS kept of it is let go.
func (c *Controller) podGone(ctx context.Context, p *podrecord.Pod) {
	attempt, role, ok := attemptOf(p)
	if !ok {
		return
	}
	c.mu.Lock()
	if b := c.books[bookKey{attempt, role}]; b != nil {
		if _, ok := b.pending[p.Name]; ok {
			delete(b.pending, p.Name)
			c.bookQueue.Add(bookKey{attempt, role})
		}
	}
	id, allocated := containerOf(p)
	if !allocated {
		id, allocated = c.byPod[p.UID]
	}
	if allocated {
		delete(c.containers, id)
	}
	delete(c.byPod, p.UID)
	c.mu.Unlock()
	c.orphans.clear(p.UID)
	if !allocated {
		return
	}
	defer func() {
		c.mu.Lock()
		delete(c.reported, id)
		delete(c.warned, id)
		c.mu.Unlock()
	}()
	if done, exit, diag, preempted := ended(p); done {
		c.complete(ctx, scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted})
		return
	}
	preempted := disrupted(p) || p.Status.Reason == "Evicted"
	exit, diag := int32(ExitAborted), "Container's pod was deleted"
	if stoppedByAM(p) {
		exit, diag = ExitKilledByAppMaster, killedByAMDiagnostics(143)
	}
	if preempted {
		exit, diag = ExitPreempted, preemptedDiagnostics(p)
	}
	c.complete(ctx, scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted, Vanished: true})
}

// containerOfPod is the container a pod holds: from its label, or, when
// the cache does not show the label yet, from what RGS recorded.
func (c *Controller) containerOfPod(p *podrecord.Pod) (yarnid.ContainerID, bool) {
	if id, ok := containerOf(p); ok {
		return id, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byPod[p.UID]
	return id, ok
}
