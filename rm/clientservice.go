package rm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
)

// ClientRMService's messages; its exception classes (protocols/yarnerr)
// are those of docs/hadoop-wire-facts.md §1.7.
const (
	msgResourceProfilesDisabled        = "Resource profile is not enabled, please enable resource profile feature before using its functions. (by setting yarn.resourcemanager.resource-profiles.enabled to true)"
	iso8601Layout                      = "2006-01-02T15:04:05.000-0700"
	iso8601Java                        = "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
	appNotFoundFormat                  = "Application with id '%s' doesn't exist in RM. Please check that the job submission was successful."
	attemptNotFoundFormat              = "ApplicationAttempt with id '%s' doesn't exist in RM."
	containerNotFoundFormat            = "Container with id '%s' doesn't exist in RM."
	userCannotFormat                   = string(yarnerr.AccessControl) + ": User %s cannot perform operation %s on %s"
	delegationNeedsKerberosIssueFormat = string(yarnerr.IOException) + ": Delegation Token can be %s only with kerberos authentication"
)

// Register adds ApplicationClientProtocol to srv: every method a Hadoop 3
// client can call (clientprotocol.go has the features Knit leaves off).
func (rm *ResourceManager) Register(srv *ipc.Server) error {
	methods := yarnrpc.ApplicationClientProtocolMethods(rm)
	enc, encoded := rm.cfg.Nodes.(encodedNodeReports)
	for i, m := range methods {
		switch {
		case m.Name() == getClusterMetricsMethod:
			methods[i] = ipc.HandleRaw(getClusterMetricsMethod, func(ctx context.Context, _ *yarnpb.GetClusterMetricsRequestProto, _ []byte) ([]byte, error) {
				return rm.encodedClusterMetrics(ctx)
			})
		case m.Name() == getClusterNodesMethod && encoded:
			methods[i] = ipc.HandleRawParts(getClusterNodesMethod, func(_ context.Context, req *yarnpb.GetClusterNodesRequestProto, _ []byte) ([][]byte, error) {
				return encodedClusterNodes(enc, req)
			})
		}
	}
	return srv.Register(yarnrpc.ApplicationClientProtocolName, methods...)
}

const (
	getClusterMetricsMethod = "getClusterMetrics"
	getClusterNodesMethod   = "getClusterNodes"
)

// encodedClusterNodes is getClusterNodes' answer as the bytes the lister
// keeps: a GetClusterNodesResponseProto is its nodeReports field alone, so
// that field's elements are the whole message, and the engine writes
// them as they are, never joining a thousand nodes' reports into one
// buffer or copying them into a frame.
func encodedClusterNodes(enc encodedNodeReports, req *yarnpb.GetClusterNodesRequestProto) ([][]byte, error) {
	field := (&yarnpb.GetClusterNodesResponseProto{}).ProtoReflect().Descriptor().Fields().ByName("nodeReports").Number()
	raw, err := enc.EncodedReports(field, req.GetNodeStates())
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(fmt.Errorf("listing nodes: %w", err))
	}
	return raw, nil
}

// answerEmpty answers with an empty response, as YARN does for the admin
// refreshes with nothing to refresh.
func answerEmpty[Req proto.Message, Resp any, P interface {
	*Resp
	proto.Message
}](context.Context, Req) (P, error) {
	return P(new(Resp)), nil
}

// refuse answers every request with the error of a feature that is off.
func refuse[Req, Resp proto.Message](errOff func() error) func(context.Context, Req) (Resp, error) {
	return func(context.Context, Req) (Resp, error) {
		var none Resp
		return none, errOff()
	}
}

// errResourceProfiles is what YARN answers while resource profiles are off.
func errResourceProfiles() error {
	return yarnerr.YARNFeatureNotEnabled.Errorf("%s", msgResourceProfilesDisabled)
}

// errReservation is checkReservationSystem's answer: Knit has no
// reservation system.
func errReservation() error { return yarnerr.ReservationDisabled() }

// shortName is UGI.getShortUserName for the simple names SIMPLE auth
// carries: the part before any '/' or '@'.
func shortName(user string) string {
	if i := strings.IndexAny(user, "/@"); i >= 0 {
		return user[:i]
	}
	return user
}

func notFound(id string) error {
	return yarnerr.ApplicationNotFound.Errorf(appNotFoundFormat, id)
}

func denied(user string, t yarnpb.ApplicationAccessTypeProto, id apps.ApplicationID) error {
	return yarnerr.YarnException.Errorf(userCannotFormat, shortName(user), accessName(t), id)
}

func accessName(t yarnpb.ApplicationAccessTypeProto) string {
	if t == yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP {
		return "MODIFY_APP"
	}
	return "VIEW_APP"
}

// appID reads a wire id; ok is false for a missing one.
func appID(p *yarnpb.ApplicationIdProto) (id apps.ApplicationID, ok bool) {
	id, err := yarnid.ApplicationIDFromProto(p)
	return id, err == nil
}

// appIDText is a wire id as errors name it, a missing one as Java prints
// null: made for the error, not on every call (two allocations).
func appIDText(p *yarnpb.ApplicationIdProto) string {
	if id, ok := appID(p); ok {
		return id.String()
	}
	return "null"
}

// canAccess is ClientRMService.checkAccess. The caller holds e.mu.
func (rm *ResourceManager) canAccess(e *entry, user string, t yarnpb.ApplicationAccessTypeProto) bool {
	var appACL acl.ACL
	if s, ok := e.app.ACL(t); ok {
		appACL = acl.Parse(s)
	}
	return rm.queueTree().CheckAppAccess(queues.AppAccess{
		Queue: e.app.Queue(), Owner: e.app.User(), ACL: appACL, User: shortName(user),
	})
}

