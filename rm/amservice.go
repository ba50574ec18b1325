package rm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/scheduling"
)

// ApplicationMasterService's messages. Its exception classes
// (protocols/yarnerr), which AMRMClient and the MapReduce and Spark AMs
// branch on, are those of hadoop-wire-facts §9 item 13.
const (
	msgNotInAMServiceFormat           = "Application attempt %s doesn't exist in ApplicationMasterService cache."
	msgNotRegisteredFormat            = "AM is not registered for known application attempt: %s or RM had restarted after AM registered. AM should re-register."
	msgUnregisterBeforeRegisterFormat = "Application Master is trying to unregister before registering for: %s"
	msgReleaseNotOwnedFormat          = "Cannot release container : %s not belonging to this application attempt : %s"
	msgNegativeResourceFormat         = "Invalid resource request! Cannot allocate containers as requested resource is less than 0! Requested resource type=[%s], Requested resource=%s"
	msgAboveMaximumFormat             = "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[%s], Requested resource=%s, maximum allowed allocation=%s, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation=%s"
	msgUnknownResourceFormat          = "Invalid resource request! Cannot allocate containers as requested resource type=[%s] is not known to the scheduler."
	msgNegativeContainersFormat       = "Invalid resource request, number of containers requested is negative: %d"
)

// clusterViewRefresh is how old the node count and free resources in
// allocate answers may be.
const clusterViewRefresh = time.Second

// Scheduler places containers on the cluster; in Knit it is RGS, which turns
// asks into pending pods and bound pods into containers.
type Scheduler interface {
	// Ask records an attempt's asks, absolute totals per key.
	Ask(spec scheduling.AttemptSpec, asks []*yarnpb.ResourceRequestProto)
	// Blacklist changes the hosts the attempt's new pods avoid.
	Blacklist(spec scheduling.AttemptSpec, add, remove []string)
	// The removals below are intents: the scheduler records them and
	// carries them out in its own time, retrying as it must, so that no
	// client's call and no application's lock waits on the pods going.

	// ForgetAttempt drops the attempt's asks and removes its pending pods.
	ForgetAttempt(attempt yarnid.AttemptID)
	// DeleteContainer removes a container's pod.
	DeleteContainer(id yarnid.ContainerID)
	// RemoveApplication removes every pod of an application.
	RemoveApplication(app yarnid.ApplicationID)
	// CurrentContainer reads a running container's version, size and
	// execution type.
	CurrentContainer(id yarnid.ContainerID) (scheduling.Current, bool)
	// UpdateContainer carries out a granted update: at once (the updated
	// container returned) or, for an increase, through Sink.Updated.
	UpdateContainer(ctx context.Context, u scheduling.Update) (*yarnpb.ContainerProto, error)
}

// amState is the ApplicationMasterService's view of one attempt, from the
// attempt's start to its end (YARN's AllocateResponseLock).
type amState struct {
	// mu serialises the AM's calls. Lock order: mu, then the application
	// entry's lock, then qmu.
	mu         sync.Mutex
	attempt    apps.AttemptID
	registered bool
	// last is the previous allocate answer: a repeated request gets it
	// again. Its response id is the one the next request must carry.
	last *yarnpb.AllocateResponseProto

	// qmu guards what waits for the AM's next allocate: allocated
	// containers, completed statuses it has not seen, and containers
	// Kubernetes is about to take back.
	qmu        sync.Mutex
	allocated  []*yarnpb.ContainerProto
	completed  []*yarnpb.ContainerStatusProto
	preempting []scheduling.Preemption
	// increasing are the requests of increases the nodes have not answered;
	// updated and updateErrors wait for the next allocate.
	increasing   map[yarnid.ContainerID]*yarnpb.UpdateContainerRequestProto
	updated      []*yarnpb.UpdatedContainerProto
	updateErrors []*yarnpb.UpdateContainerErrorProto
	// updatedNodes are nodes that became usable or unusable since the
	// AM's last allocate.
	updatedNodes []*yarnpb.NodeReportProto
}

func newAMState(attempt apps.AttemptID) *amState {
	return &amState{attempt: attempt, increasing: map[yarnid.ContainerID]*yarnpb.UpdateContainerRequestProto{}}
}

// monitors are the AM liveness and container allocation timers.
type monitors struct {
	mu sync.Mutex
	am map[apps.AttemptID]amWatch
	// allocations are the containers allocated and not yet started, by
	// when they must start (ContainerAllocationExpirer).
	allocations *deadlines[apps.ContainerID]
	// increases are increases handed to AMs and not yet brought to the
	// node: rolled back at their deadline (ContainerAllocationExpirer).
	increases map[apps.ContainerID]increaseWatch
}

// increaseWatch is an increase waiting for the AM's updateContainer.
type increaseWatch struct {
	deadline time.Time
	version  int32                 // the increased container's
	from     *yarnpb.ResourceProto // the size to go back to
}

type amWatch struct {
	monitor  apps.AMMonitor
	lastSeen time.Time
}

// amService is the ApplicationMasterService: it serves
// ApplicationMasterProtocol and carries out the effects that need the
// cluster, through the Scheduler.
type amService struct {
	rm        *ResourceManager
	scheduler Scheduler
	// knownTypes are the resource types asks may name.
	knownTypes map[string]bool

	mu       sync.Mutex
	attempts map[apps.AttemptID]*amState
	mon      monitors

	clusterMu   sync.Mutex
	cluster     clusterView
	clusterTime time.Time
	// nodes are the nodes at the last refresh, by name; nil before the
	// first.
	nodes map[string]NodeInfo
}

