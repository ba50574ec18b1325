package rm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/rgs/nodes"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/scheduling"
)

// recordingScheduler is a Scheduler that only records what it is told.
type recordingScheduler struct {
	mu        sync.Mutex
	asks      []*yarnpb.ResourceRequestProto
	forgotten []yarnid.AttemptID
	deleted   []yarnid.ContainerID
	// current are the running containers updates are checked against;
	// updates are the updates carried out.
	current map[yarnid.ContainerID]scheduling.Current
	updates []scheduling.Update
	// failUpdates fail as many updates, after recording them, as an API
	// server's error would.
	failUpdates int
}

func (s *recordingScheduler) Ask(_ scheduling.AttemptSpec, asks []*yarnpb.ResourceRequestProto) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks = append(s.asks, asks...)
}
func (s *recordingScheduler) Blacklist(scheduling.AttemptSpec, []string, []string) {}
func (s *recordingScheduler) ForgetAttempt(a yarnid.AttemptID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, a)
}
func (s *recordingScheduler) DeleteContainer(id yarnid.ContainerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, id)
}
func (s *recordingScheduler) RemoveApplication(yarnid.ApplicationID) {}
func (s *recordingScheduler) CurrentContainer(id yarnid.ContainerID) (scheduling.Current, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.current[id]
	return c, ok
}

// UpdateContainer grants at once what is not an increase: the container at
// the next version, with the new size or execution type.
func (s *recordingScheduler) UpdateContainer(_ context.Context, u scheduling.Update) (*yarnpb.ContainerProto, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, u)
	if s.failUpdates > 0 {
		s.failUpdates--
		return nil, errors.New("the API server is unavailable")
	}
	cur := s.current[u.Container]
	if u.Type == yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE {
		cur.Increasing = true
		s.current[u.Container] = cur
		return nil, nil
	}
	cur.Version++
	c := &yarnpb.ContainerProto{Id: u.Container.Proto(), Version: proto.Int32(cur.Version), Resource: cur.Resource, ExecutionType: cur.ExecutionType.Enum()}
	if u.Capability != nil {
		c.Resource = u.Capability
	}
	if u.Type == yarnpb.ContainerUpdateTypeProto_PROMOTE_EXECUTION_TYPE || u.Type == yarnpb.ContainerUpdateTypeProto_DEMOTE_EXECUTION_TYPE {
		c.ExecutionType = u.ExecutionType.Enum()
	}
	s.current[u.Container] = cur
	return c, nil
}

// unmanagedAM submits an unmanaged application and registers its AM (with
// the tracking URL, if one is given), returning the AM's context (its
// AMRMToken identity).
func unmanagedAM(t *testing.T, e *env, trackingURL ...string) (apps.AttemptID, context.Context) {
	t.Helper()
	c := e.client("alice")
	newApp := mustCall(t, c, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	mustCall(t, c, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: newApp.ApplicationId, Queue: proto.String("default"), UnmanagedAm: proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}, &yarnpb.SubmitApplicationResponseProto{})
	attempt := apps.AttemptID{App: appIDOf(t, newApp.ApplicationId), ID: 1}
	ctx := ipc.WithCaller(t.Context(), ipc.Caller{
		User: attempt.String(), Auth: ipc.AuthToken,
		TokenIdentity: &yarnpb.AMRMTokenIdentifierProto{AppAttemptId: attempt.Proto(), KeyId: proto.Int32(1)},
	})
	reg := &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am"), RpcPort: proto.Int32(-1)}
	if len(trackingURL) > 0 {
		reg.TrackingUrl = proto.String(trackingURL[0])
	}
	if _, err := e.rm.RegisterApplicationMaster(ctx, reg); err != nil {
		t.Fatal(err)
	}
	return attempt, ctx
}

