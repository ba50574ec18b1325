package rgs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/cenkalti/backoff/v4"
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
	b := c.books[k]
	if b == nil {
		b = newBook(spec)
		c.books[k] = b
	}
	b.spec = spec
	b.update(asks)
	c.mu.Unlock()
	c.bookQueue.Add(k)
}

// Blacklist adds and removes hosts the attempt's new pods must avoid.
func (c *Controller) Blacklist(spec scheduling.AttemptSpec, add, remove []string) {
	if len(add) == 0 && len(remove) == 0 {
		return
	}
	k := bookKey{spec.Attempt, spec.Role}
	c.mu.Lock()
	b := c.books[k]
	if b == nil {
		b = newBook(spec)
		c.books[k] = b
	}
	for _, h := range add {
		b.blacklist[h] = true
	}
	for _, h := range remove {
		delete(b.blacklist, h)
	}
	c.mu.Unlock()
}

// deletePod deletes a pod, retrying with backoff; a pod already gone is no
// error. With rv set, the pod is deleted only if unchanged since: a pending
// pod the scheduler has just bound is kept, and becomes a container.
func (c *Controller) deletePod(ctx context.Context, ns, name string, rv *string) error {
	opts := metav1.DeleteOptions{}
	if rv != nil {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: rv}
	}
	op := func() error {
		err := c.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, opts)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return backoff.Permanent(err)
		}
		return err
	}
	err := backoff.Retry(op, backoff.WithContext(retryPolicy(), ctx))
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("rgs: delete pod %s/%s: %w", ns, name, err)
	}
	return err
}

func retryPolicy() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = time.Minute
	return b
}

// processBook reconciles one book's pending pods to its asks.
func (c *Controller) processBook(ctx context.Context) bool {
	k, quit := c.bookQueue.Get()
	if quit {
		return false
	}
	defer c.bookQueue.Done(k)
	if err := c.syncBook(ctx, k); err != nil {
		c.log.WarnContext(ctx, "reconciling asks", "attempt", k.attempt.String(), "role", k.role, "err", err)
		c.bookQueue.AddRateLimited(k)
		return true
	}
	c.bookQueue.Forget(k)
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
		var rv *string
		if cur, err := c.pods.Pods(p.namespace).Get(p.name); err == nil {
			if cur.Spec.NodeName != "" {
				continue // bound meanwhile: the pod worker makes it a container
			}
			rv = &cur.ResourceVersion
		}
		if err := c.deletePod(ctx, p.namespace, p.name, rv); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		delete(b.pending, p.name)
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// createPods creates pods concurrently, each after the rate limiter allows.
func (c *Controller) createPods(ctx context.Context, b *book, pods []podToCreate) []error {
	if len(pods) == 0 {
		return nil
	}
	sem := make(chan struct{}, c.cfg.CreateConcurrency)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		if err := c.limiter.Wait(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := backoff.Retry(func() error {
				_, err := c.cfg.Client.CoreV1().Pods(p.pod.Namespace).Create(ctx, p.pod, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
					return backoff.Permanent(err)
				}
				return err
			}, backoff.WithContext(retryPolicy(), ctx))
			if err == nil {
				c.cfg.Observer.PodCreated(p.pod.Labels[launch.LabelQueue])
			}
			if err != nil {
				c.cfg.Observer.PodCreateFailed(p.pod.Labels[launch.LabelQueue])
				c.mu.Lock()
				delete(b.pending, p.pod.Name)
				c.mu.Unlock()
				mu.Lock()
				errs = append(errs, fmt.Errorf("rgs: create pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err))
				mu.Unlock()
			}
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

// Pending is what waits for the Kubernetes scheduler: per queue and user,
// the pods created for asks and not yet bound into containers, and the
// resources they ask for.
type Pending struct {
	Queue, User string
	Pods        int
	MemoryMB    int64
	VCores      int64
}

// Pending reports the pending pods per queue and user, in no order.
func (c *Controller) Pending() []Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[[2]string]*Pending{}
	for _, b := range c.books {
		if len(b.pending) == 0 {
			continue
		}
		k := [2]string{b.spec.Queue, b.spec.User}
		p := by[k]
		if p == nil {
			p = &Pending{Queue: k[0], User: k[1]}
			by[k] = p
		}
		for _, pp := range b.pending {
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
