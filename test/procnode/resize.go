package procnode

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// resizeRetryInterval is how often a deferred resize is tried again even
// if no pod ended, the kubelet's retry period for pending resizes.
const resizeRetryInterval = 3 * time.Minute

// podAllocation is _allocated.json: the resources the node granted each
// resizable container of a pod (regular and sidecar containers), by name.
// It plays the kubelet's allocation checkpoint: written from the spec when
// the pod's first container starts and again whenever a resize is
// accepted, so a pending resize survives a node restart as pending.
type podAllocation map[string]corev1.ResourceRequirements

// allocationFromSpec is the allocation that grants pod exactly its spec.
func allocationFromSpec(pod *corev1.Pod) podAllocation {
	a := podAllocation{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		a[c.Name] = *c.Resources.DeepCopy()
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			a[c.Name] = *c.Resources.DeepCopy()
		}
	}
	return a
}

// seedAllocation rebuilds the allocation of a pod that ran before the
// node kept one (or whose file is lost): what the status reports, where
// it does, else the spec.
func seedAllocation(pod *corev1.Pod) podAllocation {
	a := allocationFromSpec(pod)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range list {
			if _, ok := a[cs.Name]; ok && cs.Resources != nil {
				a[cs.Name] = *cs.Resources.DeepCopy()
			}
		}
	}
	return a
}

// resourcesOf is what container c was granted: its allocation, or its spec
// for containers that cannot be resized (regular init containers) and
// while there is no allocation (nil a).
func (a podAllocation) resourcesOf(c *corev1.Container) corev1.ResourceRequirements {
	if r, ok := a[c.Name]; ok {
		return *r.DeepCopy()
	}
	return *c.Resources.DeepCopy()
}

// applyTo returns pod as the node runs it, its spec resources replaced by
// the allocation, and whether that changed anything (a resize is pending).
// pod itself is never modified; it is copied only when something differs.
func (a podAllocation) applyTo(pod *corev1.Pod) (*corev1.Pod, bool) {
	out, changed := pod, false
	apply := func(list func(*corev1.Pod) []corev1.Container) {
		for i, c := range list(out) {
			r, ok := a[c.Name]
			if !ok || apiequality.Semantic.DeepEqual(c.Resources, r) {
				continue
			}
			if !changed {
				out, changed = pod.DeepCopy(), true
			}
			list(out)[i].Resources = *r.DeepCopy()
		}
	}
	apply(func(p *corev1.Pod) []corev1.Container { return p.Spec.Containers })
	apply(func(p *corev1.Pod) []corev1.Container { return p.Spec.InitContainers })
	return out, changed
}

func readAllocation(paths podPaths) (podAllocation, bool, error) {
	var a podAllocation
	ok, err := readJSON(paths.allocated(), &a)
	if err != nil {
		return nil, false, fmt.Errorf("read allocation: %w", err)
	}
	return a, ok, nil
}

// resizeOutcome is what the node makes of a pod whose spec asks for other
// resources than it was allocated.
type resizeOutcome int

const (
	resizeAccepted   resizeOutcome = iota + 1 // fits: the allocation follows the spec
	resizeDeferred                            // fits the node, not the room left now: tried again later
	resizeInfeasible                          // more than the node has at all
)

// resizeDecision is a resize decided on: its outcome, the kubelet's
// message for a pending one, and the pod generation it was decided for.
type resizeDecision struct {
	Outcome    resizeOutcome
	Message    string
	Generation int64
}

// reason is the PodResizePending reason of a pending decision.
func (d resizeDecision) reason() string {
	if d.Outcome == resizeInfeasible {
		return corev1.PodReasonInfeasible
	}
	return corev1.PodReasonDeferred
}

// decideResize is the kubelet's canResizePod for a node without CPU or
// memory managers: desired holds the pod with the resources its spec asks
// for, others the other non-terminal pods of the node with the resources
// they were allocated. A pod asking more cpu or memory than the node's
// allocatable is Infeasible; one that does not fit beside the others (the
// kubelet's admission check: pod count, cpu, memory, ephemeral-storage and
// the extended resources the node advertises) is Deferred. It does no I/O.
func decideResize(desired *corev1.Pod, others []*corev1.Pod, allocatable corev1.ResourceList) resizeDecision {
	d := resizeDecision{Outcome: resizeAccepted, Generation: desired.Generation}
	req := podRequests(desired)
	cpuReq, cpuCap := req.Cpu().MilliValue(), allocatable.Cpu().MilliValue()
	memReq, memCap := req.Memory().Value(), allocatable.Memory().Value()
	switch {
	case memReq > memCap:
		d.Outcome = resizeInfeasible
		d.Message = fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", memReq, memCap)
		return d
	case cpuReq > cpuCap:
		d.Outcome = resizeInfeasible
		d.Message = fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpuReq, cpuCap)
		return d
	}
	if msg := admitFailure(req, others, allocatable); msg != "" {
		d.Outcome, d.Message = resizeDeferred, msg
	}
	return d
}

