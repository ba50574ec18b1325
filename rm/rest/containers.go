package rest

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// The attempt and container resources are those RMWebServices inherits
// from YARN's common WebServices: they read the client protocol's reports
// as the caller, and write the common DAOs (server.webapp.dao), not the
// RM's own AppAttemptInfo.

// attemptReportInfo is Hadoop's server.webapp.dao.AppAttemptInfo. Strings
// the report leaves null are left out, as JAXB leaves out null fields.
type attemptReportInfo struct {
	AppAttemptID        string      `json:"appAttemptId"`
	Host                *JavaString `json:"host,omitempty"`
	RPCPort             int32       `json:"rpcPort"`
	TrackingURL         *JavaString `json:"trackingUrl,omitempty"`
	OriginalTrackingURL *JavaString `json:"originalTrackingUrl,omitempty"`
	DiagnosticsInfo     *JavaString `json:"diagnosticsInfo,omitempty"`
	AppAttemptState     string      `json:"appAttemptState"`
	AMContainerID       string      `json:"amContainerId,omitempty"`
	StartedTime         int64       `json:"startedTime"`
	FinishedTime        int64       `json:"finishedTime"`
}

// containerInfo is Hadoop's server.webapp.dao.ContainerInfo.
type containerInfo struct {
	ContainerID         string      `json:"containerId"`
	AllocatedMB         int64       `json:"allocatedMB"`
	AllocatedVCores     int64       `json:"allocatedVCores"`
	AssignedNodeID      string      `json:"assignedNodeId,omitempty"`
	Priority            int32       `json:"priority"`
	StartedTime         int64       `json:"startedTime"`
	FinishedTime        int64       `json:"finishedTime"`
	ElapsedTime         int64       `json:"elapsedTime"`
	DiagnosticsInfo     *JavaString `json:"diagnosticsInfo,omitempty"`
	LogURL              *JavaString `json:"logUrl,omitempty"`
	ContainerExitStatus int32       `json:"containerExitStatus"`
	ContainerState      string      `json:"containerState"`
	NodeHTTPAddress     *JavaString `json:"nodeHttpAddress,omitempty"`
	NodeID              string      `json:"nodeId,omitempty"`
	AllocatedResources  entryMap    `json:"allocatedResources,omitempty"`
	ExposedPorts        *JavaString `json:"exposedPorts,omitempty"`
}

// optString is a proto string field as JAXB writes a String field: left
// out when null, {} when empty.
func optString(set bool, v string) *JavaString {
	if !set {
		return nil
	}
	s := JavaString(v)
	return &s
}

func newAttemptReportInfo(r *yarnpb.ApplicationAttemptReportProto) attemptReportInfo {
	id, _ := yarnid.AttemptIDFromProto(r.GetApplicationAttemptId())
	info := attemptReportInfo{
		AppAttemptID:        id.String(),
		Host:                optString(r.Host != nil, r.GetHost()),
		RPCPort:             r.GetRpcPort(),
		TrackingURL:         optString(r.TrackingUrl != nil, r.GetTrackingUrl()),
		OriginalTrackingURL: optString(r.OriginalTrackingUrl != nil, r.GetOriginalTrackingUrl()),
		DiagnosticsInfo:     optString(true, r.GetDiagnostics()),
		AppAttemptState:     strings.TrimPrefix(r.GetYarnApplicationAttemptState().String(), "APP_ATTEMPT_"),
		StartedTime:         r.GetStartTime(),
		FinishedTime:        r.GetFinishTime(),
	}
	if r.AmContainerId != nil {
		info.AMContainerID = containerID(r.GetAmContainerId())
	}
	return info
}

func newContainerInfo(r *yarnpb.ContainerReportProto, now time.Time) containerInfo {
	info := containerInfo{
		ContainerID:         containerID(r.GetContainerId()),
		Priority:            r.GetPriority().GetPriority(),
		StartedTime:         r.GetCreationTime(),
		FinishedTime:        r.GetFinishTime(),
		ElapsedTime:         elapsed(r.GetCreationTime(), r.GetFinishTime(), now),
		DiagnosticsInfo:     optString(true, r.GetDiagnosticsInfo()),
		LogURL:              optString(r.LogUrl != nil, r.GetLogUrl()),
		ContainerExitStatus: r.GetContainerExitStatus(),
		ContainerState:      strings.TrimPrefix(r.GetContainerState().String(), "C_"),
		NodeHTTPAddress:     optString(r.NodeHttpAddress != nil, r.GetNodeHttpAddress()),
		ExposedPorts:        optString(r.ExposedPorts != nil, r.GetExposedPorts()),
	}
	if r.NodeId != nil {
		info.AssignedNodeID = nodeID(r.GetNodeId())
		info.NodeID = info.AssignedNodeID
	}
	if p := r.GetResource(); p != nil {
		res := ResourceFromProto(p)
		info.AllocatedMB, info.AllocatedVCores = res.MemoryMB, res.VCores
		info.AllocatedResources = entryMap{{Key: "memory-mb", Value: itoa(res.MemoryMB)}, {Key: "vcores", Value: itoa(res.VCores)}}
		for _, o := range res.Other {
			info.AllocatedResources = append(info.AllocatedResources, entry{Key: o.Name, Value: itoa(o.Value)})
		}
	}
	return info
}

