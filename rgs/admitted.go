package rgs

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/admission"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
)

// The CapacityScheduler counts a container as used from the moment it
// allocates it, before the AM hears of it and before it runs. Knit's
// allocation is admission lifting a pod's gate, and a pod becomes a
// container only once the Kubernetes scheduler binds it: admission counts
// the pods in between as used (admission.Pod.Admitted), and so must
// everything that reads the queues' use as YARN's, the AM's headroom
// first. The admitted index keeps them, added up per queue and per user,
// as pod syncs see them come and go: O(1) a pod event and O(1) a read,
// never a walk over the pods.

// admittedPod is what one admitted pod that is not yet a container
// counts for.
type admittedPod struct {
	queue, user string
	resource    admission.Resource
	// placed is whether the Kubernetes scheduler has bound it to a node,
	// whose use then counts it already.
	placed bool
}

// admittedIndex is the admitted pods not yet containers, by pod, and
// their resources added up per queue (each leaf's in it and in every queue
// above it), per (leaf, user), and over those not yet on a node. Its lock
// is taken under no other of RGS's.
type admittedIndex struct {
	mu       sync.Mutex
	pods     map[types.NamespacedName]admittedPod
	queues   map[string]admission.Resource
	users    map[[2]string]admission.Resource
	unplaced admission.Resource
}

func newAdmittedIndex() *admittedIndex {
	return &admittedIndex{pods: map[types.NamespacedName]admittedPod{}, queues: map[string]admission.Resource{},
		users: map[[2]string]admission.Resource{}}
}

// set makes the pod nn count for a (counts true) or for nothing.
func (x *admittedIndex) set(nn types.NamespacedName, a admittedPod, counts bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.pods[nn]; ok {
		if counts && old == a {
			return
		}
		x.add(old, -1)
		delete(x.pods, nn)
	}
	if counts {
		x.pods[nn] = a
		x.add(a, 1)
	}
}

// add adds a's resource (sign 1) or takes it away (-1) in its leaf, the
// leaf's parents and its user; mu is held.
func (x *admittedIndex) add(a admittedPod, sign int64) {
	r := admission.Resource{MemoryMB: sign * a.resource.MemoryMB, Vcores: sign * a.resource.Vcores}
	if !a.placed {
		x.unplaced = admission.Resource{MemoryMB: x.unplaced.MemoryMB + r.MemoryMB, Vcores: x.unplaced.Vcores + r.Vcores}
	}
	addTo(x.users, [2]string{a.queue, a.user}, r)
	for path := a.queue; ; {
		addTo(x.queues, path, r)
		i := strings.LastIndexByte(path, '.')
		if i <= 0 {
			break
		}
		path = path[:i]
	}
}

// addTo adds r to m[k], dropping a key left with nothing.
func addTo[K comparable](m map[K]admission.Resource, k K, r admission.Resource) {
	s := admission.Resource{MemoryMB: m[k].MemoryMB + r.MemoryMB, Vcores: m[k].Vcores + r.Vcores}
	if s == (admission.Resource{}) {
		delete(m, k)
		return
	}
	m[k] = s
}

func (x *admittedIndex) queue(path string) admission.Resource {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.queues[path]
}

func (x *admittedIndex) notPlaced() admission.Resource {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.unplaced
}

func (x *admittedIndex) user(leaf, user string) admission.Resource {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.users[[2]string{leaf, user}]
}

// AdmittedUnbound is what the pods admission let go to the Kubernetes
// scheduler and not yet bound into containers ask for, in the queue at
// path and below it (root's: in every queue): used, as the
// CapacityScheduler counts the containers it allocated. Nothing without
// admission, where a pod is allocated when bound.
func (c *Controller) AdmittedUnbound(path string) admission.Resource { return c.admitted.queue(path) }

// AdmittedUnplaced is what the pods of AdmittedUnbound that no node holds
// yet ask for, in every queue: a node's use counts a pod once it is bound
// there, container or not.
func (c *Controller) AdmittedUnplaced() admission.Resource { return c.admitted.notPlaced() }

// AdmittedUnboundOf is AdmittedUnbound of one user's pods in leaf.
func (c *Controller) AdmittedUnboundOf(leaf, user string) admission.Resource {
	return c.admitted.user(leaf, user)
}

// noteAdmitted counts the pod nn, p its state in the cache (nil when
// gone), as admission does: admitted and not yet a container, as long as
// it has not ended. Called from the pod's sync, and again once the pod
// has become a container. A pod of a queue delegated to a batch scheduler
// never had Knit's gate: that scheduler admits it, unseen, so it counts
// only once bound, as a container.
func (c *Controller) noteAdmitted(nn types.NamespacedName, p *podrecord.Pod, container bool) {
	if c.policy == nil {
		return
	}
	counts := p != nil && !container && !hasGate(p) && !delegated(p) && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	var a admittedPod
	if counts {
		mem, vcores := yarnpb.MemoryAndVcores(resourceOf(p, c.cfg.Resources))
		a = admittedPod{queue: annotationOrLabel(p, launch.LabelQueue), user: annotationOrLabel(p, launch.LabelUser),
			resource: admission.Resource{MemoryMB: mem, Vcores: int64(vcores)}, placed: p.Spec.NodeName != ""}
	}
	c.admitted.set(nn, a, counts)
}

// delegated reports whether the pod's queue is a batch scheduler's
// (Mapping.Delegate): it carries that scheduler's queue.
func delegated(p *podrecord.Pod) bool {
	return p.Annotations[YuniKornQueueAnnotation] != "" || p.Annotations[VolcanoQueueAnnotation] != "" ||
		p.Labels[KueueQueueLabel] != ""
}