// clusterView is what allocate answers say about the cluster: node count
// and free resources, refreshed at most once a second so heartbeats do not
// each walk every node. The queues' use comes from the queue usage index
// at each allocate.
type clusterView struct {
	nodes            int32
	freeMB, totalMB  int64
	freeVC, totalVCs int32
}

func newAMService(rm *ResourceManager, s Scheduler) *amService {
	known := map[string]bool{"memory-mb": true, "vcores": true}
	for _, t := range rm.cfg.ResourceTypes {
		known[t.Name] = true
	}
	return &amService{
		rm:         rm,
		scheduler:  s,
		knownTypes: known,
		attempts:   map[apps.AttemptID]*amState{},
		mon: monitors{am: map[apps.AttemptID]amWatch{}, allocations: newDeadlines[apps.ContainerID](),
			increases: map[apps.ContainerID]increaseWatch{}},
	}
}

// RegisterAM adds ApplicationMasterProtocol to srv, which must
// authenticate AMs with their AMRMTokens (tokens.AMRMTokens.SecretLookup).
func (rm *ResourceManager) RegisterAM(srv *ipc.Server) error {
	return yarnrpc.RegisterApplicationMasterProtocolServer(srv, rm)
}

var _ yarnrpc.ApplicationMasterProtocolServer = (*ResourceManager)(nil)

// callerAttempt is the attempt whose AMRMToken authenticated the caller.
func callerAttempt(ctx context.Context) (apps.AttemptID, error) {
	c := callerOf(ctx)
	if id, ok := c.TokenIdentity.(*yarnpb.AMRMTokenIdentifierProto); ok {
		if a, err := yarnid.AttemptIDFromProto(id.GetAppAttemptId()); err == nil {
			return a, nil
		}
	}
	return apps.AttemptID{}, yarnerr.AccessControl.Errorf("SIMPLE authentication is not enabled.  Available:[TOKEN]")
}

func (s *amService) state(a apps.AttemptID) *amState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[a]
}

// amCaller finds the attempt whose AMRMToken authenticated the call, its AM
// state and its application; an attempt the AM service does not hold (over,
// or never started) is ApplicationAttemptNotFoundException.
func (rm *ResourceManager) amCaller(ctx context.Context) (apps.AttemptID, *amState, *entry, error) {
	attempt, err := callerAttempt(ctx)
	if err != nil {
		return attempt, nil, nil, err
	}
	st := rm.am.state(attempt)
	e := rm.lookup(attempt.App)
	if st == nil || e == nil {
		return attempt, nil, nil, yarnerr.ApplicationAttemptNotFound.Errorf(msgNotInAMServiceFormat, attempt)
	}
	return attempt, st, e, nil
}

// RegisterApplicationMaster is registerApplicationMaster.
func (rm *ResourceManager) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	attempt, st, e, err := rm.amCaller(ctx)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.registered {
		e.mu.Lock()
		rereg := e.app.Unmanaged() && e.app.KeepContainersAcrossAttempts()
		e.mu.Unlock()
		if !rereg {
			return nil, yarnerr.AlreadyRegistered(attempt.App.String())
		}
	}
	err = rm.handle(ctx, e, apps.AttemptRegistered{
		Attempt: attempt, Host: req.GetHost(), RPCPort: req.GetRpcPort(), TrackingURL: req.GetTrackingUrl(),
	})
	if err != nil {
		return nil, yarnerr.InvalidApplicationMasterRequest.Errorf("%s", err)
	}
	st.registered = true
	// The next allocate must carry response id 0.
	st.last = &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(0)}
	rm.am.seen(attempt)

	e.mu.Lock()
	defer e.mu.Unlock()
	app := e.app
	resp := &yarnpb.RegisterApplicationMasterResponseProto{
		MaximumCapability:      yarnpb.NewResource(int64(rm.cfg.Settings.MaxAllocationMB), int32(rm.cfg.Settings.MaxAllocationVcores)),
		Queue:                  proto.String(app.Queue()),
		SchedulerResourceTypes: []yarnpb.SchedulerResourceTypes{yarnpb.SchedulerResourceTypes_MEMORY},
		ResourceTypes:          ResourceTypeInfo{Types: rm.cfg.ResourceTypes}.infos(),
	}
	if rm.cfg.Tokens != nil {
		resp.ClientToAmTokenMasterKey = rm.cfg.Tokens.ClientToAM().MasterKey(attempt.Proto())
	}
	for _, t := range []yarnpb.ApplicationAccessTypeProto{yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP} {
		if acl, ok := app.ACL(t); ok {
			resp.Application_ACLs = append(resp.Application_ACLs, &yarnpb.ApplicationACLMapProto{AccessType: t.Enum(), Acl: proto.String(acl)})
		}
	}
	// Containers that outlived an earlier attempt (keep-containers) belong
	// to this one now; the AM needs them and NMTokens for their nodes.
	var nodes []*yarnpb.NodeIdProto
	for _, c := range app.Containers() {
		if c.Attempt() != attempt && c.Attempt().ID < attempt.ID && !c.IsAM() && c.State() == apps.ContainerStateRunning {
			resp.ContainersFromPreviousAttempts = append(resp.ContainersFromPreviousAttempts, c.Proto())
			nodes = append(nodes, c.Node())
		}
	}
	if len(nodes) > 0 && rm.cfg.Tokens != nil {
		resp.NmTokensFromPreviousAttempts = rm.cfg.Tokens.NMTokens().ForNodes(attempt.Proto(), app.User(), nodes)
	}
	return resp, nil
}

