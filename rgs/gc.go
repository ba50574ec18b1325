package rgs

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs/podrecord"
)

// Garbage collection: the RM's removals (removal.go) are intents, and an
// intent can be lost (the RM ends between an application's end stored and
// its removal carried out), refused, or come before the pod it was meant
// for (a pod created just after its application's removal ran). So each
// pod's sync, and a sweep of the cache every Resync, also compare the pod
// with what the RM holds, and queue the removal the RM would have.

// Desired is what the RM holds of applications, attempts and containers,
// against which RGS collects the pods no removal took. The RM answers from
// memory; RGS asks only once Start has returned, after the RM recovered
// its applications.
type Desired interface {
	// ApplicationEnded reports whether the RM holds app (known) and, if so,
	// whether it has ended. An application the RM does not hold is not
	// taken for ended: its pods may be another cluster's.
	ApplicationEnded(app yarnid.ApplicationID) (ended, known bool)
	// AttemptLive reports whether attempt runs: its asks still count.
	AttemptLive(attempt yarnid.AttemptID) bool
	// ContainerLive reports whether the RM holds id as allocated, acquired
	// or running: its pod still counts.
	ContainerLive(id yarnid.ContainerID) bool
}

// orphanGrace is how long a pod of a live application may stand with its
// container or attempt not held by the RM before it goes: a container is
// labelled on its pod before the Sink hears of it, and containers come
// back to the RM only after Start.
const orphanGrace = 30 * time.Second

// defaultResync is how often, without events, every pod is checked.
const defaultResync = time.Minute

// orphans are the pods of live applications seen with a container or an
// attempt the RM does not hold, since when: each goes once its doubt has
// lasted orphanGrace, and is cleared when the RM holds it again or the pod
// is gone.
type orphans struct {
	mu    sync.Mutex
	now   func() time.Time
	since map[types.UID]time.Time
}

func newOrphans(now func() time.Time) *orphans {
	return &orphans{now: now, since: map[types.UID]time.Time{}}
}

// doubt notes the pod as not held and returns how long it has to go before
// its grace is over; zero or less means over.
func (o *orphans) doubt(uid types.UID) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	since, ok := o.since[uid]
	if !ok {
		since = now
		o.since[uid] = now
	}
	return orphanGrace - now.Sub(since)
}

func (o *orphans) clear(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.since, uid)
}

// collect queues the removal of p if the RM holds nothing that wants it,
// and reports whether it did. It writes nothing itself: the removal
// workers do. It is conservative: a pod already going, of an application
// the RM does not hold, or bound and not yet a container (allocate's to
// settle) is left alone; an ended container's pod stays with its
// application, as the RM's own removals leave it.
func (c *Controller) collect(ctx context.Context, p *podrecord.Pod) bool {
	if c.desired == nil || p.DeletionTimestamp != nil {
		return false
	}
	nn := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if c.expect.deleting(nn) {
		return false
	}
	attempt, _, ok := attemptOf(p)
	if !ok {
		return false
	}
	over, known := c.desired.ApplicationEnded(attempt.App)
	if !known {
		return false
	}
	if over {
		c.log.InfoContext(ctx, "collecting the pods of an application that has ended", "app", attempt.App.String(), "pod", nn.String())
		c.orphans.clear(p.UID)
		c.RemoveApplication(attempt.App)
		return true
	}
	if done, _, _, _ := ended(p); done {
		return false
	}
	id, allocated := c.containerOfPod(p)
	var held bool
	switch {
	case allocated:
		held = c.desired.ContainerLive(id)
	case p.Spec.NodeName != "":
		return false
	default:
		held = c.desired.AttemptLive(attempt)
	}
	if held {
		c.orphans.clear(p.UID)
		return false
	}
	if left := c.orphans.doubt(p.UID); left > 0 {
		c.podQueue.AddAfter(nn, left)
		return false
	}
	c.log.InfoContext(ctx, "collecting a pod the RM holds no container or attempt of", "pod", nn.String(),
		"attempt", attempt.String(), "container", id.String(), "allocated", allocated)
	c.orphans.clear(p.UID)
	c.removeQueue.Add(removal{pod: nn})
	return true
}

// sweep checks every pod in the cache, so that orphans are found without
// an event of theirs.
func (c *Controller) sweep(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		c.log.WarnContext(ctx, "garbage collection sweep", "err", err)
		return
	}
	for _, p := range pods {
		c.collect(ctx, p)
	}
}

// runSweeps sweeps every period until ctx ends.
func (c *Controller) runSweeps(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.sweep(ctx)
		}
	}
}
