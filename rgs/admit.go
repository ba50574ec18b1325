package rgs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
)

// Policy is what admission reads of the RM. Started with a Policy, RGS
// creates every pod of a queue that does not delegate with
// launch.SchedulingGate and lifts the gates as rgs/admission decides.
type Policy interface {
	// AdmissionQueues are the queues' limits now, parents included, with
	// their shares of the labelled partitions they may use
	// (PartitionPolicy).
	AdmissionQueues() []admission.Queue
	// ClusterResource is what the usable nodes of the default partition
	// (the nodes without a launch.NodeLabelPartition label) hold.
	ClusterResource() admission.Resource
	// MinimumAllocation is the scheduler's minimum allocation, the step
	// user limits are reckoned in.
	MinimumAllocation() admission.Resource
	// AppPriority is the application's priority now.
	AppPriority(app yarnid.ApplicationID) int32
	// Preemption says whether and how containers are taken back from
	// queues over their share.
	Preemption() Preemption
}

// PartitionPolicy is a Policy that knows node-label partitions. Under a
// Policy without it, pods asking a labelled partition are never admitted,
// as no node of theirs is known.
type PartitionPolicy interface {
	// PartitionResources are what the usable nodes of each labelled
	// partition hold, by partition name.
	PartitionResources() map[string]admission.Resource
}

// UserPolicy is a Policy that limits each user's running applications.
// Under a Policy without it, users run any number at once.
type UserPolicy interface {
	// MaxParallelAppsOfUser is the most applications of user that run at
	// once in every queue together; 0 is no limit, and a negative one
	// lets none run.
	MaxParallelAppsOfUser(user string) int
}

// Preemption is how RGS takes containers back (admission.Preempt, between
// queues and, with Policy.IntraQueue, within them): each round it marks
// the containers to take with a DisruptionTarget condition
// (reason ReasonPreemptionByKnit), which the AM hears of in its next
// allocate, and deletes those still marked MaxWaitBeforeKill later; they
// complete PREEMPTED.
type Preemption struct {
	Enabled                     bool
	Policy                      admission.Preemption
	Interval, MaxWaitBeforeKill time.Duration
	// ObserveOnly rounds choose containers and log how many, but neither
	// mark nor delete any (YARN's observe_only).
	ObserveOnly bool
}

// ReasonPreemptionByKnit is the reason of the DisruptionTarget condition
// RGS sets on a container's pod it takes back for another queue, or for
// another application or user of its queue.
const ReasonPreemptionByKnit = "PreemptionByKnit"

// preemptedByKnit reports whether RGS marked the pod to be taken back.
func preemptedByKnit(p *podrecord.Pod) bool {
	c := disruption(p)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == ReasonPreemptionByKnit
}