// Allocate is allocate: the AM's heartbeat, with its asks, releases and
// blacklist, answered with what happened since the last one.
func (rm *ResourceManager) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	attempt, st, e, err := rm.amCaller(ctx)
	if err != nil {
		return nil, err
	}
	rm.am.seen(attempt)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.registered {
		return nil, yarnerr.ApplicationMasterNotRegistered.Errorf(msgNotRegisteredFormat, attempt)
	}
	lastID := st.last.GetResponseId()
	switch {
	case nextResponseID(req.GetResponseId()) == lastID:
		return st.last, nil // a retry of a request already answered
	case req.GetResponseId() != lastID:
		return nil, yarnerr.InvalidResponseID(attempt.String(), lastID, req.GetResponseId())
	}

	spec, asks, err := rm.am.checkAsks(e, attempt, req)
	if err != nil {
		return nil, err
	}
	releases, err := checkReleases(attempt, req.GetRelease())
	if err != nil {
		return nil, err
	}
	if req.Progress != nil {
		rm.updateProgress(ctx, e, apps.AttemptStatusUpdate{Attempt: attempt, Progress: req.GetProgress()})
	}
	if len(releases) > 0 {
		rm.release(ctx, e, releases)
	}
	var updates updateAnswer
	if reqs := req.GetUpdateRequests(); len(reqs) > 0 {
		updates = rm.am.updates(ctx, st, attempt, reqs)
	}
	bl := req.GetBlacklistRequest()
	rm.am.scheduler.Blacklist(spec, bl.GetBlacklistAdditions(), bl.GetBlacklistRemovals())
	if len(asks) > 0 {
		rm.am.scheduler.Ask(spec, asks)
	}

	ans := &allocateAnswer{responseID: nextResponseID(lastID)}
	resp := &ans.resp
	resp.ResponseId = &ans.responseID
	st.qmu.Lock()
	allocated := st.allocated
	st.allocated = nil
	st.qmu.Unlock()
	var nodes []*yarnpb.NodeIdProto
	if len(allocated) > 0 {
		nodes = rm.handOut(ctx, e, resp, allocated)
	}
	updates = rm.takeUpdates(ctx, e, st, updates)
	resp.UpdatedContainers, resp.UpdateErrors = updates.updated, updates.errors
	for _, u := range updates.updated {
		// A new token for the node too, as YARN's updateContainerAndNMToken.
		nodes = append(nodes, u.GetContainer().GetNodeId())
	}
	st.qmu.Lock()
	resp.CompletedContainerStatuses, st.completed = st.completed, nil
	if len(st.preempting) > 0 {
		resp.Preempt = rm.preemptionMessage(st.preempting)
		st.preempting = nil
	}
	st.qmu.Unlock()

	e.mu.Lock()
	user, queue, priority := e.app.User(), e.app.Queue(), e.app.Priority()
	e.mu.Unlock()
	if rm.cfg.Tokens != nil {
		rm.addTokens(ctx, resp, attempt, user, nodes)
	}
	view := rm.am.clusterView(ctx)
	st.qmu.Lock()
	resp.UpdatedNodes, st.updatedNodes = st.updatedNodes, nil
	st.qmu.Unlock()
	ans.nodes, ans.priority = view.nodes, priority
	resp.NumClusterNodes = &ans.nodes
	mem, vc := rm.am.headroom(view, queue, user)
	resp.Limit = limitProto(st.last.GetLimit(), mem, vc)
	ans.applicationPriority.Priority = &ans.priority
	resp.ApplicationPriority = &ans.applicationPriority
	st.last = resp
	return resp, nil
}

// allocateAnswer is an allocate answer with the values its fields point to
// that every heartbeat sets, in one allocation instead of five.
type allocateAnswer struct {
	resp                yarnpb.AllocateResponseProto
	responseID, nodes   int32
	priority            int32
	applicationPriority yarnpb.PriorityProto
}

// The parts of Allocate below are functions of their own, not inline, for
// the stack: a call's goroutine starts with a small stack, and one frame
// holding every branch's locals made each heartbeat copy its stack twice
// as it grew (most of the RM's cost of an allocate over a no-op's).

// release hands the AM's releases to their containers.
func (rm *ResourceManager) release(ctx context.Context, e *entry, releases []apps.ContainerID) {
	for _, id := range releases {
		if err := rm.handle(ctx, e, apps.ContainerReleased{Container: id}); err != nil {
			rm.log.InfoContext(ctx, "release", "container", id.String(), "err", err)
		}
	}
}

// handOut adds the containers allocated since the last heartbeat to resp
// as the application acquires them, and returns their nodes.
func (rm *ResourceManager) handOut(ctx context.Context, e *entry, resp *yarnpb.AllocateResponseProto, allocated []*yarnpb.ContainerProto) []*yarnpb.NodeIdProto {
	var nodes []*yarnpb.NodeIdProto
	for _, c := range allocated {
		id, _ := yarnid.ContainerIDFromProto(c.GetId())
		if err := rm.handle(ctx, e, apps.ContainerAcquired{Container: id}); err != nil {
			rm.log.InfoContext(ctx, "container not handed out", "container", id.String(), "err", err)
			continue
		}
		resp.AllocatedContainers = append(resp.AllocatedContainers, c)
		nodes = append(nodes, c.GetNodeId())
	}
	return nodes
}

