package rm

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rm/apps"
)

// recordingScheduler is a Scheduler that only records what it is told.
type recordingScheduler struct {
	mu        sync.Mutex
	asks      []*yarnpb.ResourceRequestProto
	forgotten []yarnid.AttemptID
	deleted   []yarnid.ContainerID
}

func (s *recordingScheduler) Ask(_ rgs.AttemptSpec, asks []*yarnpb.ResourceRequestProto) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks = append(s.asks, asks...)
}
func (s *recordingScheduler) Blacklist(rgs.AttemptSpec, []string, []string) {}
func (s *recordingScheduler) ForgetAttempt(_ context.Context, a yarnid.AttemptID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, a)
	return nil
}
func (s *recordingScheduler) DeleteContainer(_ context.Context, id yarnid.ContainerID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, id)
	return nil
}
func (s *recordingScheduler) RemoveApplication(context.Context, yarnid.ApplicationID) error {
	return nil
}

// unmanagedAM submits an unmanaged application and registers its AM,
// returning the AM's context (its AMRMToken identity).
func unmanagedAM(t *testing.T, e *env) (apps.AttemptID, context.Context) {
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
	if _, err := e.rm.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am"), RpcPort: proto.Int32(-1)}); err != nil {
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
	wantRemote(t, err, ClassApplicationAttemptNotFound, "Application attempt "+attempt.String()+" doesn't exist in ApplicationMasterService cache.")
}

func TestAContainerNotStartedInTimeIsTakenBackAndReportedOnce(t *testing.T) {
	sched := &recordingScheduler{}
	e := newEnv(t, envOptions{scheduler: sched})
	attempt, ctx := unmanagedAM(t, e)
	id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), rgs.Allocation{Role: rgs.RoleTask, Container: ctr}); err != nil {
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
