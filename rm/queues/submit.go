package queues

import (
	"errors"
	"fmt"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// Submission is an application being submitted.
type Submission struct {
	// AppID is the application's id, as in "application_1700000000000_0001".
	AppID string
	// User submits; Groups are theirs (nil: Options.Groups).
	User   string
	Groups []string
	// Queue is the queue the application asks for, short name or path,
	// after placement (YARN submits to "default" when none is named).
	Queue string
}

// AppCounts reports applications that were accepted and have not finished.
type AppCounts interface {
	// Total counts them in the whole cluster.
	Total() int
	// InQueue counts them in the queue at path and below it.
	InQueue(path string) int
	// ByUser counts the user's in the queue at path and below it.
	ByUser(path, user string) int
}

// CheckSubmit decides whether the submission may enter its queue, with the
// checks, order and messages of YARN: the queue ACLs of RMAppManager
// (submitApplication fails with a YarnException), then the
// CapacityScheduler's addApplication and the queues' validateSubmitApplication
// (the application is rejected with diagnostics). It returns the leaf queue
// the application enters, or an *Error.
func (t *Tree) CheckSubmit(s Submission, apps AppCounts) (*Queue, error) {
	q, lookupErr := t.Lookup(s.Queue)
	if t.opts.ACLsEnabled && lookupErr == nil {
		groups := t.groups(s.User, s.Groups)
		if !t.hasAccess(q, SubmitApplications, s.User, groups) && !t.hasAccess(q, AdministerQueue, s.User, groups) {
			return nil, &Error{
				Class: yarnerr.YarnException,
				Message: fmt.Sprintf("%s: User %s does not have permission to submit %s to queue %s",
					yarnerr.AccessControl, s.User, s.AppID, s.Queue),
				Err: ErrAccessDenied,
			}
		}
	}
	if apps.Total() >= t.maxSystemApps {
		return nil, rejected(ErrQueueFull,
			"Maximum system application limit reached,cannot accept submission of application: %s", s.AppID)
	}
	if lookupErr != nil {
		if errors.Is(lookupErr, ErrAmbiguousQueue) {
			return nil, rejected(lookupErr,
				"Application %s submitted by user %s to ambiguous queue: %s please use full queue path instead.",
				s.AppID, s.User, s.Queue)
		}
		return nil, rejected(lookupErr,
			"Application %s submitted by user %s to unknown queue: %s", s.AppID, s.User, s.Queue)
	}
	if !q.IsLeaf() {
		return nil, rejected(ErrNotLeaf,
			"Application %s submitted by user : %s to non-leaf queue : %s", s.AppID, s.User, s.Queue)
	}
	// AbstractLeafQueue.validateSubmitApplication, then each parent's.
	if q.State != Running {
		return nil, refusedByQueue(ErrQueueStopped,
			"Queue %s is STOPPED. Cannot accept submission of application: %s", q.Path, s.AppID)
	}
	if n := apps.InQueue(q.Path); n >= q.MaxApplications {
		return nil, refusedByQueue(ErrQueueFull,
			"Queue %s already has %d applications, cannot accept submission of application: %s", q.Path, n, s.AppID)
	}
	if n := apps.ByUser(q.Path, s.User); n >= q.MaxApplicationsPerUser {
		return nil, refusedByQueue(ErrQueueFull,
			"Queue %s already has %d applications from user %s cannot accept submission of application: %s",
			q.Path, n, s.User, s.AppID)
	}
	// ParentQueue.validateSubmitApplication. Configured states cannot put
	// a running leaf under a stopped parent today; the check keeps
	// Hadoop's order should runtime states arrive.
	for p := q.Parent; p != nil; p = p.Parent {
		if p.State != Running {
			return nil, refusedByQueue(ErrQueueStopped,
				"Queue %s is STOPPED. Cannot accept submission of application: %s", p.Path, s.AppID)
		}
	}
	return q, nil
}

// rejected is an APP_REJECTED with the CapacityScheduler's own message.
func rejected(err error, format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...), Err: err}
}

// refusedByQueue is an APP_REJECTED whose diagnostics are the toString() of
// the AccessControlException a queue threw.
func refusedByQueue(err error, format string, args ...any) *Error {
	return &Error{Message: yarnerr.AccessControl.Errorf(format, args...).Error(), Err: err}
}