// modifiable looks up an application and checks MODIFY_APP, as
// verifyUserAccessForRMApp does.
func (rm *ResourceManager) modifiable(ctx context.Context, p *yarnpb.ApplicationIdProto) (*entry, string, error) {
	user := callerOf(ctx).User
	id, ok := appID(p)
	var e *entry
	if ok {
		e = rm.lookup(id)
	}
	if e == nil {
		return nil, user, notFound(appIDText(p))
	}
	e.mu.Lock()
	allowed := rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP)
	e.mu.Unlock()
	if !allowed {
		return nil, user, denied(user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP, id)
	}
	return e, user, nil
}

func (rm *ResourceManager) maxResource() *yarnpb.ResourceProto {
	return yarnpb.NewResource(int64(rm.cfg.Settings.MaxAllocationMB), int32(rm.cfg.Settings.MaxAllocationVcores))
}

// GetNewApplication hands out a fresh application id and the largest
// container the scheduler grants.
func (rm *ResourceManager) GetNewApplication(ctx context.Context, _ *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
	ts, seq, err := rm.cfg.IDs.Next(ctx)
	if err != nil {
		rm.log.ErrorContext(ctx, "allocating application id", "err", err)
		return nil, yarnerr.YarnException.Wrap(err)
	}
	id := apps.ApplicationID{ClusterTimestamp: ts, ID: seq}
	rm.log.InfoContext(ctx, "allocated new application id", "app", id.String())
	return &yarnpb.GetNewApplicationResponseProto{ApplicationId: id.Proto(), MaximumCapability: rm.maxResource()}, nil
}

// SubmitApplication admits an application as ClientRMService and
// RMAppManager do, and answers once its record is stored. A queue that
// refuses it by capacity or state makes it FAILED with the scheduler's
// diagnostics; only ACL refusals and bad AM resources fail the call.
func (rm *ResourceManager) SubmitApplication(ctx context.Context, req *yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
	caller := callerOf(ctx)
	user := shortName(caller.User)
	sc := req.GetApplicationSubmissionContext()
	if sc == nil || sc.ApplicationId == nil {
		return nil, yarnerr.ApplicationIDNotProvided.Errorf("ApplicationId is not provided in ApplicationSubmissionContext")
	}
	id, err := yarnid.ApplicationIDFromProto(sc.ApplicationId)
	if err != nil {
		return nil, yarnerr.YarnException.Errorf("%s", err)
	}
	if rm.lookup(id) != nil {
		// A client resubmits after ApplicationNotFoundException or a lost
		// answer; YARN answers the earlier submission's success.
		rm.log.InfoContext(ctx, "earlier submitted application", "app", id.String())
		return &yarnpb.SubmitApplicationResponseProto{}, nil
	}
	sc = proto.Clone(sc).(*yarnpb.ApplicationSubmissionContextProto)
	if sc.Queue == nil {
		sc.Queue = proto.String("default")
	}
	now := rm.now()
	sub := apps.Submission{ID: id, User: user, Context: sc, SubmitTime: now}
	app, err := rm.newApp(sub)
	if err != nil {
		return nil, err
	}

	rm.admitMu.Lock()
	q, err := rm.queueTree().CheckSubmit(queues.Submission{AppID: id.String(), User: user, Queue: sc.GetQueue()}, rm.counts())
	rejection := ""
	if err != nil {
		var qe *queues.Error
		switch {
		case errors.As(err, &qe) && qe.Rejected():
			rejection = qe.Message
		case qe != nil:
			rm.admitMu.Unlock()
			rm.log.InfoContext(ctx, "submission refused", "app", id.String(), "user", user, "err", err)
			return nil, qe.Exception()
		default:
			rm.admitMu.Unlock()
			return nil, yarnerr.YarnException.Errorf("%s", err)
		}
	} else {
		// The scheduler names the queue by its full path and gives the
		// queue's default priority to an application that asks none,
		// within the cluster's maximum (checkAndGetApplicationPriority).
		prio := int32(q.DefaultApplicationPriority)
		if sc.Priority != nil {
			prio = sc.GetPriority().GetPriority()
		}
		prio = min(prio, rm.maxPriority())
		sc.Priority = &yarnpb.PriorityProto{Priority: proto.Int32(prio)}
		// The AM's ask must name partitions the queue may use
		// (RMAppManager.validateAndCreateResourceRequest); with none of
		// its own it is placed by the application's, else the queue's
		// default.
		for _, r := range app.AMRequests() {
			expr := r.GetNodeLabelExpression()
			if expr == "" {
				expr = cmp.Or(sc.GetNodeLabelExpression(), q.DefaultNodeLabelExpression)
			}
			if err := checkLabelAccess(expr, q); err != nil {
				rm.admitMu.Unlock()
				rm.log.InfoContext(ctx, "submission refused", "app", id.String(), "user", user, "err", err)
				return nil, err
			}
		}
		sub.Queue = q.Path
		sub.AMRequests = app.AMRequests()
		if app, err = apps.NewApplication(rm.appsCfg, sub); err != nil {
			rm.admitMu.Unlock()
			return nil, yarnerr.YarnException.Errorf("%s", err)
		}
	}
	// Read before the application is published: a move may change it
	// from then on, under the application's locks.
	queue := app.Queue()
	e := &entry{app: app, attempts: map[apps.AttemptID]apps.AttemptRecord{}, rejection: rejection,
		queue: queue, user: user}
	rm.mu.Lock()
	if rm.apps[id] != nil {
		rm.mu.Unlock()
		rm.admitMu.Unlock()
		return &yarnpb.SubmitApplicationResponseProto{}, nil
	}
	rm.apps[id] = e
	rm.countLocked(e, 1)
	rm.usage.insert(e)
	rm.mu.Unlock()
	rm.admitMu.Unlock()

	if err := rm.handle(ctx, e, apps.Start{}); err != nil {
		rm.log.ErrorContext(ctx, "submitting application", "app", id.String(), "err", err)
		if errors.Is(err, ErrFenced) {
			// Not stored: the client submits it again to the active RM.
			return nil, yarnerr.Standby.Wrap(err)
		}
		return nil, yarnerr.YarnException.Wrap(err)
	}
	rm.log.InfoContext(ctx, "application submitted", "app", id.String(), "user", user, "queue", queue, "rejected", rejection != "")
	return &yarnpb.SubmitApplicationResponseProto{}, nil
}

