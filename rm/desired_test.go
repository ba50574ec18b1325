package rm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// TestTheRMHoldsWhatRGSMustKeepAndNothingElse: RGS collects the pods of
// what these answers do not hold (rgs.Desired), so a live application's
// allocated containers and running attempt are held, an ended container
// and everything of an ended application are not, and an application the
// RM does not hold is unknown rather than ended.
func TestTheRMHoldsWhatRGSMustKeepAndNothingElse(t *testing.T) {
	e := newEnv(t, envOptions{scheduler: &recordingScheduler{}})
	attempt, _ := unmanagedAM(t, e)
	container := func(seq int64) yarnid.ContainerID {
		id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: seq}
		ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
			Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
		if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	live, done := container(2), container(3)
	e.rm.SchedulerSink().Completed(t.Context(), scheduling.Completion{Container: done, ExitStatus: 0})
	never := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 9}
	unknown := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 99}

	type answer struct{ ended, known, attemptLive, liveHeld, doneHeld, neverHeld bool }
	ask := func() answer {
		ended, known := e.rm.ApplicationEnded(attempt.App)
		return answer{ended, known, e.rm.AttemptLive(attempt), e.rm.ContainerLive(live), e.rm.ContainerLive(done), e.rm.ContainerLive(never)}
	}
	if got, want := ask(), (answer{known: true, attemptLive: true, liveHeld: true}); got != want {
		t.Errorf("running application: %+v, want %+v", got, want)
	}
	if ended, known := e.rm.ApplicationEnded(unknown); ended || known {
		t.Errorf("an application the RM does not hold: ended %v, known %v; want unknown", ended, known)
	}
	c := e.client("alice")
	kill := &yarnpb.KillApplicationRequestProto{ApplicationId: attempt.App.Proto()}
	for range 2 {
		mustCall(t, c, "forceKillApplication", kill, &yarnpb.KillApplicationResponseProto{})
	}
	if got, want := ask(), (answer{ended: true, known: true}); got != want {
		t.Errorf("killed application: %+v, want %+v", got, want)
	}
}
