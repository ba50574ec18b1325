package rest

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// appPriority is Hadoop's AppPriority, written unwrapped as AppState is.
type appPriority struct {
	Priority int32 `json:"priority"`
}

func (appPriority) xmlRoot() string { return appPriorityRoot }

// appQueue is Hadoop's AppQueue, written unwrapped.
type appQueue struct {
	Queue string `json:"queue"`
}

func (appQueue) xmlRoot() string { return appQueueRoot }

// lifetime is the only ApplicationTimeoutType of YARN 3.4.1.
const lifetime = "LIFETIME"

func priorityOf(a App) any { return appPriority{Priority: a.Report.GetPriority().GetPriority()} }

func queueOf(a App) any { return appQueue{Queue: a.Report.GetQueue()} }

func timeoutsOf(a App) any {
	return struct {
		Timeouts *appTimeoutsOut `json:"timeouts"`
	}{timeouts(a.Report.GetAppTimeouts())}
}

// putPriority is RMWebServices.updateApplicationPriority: a priority the
// application has already is answered as it is; another goes through
// updateApplicationPriority as the caller.
func (s *server) putPriority(c echo.Context) error {
	// JAXB reads a body without a priority as priority 0.
	var target appPriority
	user, appID, a, err := s.update(c, appPriorityRoot, &target)
	if err != nil {
		return err
	}
	if a.Report.GetPriority().GetPriority() == target.Priority {
		return writeJSON(c, http.StatusOK, target)
	}
	got, err := s.cfg.Cluster.UpdatePriority(c.Request().Context(), user, appID, target.Priority)
	if err != nil {
		return denial(err, appID, "Unauthorized attempt to change priority of appid "+appID+" by remote user "+user)
	}
	return writeJSON(c, http.StatusOK, appPriority{Priority: got})
}

// putQueue is RMWebServices.updateAppQueue: a move to another queue goes
// through moveApplicationAcrossQueues as the caller.
func (s *server) putQueue(c echo.Context) error {
	var target appQueue
	user, appID, a, err := s.update(c, appQueueRoot, &target)
	if err != nil {
		return err
	}
	if a.Report.GetQueue() == target.Queue {
		return writeJSON(c, http.StatusOK, appQueue{Queue: target.Queue})
	}
	if err := s.cfg.Cluster.Move(c.Request().Context(), user, appID, target.Queue); err != nil {
		re := denial(err, appID, "Unauthorized attempt to move appid "+appID+" by remote user "+user)
		if e, ok := yarnerr.Find(err); ok && strings.HasPrefix(e.Message, "App in ") && strings.HasSuffix(e.Message, "state cannot be moved.") {
			// YARN answers this one refusal 400 with its message.
			return badRequest(e.Message)
		}
		return re
	}
	if a, err = s.lookup(c, user, appID); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, appQueue{Queue: a.Report.GetQueue()})
}

// denial is the answer to a refused update: YARN answers an
// AccessControlException under the YarnException 403 with its own message
// naming the caller, and passes anything else on.
func denial(err error, appID, forbiddenMsg string) error {
	re := fromCluster(err, appID)
	if re.status == http.StatusForbidden {
		return forbidden(forbiddenMsg)
	}
	return re
}

func (s *server) getTimeout(c echo.Context) error {
	user, _ := s.user(c)
	a, err := s.lookup(c, user, c.Param("appid"))
	if err != nil {
		return err
	}
	typ, err := parseTimeoutType(c.Param("type"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Timeout appTimeoutOut `json:"timeout"`
	}{timeoutOf(a, typ)})
}

// timeoutOf is the application's timeout of the type, UNLIMITED when it
// has none.
func timeoutOf(a App, typ string) appTimeoutOut {
	for _, t := range timeouts(a.Report.GetAppTimeouts()).Timeout {
		if t.Type == typ {
			return t
		}
	}
	return appTimeoutOut{Type: typ, ExpiryTime: "UNLIMITED", RemainingTimeInSeconds: -1}
}

// parseTimeoutType reads an ApplicationTimeoutType as
// RMWebServices.parseTimeoutType does, message included.
func parseTimeoutType(s string) (string, error) {
	if t := strings.ToUpper(strings.TrimSpace(s)); t == lifetime {
		return t, nil
	}
	return "", badRequest("Invalid application-state " + strings.TrimSpace(s) + " specified. It should be one of [" + lifetime + "]")
}

// putTimeout is RMWebServices.updateApplicationTimeout: the body is an
// AppTimeoutInfo under its root "timeout"; the update goes through
// updateApplicationTimeouts as the caller.
func (s *server) putTimeout(c echo.Context) error {
	var body struct {
		Timeout *appTimeoutIn `json:"timeout"`
		appTimeoutIn
	}
	user, appID, _, err := s.update(c, "timeout", &body)
	if err != nil {
		return err
	}
	in := body.appTimeoutIn
	if body.Timeout != nil {
		in = *body.Timeout
	}
	// JAXB reads an unknown enum constant as null.
	if in.Type == nil || in.ExpiryTime == nil || strings.ToUpper(*in.Type) != lifetime {
		return badRequest("Timeout type or ExpiryTime is null.")
	}
	if err := s.cfg.Cluster.UpdateTimeout(c.Request().Context(), user, appID, lifetime, *in.ExpiryTime); err != nil {
		if e, ok := yarnerr.Find(err); ok && strings.HasPrefix(e.Message, "Expire time is not in ISO8601 format") {
			// The ParseException YARN answers 400 with its message.
			return badRequest(e.Message)
		}
		return denial(err, appID, "Unauthorized attempt to change timeout of app "+appID+" by remote user "+user)
	}
	a, err := s.lookup(c, user, appID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Timeout appTimeoutOut `json:"timeout"`
	}{timeoutOf(a, lifetime)})
}

// appTimeoutIn is an AppTimeoutInfo as a client sends it.
type appTimeoutIn struct {
	Type       *string `json:"type"`
	ExpiryTime *string `json:"expiryTime"`
}
