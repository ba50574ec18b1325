package rm

import (
	"context"
	"sync"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rm/apps"
)

// LiveAttempts is the set of application attempts between their start and
// their end, as YARN's AMRMTokenSecretManager keeps its appAttemptSet: the
// ResourceManager adds and removes them, and the token manager asks it
// (tokens.Config.AttemptValid) whether a token's attempt still counts. It
// is built before both, so that neither needs the other to exist first.
// Safe for concurrent use.
type LiveAttempts struct {
	mu  sync.RWMutex
	set map[apps.AttemptID]struct{}
}

// NewLiveAttempts returns an empty set.
func NewLiveAttempts() *LiveAttempts {
	return &LiveAttempts{set: map[apps.AttemptID]struct{}{}}
}

// Valid reports whether attempt is live; it has the shape of
// tokens.Config.AttemptValid.
func (l *LiveAttempts) Valid(_ context.Context, attempt *yarnpb.ApplicationAttemptIdProto) bool {
	a, err := yarnid.AttemptIDFromProto(attempt)
	if err != nil {
		return false
	}
	return l.has(a)
}

func (l *LiveAttempts) has(a apps.AttemptID) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.set[a]
	return ok
}

func (l *LiveAttempts) add(a apps.AttemptID) {
	l.mu.Lock()
	l.set[a] = struct{}{}
	l.mu.Unlock()
}

func (l *LiveAttempts) remove(a apps.AttemptID) {
	l.mu.Lock()
	delete(l.set, a)
	l.mu.Unlock()
}

// ContainerReports carries what RKS sees of containers (one started, an
// update taken on its node) to the ResourceManager, as a NodeManager's
// heartbeat carries them to YARN's: RKS is built with it as its
// rks.Observer before the RM exists, and the RM takes the reports in Run,
// in order. A report waits while the queue is full, until its context
// ends.
type ContainerReports struct {
	ch chan containerReport
}

var _ rks.Observer = (*ContainerReports)(nil)

type containerReport struct {
	id      yarnid.ContainerID
	updated bool  // an update was taken; else the container started
	version int32 // of the update
}

// NewContainerReports returns an empty queue.
func NewContainerReports() *ContainerReports {
	return &ContainerReports{ch: make(chan containerReport, 1024)}
}

// ContainerStarted implements rks.Observer.
func (c *ContainerReports) ContainerStarted(ctx context.Context, id yarnid.ContainerID) {
	c.send(ctx, containerReport{id: id})
}

// ContainerUpdated implements rks.Observer.
func (c *ContainerReports) ContainerUpdated(ctx context.Context, id yarnid.ContainerID, version int32) {
	c.send(ctx, containerReport{id: id, updated: true, version: version})
}

func (c *ContainerReports) send(ctx context.Context, r containerReport) {
	select {
	case c.ch <- r:
	case <-ctx.Done():
	}
}

// reports is the queue Run reads; nil (never ready) without one.
func (c *ContainerReports) reports() <-chan containerReport {
	if c == nil {
		return nil
	}
	return c.ch
}

// take hands one report to the RM.
func (rm *ResourceManager) take(ctx context.Context, r containerReport) {
	if r.updated {
		rm.ContainerUpdated(ctx, r.id, r.version)
		return
	}
	rm.ContainerStarted(ctx, r.id)
}