// newApp builds the application and checks its AM ask against the
// scheduler's limits (SchedulerUtils.normalizeAndValidateRequest), with the
// memory rounded up to the minimum allocation as the scheduler does.
func (rm *ResourceManager) newApp(sub apps.Submission) (*apps.Application, error) {
	app, err := apps.NewApplication(rm.appsCfg, sub)
	if err != nil {
		if errors.Is(err, apps.ErrInvalidResourceRequest) {
			msg := err.Error()
			if i := strings.Index(msg, apps.ErrInvalidResourceRequest.Error()+": "); i >= 0 {
				msg = "Invalid resource request, " + msg[i+len(apps.ErrInvalidResourceRequest.Error())+2:]
			}
			return nil, yarnerr.InvalidResourceRequest.Errorf("%s", msg)
		}
		return nil, yarnerr.YarnException.Errorf("%s", err)
	}
	reqs := app.AMRequests()
	if len(reqs) == 0 {
		return app, nil
	}
	s := rm.cfg.Settings
	capab := reqs[0].GetCapability()
	mb, vc := capab.GetMemory(), capab.GetVirtualCores()
	show := func(mb int64, vc int32) string { return fmt.Sprintf("<memory:%d, vCores:%d>", mb, vc) }
	maxShow := show(int64(s.MaxAllocationMB), int32(s.MaxAllocationVcores))
	for _, bad := range []struct {
		name string
		neg  bool
		over bool
	}{
		{"memory-mb", mb < 0, mb > int64(s.MaxAllocationMB)},
		{"vcores", vc < 0, vc > int32(s.MaxAllocationVcores)},
	} {
		if bad.neg {
			return nil, yarnerr.InvalidResourceRequest.Errorf("Invalid resource request! Cannot allocate containers as requested resource is less than 0! Requested resource type=[%s], Requested resource=%s",
				bad.name, show(mb, vc))
		}
		if bad.over {
			return nil, yarnerr.InvalidResourceRequest.Errorf("Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[%s], Requested resource=%s, maximum allowed allocation=%s, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation=%s",
				bad.name, show(mb, vc), maxShow, maxShow)
		}
	}
	if step := int64(s.MinAllocationMB); step > 0 {
		norm := max(mb, step)
		norm = (norm + step - 1) / step * step
		norm = min(norm, int64(s.MaxAllocationMB))
		if norm != mb {
			for _, r := range reqs {
				r.Capability = yarnpb.NewResource(norm, vc)
			}
			sub.AMRequests = reqs
			return apps.NewApplication(rm.appsCfg, sub)
		}
	}
	return app, nil
}

// GetApplicationReport reports one application; a caller without VIEW_APP
// gets the report with the private fields hidden.
func (rm *ResourceManager) GetApplicationReport(ctx context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
	if req.GetApplicationId() == nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Invalid application id: null")
	}
	id, ok := appID(req.GetApplicationId())
	var e *entry
	if ok {
		e = rm.lookup(id)
	}
	if e == nil {
		return nil, notFound(appIDText(req.GetApplicationId()))
	}
	user := callerOf(ctx).User
	e.mu.Lock()
	defer e.mu.Unlock()
	access := rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP)
	report := e.app.Report(apps.ReportOptions{Now: rm.now(), Access: access, Keep: true})
	rm.setLogAggregationStatus(ctx, e, report)
	// An unmanaged AM runs wherever its submitter runs it: the submitter
	// reads the AMRMToken from the report (RMAppImpl shows it to the owner).
	if e.amrmToken != nil && e.app.Unmanaged() && shortName(user) == e.app.User() {
		report.AmRmToken = e.amrmToken
	}
	return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: report}, nil
}

// GetApplications lists the applications the request's filters select,
// ordered by id.
func (rm *ResourceManager) GetApplications(ctx context.Context, req *yarnpb.GetApplicationsRequestProto) (*yarnpb.GetApplicationsResponseProto, error) {
	user := callerOf(ctx).User
	tree := rm.queueTree()
	view := func(a *apps.Application) bool {
		var viewACL acl.ACL
		if s, ok := a.ACL(yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP); ok {
			viewACL = acl.Parse(s)
		}
		return tree.CheckAppAccess(queues.AppAccess{Queue: a.Queue(), Owner: a.User(), ACL: viewACL, User: shortName(user)})
	}
	if req == nil {
		req = &yarnpb.GetApplicationsRequestProto{} // FilterFromRequest reads fields directly
	}
	f := apps.FilterFromRequest(req, user, view)
	resp := &yarnpb.GetApplicationsResponseProto{}
	now := rm.now()
	for _, e := range rm.snapshot() {
		if f.Limit > 0 && int64(len(resp.Applications)) >= f.Limit {
			break
		}
		e.mu.Lock()
		if f.Matches(e.app) {
			r := e.app.Report(apps.ReportOptions{Now: now, Access: view(e.app)})
			rm.setLogAggregationStatus(ctx, e, r)
			resp.Applications = append(resp.Applications, r)
		}
		e.mu.Unlock()
	}
	return resp, nil
}

