package ipc

import (
	"errors"
	"fmt"

	"github.com/knitdev/knit/protocols/commonpb"
)

// Java exception classes the engine itself answers with. Handlers name their
// own classes (YARN's live in protocols/yarnerr); these are the IPC layer's.
const (
	ClassIOException            = "java.io.IOException"
	ClassIPCException           = "org.apache.hadoop.ipc.IpcException"
	ClassVersionMismatch        = "org.apache.hadoop.ipc.RPC$VersionMismatch"
	ClassNoSuchProtocol         = "org.apache.hadoop.ipc.RpcNoSuchProtocolException"
	ClassNoSuchMethod           = "org.apache.hadoop.ipc.RpcNoSuchMethodException"
	ClassFatalRPCServer         = "org.apache.hadoop.ipc.Server$FatalRpcServerException"
	ClassRPCServer              = "org.apache.hadoop.ipc.RpcServerException"
	ClassAccessControl          = "org.apache.hadoop.security.AccessControlException"
	ClassInvalidToken           = "org.apache.hadoop.security.token.SecretManager$InvalidToken"
	ClassSaslException          = "javax.security.sasl.SaslException"
	ClassServerDidNotSetClass   = "ServerDidNotSetExceptionClassName"
	ClassServerDidNotSetMessage = "ServerDidNotSetErrorMsg"
)

// ErrorCode is the errorDetail Hadoop puts in an ERROR or FATAL response.
type ErrorCode = commonpb.RpcResponseHeaderProto_RpcErrorCodeProto

// JavaError is an error that knows the Java exception a Hadoop client should
// see: a handler's error, or one in its chain (errors.As), that implements it
// is answered with its class and message (as ERROR_APPLICATION, unless it is
// a *RemoteError naming its own code). protocols/yarnerr's errors implement
// it; so does RemoteError.
type JavaError interface {
	error
	// JavaClass is the fully qualified exception class name.
	JavaClass() string
	// JavaMessage is the exception's message, without its class.
	JavaMessage() string
}

var _ JavaError = (*RemoteError)(nil)

// RemoteError is an error that travels as a Hadoop RPC error response: the
// Java class name a client unwraps, its message, the error code and whether it
// is fatal to the connection. Handlers return one (usually through Errorf) to
// choose the exception a Java client sees; the client returns one for every
// ERROR or FATAL answer.
type RemoteError struct {
	ClassName string
	Message   string
	Code      ErrorCode
	// Fatal errors close the connection and fail every call on it.
	Fatal bool
}

func (e *RemoteError) Error() string {
	if e.Message == "" {
		return e.ClassName
	}
	return e.ClassName + ": " + e.Message
}

// JavaClass returns ClassName.
func (e *RemoteError) JavaClass() string { return e.ClassName }

// JavaMessage returns Message.
func (e *RemoteError) JavaMessage() string { return e.Message }

// Is reports whether target names the same Java class: another *RemoteError
// or any error with a JavaClass method (a yarnerr class or error), so that
// errors.Is(err, &ipc.RemoteError{ClassName: X}) asks "did the server throw X".
func (e *RemoteError) Is(target error) bool {
	t, ok := target.(interface{ JavaClass() string })
	return ok && t.JavaClass() == e.ClassName
}

// Errorf returns an application error of the given Java class, as a handler
// returns it.
func Errorf(className, format string, args ...any) *RemoteError {
	return &RemoteError{
		ClassName: className,
		Message:   fmt.Sprintf(format, args...),
		Code:      commonpb.RpcResponseHeaderProto_ERROR_APPLICATION,
	}
}

// IsClass reports whether the first JavaError in err's chain (a RemoteError,
// a yarnerr error) is of the Java class.
func IsClass(err error, className string) bool {
	var je JavaError
	return errors.As(err, &je) && je.JavaClass() == className
}

// remoteErrorFor maps a handler's error onto what goes on the wire: the
// first JavaError in its chain. An error that names no class travels as
// java.io.IOException: Hadoop's YARN clients
// rethrow IOException subclasses as themselves, so the message survives.
// A handler fails its own call only: a fatal error it passes on (say, one
// its own client got) is answered as a plain ERROR.
func remoteErrorFor(err error) *RemoteError {
	var je JavaError
	if errors.As(err, &je) {
		var cp RemoteError
		if re, ok := je.(*RemoteError); ok {
			cp = *re
			cp.Fatal = false
		} else {
			cp = RemoteError{ClassName: je.JavaClass(), Message: je.JavaMessage()}
		}
		if cp.Code == 0 {
			cp.Code = commonpb.RpcResponseHeaderProto_ERROR_APPLICATION
		}
		return &cp
	}
	return &RemoteError{
		ClassName: ClassIOException,
		Message:   err.Error(),
		Code:      commonpb.RpcResponseHeaderProto_ERROR_APPLICATION,
	}
}

// fatal builds a connection-ending error of the given code.
func fatal(code ErrorCode, className, format string, args ...any) *RemoteError {
	return &RemoteError{ClassName: className, Message: fmt.Sprintf(format, args...), Code: code, Fatal: true}
}

// fatalHeader is Hadoop's FatalRpcServerException with a plain message, the
// answer to malformed headers and out-of-order frames.
func fatalHeader(format string, args ...any) *RemoteError {
	return fatal(commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, ClassFatalRPCServer, format, args...)
}
