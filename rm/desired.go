package rm

import (
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
)

// What the RM holds, as RGS collects the pods no removal took against it
// (rgs.Desired): the intents the RM records (Scheduler) can be lost with
// the RM, refused, or come before the pod they were meant for.

var _ rgs.Desired = (*ResourceManager)(nil)

// ApplicationEnded reports whether the RM holds app and whether it has
// ended. An application forgotten after retention is not known: the RM
// cannot tell it from one it never had.
func (rm *ResourceManager) ApplicationEnded(app yarnid.ApplicationID) (ended, known bool) {
	e := rm.lookup(app)
	if e == nil {
		return false, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.app.State().Final(), true
}

// AttemptLive reports whether attempt is between its start and its end,
// the set its AMRMToken is valid for.
func (rm *ResourceManager) AttemptLive(attempt yarnid.AttemptID) bool {
	return rm.cfg.LiveAttempts.has(attempt)
}

// ContainerLive reports whether the RM holds id as allocated, acquired or
// running: released, expired, killed and completed containers are not.
func (rm *ResourceManager) ContainerLive(id yarnid.ContainerID) bool {
	e := rm.lookup(id.Attempt.App)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.app.Container(id)
	return c != nil && c.Live()
}
