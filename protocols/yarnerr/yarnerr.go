package yarnerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knitdev/knit/protocols/ipc"
)

// Class is a Java exception class name as it travels on the wire. A Class is
// also the sentinel errors.Is compares with: errors.Is(err,
// yarnerr.ApplicationNotFound) reports whether err is, or was caused by, an
// ApplicationNotFoundException.
type Class string

// YARN's exceptions (org.apache.hadoop.yarn.exceptions), each a subclass of
// YarnException.
// RelaunchMessage begins the part of a NodeManager's refusal to start a
// container it started already (ContainerManagerImpl) that names it; the
// message goes on with the container id and a period.
const RelaunchMessage = "Attempt to relaunch the same container with id "

const (
	YarnException                   Class = "org.apache.hadoop.yarn.exceptions.YarnException"
	ApplicationNotFound             Class = "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
	ApplicationAttemptNotFound      Class = "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException"
	ContainerNotFound               Class = "org.apache.hadoop.yarn.exceptions.ContainerNotFoundException"
	ApplicationIDNotProvided        Class = "org.apache.hadoop.yarn.exceptions.ApplicationIdNotProvidedException"
	ApplicationMasterNotRegistered  Class = "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException"
	InvalidApplicationMasterRequest Class = "org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException"
	InvalidResourceRequest          Class = "org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException"
	InvalidLabelResourceRequest     Class = "org.apache.hadoop.yarn.exceptions.InvalidLabelResourceRequestException"
	InvalidContainerRelease         Class = "org.apache.hadoop.yarn.exceptions.InvalidContainerReleaseException"
	InvalidContainer                Class = "org.apache.hadoop.yarn.exceptions.InvalidContainerException"
	InvalidAuxService               Class = "org.apache.hadoop.yarn.exceptions.InvalidAuxServiceException"
	YARNFeatureNotEnabled           Class = "org.apache.hadoop.yarn.exceptions.YARNFeatureNotEnabledException"
)

// YarnRuntime is YARN's unchecked exception, which shares the package of
// YARN's exceptions but is no YarnException: a RuntimeException.
const YarnRuntime Class = yarnExceptionsPackage + "YarnRuntimeException"

// yarnExceptionsPackage is the package of YARN's exceptions.
const yarnExceptionsPackage = "org.apache.hadoop.yarn.exceptions."

// Hadoop common's exceptions. The RPC engine answers with some of these
// itself; their names are the engine's.
const (
	IOException   Class = ipc.ClassIOException
	AccessControl Class = ipc.ClassAccessControl
	InvalidToken  Class = ipc.ClassInvalidToken
	Authorization Class = "org.apache.hadoop.security.authorize.AuthorizationException"
	// Standby is what a standby ResourceManager answers every call with, so
	// Hadoop's failover proxy tries the next one.
	Standby   Class = "org.apache.hadoop.ipc.StandbyException"
	Retriable Class = "org.apache.hadoop.ipc.RetriableException"
	// HealthCheckFailed and ServiceFailed are HAServiceProtocol's answers:
	// an unhealthy service, and a state transition that did not happen.
	HealthCheckFailed Class = "org.apache.hadoop.ha.HealthCheckFailedException"
	ServiceFailed     Class = "org.apache.hadoop.ha.ServiceFailedException"
)

// Java's own exceptions.
const (
	Exception            Class = "java.lang.Exception"
	IllegalArgument      Class = "java.lang.IllegalArgumentException"
	NumberFormat         Class = "java.lang.NumberFormatException"
	UnsupportedOperation Class = "java.lang.UnsupportedOperationException"
	FileNotFound         Class = "java.io.FileNotFoundException"
	// UnrecognizedOption is commons-cli's, which the yarn commands print.
	UnrecognizedOption Class = "org.apache.commons.cli.UnrecognizedOptionException"
	WebApplication     Class = "javax.ws.rs.WebApplicationException"
	// Unmarshal is JAXB's: Jersey wraps it in a WebApplication (400)
	// when a request's body cannot be read.
	Unmarshal     Class = "javax.xml.bind.UnmarshalException"
	webappPackage       = "org.apache.hadoop.yarn.webapp."
	BadRequest    Class = webappPackage + "BadRequestException"
	NotFound      Class = webappPackage + "NotFoundException"
	Forbidden     Class = webappPackage + "ForbiddenException"
)

