package apps

import (
	"errors"
	"fmt"
)

// InvalidTransitionError is returned for an event the object's current state
// does not take. Nothing was changed and no effect is due; the services map
// it to the exception YARN would throw (e.g.
// InvalidApplicationMasterRequestException for a register after unregister).
type InvalidTransitionError struct {
	Object string // id of the application, attempt or container
	State  string // its state, e.g. "FINISHED"
	Event  string // the event's Name, e.g. "REGISTERED"
}

// Error says which object refused which event in which state.
func (e *InvalidTransitionError) Error() string {
	return fmt.Sprintf("%s: event %s is invalid in state %s", e.Object, e.Event, e.State)
}

// Errors for events naming things the application does not have, and for
// bad arguments; Handle wraps them with the details.
var (
	ErrUnknownAttempt         = errors.New("unknown application attempt")
	ErrUnknownContainer       = errors.New("unknown container")
	ErrInvalidResourceRequest = errors.New("invalid AM resource request")
	ErrInvalidTimeout         = errors.New("invalid application timeout")
	ErrInvalidRecord          = errors.New("invalid stored record")
)