// disruption is the pod's DisruptionTarget condition, nil if none.
func disruption(p *podrecord.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// admitKey is the one key of the admission queue: a pass looks at every
// pod, so changes made while one runs need one more pass, not one each.
const admitKey = "admission"

// admitPeriod bounds how long a change the informers do not see (the
// cluster's size, a queue refresh, an application's priority) waits. Such
// a change matters only to pods that wait (gated, or marked to be taken
// back): while none does, no pass runs until a pod event asks for one
// (waitingForAdmission), so a cluster of running pods costs no pass over
// them every second.
const admitPeriod = time.Second

// A pass looks at every pod, and a stream of pod events must not keep a
// core busy with back-to-back passes: after one, the next waits three
// times as long as it took (so passes take at most a quarter of a core),
// within these bounds. Events within the wait share the next pass.
const (
	admitMinGap = 10 * time.Millisecond
	admitMaxGap = time.Second
)

// queueAdmission asks for an admission pass: now, or when the wait after
// the last one is over. The queue keeps one key, at its earliest time.
func (c *Controller) queueAdmission() {
	if c.policy == nil {
		return
	}
	if wait := time.Until(time.Unix(0, c.nextAdmission.Load())); wait > 0 {
		c.admitQueue.AddAfter(admitKey, wait)
		return
	}
	c.admitQueue.Add(admitKey)
}

// processAdmission runs one pass; false when the queue is shut down.
func (c *Controller) processAdmission(ctx context.Context) bool {
	k, quit := c.admitQueue.Get()
	if quit {
		return false
	}
	defer c.admitQueue.Done(k)
	start := time.Now()
	err := c.admit(ctx)
	end := time.Now()
	c.nextAdmission.Store(end.Add(min(max(3*end.Sub(start), admitMinGap), admitMaxGap)).UnixNano())
	// The one retry policy: a failed pass is tried again after the key's
	// backoff, which a pass that succeeds resets, and one refused for good
	// waits for the next event. While pods wait, a pass is due within
	// admitPeriod whatever the backoff.
	finish(ctx, c.log, c.admitQueue, k, err, "admission")
	if c.waiting.Load() {
		c.admitQueue.AddAfter(k, admitPeriod)
	}
	return true
}

// admit lifts the gates of the pods the queues admit now.
func (c *Controller) admit(ctx context.Context) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("rgs: list pods: %w", err)
	}
	// Sized once for every pod: a pass runs every few hundred
	// milliseconds while pods wait, and growing them as they fill made
	// most of RGS's garbage under a burst of asks.
	snap := admission.Snapshot{Cluster: c.policy.ClusterResource(), Queues: c.policy.AdmissionQueues(),
		MinimumAllocation: c.policy.MinimumAllocation(), Pods: make([]admission.Pod, 0, len(pods))}
	if pp, ok := c.policy.(PartitionPolicy); ok {
		snap.Partitions = pp.PartitionResources()
	}
	if up, ok := c.policy.(UserPolicy); ok {
		snap.MaxParallelAppsOfUser = up.MaxParallelAppsOfUser
	}
	byKey := make(map[string]*podrecord.Pod, len(pods))
	priorities := map[yarnid.ApplicationID]int32{}
	// The expectations are read once and settled after the walk: the
	// Policy is the RM's, called without RGS's locks.
	c.admitMu.Lock()
	lifting := maps.Clone(c.ungated)
	c.admitMu.Unlock()
	seen := make(map[types.UID]bool, len(lifting))
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if c.expect.deleting(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}) {
			continue // deleted by RGS, the cache not yet told
		}
		attempt, role, ok := attemptOf(p)
		if !ok {
			continue
		}
		if delegated(p) && p.Spec.NodeName == "" {
			// Its batch scheduler's to admit, unseen: neither Knit's to
			// lift nor used until bound, as the headroom counts it.
			continue
		}
		gated := hasGate(p)
		if lifting[p.UID] {
			// Lifted and not yet seen lifted, it counts as used; seen
			// lifted, it needs no expectation any more.
			seen[p.UID] = gated
			gated = false
		}
		prio, ok := priorities[attempt.App]
		if !ok {
			prio = c.policy.AppPriority(attempt.App)
			priorities[attempt.App] = prio
		}
		mem, vcores := yarnpb.MemoryAndVcores(resourceOf(p, c.cfg.Resources))
		key := p.Namespace + "/" + p.Name
		byKey[key] = p
		_, isContainer := containerOf(p)
		snap.Pods = append(snap.Pods, admission.Pod{
			Key: key, Queue: annotationOrLabel(p, launch.LabelQueue), User: annotationOrLabel(p, launch.LabelUser),
			App: attempt.App, AppPriority: prio, AM: role == launch.RoleAM,
			Resource:  admission.Resource{MemoryMB: mem, Vcores: int64(vcores)},
			Partition: p.Spec.NodeSelector[launch.NodeLabelPartition],
			Seq:       p.CreationTimestamp.UnixNano(), Admitted: !gated,
			Running: isContainer && !gated, Preempting: preemptedByKnit(p),
		})
	}
	c.admitMu.Lock()
	for uid := range lifting {
		if !seen[uid] {
			// Seen lifted, or gone from the cache.
			delete(c.ungated, uid)
		}
	}
	c.admitMu.Unlock()
	lifted := map[string]bool{}
	for _, key := range admission.Admit(snap) {
		if err := c.liftGate(ctx, byKey[key]); err != nil {
			return err
		}
		lifted[key] = true
	}
	// Preemption sees what this pass admitted as used, as YARN's policy
	// sees what the scheduler allocated: room just given to a queue's
	// pending pods is no reason to take its containers back.
	waiting := false
	for i := range snap.Pods {
		if lifted[snap.Pods[i].Key] {
			snap.Pods[i].Admitted = true
		}
		waiting = waiting || !snap.Pods[i].Admitted || snap.Pods[i].Preempting
	}
	c.waiting.Store(waiting)
	return c.preempt(ctx, snap, byKey)
}