// finalStateStored is RMAppImpl.isAppFinalStateStored.
func finalStateStored(s apps.AppState) bool {
	switch s {
	case apps.AppStateFinishing, apps.AppStateFinished, apps.AppStateFailed, apps.AppStateKilled:
		return true
	}
	return false
}

// completedState is RMAppImpl.isAppInCompletedStates.
func completedState(s apps.AppState) bool {
	return finalStateStored(s) || s == apps.AppStateFinalSaving || s == apps.AppStateKilling
}

// activeState is ClientRMService.ACTIVE_APP_STATES: the application is
// known to the scheduler.
func activeState(s apps.AppState) bool {
	return s == apps.AppStateSubmitted || s == apps.AppStateAccepted || s == apps.AppStateRunning
}

// ForceKillApplication kills an application. Like YARN it answers
// isKillCompleted only once the final state is stored, so the client polls.
func (rm *ResourceManager) ForceKillApplication(ctx context.Context, req *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
	caller := callerOf(ctx)
	id, ok := appID(req.GetApplicationId())
	var e *entry
	if ok {
		e = rm.lookup(id)
	}
	if e == nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Trying to kill an absent application %s", appIDText(req.GetApplicationId()))
	}
	e.mu.Lock()
	allowed := rm.canAccess(e, caller.User, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP)
	stored := finalStateStored(e.app.State())
	unmanaged := e.app.Unmanaged()
	e.mu.Unlock()
	if !allowed {
		return nil, denied(caller.User, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP, id)
	}
	if stored {
		return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
	}
	diag := apps.UserKillDiagnostics(id, shortName(caller.User), remoteIP(caller.RemoteAddr), strings.TrimSpace(req.GetDiagnostics()))
	if err := rm.handle(ctx, e, apps.Kill{Diagnostics: diag}); err != nil {
		rm.log.WarnContext(ctx, "kill", "app", id.String(), "err", err)
	}
	rm.log.InfoContext(ctx, "application kill requested", "app", id.String(), "user", caller.User)
	return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(unmanaged)}, nil
}

func remoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// FailApplicationAttempt fails an attempt at the user's request; a new one
// follows if attempts remain.
func (rm *ResourceManager) FailApplicationAttempt(ctx context.Context, req *yarnpb.FailApplicationAttemptRequestProto) (*yarnpb.FailApplicationAttemptResponseProto, error) {
	user := callerOf(ctx).User
	aid, err := yarnid.AttemptIDFromProto(req.GetApplicationAttemptId())
	if err != nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Trying to fail an attempt null of an absent application null")
	}
	e := rm.lookup(aid.App)
	if e == nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Trying to fail an attempt %s of an absent application %s", aid, aid.App)
	}
	e.mu.Lock()
	known := e.app.Attempt(aid) != nil
	allowed := rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP)
	completed := completedState(e.app.State())
	e.mu.Unlock()
	if !known {
		return nil, yarnerr.ApplicationAttemptNotFound.Errorf(attemptNotFoundFormat, aid)
	}
	if !allowed {
		return nil, denied(user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP, aid.App)
	}
	if completed {
		return &yarnpb.FailApplicationAttemptResponseProto{}, nil
	}
	if err := rm.handle(ctx, e, apps.AttemptFailed{Attempt: aid, Diagnostics: "Attempt failed by user."}); err != nil {
		// YARN's dispatcher drops an event the attempt's state does not
		// take; the call has still succeeded.
		rm.log.InfoContext(ctx, "fail attempt ignored", "attempt", aid.String(), "err", err)
	}
	return &yarnpb.FailApplicationAttemptResponseProto{}, nil
}

// viewable looks up an application for the attempt and container reports,
// which refuse a caller without VIEW_APP.
func (rm *ResourceManager) viewable(ctx context.Context, id apps.ApplicationID, what string) (*entry, error) {
	user := callerOf(ctx).User
	e := rm.lookup(id)
	if e == nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
	}
	e.mu.Lock()
	if !rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP) {
		e.mu.Unlock()
		return nil, yarnerr.YarnException.Errorf("User %s does not have privilage to see this %s", shortName(user), what)
	}
	return e, nil // locked
}

// GetApplicationAttemptReport reports one attempt.
func (rm *ResourceManager) GetApplicationAttemptReport(ctx context.Context, req *yarnpb.GetApplicationAttemptReportRequestProto) (*yarnpb.GetApplicationAttemptReportResponseProto, error) {
	aid, err := yarnid.AttemptIDFromProto(req.GetApplicationAttemptId())
	if err != nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Application with id 'null' doesn't exist in RM.")
	}
	e, err := rm.viewable(ctx, aid.App, "attempt "+aid.String())
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	t := e.app.Attempt(aid)
	if t == nil {
		return nil, yarnerr.ApplicationAttemptNotFound.Errorf(attemptNotFoundFormat, aid)
	}
	return &yarnpb.GetApplicationAttemptReportResponseProto{ApplicationAttemptReport: t.Report()}, nil
}

