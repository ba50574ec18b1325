// Package yarnerr is the one place Knit names the Java exceptions YARN's
// clients see: each Class constant is a Java class name, declared once, and
// an *Error is one such exception with its message.
//
// Servers return *Error values (ApplicationNotFound.Errorf(…),
// YarnException.Wrap(cause)); the RPC engine answers with their class and
// message because they satisfy ipc.JavaError, the REST API maps them to an
// HTTP status and YARN's RemoteException body, and the domain packages
// (queues, tokens) return them without knowing either. Clients built with
// ClientErrors get them back from the wire, so errors.Is(err,
// yarnerr.ApplicationNotFound) and errors.As(err, &*yarnerr.Error) read the
// same on both sides.
//
// Imports: the standard library and protocols/ipc only (for the engine's own
// classes and RemoteError). protocols/ipc does not import this package.
package yarnerr
