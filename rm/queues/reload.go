package queues

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// Reload builds the Tree for a new configuration, as refreshQueues does: the
// new hierarchy must be valid on its own, and every queue of t must still be
// in it unless that queue is stopped and empty. A leaf may become a parent
// only on the same terms; a parent may become a leaf. apps counts the
// applications still in t's queues. The Options of t carry over.
//
// The caller swaps the returned Tree in atomically; t stays usable. A refusal
// is an *Error as AdminService answers it: a YarnException with the message
// "java.io.IOException: Failed to re-init queues : <reason>".
//
// Unlike the CapacityScheduler, which lets a running queue go when the new
// configuration marks it STOPPED, Reload refuses to drop any queue that
// still has applications: Knit would lose track of their pods.
func (t *Tree) Reload(c *hadoopconf.Configuration, apps AppCounts) (*Tree, error) {
	next, err := Build(c, t.opts)
	if err != nil {
		return nil, reinitError(err)
	}
	for _, old := range t.queues {
		n := apps.InQueue(old.Path)
		oldState := old.EffectiveState(n)
		nq := next.byPath[old.Path]
		if nq == nil {
			stoppedNow := configuredStopped(c, old.Path)
			if n > 0 || (oldState != Stopped && !stoppedNow) {
				return nil, reinitError(&ConfigError{
					Message: fmt.Sprintf("%s cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : %s",
						old.Path, oldState),
					Err: ErrQueueInUse,
				})
			}
			continue
		}
		if old.IsLeaf() && !nq.IsLeaf() && (n > 0 || (oldState != Stopped && nq.State != Stopped)) {
			return nil, reinitError(&ConfigError{
				Message: fmt.Sprintf("Can not convert the leaf queue: %s to parent queue since it is not yet in stopped state. Current State : %s",
					old.Path, oldState),
				Err: ErrQueueInUse,
			})
		}
	}
	return next, nil
}

// configuredStopped reports whether c still sets the removed queue's state
// to STOPPED, which lets the CapacityScheduler drop a running queue.
func configuredStopped(c *hadoopconf.Configuration, path string) bool {
	v, ok, err := c.Lookup(Prefix + path + ".state")
	return err == nil && ok && v == "STOPPED"
}

func reinitError(err error) *Error {
	msg := err.Error()
	var ce *ConfigError
	if errors.As(err, &ce) {
		msg = ce.Message
	}
	return &Error{
		Class:   yarnerr.YarnException,
		Message: string(yarnerr.IOException) + ": Failed to re-init queues : " + strings.TrimSpace(msg),
		Err:     err,
	}
}