// GetApplicationAttempts reports every attempt of an application.
func (rm *ResourceManager) GetApplicationAttempts(ctx context.Context, req *yarnpb.GetApplicationAttemptsRequestProto) (*yarnpb.GetApplicationAttemptsResponseProto, error) {
	id, ok := appID(req.GetApplicationId())
	if !ok {
		return nil, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", appIDText(req.GetApplicationId()))
	}
	e, err := rm.viewable(ctx, id, "application "+id.String())
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	resp := &yarnpb.GetApplicationAttemptsResponseProto{}
	for _, t := range e.app.Attempts() {
		resp.ApplicationAttempts = append(resp.ApplicationAttempts, t.Report())
	}
	return resp, nil
}

// GetContainerReport reports a container the scheduler still holds; like
// YARN, a completed container is no longer found here.
func (rm *ResourceManager) GetContainerReport(ctx context.Context, req *yarnpb.GetContainerReportRequestProto) (*yarnpb.GetContainerReportResponseProto, error) {
	cid, err := yarnid.ContainerIDFromProto(req.GetContainerId())
	if err != nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Application with id 'null' doesn't exist in RM.")
	}
	e, err := rm.viewable(ctx, cid.Attempt.App, "application "+cid.Attempt.App.String())
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if e.app.Attempt(cid.Attempt) == nil {
		return nil, yarnerr.ApplicationAttemptNotFound.Errorf(attemptNotFoundFormat, cid.Attempt)
	}
	c := e.app.Container(cid)
	if c == nil || c.State().Final() {
		return nil, yarnerr.ContainerNotFound.Errorf(containerNotFoundFormat, cid)
	}
	return &yarnpb.GetContainerReportResponseProto{ContainerReport: c.Report()}, nil
}

// GetContainers reports the live containers of an attempt.
func (rm *ResourceManager) GetContainers(ctx context.Context, req *yarnpb.GetContainersRequestProto) (*yarnpb.GetContainersResponseProto, error) {
	aid, err := yarnid.AttemptIDFromProto(req.GetApplicationAttemptId())
	if err != nil {
		return nil, yarnerr.ApplicationNotFound.Errorf("Application with id 'null' doesn't exist in RM.")
	}
	e, err := rm.viewable(ctx, aid.App, "application "+aid.App.String())
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	t := e.app.Attempt(aid)
	if t == nil {
		return nil, yarnerr.ApplicationAttemptNotFound.Errorf(attemptNotFoundFormat, aid)
	}
	resp := &yarnpb.GetContainersResponseProto{}
	if t.State().Final() {
		return resp, nil // the scheduler no longer holds the attempt
	}
	for _, c := range e.app.Containers() {
		if c.Attempt() == aid && !c.State().Final() {
			resp.Containers = append(resp.Containers, c.Report())
		}
	}
	return resp, nil
}

func (rm *ResourceManager) nodes(ctx context.Context) ([]NodeInfo, error) {
	if rm.cfg.Nodes == nil {
		return nil, nil
	}
	n, err := rm.cfg.Nodes.Nodes(ctx)
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(fmt.Errorf("listing nodes: %w", err))
	}
	return n, nil
}

// census counts the nodes; none without a NodeLister.
func (rm *ResourceManager) census(ctx context.Context) (NodeCensus, error) {
	if rm.cfg.Nodes == nil {
		return NodeCensus{}, nil
	}
	c, err := rm.cfg.Nodes.Census(ctx)
	if err != nil {
		return NodeCensus{}, yarnerr.YarnException.Wrap(fmt.Errorf("counting nodes: %w", err))
	}
	return c, nil
}

// GetClusterMetrics counts the nodes by state.
func (rm *ResourceManager) GetClusterMetrics(ctx context.Context, _ *yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
	c, err := rm.census(ctx)
	if err != nil {
		return nil, err
	}
	return clusterMetricsAnswer(clusterMetricsCounts(c)), nil
}

// clusterMetricsAnswer is the answer carrying counts v.
func clusterMetricsAnswer(v [8]int32) *yarnpb.GetClusterMetricsResponseProto {
	// One array behind the eight optional fields: one allocation, not
	// eight.
	counts := &v
	return &yarnpb.GetClusterMetricsResponseProto{ClusterMetrics: &yarnpb.YarnClusterMetricsProto{
		NumNodeManagers: &counts[0], NumActiveNms: &counts[1], NumDecommissionedNms: &counts[2], NumLostNms: &counts[3],
		NumUnhealthyNms: &counts[4], NumRebootedNms: &counts[5], NumDecommissioningNms: &counts[6], NumShutdownNms: &counts[7],
	}}
}

// clusterMetricsCounts are YarnClusterMetricsProto's eight counts, in the
// order of its fields, as YARN's ClientRMService fills them.
func clusterMetricsCounts(c NodeCensus) [8]int32 {
	n := c.Nodes
	return [8]int32{
		// getRMNodes holds the nodes that are not inactive.
		n(yarnpb.NodeStateProto_NS_NEW) + n(yarnpb.NodeStateProto_NS_RUNNING) +
			n(yarnpb.NodeStateProto_NS_UNHEALTHY) + n(yarnpb.NodeStateProto_NS_DECOMMISSIONING),
		n(yarnpb.NodeStateProto_NS_RUNNING),
		n(yarnpb.NodeStateProto_NS_DECOMMISSIONED),
		n(yarnpb.NodeStateProto_NS_LOST),
		n(yarnpb.NodeStateProto_NS_UNHEALTHY),
		n(yarnpb.NodeStateProto_NS_REBOOTED),
		n(yarnpb.NodeStateProto_NS_DECOMMISSIONING),
		n(yarnpb.NodeStateProto_NS_SHUTDOWN),
	}
}