// addTokens adds NMTokens for nodes and, once the AMRMToken master key has
// rolled, the AM's new AMRMToken.
func (rm *ResourceManager) addTokens(ctx context.Context, resp *yarnpb.AllocateResponseProto, attempt apps.AttemptID, user string, nodes []*yarnpb.NodeIdProto) {
	if len(nodes) > 0 {
		resp.NmTokens = rm.cfg.Tokens.NMTokens().ForNodes(attempt.Proto(), user, nodes)
	}
	if id, ok := callerOf(ctx).TokenIdentity.(*yarnpb.AMRMTokenIdentifierProto); ok {
		if tok, ok := rm.cfg.Tokens.AMRM().Refresh(id); ok {
			resp.AmRmToken = tok.Proto()
		}
	}
}

// updateProgress hands the heartbeat's progress to the application when it
// changes anything: most heartbeats carry the progress of the last, and the
// event's way through the state machine, the tracer and the queue index
// (with a deeper stack than the rest of allocate) changes nothing then.
func (rm *ResourceManager) updateProgress(ctx context.Context, e *entry, u apps.AttemptStatusUpdate) {
	e.mu.Lock()
	changes := u.Changes(e.app)
	e.mu.Unlock()
	if !changes {
		return
	}
	if err := rm.handle(ctx, e, u); err != nil {
		rm.log.DebugContext(ctx, "progress", "attempt", u.Attempt.String(), "err", err)
	}
}

// nextResponseID is AMRMClientUtils.getNextResponseId.
func nextResponseID(id int32) int32 { return (id + 1) & math.MaxInt32 }

// checkAsks validates and normalises an allocate request's asks as YARN's
// SchedulerUtils does, before anything changes: a bad ask refuses the whole
// request with InvalidResourceRequestException.
func (s *amService) checkAsks(e *entry, attempt apps.AttemptID, req *yarnpb.AllocateRequestProto) (scheduling.AttemptSpec, []*yarnpb.ResourceRequestProto, error) {
	e.mu.Lock()
	app := e.app
	spec := scheduling.AttemptSpec{Attempt: attempt, Role: launch.RoleTask, Queue: app.Queue(), User: app.User(),
		NodeLabel: app.NodeLabelExpression(), LogAggregation: app.LogAggregationContext()}
	e.mu.Unlock()
	if len(req.GetAsk()) == 0 && len(req.GetSchedulingRequests()) == 0 {
		return spec, nil, nil // a heartbeat
	}
	// A queue a refresh removed under the application checks no labels.
	q, _ := s.rm.queueTree().Lookup(spec.Queue)
	var asks []*yarnpb.ResourceRequestProto
	for _, r := range req.GetAsk() {
		n, err := s.normalize(r)
		if err == nil {
			err = labelAsk(n, spec.NodeLabel, q)
		}
		if err != nil {
			return spec, nil, err
		}
		asks = append(asks, n)
	}
	for _, sr := range req.GetSchedulingRequests() {
		n, err := s.fromSchedulingRequest(sr)
		if err == nil {
			err = labelAsk(n, spec.NodeLabel, q)
		}
		if err != nil {
			return spec, nil, err
		}
		asks = append(asks, n)
	}
	return spec, asks, nil
}

// normalize checks one ask against the scheduler's limits and rounds its
// capability up to the minimum allocation and its increment, as the
// CapacityScheduler does (a 10 MB ask becomes 1024 MB).
func (s *amService) normalize(r *yarnpb.ResourceRequestProto) (*yarnpb.ResourceRequestProto, error) {
	set := s.rm.cfg.Settings
	mem, vc := yarnpb.MemoryAndVcores(r.GetCapability())
	shown := fmt.Sprintf("<memory:%d, vCores:%d>", mem, vc)
	maxShown := fmt.Sprintf("<memory:%d, vCores:%d>", set.MaxAllocationMB, set.MaxAllocationVcores)
	if r.GetNumContainers() < 0 {
		return nil, yarnerr.InvalidResourceRequest.Errorf(msgNegativeContainersFormat, r.GetNumContainers())
	}
	switch {
	case mem < 0:
		return nil, yarnerr.InvalidResourceRequest.Errorf(msgNegativeResourceFormat, "memory-mb", shown)
	case vc < 0:
		return nil, yarnerr.InvalidResourceRequest.Errorf(msgNegativeResourceFormat, "vcores", shown)
	case mem > int64(set.MaxAllocationMB):
		return nil, yarnerr.InvalidResourceRequest.Errorf(msgAboveMaximumFormat, "memory-mb", shown, maxShown, maxShown)
	case vc > int32(set.MaxAllocationVcores):
		return nil, yarnerr.InvalidResourceRequest.Errorf(msgAboveMaximumFormat, "vcores", shown, maxShown, maxShown)
	}
	for _, v := range r.GetCapability().GetResourceValueMap() {
		if !s.knownTypes[v.GetKey()] {
			return nil, yarnerr.InvalidResourceRequest.Errorf(msgUnknownResourceFormat, v.GetKey())
		}
		if v.GetValue() < 0 {
			return nil, yarnerr.InvalidResourceRequest.Errorf(msgNegativeResourceFormat, v.GetKey(), shown)
		}
	}
	if _, err := rgs.NodePartition(r.GetNodeLabelExpression()); err != nil {
		return nil, yarnerr.InvalidLabelResourceRequest.Errorf("Invalid resource request, %s", err)
	}
	out := proto.CloneOf(r)
	cap := yarnpb.NewResource(s.normalizeMemoryAndVcores(mem, vc))
	for _, v := range r.GetCapability().GetResourceValueMap() {
		if v.GetKey() != "memory-mb" && v.GetKey() != "vcores" {
			cap.ResourceValueMap = append(cap.ResourceValueMap, proto.CloneOf(v))
		}
	}
	out.Capability = cap
	return out, nil
}