// admitFailure is the message of the kubelet's resource admission check
// for a pod requesting req beside others, "" if it fits. The first
// shortage wins, in the scheduler's order: pods, cpu, memory,
// ephemeral-storage, then the rest by name.
func admitFailure(req corev1.ResourceList, others []*corev1.Pod, allocatable corev1.ResourceList) string {
	short := func(name corev1.ResourceName, requested, used, capacity int64) string {
		return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity)
	}
	if allowed := allocatable.Pods().Value(); int64(len(others))+1 > allowed {
		return short(corev1.ResourcePods, 1, int64(len(others)), allowed)
	}
	used := corev1.ResourceList{}
	for _, p := range others {
		addResources(used, podRequests(p))
	}
	value := func(l corev1.ResourceList, name corev1.ResourceName) int64 {
		q := l[name]
		if name == corev1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var rest []corev1.ResourceName
	for name := range req {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, name == corev1.ResourcePods:
		case isExtendedResource(name):
			// Extended resources the node does not advertise are the
			// cluster's (or DRA's), not the node's to count.
			if _, ok := allocatable[name]; ok {
				rest = append(rest, name)
			}
		case strings.Contains(string(name), "/"), strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			rest = append(rest, name)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	for _, name := range append(names, rest...) {
		r := value(req, name)
		if r == 0 {
			continue
		}
		if u, c := value(used, name), value(allocatable, name); r > c-u {
			return short(name, r, u, c)
		}
	}
	return ""
}

// isExtendedResource reports a resource name outside the kubernetes.io
// namespace, such as yarn.io/gpu or nvidia.com/gpu.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}

// podRequests is what a pod asks of its node, as the scheduler and the
// kubelet count it: regular and sidecar containers add up; a regular init
// container needs its own requests plus the sidecars started before it,
// and the pod at least the largest such need; pod-level cpu and memory
// requests replace the containers' sum; overhead is added.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(reqs, pod.Spec.Containers[i].Resources.Requests)
	}
	sidecars, initMax := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(c) {
			addResources(reqs, c.Resources.Requests)
			addResources(sidecars, c.Resources.Requests)
			maxResources(initMax, sidecars)
			continue
		}
		need := corev1.ResourceList{}
		addResources(need, c.Resources.Requests)
		addResources(need, sidecars)
		maxResources(initMax, need)
	}
	maxResources(reqs, initMax)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	addResources(reqs, pod.Spec.Overhead)
	return reqs
}

func addResources(into, add corev1.ResourceList) {
	for name, q := range add {
		sum := into[name].DeepCopy()
		sum.Add(q)
		into[name] = sum
	}
}