// encodedClusterMetrics is getClusterMetrics' answer encoded, kept while
// the counts stay as they are: clients call it in a loop, and the counts
// change only when a node changes state, so a call allocates no answer.
func (rm *ResourceManager) encodedClusterMetrics(ctx context.Context) ([]byte, error) {
	c, err := rm.census(ctx)
	if err != nil {
		return nil, err
	}
	v := clusterMetricsCounts(c)
	if kept := rm.clusterMetrics.Load(); kept != nil && kept.counts == v {
		return kept.encoded, nil
	}
	encoded, err := proto.Marshal(clusterMetricsAnswer(v))
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(fmt.Errorf("encoding the cluster metrics: %w", err))
	}
	// Two calls racing here encode the same counts alike; either is kept.
	rm.clusterMetrics.Store(&keptClusterMetrics{counts: v, encoded: encoded})
	return encoded, nil
}

// keptClusterMetrics is an encoded getClusterMetrics answer and the counts
// it carries.
type keptClusterMetrics struct {
	counts  [8]int32
	encoded []byte
}

// GetClusterNodes reports the nodes in the states asked for (all when
// none).
func (rm *ResourceManager) GetClusterNodes(ctx context.Context, req *yarnpb.GetClusterNodesRequestProto) (*yarnpb.GetClusterNodesResponseProto, error) {
	if enc, ok := rm.cfg.Nodes.(encodedNodeReports); ok {
		raw, err := encodedClusterNodes(enc, req)
		if err != nil {
			return nil, err
		}
		// The reports in the encodings the lister keeps: on the wire,
		// fields the message holds as unknown are written as they are, so
		// the answer is the one NodeReports would make. (Served over RPC,
		// Register's raw method sends raw itself.)
		resp := &yarnpb.GetClusterNodesResponseProto{}
		resp.ProtoReflect().SetUnknown(bytes.Join(raw, nil))
		return resp, nil
	}
	nodes, err := rm.clusterNodes(ctx, req.GetNodeStates())
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetClusterNodesResponseProto{}
	for _, n := range nodes {
		resp.NodeReports = append(resp.NodeReports, n.SharedReport())
	}
	return resp, nil
}

// clusterNodes is the nodes in one of states, every node when states is
// empty: those getClusterNodes reports, and REST's nodes.
func (rm *ResourceManager) clusterNodes(ctx context.Context, states []yarnpb.NodeStateProto) ([]NodeInfo, error) {
	nodes, err := rm.nodes(ctx)
	if err != nil || len(states) == 0 {
		return nodes, err
	}
	keep := inStates(states)
	var in []NodeInfo
	for _, n := range nodes {
		if keep(n.State) {
			in = append(in, n)
		}
	}
	return in, nil
}

// inStates accepts the states asked for, every state when none is.
func inStates(states []yarnpb.NodeStateProto) func(yarnpb.NodeStateProto) bool {
	if len(states) == 0 {
		return func(yarnpb.NodeStateProto) bool { return true }
	}
	return func(s yarnpb.NodeStateProto) bool { return slices.Contains(states, s) }
}

// inQueue reports whether an application queue path is path or below it.
func inQueue(appQueue, path string) bool {
	return appQueue == path || strings.HasPrefix(appQueue, path+".")
}

// GetQueueInfo describes a queue with its live figures. An unknown queue
// gets an empty answer: ClientRMService logs the scheduler's IOException
// and returns the response without a queue. The figures come from the
// queue usage index, so the answer costs O(queues), not O(applications);
// only the applications, when asked for, are found by walking them.
func (rm *ResourceManager) GetQueueInfo(ctx context.Context, req *yarnpb.GetQueueInfoRequestProto) (*yarnpb.GetQueueInfoResponseProto, error) {
	return rm.queueInfo(ctx, req, rm.queueTree(), rm.queueView(ctx))
}

// queueInfo answers getQueueInfo from one reading of the queues' use
// (view), which the REST scheduler and the web UI share with it.
func (rm *ResourceManager) queueInfo(ctx context.Context, req *yarnpb.GetQueueInfoRequestProto, tree *queues.Tree, view *queueView) (*yarnpb.GetQueueInfoResponseProto, error) {
	user := callerOf(ctx).User
	info, err := tree.QueueInfo(req.GetQueueName(), req.GetIncludeChildQueues(), req.GetRecursive(), view.stats)
	if err != nil {
		rm.log.InfoContext(ctx, "failed to getQueueInfo", "queue", req.GetQueueName(), "err", err)
		return &yarnpb.GetQueueInfoResponseProto{}, nil
	}
	if req.GetIncludeApplications() {
		q, err := tree.Lookup(req.GetQueueName())
		if err == nil {
			now := rm.now()
			for _, e := range rm.snapshot() {
				e.mu.Lock()
				// The scheduler holds only applications that have not ended.
				if inQueue(e.app.Queue(), q.Path) && !e.app.State().Final() && activeState(e.app.State()) &&
					rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP) {
					info.Applications = append(info.Applications, e.app.Report(apps.ReportOptions{Now: now, Access: true}))
				}
				e.mu.Unlock()
			}
		}
	}
	return &yarnpb.GetQueueInfoResponseProto{QueueInfo: info}, nil
}

// GetQueueUserAcls lists the caller's operations on every queue.
func (rm *ResourceManager) GetQueueUserAcls(ctx context.Context, _ *yarnpb.GetQueueUserAclsInfoRequestProto) (*yarnpb.GetQueueUserAclsInfoResponseProto, error) {
	return &yarnpb.GetQueueUserAclsInfoResponseProto{QueueUserAcls: rm.queueTree().UserACLs(shortName(callerOf(ctx).User), nil)}, nil
}