func TestAMSilentPastTheLivenessExpiryFailsItsAttempt(t *testing.T) {
	sched := &recordingScheduler{}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	e.clock.Add(e.cfg.Settings.AMExpiry / 2)
	if _, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(e.cfg.Settings.AMExpiry / 2)
	e.rm.am.checkMonitors(t.Context()) // a heartbeat half-way kept it alive
	if st := e.rm.lookup(attempt.App).app.Attempt(attempt).State(); st != apps.AttemptStateRunning {
		t.Fatalf("attempt %s after a heartbeat within the expiry, want RUNNING", st)
	}
	e.clock.Add(e.cfg.Settings.AMExpiry + time.Second)
	e.rm.am.checkMonitors(t.Context())
	if st := e.rm.lookup(attempt.App).app.Attempt(attempt).State(); st != apps.AttemptStateFailed {
		t.Fatalf("attempt %s after the expiry, want FAILED", st)
	}
	if len(sched.forgotten) == 0 || sched.forgotten[0] != attempt {
		t.Errorf("scheduler not told to forget %s: %v", attempt, sched.forgotten)
	}
	_, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(1)})
	wantRemote(t, err, yarnerr.ApplicationAttemptNotFound, "Application attempt "+attempt.String()+" doesn't exist in ApplicationMasterService cache.")
}

func TestAContainerNotStartedInTimeIsTakenBackAndReportedOnce(t *testing.T) {
	sched := &recordingScheduler{}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)})
	if err != nil || len(resp.GetAllocatedContainers()) != 1 {
		t.Fatalf("allocate: %v, %d containers", err, len(resp.GetAllocatedContainers()))
	}
	e.clock.Add(e.cfg.Settings.ContainerAllocationExpiry + time.Second)
	// The AM keeps heartbeating, so only the container expires.
	e.rm.am.seen(attempt)
	e.rm.am.checkMonitors(t.Context())
	resp, err = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	done := resp.GetCompletedContainerStatuses()
	if len(done) != 1 || done[0].GetExitStatus() != apps.ExitAborted || !proto.Equal(done[0].GetContainerId(), id.Proto()) {
		t.Fatalf("completed %v, want %s aborted", done, id)
	}
	if len(sched.deleted) != 1 || sched.deleted[0] != id {
		t.Errorf("pods deleted %v, want %s's", sched.deleted, id)
	}
	resp, _ = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(2)})
	if len(resp.GetCompletedContainerStatuses()) != 0 {
		t.Errorf("completed status repeated: %v", resp.GetCompletedContainerStatuses())
	}
}

