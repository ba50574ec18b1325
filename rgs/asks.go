package rgs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// The asks of an attempt's role are kept in a book (book.go); a book's
// sync makes its pending pods match them: it creates the pods missing and
// deletes the pending pods asked for no more.

// Ask records the AM's asks (absolute totals per key, as allocate carries
// them) and reconciles the pending pods to them in the background.
func (c *Controller) Ask(spec scheduling.AttemptSpec, asks []*yarnpb.ResourceRequestProto) {
	k := bookKey{spec.Attempt, spec.Role}
	c.mu.Lock()
	b := c.bookLocked(k, spec)
	b.spec = spec
	b.update(asks)
	c.mu.Unlock()
	c.bookQueue.Add(k)
}

// bookLocked is the book of k, made for spec if there is none; c.mu is
// held.
func (c *Controller) bookLocked(k bookKey, spec scheduling.AttemptSpec) *book {
	b := c.books[k]
	if b == nil {
		b = newBook(spec)
		c.books[k] = b
	}
	return b
}

// Blacklist adds and removes hosts the attempt's new pods must avoid.
func (c *Controller) Blacklist(spec scheduling.AttemptSpec, add, remove []string) {
	if len(add) == 0 && len(remove) == 0 {
		return
	}
	k := bookKey{spec.Attempt, spec.Role}
	c.mu.Lock()
	b := c.bookLocked(k, spec)
	for _, h := range add {
		b.blacklist[h] = true
	}
	for _, h := range remove {
		delete(b.blacklist, h)
	}
	c.mu.Unlock()
}

// deletePending deletes a pending pod with one call. With rv set, only if
// unchanged since: a pod the scheduler has just bound is kept, and becomes
// a container. A pod already gone is no error; a conflict is, and the
// book's next sync reads the pod again.
func (c *Controller) deletePending(ctx context.Context, nn types.NamespacedName, rv *string) error {
	opts := metav1.DeleteOptions{}
	if rv != nil {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: rv}
	}
	err := c.cfg.Client.CoreV1().Pods(nn.Namespace).Delete(ctx, nn.Name, opts)
	if err == nil || apierrors.IsNotFound(err) {
		c.expect.expectDelete(nn)
		return nil
	}
	return fmt.Errorf("rgs: delete pending pod %s: %w", nn, err)
}

// awaitSeen reports whether a pod of b was created and the cache may not
// show it yet: it may be bound already, and is not deleted blindly. Its
// worker queues the book again once the cache shows it; the book is
// marked first, so that a worker seeing the pod meanwhile finds the mark.
func (c *Controller) awaitSeen(b *book, nn types.NamespacedName) bool {
	c.mu.Lock()
	b.awaitingSeen = true
	c.mu.Unlock()
	return c.expect.unseen(nn)
}

// processBook reconciles one book's pending pods to its asks.
func (c *Controller) processBook(ctx context.Context) bool {
	k, quit := c.bookQueue.Get()
	if quit {
		return false
	}
	defer c.bookQueue.Done(k)
	err := c.syncBook(ctx, k)
	finish(ctx, c.log, c.bookQueue, k, err, "reconciling asks", "attempt", k.attempt.String(), "role", k.role)
	return true
}

type podToCreate struct {
	pod  *corev1.Pod
	hash string
}

