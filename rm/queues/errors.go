package queues

import (
	"errors"
	"strings"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// Sentinels for errors.Is; every error this package returns wraps one.
var (
	// ErrInvalidConfig is a capacity-scheduler configuration the
	// CapacityScheduler would refuse (at start or on refreshQueues).
	ErrInvalidConfig = errors.New("invalid queue configuration")
	// ErrQueueInUse is a refresh that removes, or turns into a parent, a
	// queue that is not stopped or still has applications.
	ErrQueueInUse = errors.New("queue is in use")
	// ErrUnknownQueue is a name that is neither a queue path nor the short
	// name of a queue.
	ErrUnknownQueue = errors.New("unknown queue")
	// ErrAmbiguousQueue is a short name shared by more than one queue.
	ErrAmbiguousQueue = errors.New("ambiguous queue name")
	// ErrNotLeaf is a submission to a parent queue.
	ErrNotLeaf = errors.New("not a leaf queue")
	// ErrQueueStopped is a submission to a queue that is not running.
	ErrQueueStopped = errors.New("queue is stopped")
	// ErrQueueFull is a submission beyond a queue's maximum applications,
	// its per-user maximum, or the system's.
	ErrQueueFull = errors.New("queue is full")
	// ErrAccessDenied is a submission the queue ACLs refuse.
	ErrAccessDenied = errors.New("access denied")
)

// ConfigError is a configuration the CapacityScheduler refuses. Its message
// is the CapacityScheduler's own (for example "Illegal capacity of 120.0 for
// queue root.a"); values that do not parse name their property instead of
// repeating Java's NumberFormatException.
type ConfigError struct {
	Message string
	// Err is the underlying cause, such as a hadoopconf.ErrInvalidValue; may be
	// nil.
	Err error
}

// Error returns the CapacityScheduler's message.
func (e *ConfigError) Error() string { return e.Message }

// Unwrap returns ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}

// LookupError is a queue name that names no single queue.
type LookupError struct {
	Name string
	// Candidates are the paths sharing an ambiguous short name.
	Candidates []string
	// Err is ErrUnknownQueue or ErrAmbiguousQueue.
	Err error
}

// Error says which name failed and, when ambiguous, which paths share it.
func (e *LookupError) Error() string {
	if errors.Is(e.Err, ErrAmbiguousQueue) {
		return "queue name " + quote(e.Name) + " is ambiguous: it names " +
			strings.Join(e.Candidates, " and ") + "; use the full path"
	}
	return "no queue named " + quote(e.Name)
}

// Unwrap returns the sentinel.
func (e *LookupError) Unwrap() error { return e.Err }

func quote(s string) string { return `"` + s + `"` }

// Error is a refusal exactly as a YARN client sees it, in one of two forms:
//
//   - Class set: the RPC itself fails with that Java exception class and
//     Message (submitApplication refused by the queue ACLs, getQueueInfo of
//     an unknown queue, refreshQueues of an invalid configuration).
//     Exception gives the exception to answer with.
//   - Class empty: YARN accepts the RPC, then rejects the application
//     (APP_REJECTED); Message is the application's diagnostics, which the
//     client prints when the application fails.
type Error struct {
	Class   yarnerr.Class
	Message string
	// Err is the sentinel or cause (a ConfigError, a LookupError).
	Err error
}

// Error returns the message, prefixed with the exception class if any.
func (e *Error) Error() string {
	if e.Class == "" {
		return e.Message
	}
	return string(e.Class) + ": " + e.Message
}

// Unwrap returns the sentinel or cause.
func (e *Error) Unwrap() error { return e.Err }

// Rejected reports whether the application is accepted and then rejected
// with Message as diagnostics, rather than refused by the RPC.
func (e *Error) Rejected() bool { return e.Class == "" }

// Exception returns the exception the RPC answers with (its cause is e),
// or nil for a rejection, which the RPC does not report.
func (e *Error) Exception() *yarnerr.Error {
	if e.Rejected() {
		return nil
	}
	return &yarnerr.Error{Class: e.Class, Message: e.Message, Err: e}
}