// TestUpdateRequestsAreCheckedAsYARNChecksThem: every bad request becomes an
// UpdateContainerError and the allocate still succeeds; a decrease and a
// promotion come back at once at the next version; an increase waits for
// the node and comes back in a later allocate.
func TestUpdateRequestsAreCheckedAsYARNChecksThem(t *testing.T) {
	sched := &recordingScheduler{current: map[yarnid.ContainerID]scheduling.Current{}}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	ctrs := map[string]yarnid.ContainerID{}
	for i, name := range []string{"shrink", "grow", "promote", "stale", "twice", "huge"} {
		id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: int64(i + 2)}
		ctrs[name] = id
		sched.current[id] = scheduling.Current{Version: 0, Resource: yarnpb.NewResource(2048, 2), ExecutionType: yarnpb.ExecutionTypeProto_OPPORTUNISTIC}
		ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
			Resource: yarnpb.NewResource(2048, 2), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
		if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
			t.Fatal(err)
		}
	}
	resize := func(name string, version int32, typ yarnpb.ContainerUpdateTypeProto, mb int64, vc int32) *yarnpb.UpdateContainerRequestProto {
		return &yarnpb.UpdateContainerRequestProto{ContainerId: ctrs[name].Proto(), ContainerVersion: proto.Int32(version),
			UpdateType: typ.Enum(), Capability: yarnpb.NewResource(mb, vc)}
	}
	other := yarnid.ContainerID{Attempt: apps.AttemptID{App: apps.ApplicationID{ClusterTimestamp: 1, ID: 99}, ID: 1}, Epoch: 1, Sequence: 2}
	reqs := []*yarnpb.UpdateContainerRequestProto{
		resize("shrink", 0, yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE, 1000, 1),
		resize("grow", 0, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 4096, 2),
		{ContainerId: ctrs["promote"].Proto(), ContainerVersion: proto.Int32(0), UpdateType: yarnpb.ContainerUpdateTypeProto_PROMOTE_EXECUTION_TYPE.Enum(),
			ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum()},
		resize("stale", 3, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 4096, 2),
		resize("twice", 0, yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE, 1024, 1),
		resize("twice", 0, yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE, 1024, 1),
		resize("huge", 0, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 1<<20, 2),
		{ContainerId: other.Proto(), ContainerVersion: proto.Int32(0), UpdateType: yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE.Enum(), Capability: yarnpb.NewResource(4096, 2)},
	}
	resp, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0), UpdateRequests: reqs})
	if err != nil {
		t.Fatalf("allocate with bad update requests failed: %v", err)
	}
	type gotError struct {
		container yarnid.ContainerID
		reason    string
		version   int32
		set       bool
	}
	var errs []gotError
	for _, ue := range resp.GetUpdateErrors() {
		id, _ := yarnid.ContainerIDFromProto(ue.GetUpdateRequest().GetContainerId())
		errs = append(errs, gotError{id, ue.GetReason(), ue.GetCurrentContainerVersion(), ue.CurrentContainerVersion != nil})
	}
	wantErrs := []gotError{
		{ctrs["stale"], "INCORRECT_CONTAINER_VERSION_ERROR", 0, true},
		{ctrs["twice"], "UPDATE_OUTSTANDING_ERROR", 0, true},
		{ctrs["huge"], "RESOURCE_OUTSIDE_ALLOWED_RANGE", 0, true},
		{other, "INVALID_CONTAINER_ID", -1, true},
	}
	if !slices.Equal(errs, wantErrs) {
		t.Errorf("update errors\n got %+v\nwant %+v", errs, wantErrs)
	}
	var updated []string
	for _, u := range resp.GetUpdatedContainers() {
		c := u.GetContainer()
		id, _ := yarnid.ContainerIDFromProto(c.GetId())
		updated = append(updated, fmt.Sprintf("%s %v v%d %dMB/%d %v", u.GetUpdateType(), id, c.GetVersion(),
			c.GetResource().GetMemory(), c.GetResource().GetVirtualCores(), c.GetExecutionType()))
	}
	wantUpdated := []string{
		fmt.Sprintf("DECREASE_RESOURCE %v v1 1024MB/1 OPPORTUNISTIC", ctrs["shrink"]),
		fmt.Sprintf("PROMOTE_EXECUTION_TYPE %v v1 2048MB/2 GUARANTEED", ctrs["promote"]),
		fmt.Sprintf("DECREASE_RESOURCE %v v1 1024MB/1 OPPORTUNISTIC", ctrs["twice"]),
	}
	if !slices.Equal(updated, wantUpdated) {
		t.Errorf("updated containers\n got %q\nwant %q", updated, wantUpdated)
	}
	if mb, _ := e.rm.lookup(attempt.App).app.Container(ctrs["shrink"]).Resource(); mb != 1024 {
		t.Errorf("the RM's record of the decreased container holds %d MB, want 1024", mb)
	}

	// The increase is outstanding: asking again is refused by the scheduler,
	// without a version.
	resp, err = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(1),
		UpdateRequests: []*yarnpb.UpdateContainerRequestProto{resize("grow", 0, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 8192, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if ue := resp.GetUpdateErrors(); len(ue) != 1 || ue[0].GetReason() != "UPDATE_OUTSTANDING_ERROR" || ue[0].CurrentContainerVersion != nil {
		t.Errorf("second increase while one is outstanding: %v", ue)
	}
	grown := &yarnpb.ContainerProto{Id: ctrs["grow"].Proto(), Version: proto.Int32(1), Resource: yarnpb.NewResource(4096, 2),
		NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)}}
	e.rm.SchedulerSink().Updated(t.Context(), scheduling.UpdateResult{Container: ctrs["grow"], Updated: grown})
	resp, err = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if u := resp.GetUpdatedContainers(); len(u) != 1 || u[0].GetUpdateType() != yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE || u[0].GetContainer().GetVersion() != 1 {
		t.Errorf("increase answered with %v", u)
	}
	if mb, _ := e.rm.lookup(attempt.App).app.Container(ctrs["grow"]).Resource(); mb != 4096 {
		t.Errorf("the RM's record of the increased container holds %d MB, want 4096", mb)
	}
}

// usage is memory and vcores held.
type usage struct {
	mb int64
	vc int32
}

