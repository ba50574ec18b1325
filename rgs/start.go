package rgs

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// At Start, RGS rebuilds what it knows from the pods that exist: the books
// of pending pods and the containers of bound ones.

// StartConfig is what RGS takes from the RM that leads when it starts.
type StartConfig struct {
	// Epoch is the leader's term: it goes into every container id this
	// controller assigns, so ids of different terms never collide.
	Epoch int64
	// Sink hears of everything that happens to pods.
	Sink scheduling.Sink
	// Mapping gives the Kubernetes side of a queue (namespace, scheduler,
	// pod template) at the time a pod is built.
	Mapping func(queue string) Mapping
	// Policy, if set, holds every pod behind a scheduling gate until the
	// queues admit it (admit.go); nil sends pods to the Kubernetes
	// scheduler as created.
	Policy Policy
	// Desired, if set, is what the RM holds of applications, attempts and
	// containers: the pods none of them wants are collected (gc.go). The
	// RM has recovered its applications before Start.
	Desired Desired
}

// Start starts the informer and waits for its cache, then rebuilds the books
// and container sequences from the pods that exist: after a restart, the
// pending pods are kept for the AM's resync and the running containers are
// returned, for the RM to recover. Everything that happens to pods from then
// on goes to the Sink.
func (c *Controller) Start(ctx context.Context, sc StartConfig) ([]scheduling.Allocation, error) {
	c.epoch, c.sink, c.mapping, c.policy, c.desired = sc.Epoch, sc.Sink, sc.Mapping, sc.Policy, sc.Desired
	// The informer lives as long as the controller, not as long as ctx,
	// which bounds only the start-up.
	c.factory.Start(c.stop)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return nil, fmt.Errorf("rgs: pod cache not synced: %w", ctx.Err())
	}
	c.listPodGroups(ctx)
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("rgs: list pods: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var running []scheduling.Allocation
	for _, p := range pods {
		attempt, role, ok := attemptOf(p)
		if !ok {
			continue
		}
		if id, ok := containerOf(p); ok {
			c.containers[id] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			c.byPod[p.UID] = id
			c.seq[attempt] = max(c.seq[attempt], id.Sequence)
			if cp, err := c.containerProto(p, id); err == nil {
				running = append(running, scheduling.Allocation{Role: role, Container: cp, Created: p.CreationTimestamp.Time,
					Partition: p.Spec.NodeSelector[launch.NodeLabelPartition]})
			}
			continue
		}
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue // bound before the restart: the pod worker allocates it
		}
		k := bookKey{attempt, role}
		b := c.books[k]
		if b == nil {
			b = newBook(scheduling.AttemptSpec{Attempt: attempt, Role: role})
			c.books[k] = b
		}
		b.created++
		b.pending[p.Name] = &pendingPod{namespace: p.Namespace, name: p.Name, hash: p.Labels[launch.LabelAsk], order: b.created}
	}
	return running, nil
}
