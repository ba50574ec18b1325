package rm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

func TestMetricsSnapshotHoldsTheApplicationsAndQueues(t *testing.T) {
	e := newEnv(t, envOptions{})
	unmanagedAM(t, e)
	s, err := e.rm.MetricsSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sums) != 1 || s.Sums[0].Queue != "root.default" || s.Sums[0].User != "alice" ||
		s.Sums[0].States[yarnpb.YarnApplicationStateProto_RUNNING] != 1 || s.Sums[0].Unmanaged[yarnpb.YarnApplicationStateProto_RUNNING] != 1 {
		t.Errorf("applications %+v", s.Sums)
	}
	paths := map[string]bool{}
	for _, q := range s.Queues {
		paths[q.Path] = true
	}
	if !paths["root"] || !paths["root.default"] {
		t.Errorf("queues %+v", s.Queues)
	}
}

func TestApplicationOwnerIsTheQueueAndUser(t *testing.T) {
	e := newEnv(t, envOptions{})
	attempt, _ := unmanagedAM(t, e)
	if q, u, ok := e.rm.ApplicationOwner(t.Context(), attempt.App); !ok || q != "root.default" || u != "alice" {
		t.Errorf("owner %q %q %v", q, u, ok)
	}
	if _, _, ok := e.rm.ApplicationOwner(t.Context(), yarnid.ApplicationID{ClusterTimestamp: 1, ID: 9}); ok {
		t.Error("an unknown application has an owner")
	}
}

func TestMetricsSnapshotCountsLiveContainersOnly(t *testing.T) {
	e := newEnv(t, envOptions{scheduler: &recordingScheduler{}})
	attempt, _ := unmanagedAM(t, e)
	waiting := e.mustSubmit(e.client("bob"), subOpts{})
	for seq := int64(2); seq <= 3; seq++ {
		id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: seq}
		ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
			Resource: yarnpb.NewResource(2048, 2), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
		if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.rm.MetricsSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sums) != 2 {
		t.Fatalf("applications %+v", s.Sums)
	}
	for _, a := range s.Sums {
		switch a.User {
		case "alice":
			if a.UsedContainers != 2 || a.UsedMB != 4096 || a.UsedVCores != 4 {
				t.Errorf("running application: %d containers, %d MB, %d vcores; want 2, 4096, 4", a.UsedContainers, a.UsedMB, a.UsedVCores)
			}
		case "bob":
			if a.UsedContainers != 0 || a.UsedMB != 0 || a.ReservedContainers != 0 || a.AMUsedMB != 0 {
				t.Errorf("application %s waiting for its AM counts %+v", appIDOf(t, waiting), a)
			}
		default:
			t.Errorf("unexpected application %+v", a)
		}
	}
}