// normalizeMemoryAndVcores raises memory and vcores to the minimum
// allocation, memory to a multiple of it, within the maximum memory
// (SchedulerUtils.normalizeRequest).
func (s *amService) normalizeMemoryAndVcores(mem int64, vc int32) (int64, int32) {
	set := s.rm.cfg.Settings
	minMB, minVC := int64(max(set.MinAllocationMB, 1)), int32(max(set.MinAllocationVcores, 1))
	mem = max(mem, minMB)
	mem = (mem + minMB - 1) / minMB * minMB
	return min(mem, int64(set.MaxAllocationMB)), max(vc, minVC)
}

// fromSchedulingRequest turns a SchedulingRequest into the ask RGS keeps:
// the same key fields, resource name ANY. Its placement constraint and
// tags are refused here when Kubernetes cannot express them.
func (s *amService) fromSchedulingRequest(sr *yarnpb.SchedulingRequestProto) (*yarnpb.ResourceRequestProto, error) {
	if err := rgs.CheckSchedulingRequest(sr); err != nil {
		return nil, yarnerr.InvalidResourceRequest.Errorf("Invalid scheduling request: %s", err)
	}
	r := &yarnpb.ResourceRequestProto{
		Priority:             sr.GetPriority(),
		ResourceName:         proto.String("*"),
		Capability:           sr.GetResourceSizing().GetResources(),
		NumContainers:        proto.Int32(sr.GetResourceSizing().GetNumAllocations()),
		RelaxLocality:        proto.Bool(true),
		ExecutionTypeRequest: sr.GetExecutionType(),
		AllocationRequestId:  proto.Int64(sr.GetAllocationRequestId()),
	}
	return s.normalize(r)
}

// checkReleases refuses a release of a container of another attempt or
// application (InvalidContainerReleaseException).
func checkReleases(attempt apps.AttemptID, ids []*yarnpb.ContainerIdProto) ([]apps.ContainerID, error) {
	out := make([]apps.ContainerID, 0, len(ids))
	for _, p := range ids {
		id, err := yarnid.ContainerIDFromProto(p)
		if err != nil || id.Attempt.App != attempt.App {
			return nil, yarnerr.InvalidContainerRelease.Errorf(msgReleaseNotOwnedFormat, id, attempt)
		}
		out = append(out, id)
	}
	return out, nil
}

// FinishApplicationMaster is finishApplicationMaster.
func (rm *ResourceManager) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	attempt, st, e, err := rm.amCaller(ctx)
	if err != nil {
		return nil, err
	}
	rm.am.seen(attempt)
	st.mu.Lock()
	registered := st.registered
	st.mu.Unlock()
	if !registered {
		return nil, yarnerr.ApplicationMasterNotRegistered.Errorf(msgUnregisterBeforeRegisterFormat, attempt)
	}
	err = rm.handle(ctx, e, apps.AttemptUnregistered{
		Attempt: attempt, FinalStatus: req.GetFinalApplicationStatus(),
		Diagnostics: req.GetDiagnostics(), TrackingURL: req.GetTrackingUrl(),
	})
	if err != nil {
		return nil, yarnerr.InvalidApplicationMasterRequest.Errorf("%s", err)
	}
	// The final state is stored before Handle returns, so the AM may go.
	return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
}

// seen records an AM's sign of life for its liveness monitor.
func (s *amService) seen(a apps.AttemptID) {
	s.mon.mu.Lock()
	defer s.mon.mu.Unlock()
	if w, ok := s.mon.am[a]; ok && w.monitor == apps.AMLiveness {
		w.lastSeen = s.rm.now()
		s.mon.am[a] = w
	}
}

// clusterView returns the node count and free resources, refreshed at most
// once a second.
func (s *amService) clusterView(ctx context.Context) clusterView {
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	now := s.rm.now()
	if now.Sub(s.clusterTime) < clusterViewRefresh && !s.clusterTime.IsZero() {
		return s.cluster
	}
	var v clusterView
	if s.rm.cfg.Nodes != nil {
		nodes, err := s.rm.cfg.Nodes.Nodes(ctx)
		if err != nil {
			s.rm.log.WarnContext(ctx, "cluster view", "err", err)
			return s.cluster
		}
		s.noteNodeChanges(nodes)
		for _, n := range nodes {
			if n.State != yarnpb.NodeStateProto_NS_RUNNING {
				continue
			}
			v.nodes++
			v.totalMB += n.CapabilityMB
			v.totalVCs += n.CapabilityVcores
			v.freeMB += max(n.CapabilityMB-n.UsedMB, 0)
			v.freeVC += max(n.CapabilityVcores-n.UsedVcores, 0)
		}
	}
	s.cluster, s.clusterTime = v, now
	return v
}