// ids reads the path's application, attempt and (when the path has one)
// container ids as WebServices does: each must parse and belong to the
// one before it.
func ids(c echo.Context, withContainer bool) (attempt yarnid.AttemptID, container yarnid.ContainerID, err error) {
	appIDText := c.Param("appid")
	if appIDText == "" {
		return attempt, container, notFound("appId, " + appIDText + ", is empty or null")
	}
	app, err := yarnid.ParseApplicationID(appIDText)
	if err != nil {
		return attempt, container, illegalArgument(invalidID("ApplicationId", "application", appIDText))
	}
	attemptText := c.Param("appattemptid")
	if attempt, err = yarnid.ParseAttemptID(attemptText); err != nil {
		return attempt, container, illegalArgument(invalidID("AppAttemptId", "appattempt", attemptText))
	}
	if withContainer {
		containerText := c.Param("containerid")
		if container, err = yarnid.ParseContainerID(containerText); err != nil {
			return attempt, container, illegalArgument(invalidID("ContainerId", "container", containerText))
		}
	}
	if attempt.App != app {
		return attempt, container, notFound("appId and appAttemptId don't match")
	}
	if withContainer && container.Attempt != attempt {
		return attempt, container, notFound("appAttemptId and containerId don't match")
	}
	return attempt, container, nil
}

// invalidID is the IllegalArgumentException message of the id's
// fromString.
func invalidID(kind, prefix, s string) string {
	if !strings.HasPrefix(s, prefix+"_") {
		return "Invalid " + kind + " prefix: " + s
	}
	return "Invalid " + kind + ": " + s
}

// fromReports maps the client protocol's errors as WebServices'
// rewrapAndThrowException does: the not-found exceptions are a 404 of
// the exception as Java prints it, an AuthorizationException a 403, and
// anything else (a caller without VIEW_APP among them) a 500.
func fromReports(err error) error {
	var re *remoteException
	if errors.As(err, &re) {
		return re
	}
	e, ok := yarnerr.Find(err)
	if !ok {
		return fromCluster(err, "")
	}
	switch e.Class {
	case yarnerr.ApplicationNotFound, yarnerr.ApplicationAttemptNotFound, yarnerr.ContainerNotFound:
		return exception(http.StatusNotFound, yarnerr.NotFound.Wrap(e))
	case yarnerr.Authorization:
		return exception(http.StatusForbidden, yarnerr.Forbidden.Wrap(e))
	}
	return exception(http.StatusInternalServerError, yarnerr.WebApplication.Wrap(e))
}

func (s *server) attempt(c echo.Context) error {
	user, _ := s.user(c)
	aid, _, err := ids(c, false)
	if err != nil {
		return err
	}
	r, err := s.cfg.Cluster.Attempt(c.Request().Context(), user, aid.String())
	if err != nil {
		return fromReports(err)
	}
	if r == nil {
		return notFound("app attempt with id: " + aid.String() + " not found")
	}
	return writeJSON(c, http.StatusOK, struct {
		AppAttempt attemptReportInfo `json:"appAttempt"`
	}{newAttemptReportInfo(r)})
}

func (s *server) containers(c echo.Context) error {
	user, _ := s.user(c)
	aid, _, err := ids(c, false)
	if err != nil {
		return err
	}
	list, err := s.cfg.Cluster.Containers(c.Request().Context(), user, aid.String())
	if err != nil {
		return fromReports(err)
	}
	var body struct {
		Containers struct {
			Container []containerInfo `json:"container,omitempty"`
		} `json:"containers"`
	}
	now := s.cfg.Now()
	for _, r := range list {
		body.Containers.Container = append(body.Containers.Container, newContainerInfo(r, now))
	}
	return writeJSON(c, http.StatusOK, body)
}

func (s *server) container(c echo.Context) error {
	user, _ := s.user(c)
	_, cid, err := ids(c, true)
	if err != nil {
		return err
	}
	r, err := s.cfg.Cluster.Container(c.Request().Context(), user, cid.String())
	if err != nil {
		return fromReports(err)
	}
	if r == nil {
		return notFound("container with id: " + cid.String() + " not found")
	}
	return writeJSON(c, http.StatusOK, struct {
		Container containerInfo `json:"container"`
	}{newContainerInfo(r, s.cfg.Now())})
}