// MoveApplicationAcrossQueues moves an application the scheduler holds to
// another leaf queue the caller may submit to or administer.
func (rm *ResourceManager) MoveApplicationAcrossQueues(ctx context.Context, req *yarnpb.MoveApplicationAcrossQueuesRequestProto) (*yarnpb.MoveApplicationAcrossQueuesResponseProto, error) {
	e, user, err := rm.modifiable(ctx, req.GetApplicationId())
	if err != nil {
		return nil, err
	}
	id := e.app.ID()
	target := req.GetTargetQueue()
	// Held as a submission holds it: a refreshQueues in between could
	// remove the target, and the queue's application count changes.
	rm.admitMu.Lock()
	defer rm.admitMu.Unlock()
	tree := rm.queueTree()
	short := shortName(user)
	if !tree.HasAccess(target, queues.SubmitApplications, short, nil) &&
		!tree.HasAccess(target, queues.AdministerQueue, short, nil) {
		return nil, yarnerr.YarnException.Errorf("%s: User %s cannot submit applications to target queue or the target queue doesn't exist: %s while moving %s",
			yarnerr.AccessControl, short, target, id)
	}
	// In the application's turn, no event comes between the checks and
	// the move.
	e.turn.Lock()
	defer e.turn.Unlock()
	e.mu.Lock()
	st, current := e.app.State(), e.app.Queue()
	e.mu.Unlock()
	if !activeState(st) {
		return nil, yarnerr.YarnException.Errorf("App in %s state cannot be moved.", st)
	}
	q, err := tree.Lookup(target)
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(err)
	}
	if !q.IsLeaf() {
		return nil, yarnerr.YarnException.Wrap(yarnerr.IOException.Errorf("Target queue %s is not a leaf queue", target))
	}
	if q.Path == current {
		return nil, yarnerr.YarnException.Errorf("App %s is already present in queue %s", id, q.Path)
	}
	if q.EffectiveState(0) != queues.Running {
		return nil, yarnerr.YarnException.Errorf("%s: Queue %s is STOPPED. Cannot accept submission of application: %s",
			yarnerr.AccessControl, q.Path, id)
	}
	if err := rm.handleInTurn(ctx, e, apps.Move{Queue: q.Path}); err != nil {
		return nil, yarnerr.YarnException.Errorf("%s", err)
	}
	rm.mu.Lock()
	rm.countLocked(e, -1)
	e.queue = q.Path
	rm.countLocked(e, 1)
	rm.mu.Unlock()
	rm.log.InfoContext(ctx, "application moved", "app", id.String(), "queue", q.Path, "user", user)
	return &yarnpb.MoveApplicationAcrossQueuesResponseProto{}, nil
}

// UpdateApplicationPriority sets a new priority, lowered to the cluster
// maximum as the CapacityScheduler does.
func (rm *ResourceManager) UpdateApplicationPriority(ctx context.Context, req *yarnpb.UpdateApplicationPriorityRequestProto) (*yarnpb.UpdateApplicationPriorityResponseProto, error) {
	e, _, err := rm.modifiable(ctx, req.GetApplicationId())
	if err != nil {
		return nil, err
	}
	e.turn.Lock()
	defer e.turn.Unlock()
	e.mu.Lock()
	st, current := e.app.State(), e.app.Priority()
	e.mu.Unlock()
	answer := func(p int32) *yarnpb.UpdateApplicationPriorityResponseProto {
		return &yarnpb.UpdateApplicationPriorityResponseProto{ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(p)}}
	}
	if !activeState(st) && st != apps.AppStateSubmitted {
		if completedState(st) {
			return answer(current), nil
		}
		return nil, yarnerr.YarnException.Errorf("Application in %s state cannot update priority.", st)
	}
	p := min(req.GetApplicationPriority().GetPriority(), rm.maxPriority())
	if p == current {
		return answer(current), nil
	}
	if err := rm.handleInTurn(ctx, e, apps.UpdatePriority{Priority: p}); err != nil {
		return nil, yarnerr.YarnException.Errorf("%s", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return answer(e.app.Priority()), nil
}

// UpdateApplicationTimeouts sets a new absolute lifetime expiry.
func (rm *ResourceManager) UpdateApplicationTimeouts(ctx context.Context, req *yarnpb.UpdateApplicationTimeoutsRequestProto) (*yarnpb.UpdateApplicationTimeoutsResponseProto, error) {
	e, _, err := rm.modifiable(ctx, req.GetApplicationId())
	if err != nil {
		return nil, err
	}
	timeouts := req.GetApplicationTimeouts()
	if len(timeouts) == 0 {
		return nil, yarnerr.YarnException.Errorf("At least one ApplicationTimeoutType should be configured for updating timeouts.")
	}
	resp := &yarnpb.UpdateApplicationTimeoutsResponseProto{ApplicationTimeouts: timeouts}
	e.turn.Lock()
	defer e.turn.Unlock()
	e.mu.Lock()
	st := e.app.State()
	e.mu.Unlock()
	if !activeState(st) {
		if completedState(st) {
			return resp, nil
		}
		return nil, yarnerr.YarnException.Errorf("Application is in %s state can not update timeout.", st)
	}
	for _, t := range timeouts {
		if t.GetApplicationTimeoutType() != yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME {
			continue
		}
		expiry, err := time.Parse(iso8601Layout, t.GetExpireTime())
		if err != nil {
			return nil, yarnerr.YarnException.Errorf("Expire time is not in ISO8601 format. ISO8601 supported format is %s", iso8601Java)
		}
		if err := rm.handleInTurn(ctx, e, apps.UpdateTimeout{Expiry: expiry}); err != nil {
			msg := err.Error()
			if errors.Is(err, apps.ErrInvalidTimeout) {
				msg = fmt.Sprintf("Expire time is less than current time, current-time=%s expire-time=%s",
					rm.now().Format(iso8601Layout), t.GetExpireTime())
			}
			return nil, yarnerr.YarnException.Errorf("%s", msg)
		}
	}
	return resp, nil
}

// SignalToContainer forwards a signal to a live container.
func (rm *ResourceManager) SignalToContainer(ctx context.Context, req *yarnpb.SignalContainerRequestProto) (*yarnpb.SignalContainerResponseProto, error) {
	cid, err := yarnid.ContainerIDFromProto(req.GetContainerId())
	if err != nil {
		return nil, yarnerr.YarnException.Errorf("Trying to signal an absent container null")
	}
	user := callerOf(ctx).User
	e := rm.lookup(cid.Attempt.App)
	if e == nil {
		return nil, yarnerr.YarnException.Errorf("Trying to signal an absent container %s", cid)
	}
	e.mu.Lock()
	allowed := rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP)
	c := e.app.Container(cid)
	var node *yarnpb.NodeIdProto
	live := c != nil && !c.State().Final()
	if live {
		node = c.Node()
	}
	e.mu.Unlock()
	if !allowed {
		return nil, denied(user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP, cid.Attempt.App)
	}
	if !live {
		return nil, yarnerr.YarnException.Errorf("Trying to signal an absent container %s", cid)
	}
	if rm.cfg.Signaler == nil {
		rm.log.WarnContext(ctx, "no container signaler: signal dropped", "container", cid.String(), "command", req.GetCommand().String())
		return &yarnpb.SignalContainerResponseProto{}, nil
	}
	if err := rm.cfg.Signaler.SignalContainer(ctx, cid, node, req.GetCommand()); err != nil {
		return nil, yarnerr.YarnException.Wrap(err)
	}
	return &yarnpb.SignalContainerResponseProto{}, nil
}