// noteNodeChanges compares the nodes with the last refresh and queues, for
// every attempt, a report of each node that became usable, unusable or
// decommissioning (RMAppImpl's updatedNodes): a node Kubernetes no longer
// has is LOST.
// clusterMu is held.
func (s *amService) noteNodeChanges(nodes []NodeInfo) {
	now := make(map[string]NodeInfo, len(nodes))
	for _, n := range nodes {
		now[n.Name] = n
	}
	prev := s.nodes
	s.nodes = now
	if prev == nil {
		return
	}
	var changed []*yarnpb.NodeReportProto
	for name, n := range now {
		if p, ok := prev[name]; !ok || updateType(p.State) != updateType(n.State) {
			changed = append(changed, nodeUpdate(n))
		}
	}
	for name, p := range prev {
		if _, ok := now[name]; !ok && usable(p.State) {
			p.State = yarnpb.NodeStateProto_NS_LOST
			changed = append(changed, nodeUpdate(p))
		}
	}
	if len(changed) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.attempts {
		st.qmu.Lock()
		st.updatedNodes = append(st.updatedNodes, changed...)
		st.qmu.Unlock()
	}
}

// usable is NodeState.isUnusable's opposite.
func usable(s yarnpb.NodeStateProto) bool {
	switch s {
	case yarnpb.NodeStateProto_NS_UNHEALTHY, yarnpb.NodeStateProto_NS_DECOMMISSIONED, yarnpb.NodeStateProto_NS_LOST,
		yarnpb.NodeStateProto_NS_SHUTDOWN:
		return false
	}
	return true
}

// updateType is how an AM hears of a node in a state: usable, unusable,
// or decommissioning (usable, but going).
func updateType(s yarnpb.NodeStateProto) yarnpb.NodeUpdateTypeProto {
	switch {
	case s == yarnpb.NodeStateProto_NS_DECOMMISSIONING:
		return yarnpb.NodeUpdateTypeProto_NODE_DECOMMISSIONING
	case usable(s):
		return yarnpb.NodeUpdateTypeProto_NODE_USABLE
	}
	return yarnpb.NodeUpdateTypeProto_NODE_UNUSABLE
}

// nodeUpdate is a node's report with its update type.
func nodeUpdate(n NodeInfo) *yarnpb.NodeReportProto {
	r := n.Report()
	r.NodeUpdateType = updateType(n.State).Enum()
	return r
}

// QueueMapping is the Kubernetes side of a queue, from its configuration
// and pod template, as RGS builds its pods.
func (rm *ResourceManager) QueueMapping(queue string) rgs.Mapping {
	m := rgs.Mapping{HostNetwork: true}
	if q, err := rm.queueTree().Lookup(queue); err == nil {
		m.Namespace, m.SchedulerName, m.PriorityClass = q.Kube.Namespace, q.Kube.SchedulerName, q.Kube.PriorityClass
		if m.Delegate = q.Kube.Delegate; m.Delegate != "" {
			m.DelegateQueue = q.Kube.DelegateQueue
			if m.DelegateQueue == "" {
				// YuniKorn's queues are paths as YARN's are; Volcano's and
				// Kueue's are names.
				m.DelegateQueue = q.Name
				if m.Delegate == queues.DelegateYuniKorn {
					m.DelegateQueue = q.Path
				}
			}
		}
		m.Template = (*rm.live.templates.Load())[q.Kube.PodTemplate]
	}
	return m
}

// --- effects that need the cluster ---

// execute carries out one effect on the scheduler, the AM service and the
// launcher; it returns the event to feed back, if any. Called with the
// entry's lock held.
func (s *amService) execute(ctx context.Context, e *entry, eff apps.Effect) (apps.Event, error) {
	switch x := eff.(type) {
	case apps.AddAttemptToScheduler:
		s.mu.Lock()
		if s.attempts[x.Attempt] == nil {
			s.attempts[x.Attempt] = newAMState(x.Attempt)
		}
		s.mu.Unlock()
		s.rm.cfg.LiveAttempts.add(x.Attempt)
		if x.Recovering {
			return nil, nil
		}
		return apps.AttemptAdded{Attempt: x.Attempt}, nil
	case apps.RequestAMContainer:
		if s.scheduler == nil {
			return nil, errNoScheduler
		}
		app := e.app
		spec := scheduling.AttemptSpec{
			Attempt: x.Attempt, Role: launch.RoleAM, Queue: app.Queue(), User: app.User(),
			NodeLabel:      app.NodeLabelExpression(),
			LogAggregation: app.LogAggregationContext(),
		}
		var asks []*yarnpb.ResourceRequestProto
		q, _ := s.rm.queueTree().Lookup(app.Queue())
		for _, r := range x.Requests {
			n, err := s.normalize(r)
			if err == nil {
				err = labelAsk(n, spec.NodeLabel, q)
			}
			if err != nil {
				return apps.AttemptFailed{Attempt: x.Attempt, Diagnostics: err.Error()}, err
			}
			asks = append(asks, n)
		}
		s.scheduler.Ask(spec, asks)
		return nil, nil
	case apps.IssueAMRMToken:
		s.rm.issueAMRMToken(e, x.Attempt)
		return nil, nil
	case apps.WatchAM:
		s.mon.mu.Lock()
		s.mon.am[x.Attempt] = amWatch{monitor: x.Monitor, lastSeen: s.rm.now()}
		s.mon.mu.Unlock()
		return nil, nil
	case apps.WatchAllocation:
		s.mon.mu.Lock()
		s.mon.allocations.set(x.Container, s.rm.now().Add(s.rm.cfg.Settings.ContainerAllocationExpiry))
		s.mon.mu.Unlock()
		return nil, nil
	case apps.UnwatchAllocation:
		s.mon.mu.Lock()
		s.mon.allocations.remove(x.Container)
		s.mon.mu.Unlock()
		return nil, nil
	case apps.ContainerCompleted:
		s.deliver(e, x.Status)
		return nil, nil
	case apps.StopContainer:
		if s.scheduler == nil {
			return nil, nil
		}
		s.scheduler.DeleteContainer(x.Container)
		return nil, nil
	case apps.ReleaseAttempt:
		s.mu.Lock()
		delete(s.attempts, x.Attempt)
		s.mu.Unlock()
		s.rm.cfg.LiveAttempts.remove(x.Attempt)
		s.mon.mu.Lock()
		delete(s.mon.am, x.Attempt)
		s.mon.mu.Unlock()
		if s.rm.cfg.Tokens != nil {
			s.rm.cfg.Tokens.NMTokens().ForgetAttempt(x.Attempt.Proto())
		}
		if s.scheduler != nil {
			s.scheduler.ForgetAttempt(x.Attempt)
		}
		return nil, nil
	case apps.RemoveFromScheduler:
		if s.scheduler != nil {
			s.scheduler.RemoveApplication(x.App)
		}
		return nil, nil
	}
	return nil, s.rm.launch(ctx, e.app.ID(), eff)
}