// TestHeadroomIsTheLeastOfClusterQueueAndUserRoom checks the
// CapacityScheduler's headroom with queue b at 50% capacity (5000 MB),
// 100% maximum, of a 10,000 MB / 10 vcore cluster, a minimum allocation
// of 1024 MB: the user limit as UsersManager.computeUserLimit reckons it
// (rounded up to the minimum allocation), its room and the queue's
// rounded down to it, then the cluster's free room.
func TestHeadroomIsTheLeastOfClusterQueueAndUserRoom(t *testing.T) {
	queueB := func(extra map[string]string) map[string]string {
		props := map[string]string{"yarn.scheduler.capacity.root.b.maximum-capacity": "100"}
		maps.Copy(props, extra)
		return baseQueues(props)
	}
	// view is the cluster's room and the unfinished applications of b's
	// users, one each holding what it says.
	type view struct {
		freeMB int64
		users  map[string]usage
	}
	tests := []struct {
		name   string
		queues map[string]string
		view   view
		user   string
		wantMB int64
	}{
		// max((0 + 1024) / 1, 5000 * 100%) = 5000, up to 5120.
		{"an idle queue: the user limit is the queue's capacity", queueB(nil), view{10000, nil}, "alice", 5120},
		{"the cluster's free room is less", queueB(nil), view{2000, nil}, "alice", 2000},
		// 5120 less alice's 3000 is 2120, down to 2048.
		{"what the user holds counts against it", queueB(nil), view{10000, map[string]usage{"alice": {3000, 3}}}, "alice", 2048},
		// Two active users: max((1000 + 1024) / 2, 5000) = 5000, up to 5120.
		{"minimum-user-limit-percent 100, the default, shares nothing", queueB(nil), view{10000, map[string]usage{"bob": {1000, 1}}}, "alice", 5120},
		// max(1012, 5000 * 25% = 1250), up to 2048.
		{"a second user shares the capacity", queueB(map[string]string{"yarn.scheduler.capacity.root.b.minimum-user-limit-percent": "25"}),
			view{10000, map[string]usage{"bob": {1000, 1}}}, "alice", 2048},
		// The factor caps the limit at twice the capacity; an idle queue's
		// limit is its capacity, 5000, up to 5120: it grows with the
		// queue's use, not at once.
		{"the user limit factor bounds it, it does not multiply it", queueB(map[string]string{"yarn.scheduler.capacity.root.b.user-limit-factor": "2"}),
			view{10000, nil}, "alice", 5120},
		// bob's 6000 put the queue over its capacity: the current capacity
		// is 6144 + 1024 = 7168, the limit max(3512, 7168) within the
		// maximum (9216); the queue's room, 4000, binds, down to 3072.
		{"a factor of -1 leaves the queue's maximum", queueB(map[string]string{"yarn.scheduler.capacity.root.b.user-limit-factor": "-1"}),
			view{10000, map[string]usage{"bob": {6000, 1}}}, "alice", 3072},
		// Three active users: max((2000 + 1024) / 3, 5000 * 50% = 2500), up
		// to 3072.
		{"minimum-user-limit-percent keeps a share", queueB(map[string]string{"yarn.scheduler.capacity.root.b.minimum-user-limit-percent": "50"}),
			view{10000, map[string]usage{"bob": {1000, 1}, "carol": {1000, 1}}}, "alice", 3072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{queues: tt.queues})
			for user, u := range tt.view.users {
				e.rm.usage.apply(appUse{queue: "root.b", user: user, state: yarnpb.YarnApplicationStateProto_RUNNING, unfinished: true,
					live: apps.Holding{Containers: 1, MemoryMB: u.mb, VCores: u.vc}}, 1)
			}
			v := clusterView{totalMB: 10000, totalVCs: 10, freeMB: tt.view.freeMB, freeVC: 10}
			if got, _ := e.rm.am.headroom(v, "root.b", tt.user); got != tt.wantMB {
				t.Errorf("headroom = %d MB, want %d", got, tt.wantMB)
			}
		})
	}
}

// changingNodes is a NodeLister whose nodes a test changes.
type changingNodes struct {
	mu    sync.Mutex
	nodes []NodeInfo
}

func (c *changingNodes) Nodes(context.Context) ([]NodeInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes), nil
}

func (c *changingNodes) Census(context.Context) (NodeCensus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return nodes.CensusOf(c.nodes), nil
}

func (c *changingNodes) set(nodes ...NodeInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = nodes
}