// Java's and Jersey's unchecked exceptions that reach Hadoop's
// GenericExceptionHandler from a resource that does not catch them.
const (
	NullPointer           Class = "java.lang.NullPointerException"
	ArrayIndexOutOfBounds Class = "java.lang.ArrayIndexOutOfBoundsException"
	// QueryParam is Jersey 1's refusal of a query parameter its type
	// cannot be made of, before the resource method runs.
	QueryParam Class = "com.sun.jersey.api.ParamException$QueryParamException"
)

// Error returns the class name, so a Class can stand as the target of
// errors.Is.
func (c Class) Error() string { return string(c) }

// JavaClass returns the class name.
func (c Class) JavaClass() string { return string(c) }

// Simple returns the class name without its package, or a nested class's
// without its enclosing class, as Java's getSimpleName (REST's "exception"
// field): "NotFoundException", "QueryParamException".
func (c Class) Simple() string {
	s := string(c)
	return s[strings.LastIndexAny(s, ".$")+1:]
}

// IsYarnException reports whether c is YarnException or another class of
// its package, each of which but YarnRuntime extends it: the checked
// exceptions YARN's services throw, which Java's doAs wraps in an
// UndeclaredThrowableException.
func (c Class) IsYarnException() bool {
	return strings.HasPrefix(string(c), yarnExceptionsPackage) && c != YarnRuntime
}

// New returns an exception of class c with message msg.
func (c Class) New(msg string) *Error { return &Error{Class: c, Message: msg} }

// Errorf returns an exception of class c whose message is formatted as
// fmt.Errorf formats it; an operand of %w becomes its cause.
func (c Class) Errorf(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Class: c, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns an exception of class c caused by cause, with the message
// Java gives new C(cause): the cause's toString, "class: message" (see
// JavaString). RPCUtil.getRemoteException makes YARN's YarnExceptions so.
func (c Class) Wrap(cause error) *Error {
	return &Error{Class: c, Message: JavaString(cause), Err: cause}
}

// Error is one Java exception: its class, its message, and the Go error
// that caused it, if any. Servers create them (through Class's methods) and
// clients get them back from the wire (ClientErrors); the zero value is not
// useful.
type Error struct {
	Class   Class
	Message string
	// Err is the cause; may be nil. A client's Error wraps the
	// *ipc.RemoteError it came as.
	Err error
}

var _ ipc.JavaError = (*Error)(nil)

// Error returns "class: message", as Java's Throwable.toString.
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Class)
	}
	return string(e.Class) + ": " + e.Message
}

// JavaClass returns the class the exception travels as.
func (e *Error) JavaClass() string { return string(e.Class) }

// JavaMessage returns the message the exception travels with.
func (e *Error) JavaMessage() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target names e's class: a Class, or any error that
// knows its Java class (another *Error, an *ipc.RemoteError).
func (e *Error) Is(target error) bool {
	t, ok := target.(interface{ JavaClass() string })
	return ok && t.JavaClass() == string(e.Class)
}

// Find returns the exception err travels as: the first error in err's chain
// that knows its Java class, as an *Error. An *ipc.RemoteError or other
// ipc.JavaError found is converted, with err as the new Error's cause. ok is
// false when no error in the chain knows its class (the RPC engine answers
// those as java.io.IOException).
func Find(err error) (_ *Error, ok bool) {
	var je ipc.JavaError
	if !errors.As(err, &je) {
		return nil, false
	}
	if e, ok := je.(*Error); ok {
		return e, true
	}
	return &Error{Class: Class(je.JavaClass()), Message: je.JavaMessage(), Err: err}, true
}

// ClassOf returns the class err travels as: that of Find, else IOException.
func ClassOf(err error) Class {
	if e, ok := Find(err); ok {
		return e.Class
	}
	return IOException
}

// JavaString returns err as Java's Throwable.toString reads it: "class:
// message" for an error that knows its class (Find), and
// "java.io.IOException: " + err.Error() for any other.
func JavaString(err error) string {
	if e, ok := Find(err); ok {
		return e.Error()
	}
	return string(IOException) + ": " + err.Error()
}

// FromRemote is the client's side of the mapping: the error answer of a
// Hadoop server as an *Error of its class, wrapping re so that the error
// code and fatality stay readable with errors.As. It is the
// ipc.ClientConfig.Errors of Knit's clients.
func FromRemote(re *ipc.RemoteError) error {
	return &Error{Class: Class(re.ClassName), Message: re.Message, Err: re}
}