// issueAMRMToken gives an unmanaged AM's attempt the token its submitter
// reads from the application report.
func (rm *ResourceManager) issueAMRMToken(e *entry, attempt apps.AttemptID) {
	if rm.cfg.Tokens != nil {
		e.amrmToken = rm.cfg.Tokens.AMRM().Create(attempt.Proto()).Proto()
	}
}

var errNoScheduler = errors.New("no scheduler: AM containers cannot be placed")

// deliver queues a completed container's status for the application's
// current AM, which sees each once.
func (s *amService) deliver(e *entry, status *yarnpb.ContainerStatusProto) {
	t := e.app.CurrentAttempt()
	if t == nil {
		return
	}
	if st := s.state(t.ID()); st != nil {
		st.qmu.Lock()
		st.completed = append(st.completed, status)
		st.qmu.Unlock()
	}
}

// checkMonitors fires the AM liveness and allocation expiry timers that are
// due.
func (s *amService) checkMonitors(ctx context.Context) {
	now := s.rm.now()
	expiry := s.rm.cfg.Settings.AMExpiry
	if expiry <= 0 {
		expiry = 10 * time.Minute
	}
	var amDue []apps.AttemptID
	s.mon.mu.Lock()
	for a, w := range s.mon.am {
		if now.Sub(w.lastSeen) >= expiry {
			amDue = append(amDue, a)
			delete(s.mon.am, a)
		}
	}
	containersDue := s.mon.allocations.due(now)
	increasesDue := map[apps.ContainerID]increaseWatch{}
	for c, w := range s.mon.increases {
		if !now.Before(w.deadline) {
			increasesDue[c] = w
			delete(s.mon.increases, c)
		}
	}
	s.mon.mu.Unlock()
	for c, w := range increasesDue {
		s.rollBack(ctx, c, w)
	}
	for _, a := range amDue {
		s.rm.log.InfoContext(ctx, "AM expired", "attempt", a.String())
		if err := s.rm.Handle(ctx, a.App, apps.AttemptExpired{Attempt: a}); err != nil {
			s.rm.log.WarnContext(ctx, "AM expiry", "attempt", a.String(), "err", err)
		}
	}
	for _, c := range containersDue {
		s.rm.log.InfoContext(ctx, "allocated container not started in time", "container", c.String())
		if err := s.rm.Handle(ctx, c.Attempt.App, apps.ContainerExpired{Container: c}); err != nil {
			s.rm.log.WarnContext(ctx, "allocation expiry", "container", c.String(), "err", err)
		}
	}
}

// --- what RGS reports (scheduling.Sink) ---

// schedulerSink receives RGS's reports for the ResourceManager.
type schedulerSink struct{ rm *ResourceManager }

// SchedulerSink is where the Scheduler (RGS) reports allocated, completed
// and preempted containers.
func (rm *ResourceManager) SchedulerSink() scheduling.Sink { return schedulerSink{rm} }

// Allocated implements scheduling.Sink.
func (k schedulerSink) Allocated(ctx context.Context, a scheduling.Allocation) error {
	rm := k.rm
	id, err := yarnid.ContainerIDFromProto(a.Container.GetId())
	if err != nil {
		return err
	}
	e := rm.lookup(id.Attempt.App)
	if e == nil {
		return fmt.Errorf("allocated %s: %w", id, errUnknownApp)
	}
	if a.Role == launch.RoleAM {
		// Traced first: handling the allocation starts the AM's launch,
		// whose event must come after the pod's in the AM container's span.
		rm.traceAllocated(ctx, e, a)
		return rm.handle(ctx, e, apps.AMContainerAllocated{Attempt: id.Attempt, Container: a.Container, Partition: a.Partition})
	}
	st := rm.am.state(id.Attempt)
	if st == nil {
		return fmt.Errorf("allocated %s: attempt %s is over", id, id.Attempt)
	}
	if err := rm.handle(ctx, e, apps.ContainerAllocated{Container: a.Container, Partition: a.Partition}); err != nil {
		return err
	}
	rm.traceAllocated(ctx, e, a)
	st.qmu.Lock()
	st.allocated = append(st.allocated, a.Container)
	st.qmu.Unlock()
	return nil
}