// preempt runs a preemption round when one is due: it marks the
// containers admission.Preempt chooses, lets go of those it no longer
// chooses, and deletes those chosen MaxWaitBeforeKill ago or more.
func (c *Controller) preempt(ctx context.Context, snap admission.Snapshot, byKey map[string]*podrecord.Pod) error {
	settings := c.policy.Preemption()
	now := time.Now()
	if !settings.Enabled || now.Sub(c.lastPreemption) < settings.Interval {
		return nil
	}
	c.lastPreemption = now
	chosen := map[string]bool{}
	for _, k := range admission.Preempt(snap, settings.Policy) {
		chosen[k] = true
	}
	if settings.ObserveOnly {
		if len(chosen) > 0 {
			c.log.InfoContext(ctx, "preemption observed only: containers chosen, none taken back", "containers", len(chosen))
		}
		// Nothing marked, nothing deleted; and what rounds marked before
		// observe_only was turned on is let go, so no AM is told to give
		// back what will never be taken.
		clear(chosen)
	}
	for _, sp := range snap.Pods {
		p := byKey[sp.Key]
		var err error
		switch {
		case chosen[sp.Key] && !sp.Preempting:
			err = c.markPreempted(ctx, p, corev1.ConditionTrue, "taken back for a queue below its guaranteed capacity, or within its queue for an application of higher priority or a user below its limit")
		case !chosen[sp.Key] && sp.Preempting:
			err = c.markPreempted(ctx, p, corev1.ConditionFalse, "no longer needed by another queue or application")
		case chosen[sp.Key] && now.Sub(disruption(p).LastTransitionTime.Time) >= settings.MaxWaitBeforeKill:
			c.log.InfoContext(ctx, "preempting container", "pod", sp.Key, "queue", sp.Queue, "waited", settings.MaxWaitBeforeKill.String())
			err = c.deleteOnce(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// markPreempted sets the pod's DisruptionTarget condition with
// ReasonPreemptionByKnit: True to take it back, False to let it go.
func (c *Controller) markPreempted(ctx context.Context, p *podrecord.Pod, status corev1.ConditionStatus, message string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: status, Reason: ReasonPreemptionByKnit, Message: message,
		LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("rgs: mark pod %s/%s preempted: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// waitingForAdmission reports whether admission passes are for p: it is
// gated, or marked to be taken back.
func waitingForAdmission(p *podrecord.Pod) bool { return hasGate(p) || preemptedByKnit(p) }

// hasGate reports whether the pod still waits for Knit's admission.
func hasGate(p *podrecord.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == launch.SchedulingGate {
			return true
		}
	}
	return false
}

// liftGate removes Knit's scheduling gate from the pod, and only it: a
// JSON patch that tests the gate is where the cache saw it, so a pod
// changed meanwhile is left for the next pass.
func (c *Controller) liftGate(ctx context.Context, p *podrecord.Pod) error {
	i := -1
	for j, g := range p.Spec.SchedulingGates {
		if g.Name == launch.SchedulingGate {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	path := "/spec/schedulingGates/" + strconv.Itoa(i)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path + "/name", "value": launch.SchedulingGate},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsConflict(err):
		// Gone, or changed since the cache saw it: the next pass decides
		// again on what it sees then.
		return nil
	case err != nil:
		return fmt.Errorf("rgs: admit pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.admitMu.Lock()
	c.ungated[p.UID] = true
	c.admitMu.Unlock()
	return nil
}

// gatedMapping is the queue's mapping, gated when admission is on.
func (c *Controller) gatedMapping(queue string) Mapping {
	m := c.mapping(queue)
	m.Gated = c.policy != nil
	return m
}
