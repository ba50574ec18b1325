package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// ErrNodeNotFound is what Cluster.Node returns for an unknown node.
var ErrNodeNotFound = errors.New("node not found")

// remoteException is Hadoop's RemoteExceptionData with the HTTP status
// GenericExceptionHandler gives it.
type remoteException struct {
	status    int
	Exception string `json:"exception"`
	Message   string `json:"message"`
	JavaClass string `json:"javaClassName"`
}

func (e *remoteException) Error() string { return e.Exception + ": " + e.Message }

// exception is an answer of the given status carrying e as it is.
func exception(status int, e *yarnerr.Error) *remoteException {
	return &remoteException{status: status, Exception: e.Class.Simple(), Message: e.Message, JavaClass: string(e.Class)}
}

// webAppError is one of YARN's webapp exceptions, whose message is that of
// the java.lang.Exception it wraps.
func webAppError(status int, class yarnerr.Class, msg string) *remoteException {
	return exception(status, class.Wrap(yarnerr.Exception.New(msg)))
}

// badRequest, notFound and forbidden are YARN's webapp exceptions.
func badRequest(msg string) *remoteException {
	return webAppError(http.StatusBadRequest, yarnerr.BadRequest, msg)
}
func notFound(msg string) *remoteException {
	return webAppError(http.StatusNotFound, yarnerr.NotFound, msg)
}
func forbidden(msg string) *remoteException {
	return webAppError(http.StatusForbidden, yarnerr.Forbidden, msg)
}

// unreadableBody is Jersey's answer to a body its JAXB provider cannot
// read: a WebApplicationException (400) around JAXB's
// UnmarshalException, whose message is that exception as Java prints one
// with its linked exception. The linked exception's text is Knit's own
// reading of the fault, as no Java parser read the body.
func unreadableBody(detail string) *remoteException {
	return exception(http.StatusBadRequest, yarnerr.WebApplication.New(string(yarnerr.Unmarshal)+"\n - with linked exception:\n["+detail+"]"))
}

// illegalArgument is a java.lang.IllegalArgumentException (400), e.g. an
// unknown enum constant.
func illegalArgument(msg string) *remoteException {
	return exception(http.StatusBadRequest, yarnerr.IllegalArgument.New(msg))
}

// notAuthenticated is the AuthorizationException writes get without a user.
func notAuthenticated() *remoteException {
	return exception(http.StatusUnauthorized, yarnerr.Authorization.New("Unable to obtain user name, user not authenticated"))
}

// webApplicationError is JAX-RS's own answer for a request no resource
// takes (405 and the like).
func webApplicationError(status int, msg string) *remoteException {
	return exception(status, yarnerr.WebApplication.New(msg))
}

// fromCluster maps an error of the Cluster onto the answer, as YARN's
// RMWebServices and GenericExceptionHandler do: the exception the error
// carries (yarnerr.Find) chooses the status. appID names the application
// for the NotFound message, when there is one.
func fromCluster(err error, appID string) *remoteException {
	var re *remoteException
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, ErrNodeNotFound) {
		return notFound(err.Error())
	}
	e, ok := yarnerr.Find(err)
	if !ok {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return exception(http.StatusServiceUnavailable, yarnerr.IOException.New(err.Error()))
		}
		return webApplicationError(http.StatusInternalServerError, err.Error())
	}
	switch simple := e.Class.Simple(); {
	case e.Class == yarnerr.ApplicationNotFound:
		if appID != "" {
			return notFound("app with id: " + appID + " not found")
		}
		return notFound(e.Message)
	case simple == yarnerr.AccessControl.Simple() ||
		// ClientRMService's YarnException wrapping one.
		(e.Class == yarnerr.YarnException && strings.Contains(e.Message, yarnerr.AccessControl.Simple())):
		return forbidden(e.Message)
	case strings.HasPrefix(simple, "Invalid") || e.Class == yarnerr.IllegalArgument ||
		e.Class == yarnerr.BadRequest || e.Class == yarnerr.NumberFormat:
		return badRequest(e.Message)
	}
	return exception(http.StatusInternalServerError, e)
}

// Status is the HTTP status the REST API answers a Cluster's error with, for
// the RM's other web pages that read the same state (rm/webui).
func Status(err error) int { return fromCluster(err, "").status }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// NotFound and BadRequest are YARN's webapp NotFoundException (404) and
// BadRequestException (400), for the Router's own answers in the RM's shape.
func NotFound(msg string) error   { return notFound(msg) }
func BadRequest(msg string) error { return badRequest(msg) }