func TestAllocateReportsNodesThatBecameUsableUnusableOrDecommissioning(t *testing.T) {
	node := func(name string, state yarnpb.NodeStateProto) NodeInfo {
		return NodeInfo{Name: name, Host: name, NMPort: 8041, HTTPAddress: name + ":8042", Rack: "/default-rack",
			State: state, CapabilityMB: 8192, CapabilityVcores: 8}
	}
	running, unhealthy := yarnpb.NodeStateProto_NS_RUNNING, yarnpb.NodeStateProto_NS_UNHEALTHY
	nodes := &changingNodes{}
	nodes.set(node("a", running), node("b", running), node("c", running))
	e := newEnv(t, envOptions{nodes: nodes, scheduler: &recordingScheduler{}})
	_, ctx := unmanagedAM(t, e)
	responseID := int32(0)
	heartbeat := func() []string {
		t.Helper()
		resp, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(responseID)})
		if err != nil {
			t.Fatal(err)
		}
		responseID = resp.GetResponseId()
		var got []string
		for _, r := range resp.GetUpdatedNodes() {
			got = append(got, fmt.Sprintf("%s %s %s", r.GetNodeId().GetHost(), r.GetNodeState(), r.GetNodeUpdateType()))
		}
		slices.Sort(got)
		return got
	}
	steps := []struct {
		name  string
		nodes []NodeInfo
		want  []string
	}{
		{"the first view reports nothing", []NodeInfo{node("a", running), node("b", running), node("c", running)}, nil},
		{"a node turns unhealthy and another goes", []NodeInfo{node("a", unhealthy), node("b", running)},
			[]string{"a NS_UNHEALTHY NODE_UNUSABLE", "c NS_LOST NODE_UNUSABLE"}},
		{"nothing changed", []NodeInfo{node("a", unhealthy), node("b", running)}, nil},
		{"a node heals, one decommissions and one joins", []NodeInfo{node("a", running), node("b", yarnpb.NodeStateProto_NS_DECOMMISSIONING), node("d", running)},
			[]string{"a NS_RUNNING NODE_USABLE", "b NS_DECOMMISSIONING NODE_DECOMMISSIONING", "d NS_RUNNING NODE_USABLE"}},
	}
	for _, s := range steps {
		nodes.set(s.nodes...)
		e.clock.Add(2 * clusterViewRefresh)
		if got := heartbeat(); !slices.Equal(got, s.want) {
			t.Errorf("%s: updated nodes %q, want %q", s.name, got, s.want)
		}
	}
}

// TestAnIncreaseNotBroughtToTheNodeInTimeIsRolledBack: YARN's RM decreases
// an increased container back when the AM does not call updateContainer
// within the allocation expiry; one the AM did bring stays.
func TestAnIncreaseNotBroughtToTheNodeInTimeIsRolledBack(t *testing.T) {
	sched := &recordingScheduler{current: map[yarnid.ContainerID]scheduling.Current{}}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	forgotten := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	confirmed := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 3}
	for _, id := range []yarnid.ContainerID{forgotten, confirmed} {
		growOnNode(t, e, sched, id)
	}
	resp, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)})
	if err != nil || len(resp.GetUpdatedContainers()) != 2 {
		t.Fatalf("allocate: %v, %d updated containers", err, len(resp.GetUpdatedContainers()))
	}
	e.rm.ContainerUpdated(t.Context(), confirmed, 1)
	e.clock.Add(e.cfg.Settings.ContainerAllocationExpiry + time.Second)
	e.rm.am.seen(attempt)
	e.rm.am.checkMonitors(t.Context())
	if len(sched.updates) != 1 || sched.updates[0].Container != forgotten ||
		sched.updates[0].Type != yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE || sched.updates[0].Capability.GetMemory() != 1024 {
		t.Fatalf("scheduler updates %+v, want one decrease of %s back to 1024 MB", sched.updates, forgotten)
	}
	resp, err = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	u := resp.GetUpdatedContainers()
	if len(u) != 1 || u[0].GetUpdateType() != yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE || u[0].GetContainer().GetResource().GetMemory() != 1024 {
		t.Errorf("the AM heard %v, want the roll back as a DECREASE to 1024 MB", u)
	}
}