func (c *Controller) syncBook(ctx context.Context, k bookKey) error {
	c.mu.Lock()
	b := c.books[k]
	if b == nil || !b.known {
		c.mu.Unlock()
		return nil
	}
	want := b.desired()
	have := b.pendingByHash()
	var create []podToCreate
	var remove []*pendingPod
	var buildErr error
	for h, w := range want {
		for i := len(have[h]); i < w.count; i++ {
			pod, err := c.buildPod(b, w)
			if err != nil {
				buildErr = err
				break
			}
			b.created++
			b.pending[pod.Name] = &pendingPod{namespace: pod.Namespace, name: pod.Name, hash: h, order: b.created}
			create = append(create, podToCreate{pod, h})
		}
	}
	for h, ps := range have {
		if extra := len(ps) - want[h].count; extra > 0 {
			remove = append(remove, ps[:extra]...)
		}
	}
	c.mu.Unlock()

	errs := []error{buildErr}
	// An application's PodGroup exists before its pods.
	if failed, err := c.ensurePodGroups(ctx, create); err != nil {
		errs = append(errs, err)
		kept := create[:0]
		c.mu.Lock()
		for _, p := range create {
			if failed[p.pod.Name] {
				delete(b.pending, p.pod.Name)
			} else {
				kept = append(kept, p)
			}
		}
		c.mu.Unlock()
		create = kept
	}
	errs = append(errs, c.createPods(ctx, b, create)...)
	for _, p := range remove {
		nn := types.NamespacedName{Namespace: p.namespace, Name: p.name}
		var rv *string
		cur, err := c.pods.Get(p.namespace, p.name)
		switch {
		case err == nil && cur.Spec.NodeName != "":
			continue // bound meanwhile: the pod worker makes it a container
		case err == nil:
			rv = &cur.ResourceVersion
		case c.awaitSeen(b, nn):
			continue
		}
		// Else gone from the cache, or never seen in time: deleted as it is.
		if err := c.deletePending(ctx, nn, rv); err != nil {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		delete(b.pending, p.name)
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// createPods creates pods in slow-start batches, as the ReplicaSet
// controller does: 1, 2, 4, ... creations at once, each after the create
// rate limiter allows and at most CreateConcurrency in flight, until a
// batch has an error. A namespace out of quota, or a webhook refusing
// every pod, so costs one failed call per sync rather than one per pod.
// Each pod is tried once; those that failed, and those of the batches not
// tried, leave the book's pending, for its next sync to make again.
func (c *Controller) createPods(ctx context.Context, b *book, pods []podToCreate) []error {
	var errs []error
	done := 0
	for batch := min(1, len(pods)); done < len(pods); batch = min(2*batch, len(pods)-done) {
		errs = c.createBatch(ctx, b, pods[done:done+batch])
		done += batch
		if len(errs) > 0 {
			break
		}
	}
	c.mu.Lock()
	for _, p := range pods[done:] {
		delete(b.pending, p.pod.Name)
	}
	c.mu.Unlock()
	return errs
}

// createBatch creates pods at once, each with one call.
func (c *Controller) createBatch(ctx context.Context, b *book, pods []podToCreate) []error {
	sem := make(chan struct{}, c.cfg.CreateConcurrency)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, p := range pods {
		if err := c.limiter.Wait(ctx); err != nil {
			c.mu.Lock()
			for _, q := range pods[i:] {
				delete(b.pending, q.pod.Name)
			}
			c.mu.Unlock()
			errs = append(errs, fmt.Errorf("rgs: create pods: %w", err))
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			queue := p.pod.Labels[launch.LabelQueue]
			nn := types.NamespacedName{Namespace: p.pod.Namespace, Name: p.pod.Name}
			c.expect.expectCreate(nn, b.spec.Attempt.App)
			_, err := c.cfg.Client.CoreV1().Pods(p.pod.Namespace).Create(ctx, p.pod, metav1.CreateOptions{FieldManager: fieldManager})
			if err == nil || apierrors.IsAlreadyExists(err) {
				c.cfg.Observer.PodCreated(queue)
				return
			}
			c.cfg.Observer.PodCreateFailed(queue)
			c.expect.createFailed(nn)
			c.mu.Lock()
			delete(b.pending, p.pod.Name)
			c.mu.Unlock()
			mu.Lock()
			errs = append(errs, fmt.Errorf("rgs: create pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err))
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// buildPod makes the pod of one ask of book b. Called with c.mu held.
func (c *Controller) buildPod(b *book, w want) (*corev1.Pod, error) {
	s := b.spec
	req := PodRequest{
		Name:           podName(s.Attempt, s.Role),
		App:            s.Attempt.App.String(),
		Attempt:        s.Attempt.ID,
		Role:           s.Role,
		Queue:          s.Queue,
		User:           s.User,
		Ask:            w.ask,
		LogAggregation: s.LogAggregation,
		Strict:         w.strict,
		Resources:      c.cfg.Resources,
		Mapping:        c.gatedMapping(s.Queue),
		Launcher:       c.cfg.Launcher,
		AskHash:        w.hash,
		SubCluster:     c.cfg.SubCluster,
		NodeSelector:   c.cfg.NodeSelector,
	}
	if req.Mapping.Delegate == "volcano" && c.cfg.Dynamic != nil {
		req.PodGroup = PodGroupName(s.Attempt.App)
	}
	if req.Ask.GetNodeLabelExpression() == "" && s.NodeLabel != "" {
		req.Ask = proto.CloneOf(req.Ask)
		req.Ask.NodeLabelExpression = proto.String(s.NodeLabel)
	}
	switch {
	case w.key.name == anyName:
	case isRack(w.key):
		req.Rack = w.key.name[1:]
	default:
		if node, ok := c.cfg.Nodes.NodeName(w.key.name); ok {
			req.Hosts = []string{node}
		}
	}
	for h := range b.blacklist {
		if node, ok := c.cfg.Nodes.NodeName(h); ok {
			req.Blacklist = append(req.Blacklist, node)
		}
	}
	return BuildPod(req)
}

// podName names a pod before it has a container: YARN ids with '-' for '_'
// and a random suffix, as a ReplicaSet names its pods.
func podName(attempt yarnid.AttemptID, role string) string {
	return fmt.Sprintf("app-%d-%04d-%02d-%s-%s", attempt.App.ClusterTimestamp, attempt.App.ID, attempt.ID, role, utilrand.String(8))
}

// Pending is what waits for the Kubernetes scheduler: per queue, user and
// node-label partition, the pods created for asks and not yet bound into
// containers, and the resources they ask for.
type Pending struct {
	Queue, User string
	// Partition is the pods' launch.NodeLabelPartition node selector, ""
	// for the default partition.
	Partition string
	Pods      int
	MemoryMB  int64
	VCores    int64
}

// Pending reports the pending pods per queue, user and partition, in no
// order.
func (c *Controller) Pending() []Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[[3]string]*Pending{}
	for _, b := range c.books {
		for _, pp := range b.pending {
			partition := ""
			if pod, err := c.pods.Get(pp.namespace, pp.name); err == nil {
				partition = pod.Spec.NodeSelector[launch.NodeLabelPartition]
			}
			k := [3]string{b.spec.Queue, b.spec.User, partition}
			p := by[k]
			if p == nil {
				p = &Pending{Queue: k[0], User: k[1], Partition: k[2]}
				by[k] = p
			}
			p.Pods++
			if key, ok := b.byHash[pp.hash]; ok {
				p.MemoryMB += key.group.memoryMB
				p.VCores += int64(key.group.vcores)
			}
		}
	}
	out := make([]Pending, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	return out
}