func maxResources(into, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// resizeResult is what a sync knows of a pod's resources: its allocation
// (nil while no container has started) and the resize the node did not
// take, if any (Deferred or Infeasible).
type resizeResult struct {
	Allocated podAllocation
	Pending   *resizeDecision
}

// allocateAtStart records the spec as the pod's allocation before its
// first container starts, as the kubelet allocates at admission, and
// returns the allocation in force.
func (n *Node) allocateAtStart(pod *corev1.Pod, paths podPaths) (podAllocation, error) {
	n.resizeMu.Lock()
	defer n.resizeMu.Unlock()
	a, ok, err := readAllocation(paths)
	if err != nil || ok {
		return a, err
	}
	a = allocationFromSpec(pod)
	if err := writeJSONAtomic(paths.allocated(), a); err != nil {
		return nil, fmt.Errorf("record allocation: %w", err)
	}
	return a, nil
}

// syncResize handles a resize of a pod that is not being deleted, as the
// kubelet's allocation manager does: a pod whose spec differs from its
// allocation is accepted (the allocation follows the spec), deferred or
// found infeasible. Decisions are serialized, so two resizes never both
// take the same free room. A pod with no allocation yet (nothing started)
// needs nothing: it is allocated its spec when it starts.
func (n *Node) syncResize(key string, pod *corev1.Pod, paths podPaths, obs map[string]containerObs) (resizeResult, error) {
	n.resizeMu.Lock()
	defer n.resizeMu.Unlock()
	alloc, ok, err := readAllocation(paths)
	if err != nil {
		return resizeResult{}, err
	}
	if !ok {
		ran := false
		for _, o := range obs {
			ran = ran || o.Latest != nil
		}
		if !ran {
			n.forgetDeferred(key)
			return resizeResult{}, nil
		}
		alloc = seedAllocation(pod)
		if err := writeJSONAtomic(paths.allocated(), alloc); err != nil {
			return resizeResult{}, fmt.Errorf("record allocation: %w", err)
		}
	}
	if _, pending := alloc.applyTo(pod); !pending {
		n.forgetDeferred(key)
		return resizeResult{Allocated: alloc}, nil
	}

	n.mu.Lock()
	freedBefore := n.roomFreed
	n.mu.Unlock()
	others, err := n.allocatedOthers(pod)
	if err != nil {
		return resizeResult{}, err
	}
	d := decideResize(pod, others, n.cfg.Capacity)
	if d.Outcome == resizeAccepted {
		want := allocationFromSpec(pod)
		if err := writeJSONAtomic(paths.allocated(), want); err != nil {
			return resizeResult{}, fmt.Errorf("record allocation: %w", err)
		}
		n.log.Info("pod resize accepted", "pod", key, "generation", pod.Generation)
		n.forgetDeferred(key)
		// A pod that shrank leaves room a deferred resize may fit in.
		n.freeRoom()
		return resizeResult{Allocated: want}, nil
	}

	if old := podCondition(pod.Status.Conditions, corev1.PodResizePending); old == nil ||
		old.Reason != d.reason() || old.Message != d.Message {
		n.log.Info("pod resize pending", "pod", key, "generation", pod.Generation, "reason", d.reason(), "message", d.Message)
	}
	if d.Outcome == resizeDeferred {
		n.mu.Lock()
		n.deferred[key] = true
		missed := n.roomFreed != freedBefore
		n.mu.Unlock()
		if missed {
			n.queue.Add(key) // a pod ended while this was decided: decide again
		}
		n.queue.AddAfter(key, resizeRetryInterval)
	} else {
		n.forgetDeferred(key)
	}
	return resizeResult{Allocated: alloc, Pending: &d}, nil
}

// allocatedOthers lists the node's other non-terminal pods as they hold
// the node: with their allocated resources, or their spec if none of
// their containers started yet (the kubelet admitted them with it).
func (n *Node) allocatedOthers(pod *corev1.Pod) ([]*corev1.Pod, error) {
	all, err := n.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []*corev1.Pod
	for _, p := range all {
		if p.UID == pod.UID || p.Spec.NodeName != n.cfg.Name ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		a, ok, err := readAllocation(newPodPaths(n.cfg.Dir, p.Namespace, p.Name, p.UID))
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if ok {
			p, _ = a.applyTo(p)
		}
		out = append(out, p)
	}
	return out, nil
}

func (n *Node) forgetDeferred(key string) {
	n.mu.Lock()
	delete(n.deferred, key)
	n.mu.Unlock()
}

// freeRoom is called when room on the node may have grown (a pod ended or
// left, a pod shrank): every deferred resize is tried again.
func (n *Node) freeRoom() {
	n.mu.Lock()
	n.roomFreed++
	keys := make([]string, 0, len(n.deferred))
	for k := range n.deferred {
		keys = append(keys, k)
	}
	n.mu.Unlock()
	for _, k := range keys {
		n.queue.Add(k)
	}
}

func podCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// resizePendingCondition is the PodResizePending condition of a pending
// decision. Its transition time stays while the reason does, as the
// kubelet keeps it; its probe time moves only when the decision changes,
// so re-deciding the same thing on every sync does not rewrite the status.
func resizePendingCondition(d resizeDecision, old []corev1.PodCondition, now time.Time) corev1.PodCondition {
	t := metav1.NewTime(apiTime(now))
	c := corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: d.reason(), Message: d.Message, ObservedGeneration: d.Generation,
		LastProbeTime: t, LastTransitionTime: t}
	if o := podCondition(old, corev1.PodResizePending); o != nil && o.Reason == c.Reason {
		c.LastTransitionTime = o.LastTransitionTime
		if o.Message == c.Message && o.ObservedGeneration == c.ObservedGeneration {
			c.LastProbeTime = o.LastProbeTime
		}
	}
	return c
}
