package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Token kinds the clients look for (the Kind of a Hadoop token).
const (
	KindAMRMToken = "YARN_AM_RM_TOKEN"
	KindNMToken   = "NMToken"
)

// ErrNoNMToken is returned for a node the NMTokenCache holds no token for;
// the message is completed with the node as Java's ("No NMToken sent for
// host:port").
var ErrNoNMToken = errors.New("No NMToken sent")

// ErrNotRegistered is returned by AMRMClient calls made before Register.
var ErrNotRegistered = errors.New("application master not registered")

// SerializedError is a Java exception a NodeManager reports for one
// container of a bulk call (SerializedExceptionProto), with its cause chain.
type SerializedError struct {
	ClassName string
	Message   string
	Trace     string
	Cause     *SerializedError
}

// Error gives the class and message, as Java's Throwable.toString does.
func (e *SerializedError) Error() string {
	if e.Message == "" {
		return e.ClassName
	}
	return e.ClassName + ": " + e.Message
}

// Unwrap returns the cause, so errors.As finds exceptions further down.
func (e *SerializedError) Unwrap() error {
	if e.Cause == nil {
		return nil
	}
	return e.Cause
}

var _ ipc.JavaError = (*SerializedError)(nil)

// JavaClass returns ClassName.
func (e *SerializedError) JavaClass() string { return e.ClassName }

// JavaMessage returns Message.
func (e *SerializedError) JavaMessage() string { return e.Message }

// Is reports whether target names the same class: another
// *SerializedError, a yarnerr class or error, an *ipc.RemoteError.
func (e *SerializedError) Is(target error) bool {
	t, ok := target.(interface{ JavaClass() string })
	return ok && t.JavaClass() == e.ClassName
}

// serializedError converts the wire form; a missing class reads as
// YarnException, the class Java's SerializedExceptionPBImpl falls back to.
func serializedError(p *yarnpb.SerializedExceptionProto) *SerializedError {
	if p == nil {
		return nil
	}
	e := &SerializedError{
		ClassName: p.GetClassName(),
		Message:   p.GetMessage(),
		Trace:     p.GetTrace(),
		Cause:     serializedError(p.GetCause()),
	}
	if e.ClassName == "" {
		e.ClassName = string(yarnerr.YarnException)
	}
	return e
}

// containerFailure finds id among a bulk call's failed requests and returns
// its exception, or nil if id did not fail.
func containerFailure(failed []*yarnpb.ContainerExceptionMapProto, id *yarnpb.ContainerIdProto) error {
	for _, f := range failed {
		if sameContainer(f.GetContainerId(), id) {
			if se := serializedError(f.GetException()); se != nil {
				return se
			}
			return &SerializedError{ClassName: string(yarnerr.YarnException), Message: "failed without an exception"}
		}
	}
	return nil
}

// sameContainer compares the fields Java's ContainerId.equals compares.
func sameContainer(a, b *yarnpb.ContainerIdProto) bool {
	aa, ba := a.GetAppAttemptId(), b.GetAppAttemptId()
	return a.GetId() == b.GetId() && aa.GetAttemptId() == ba.GetAttemptId() &&
		aa.GetApplicationId().GetId() == ba.GetApplicationId().GetId() &&
		aa.GetApplicationId().GetClusterTimestamp() == ba.GetApplicationId().GetClusterTimestamp()
}

// containerString names a container id for messages, falling back to the
// proto's text when it is not a valid id.
func containerString(id *yarnpb.ContainerIdProto) string {
	if c, err := yarnid.ContainerIDFromProto(id); err == nil {
		return c.String()
	}
	return fmt.Sprint(id)
}

// retryable reports whether a failed call may be sent again unchanged:
// transport failures (no answer came) and the answers a failing-over RM
// gives, not a context's end or an exception the server threw on purpose.
func retryable(err error) bool {
	if e, ok := yarnerr.Find(err); ok {
		return e.Class == yarnerr.Standby || e.Class == yarnerr.Retriable
	}
	return !errors.Is(err, ipc.ErrClientClosed) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded)
}
