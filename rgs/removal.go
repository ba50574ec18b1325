package rgs

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// removal is one of the RM's intents to take pods away: a single pod (a
// released, stopped or expired container, a pending pod of an attempt that
// is over), or every pod of an application that has ended, with its
// PodGroups. The RM records it and goes on; RGS's removal workers carry it
// out, so no client's call and no application's lock waits on the API
// server for it.
type removal struct {
	pod types.NamespacedName
	// byAppMaster marks the pod before it goes, so that its end reads as
	// KILLED_BY_APPMASTER: an AM's stopContainers, a shutdown signal.
	byAppMaster bool
	app         yarnid.ApplicationID
}

func (r removal) String() string {
	if r.pod.Name != "" {
		return "pod " + r.pod.String()
	}
	return "application " + r.app.String()
}

// StopContainer records that a container the AM stops must end and
// returns, as a NodeManager's stopContainers does: a removal worker marks
// its pod, so the end reads as KILLED_BY_APPMASTER, then deletes it, which
// gives the process the pod's grace period between SIGTERM and SIGKILL.
func (c *Controller) StopContainer(id yarnid.ContainerID) {
	c.mu.Lock()
	nn, ok := c.containers[id]
	c.mu.Unlock()
	if ok {
		c.removeQueue.Add(removal{pod: nn, byAppMaster: true})
	}
}

// DeleteContainer records that a container's pod must go (a release, a
// stop, an expiry) and returns: a removal worker deletes it.
func (c *Controller) DeleteContainer(id yarnid.ContainerID) {
	c.mu.Lock()
	nn, ok := c.containers[id]
	c.mu.Unlock()
	if ok { // else never allocated here, or already gone
		c.removeQueue.Add(removal{pod: nn})
	}
}

// ForgetAttempt drops the attempt's asks at once, so that no pod is created
// for them from now on, and leaves the deletion of its pending pods to the
// removal workers.
func (c *Controller) ForgetAttempt(attempt yarnid.AttemptID) {
	var doomed []removal
	c.mu.Lock()
	for _, role := range []string{launch.RoleAM, launch.RoleTask} {
		k := bookKey{attempt, role}
		if b := c.books[k]; b != nil {
			for _, p := range b.pending {
				doomed = append(doomed, removal{pod: types.NamespacedName{Namespace: p.namespace, Name: p.name}})
			}
			delete(c.books, k)
		}
	}
	c.mu.Unlock()
	for _, r := range doomed {
		c.removeQueue.Add(r)
	}
}

// RemoveApplication drops every ask of an application that has ended and
// leaves the deletion of its pods and PodGroups to the removal workers.
func (c *Controller) RemoveApplication(app yarnid.ApplicationID) {
	c.mu.Lock()
	for k := range c.books {
		if k.attempt.App == app {
			delete(c.books, k)
		}
	}
	c.mu.Unlock()
	c.removeQueue.Add(removal{app: app})
}

// processRemoval carries out one removal. A failure goes back to the queue
// through its rate limiter, the one retry policy of removals.
func (c *Controller) processRemoval(ctx context.Context) bool {
	r, quit := c.removeQueue.Get()
	if quit {
		return false
	}
	defer c.removeQueue.Done(r)
	err := c.syncRemoval(ctx, r)
	finish(ctx, c.log, c.removeQueue, r, err, "removal", "removal", r.String())
	return true
}

// syncRemoval makes one removal true: the pod, or the application's pods
// (as the informer lists them) and then its PodGroups, are gone. It is
// idempotent: what is already gone is no error and costs no write.
func (c *Controller) syncRemoval(ctx context.Context, r removal) error {
	if r.byAppMaster {
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, launch.AnnotationStoppedBy, launch.StoppedByAppMaster))
		_, err := c.cfg.Client.CoreV1().Pods(r.pod.Namespace).Patch(ctx, r.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		switch {
		case apierrors.IsNotFound(err):
			return nil // ended already, and reads as it ended
		case isPermanent(err):
			// Its end will read as killed rather than stopped; it still goes.
			c.log.ErrorContext(ctx, "marking a pod stopped by its AM refused for good", "pod", r.pod.String(), "err", err)
		case err != nil:
			return fmt.Errorf("rgs: mark %s stopped by its AM: %w", r.pod, err)
		}
	}
	if r.pod.Name != "" {
		return c.deleteOnce(ctx, r.pod)
	}
	sel := labels.SelectorFromSet(labels.Set{launch.LabelApplication: r.app.String()})
	pods, err := c.pods.List(sel)
	if err != nil {
		return fmt.Errorf("rgs: pods of %s: %w", r.app, err)
	}
	// Pods created and not yet seen go too: none is created for the
	// application from now on, but those sent may reach the cache later.
	doomed := map[types.NamespacedName]bool{}
	for _, p := range pods {
		doomed[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
	}
	for _, nn := range c.expect.unseenOf(r.app) {
		doomed[nn] = true
	}
	var errs []error
	for nn := range doomed {
		errs = append(errs, c.deleteOnce(ctx, nn))
	}
	errs = append(errs, c.deletePodGroups(ctx, r.app))
	return errors.Join(errs...)
}

// deleteOnce deletes a pod with one call. A pod already gone is no error;
// nor is a refusal that cannot change (the delete forbidden), which is
// logged: retrying it would only repeat it.
func (c *Controller) deleteOnce(ctx context.Context, nn types.NamespacedName) error {
	err := c.cfg.Client.CoreV1().Pods(nn.Namespace).Delete(ctx, nn.Name, metav1.DeleteOptions{})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		c.expect.expectDelete(nn)
		return nil
	case isPermanent(err):
		c.log.ErrorContext(ctx, "deleting a pod refused for good", "pod", nn.String(), "err", err)
		return nil
	}
	return fmt.Errorf("rgs: delete pod %s: %w", nn, err)
}

// deletePodGroups deletes the PodGroups RGS made for app. Each stays in
// the record of made groups until its delete succeeds, so a retry of the
// removal finds what is left.
func (c *Controller) deletePodGroups(ctx context.Context, app yarnid.ApplicationID) error {
	if c.cfg.Dynamic == nil {
		return nil
	}
	c.groups.mu.Lock()
	var made []types.NamespacedName
	for nn := range c.groups.made[app] {
		made = append(made, nn)
	}
	c.groups.mu.Unlock()
	var errs []error
	for _, nn := range made {
		err := c.cfg.Dynamic.Resource(PodGroupResource).Namespace(nn.Namespace).Delete(ctx, nn.Name, metav1.DeleteOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		case isPermanent(err):
			c.log.ErrorContext(ctx, "deleting a PodGroup refused for good", "podGroup", nn.String(), "err", err)
		default:
			errs = append(errs, fmt.Errorf("rgs: delete PodGroup %s: %w", nn, err))
			continue
		}
		c.groups.mu.Lock()
		delete(c.groups.made[app], nn)
		if len(c.groups.made[app]) == 0 {
			delete(c.groups.made, app)
		}
		c.groups.mu.Unlock()
	}
	return errors.Join(errs...)
}