// traceAllocated tells the tracer of a container the application took.
func (rm *ResourceManager) traceAllocated(ctx context.Context, e *entry, a scheduling.Allocation) {
	if rm.cfg.Tracer == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rm.cfg.Tracer.Allocated(ctx, e.app, a)
}

// Completed implements scheduling.Sink.
func (k schedulerSink) Completed(ctx context.Context, c scheduling.Completion) {
	rm := k.rm
	e := rm.lookup(c.Container.Attempt.App)
	if e == nil {
		return
	}
	var ev apps.Event = apps.ContainerFinished{Container: c.Container, ExitStatus: c.ExitStatus, Diagnostics: c.Diagnostics}
	if c.Preempted || c.Vanished {
		ev = apps.ContainerKilled{Container: c.Container, ExitStatus: c.ExitStatus, Diagnostics: c.Diagnostics}
	}
	if err := rm.handle(ctx, e, ev); err != nil {
		// A container that ended before the AM took it: YARN's scheduler
		// reports it as killed.
		kill := apps.ContainerKilled{Container: c.Container, ExitStatus: c.ExitStatus, Diagnostics: c.Diagnostics}
		if err2 := rm.handle(ctx, e, kill); err2 != nil {
			rm.log.InfoContext(ctx, "container end not taken", "container", c.Container.String(), "err", err)
		}
	}
}

// currentAMState is the AM service's state of an application's current
// attempt, which holds every container the application keeps; nil when
// there is none.
func (rm *ResourceManager) currentAMState(app yarnid.ApplicationID) *amState {
	e := rm.lookup(app)
	if e == nil {
		return nil
	}
	e.mu.Lock()
	t := e.app.CurrentAttempt()
	e.mu.Unlock()
	if t == nil {
		return nil
	}
	return rm.am.state(t.ID())
}

// Preempting implements scheduling.Sink.
func (k schedulerSink) Preempting(_ context.Context, p scheduling.Preemption) {
	if st := k.rm.currentAMState(p.Container.Attempt.App); st != nil {
		st.qmu.Lock()
		st.preempting = append(st.preempting, p)
		st.qmu.Unlock()
	}
}

// preemptionMessage is the PreemptionMessage of an allocate answer, as
// ApplicationMasterService.generatePreemptionMessage builds it: the
// containers Kubernetes takes in the strict contract; those the queues take
// in the negotiable one, with the resource to give back as
// FiCaSchedulerApp.getAllocation asks it (priority UNDEFINED, "*", the
// minimum allocation times as many as cover their total).
func (rm *ResourceManager) preemptionMessage(ps []scheduling.Preemption) *yarnpb.PreemptionMessageProto {
	msg := &yarnpb.PreemptionMessageProto{}
	var totalMB int64
	for _, p := range ps {
		c := &yarnpb.PreemptionContainerProto{Id: p.Container.Proto()}
		if p.Strict {
			if msg.StrictContract == nil {
				msg.StrictContract = &yarnpb.StrictPreemptionContractProto{}
			}
			msg.StrictContract.Container = append(msg.StrictContract.Container, c)
			continue
		}
		if msg.Contract == nil {
			msg.Contract = &yarnpb.PreemptionContractProto{}
		}
		msg.Contract.Container = append(msg.Contract.Container, c)
		mem, _ := yarnpb.MemoryAndVcores(p.Resource)
		totalMB += mem
	}
	if msg.Contract != nil {
		// Counted in memory, as the DefaultResourceCalculator divides.
		minMB, minVcores := int64(rm.cfg.Settings.MinAllocationMB), int64(rm.cfg.Settings.MinAllocationVcores)
		n := ceilDiv(totalMB, minMB)
		msg.Contract.Resource = []*yarnpb.PreemptionResourceRequestProto{{Resource: &yarnpb.ResourceRequestProto{
			Priority:      &yarnpb.PriorityProto{Priority: proto.Int32(-1)},
			ResourceName:  proto.String("*"),
			Capability:    yarnpb.NewResource(minMB, int32(minVcores)),
			NumContainers: proto.Int32(int32(n)),
		}}}
	}
	return msg
}

// ceilDiv is a/b rounded up; 0 when b is not positive.
func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// Recovered rebuilds the containers RGS found running after a restart.
func (rm *ResourceManager) Recovered(ctx context.Context, running []scheduling.Allocation) {
	for _, a := range running {
		id, err := yarnid.ContainerIDFromProto(a.Container.GetId())
		if err != nil {
			continue
		}
		e := rm.lookup(id.Attempt.App)
		if e == nil {
			continue
		}
		created := a.Created
		if err := rm.handle(ctx, e, apps.ContainerRecovered{Container: a.Container, Created: created, Running: true, Partition: a.Partition}); err != nil {
			rm.log.InfoContext(ctx, "container not recovered", "container", id.String(), "err", err)
		}
	}
}