// TestARollBackThatFailsIsTriedAgainAtTheMonitorsNextRound: RGS tries a
// write once, so the roll back's watch stays until the decrease holds.
func TestARollBackThatFailsIsTriedAgainAtTheMonitorsNextRound(t *testing.T) {
	sched := &recordingScheduler{current: map[yarnid.ContainerID]scheduling.Current{}, failUpdates: 1}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	growOnNode(t, e, sched, id)
	if _, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(e.cfg.Settings.ContainerAllocationExpiry + time.Second)
	for round, want := range []int{1, 2, 2} {
		e.rm.am.seen(attempt)
		e.rm.am.checkMonitors(t.Context())
		if len(sched.updates) != want {
			t.Fatalf("round %d: %d decreases tried, want %d", round, len(sched.updates), want)
		}
	}
}

// TestPreemptionReachesTheAMAsTheCapacitySchedulerSendsIt: a container the
// queues take back is offered in the negotiable contract with the resource
// to give back; one Kubernetes evicts is in the strict contract.
func TestPreemptionReachesTheAMAsTheCapacitySchedulerSendsIt(t *testing.T) {
	e := newEnv(t, envOptions{scheduler: &recordingScheduler{}})
	attempt, ctx := unmanagedAM(t, e)
	queues := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	evicted := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 3}
	sink := e.rm.SchedulerSink()
	sink.Preempting(t.Context(), scheduling.Preemption{Container: queues, Resource: yarnpb.NewResource(2048, 1)})
	sink.Preempting(t.Context(), scheduling.Preemption{Container: evicted, Strict: true, Resource: yarnpb.NewResource(1024, 1)})
	resp, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)})
	if err != nil {
		t.Fatal(err)
	}
	want := &yarnpb.PreemptionMessageProto{
		StrictContract: &yarnpb.StrictPreemptionContractProto{Container: []*yarnpb.PreemptionContainerProto{{Id: evicted.Proto()}}},
		Contract: &yarnpb.PreemptionContractProto{
			Container: []*yarnpb.PreemptionContainerProto{{Id: queues.Proto()}},
			Resource: []*yarnpb.PreemptionResourceRequestProto{{Resource: &yarnpb.ResourceRequestProto{
				Priority: &yarnpb.PriorityProto{Priority: proto.Int32(-1)}, ResourceName: proto.String("*"),
				Capability: yarnpb.NewResource(1024, 1), NumContainers: proto.Int32(2),
			}}},
		},
	}
	if !proto.Equal(resp.GetPreempt(), want) {
		t.Errorf("preemption message\n%v\nwant\n%v", resp.GetPreempt(), want)
	}
	resp, _ = e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(1)})
	if resp.GetPreempt() != nil {
		t.Errorf("the message came twice: %v", resp.GetPreempt())
	}
}

// growOnNode allocates container id at 1024 MB on node1, then has the
// node take an increase: the container is at version 1, 2048 MB.
func growOnNode(t *testing.T, e *env, sched *recordingScheduler, id yarnid.ContainerID) {
	t.Helper()
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	sched.current[id] = scheduling.Current{Version: 1, Resource: yarnpb.NewResource(2048, 1)}
	grown := proto.CloneOf(ctr)
	grown.Version, grown.Resource = proto.Int32(1), yarnpb.NewResource(2048, 1)
	e.rm.SchedulerSink().Updated(t.Context(), scheduling.UpdateResult{Container: id, Updated: grown})
}

func TestAnUnchangedHeadroomSharesTheLastAnswersLimit(t *testing.T) {
	prev := yarnpb.NewResource(4096, 4)
	tests := []struct {
		name      string
		prev      *yarnpb.ResourceProto
		mem       int64
		vc        int32
		wantShare bool
	}{
		{"the same headroom", prev, 4096, 4, true},
		{"more memory", prev, 8192, 4, false},
		{"fewer vcores", prev, 4096, 3, false},
		{"no last answer", nil, 4096, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := limitProto(tt.prev, tt.mem, tt.vc)
			if shared := got == tt.prev; shared != tt.wantShare {
				t.Errorf("shared the last limit: %v, want %v", shared, tt.wantShare)
			}
			if !proto.Equal(got, yarnpb.NewResource(tt.mem, tt.vc)) {
				t.Errorf("limit %v, want <memory:%d, vCores:%d>", got, tt.mem, tt.vc)
			}
		})
	}
}
