package rm

import (
	"testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestMetricsSnapshotHoldsTheApplicationsAndQueues(t *testing.T) {
	e := newEnv(t, envOptions{})
	unmanagedAM(t, e)
	s, err := e.rm.MetricsSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Apps) != 1 || s.Apps[0].Queue != "root.default" || s.Apps[0].User != "alice" ||
		s.Apps[0].State != yarnpb.YarnApplicationStateProto_RUNNING || !s.Apps[0].Unmanaged {
		t.Errorf("apps %+v", s.Apps)
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
