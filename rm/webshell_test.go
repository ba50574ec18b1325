package rm

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/webshell"
	"github.com/knitdev/knit/scheduling"
)

// TestWebShellAnswersWithTheApplicationsACLs: the shell gets the RM's own
// VIEW_APP and MODIFY_APP decisions, the owner and yarn.admin.acl, and
// no container the RM does not hold.
func TestWebShellAnswersWithTheApplicationsACLs(t *testing.T) {
	e := newEnv(t, envOptions{aclEnable: true, adminACL: "admin", scheduler: &recordingScheduler{}})
	attempt, _ := unmanagedAM(t, e)
	id := yarnid.ContainerID{Attempt: attempt, Sequence: 2}
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	shell := e.rm.WebShell()
	for _, tc := range []struct {
		user string
		want webshell.Access
	}{
		{"alice", webshell.Access{View: true, Modify: true, Owner: true}},
		{"admin", webshell.Access{View: true, Modify: true, Admin: true}},
		{"mallory", webshell.Access{}},
	} {
		t.Run(tc.user, func(t *testing.T) {
			got, err := shell.ShellContainer(t.Context(), tc.user, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Access != tc.want || got.App != attempt.App || got.Ended {
				t.Fatalf("ShellContainer = %+v, want access %+v to a running container of %s", got, tc.want, attempt.App)
			}
		})
	}
	for _, unknown := range []yarnid.ContainerID{
		{Attempt: attempt, Sequence: 9},
		{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 99}, ID: 1}, Sequence: 2},
	} {
		if _, err := shell.ShellContainer(t.Context(), "alice", unknown); !errors.Is(err, webshell.ErrNoContainer) {
			t.Errorf("ShellContainer(%s) = %v, want ErrNoContainer", unknown, err)
		}
	}
}