// delegationAllowed is isAllowedDelegationTokenOp. Knit's client port has
// no Kerberos, so it answers as a YARN RM with security off (allowed),
// except when it has no token manager, where it answers as a secure RM to a
// non-Kerberos caller; a caller that itself authenticated with a token is
// refused, as a secure RM refuses it.
func (rm *ResourceManager) delegationAllowed(ctx context.Context) bool {
	if rm.cfg.Tokens == nil {
		return false
	}
	return !callerOf(ctx).Token
}

// GetDelegationToken issues an RM delegation token to the caller.
func (rm *ResourceManager) GetDelegationToken(ctx context.Context, req *commonpb.GetDelegationTokenRequestProto) (*commonpb.GetDelegationTokenResponseProto, error) {
	if !rm.delegationAllowed(ctx) {
		return nil, yarnerr.YarnException.Errorf(delegationNeedsKerberosIssueFormat, "issued")
	}
	c := callerOf(ctx)
	tok, _, err := rm.cfg.Tokens.Delegation().Issue(ctx, c.User, req.GetRenewer(), c.RealUser, rm.cfg.Settings.Address)
	if err != nil {
		return nil, tokenError(err)
	}
	return &commonpb.GetDelegationTokenResponseProto{Token: tok.Proto()}, nil
}

// RenewDelegationToken extends a token for the caller, its renewer.
func (rm *ResourceManager) RenewDelegationToken(ctx context.Context, req *commonpb.RenewDelegationTokenRequestProto) (*commonpb.RenewDelegationTokenResponseProto, error) {
	if !rm.delegationAllowed(ctx) {
		return nil, yarnerr.YarnException.Errorf(delegationNeedsKerberosIssueFormat, "renewed")
	}
	if req.GetToken() == nil {
		return nil, yarnerr.YarnException.Wrap(yarnerr.IOException.New("no token given"))
	}
	exp, err := rm.cfg.Tokens.Delegation().Renew(ctx, token.FromProto(req.GetToken()), shortName(callerOf(ctx).User))
	if err != nil {
		return nil, tokenError(err)
	}
	return &commonpb.RenewDelegationTokenResponseProto{NewExpiryTime: proto.Uint64(uint64(exp.UnixMilli()))}, nil
}

// CancelDelegationToken forgets a token at the request of its owner or
// renewer.
func (rm *ResourceManager) CancelDelegationToken(ctx context.Context, req *commonpb.CancelDelegationTokenRequestProto) (*commonpb.CancelDelegationTokenResponseProto, error) {
	if !rm.delegationAllowed(ctx) {
		return nil, yarnerr.YarnException.Errorf(delegationNeedsKerberosIssueFormat, "cancelled")
	}
	if req.GetToken() == nil {
		return nil, yarnerr.YarnException.Wrap(yarnerr.IOException.New("no token given"))
	}
	if _, err := rm.cfg.Tokens.Delegation().Cancel(ctx, token.FromProto(req.GetToken()), callerOf(ctx).User); err != nil {
		return nil, tokenError(err)
	}
	return &commonpb.CancelDelegationTokenResponseProto{}, nil
}

// tokenError passes the token manager's Hadoop exceptions through, wrapped
// in YarnException as RPCUtil.getRemoteException does with an IOException.
func tokenError(err error) error {
	if e, ok := yarnerr.Find(err); ok && e.Class == yarnerr.YarnException {
		return e
	}
	return yarnerr.YarnException.Wrap(err)
}
