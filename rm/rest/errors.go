package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/ipc"
)

// ErrNodeNotFound is what Cluster.Node returns for an unknown node.
var ErrNodeNotFound = errors.New("node not found")

// Hadoop class names the RM's errors carry.
const (
	classAppNotFound   = "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
	classAccessControl = "org.apache.hadoop.security.AccessControlException"
	classYarnAccess    = "org.apache.hadoop.yarn.exceptions.YarnException" // with an AccessControlException message
)

// remoteException is Hadoop's RemoteExceptionData with the HTTP status
// GenericExceptionHandler gives it.
type remoteException struct {
	status    int
	Exception string `json:"exception"`
	Message   string `json:"message"`
	JavaClass string `json:"javaClassName"`
}

func (e *remoteException) Error() string { return e.Exception + ": " + e.Message }

func webAppError(status int, simple, msg string) *remoteException {
	return &remoteException{status: status, Exception: simple, Message: "java.lang.Exception: " + msg,
		JavaClass: "org.apache.hadoop.yarn.webapp." + simple}
}

// badRequest, notFound and forbidden are YARN's webapp exceptions, whose
// message is that of the java.lang.Exception they wrap.
func badRequest(msg string) *remoteException {
	return webAppError(http.StatusBadRequest, "BadRequestException", msg)
}
func notFound(msg string) *remoteException {
	return webAppError(http.StatusNotFound, "NotFoundException", msg)
}
func forbidden(msg string) *remoteException {
	return webAppError(http.StatusForbidden, "ForbiddenException", msg)
}

// illegalArgument is a java.lang.IllegalArgumentException (400), e.g. an
// unknown enum constant.
func illegalArgument(msg string) *remoteException {
	return &remoteException{status: http.StatusBadRequest, Exception: "IllegalArgumentException", Message: msg,
		JavaClass: "java.lang.IllegalArgumentException"}
}

// notAuthenticated is the AuthorizationException writes get without a user.
func notAuthenticated() *remoteException {
	return &remoteException{status: http.StatusUnauthorized, Exception: "AuthorizationException",
		Message:   "Unable to obtain user name, user not authenticated",
		JavaClass: "org.apache.hadoop.security.authorize.AuthorizationException"}
}

// fromCluster maps an error of the Cluster onto the answer. appID names the
// application for the NotFound message, when there is one.
func fromCluster(err error, appID string) *remoteException {
	var re *remoteException
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, ErrNodeNotFound) {
		return notFound(err.Error())
	}
	var ie *ipc.RemoteError
	if !errors.As(err, &ie) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return &remoteException{status: http.StatusServiceUnavailable, Exception: "IOException", Message: err.Error(), JavaClass: "java.io.IOException"}
		}
		return &remoteException{status: http.StatusInternalServerError, Exception: "WebApplicationException",
			Message: err.Error(), JavaClass: "javax.ws.rs.WebApplicationException"}
	}
	simple := ie.ClassName[strings.LastIndexByte(ie.ClassName, '.')+1:]
	switch {
	case ie.ClassName == classAppNotFound:
		if appID != "" {
			return notFound("app with id: " + appID + " not found")
		}
		return notFound(ie.Message)
	case ie.ClassName == classAccessControl || simple == "AccessControlException" ||
		(ie.ClassName == classYarnAccess && strings.Contains(ie.Message, "AccessControlException")):
		return forbidden(ie.Message)
	case strings.HasPrefix(simple, "Invalid") || simple == "IllegalArgumentException" ||
		simple == "BadRequestException" || simple == "NumberFormatException":
		return badRequest(ie.Message)
	}
	return &remoteException{status: http.StatusInternalServerError, Exception: simple, Message: ie.Message, JavaClass: ie.ClassName}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
