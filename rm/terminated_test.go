package rm

import (
	"testing"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// TestApplicationTerminatedIsAFinalStateOrAnUnknownApplication: the log
// deletion keeps a running application's folder and takes an ended or
// forgotten one's, as YARN's isApplicationTerminated decides.
func TestApplicationTerminatedIsAFinalStateOrAnUnknownApplication(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	running := e.mustSubmit(c, subOpts{})
	killed := e.mustSubmit(c, subOpts{})
	req := &yarnpb.KillApplicationRequestProto{ApplicationId: killed}
	mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{})
	if !mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{}).GetIsKillCompleted() {
		t.Fatal("kill not complete")
	}
	tests := []struct {
		name string
		id   yarnid.ApplicationID
		want bool
	}{
		{"accepted", appIDOf(t, running), false},
		{"killed", appIDOf(t, killed), true},
		{"unknown to the RM", yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 99}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.rm.ApplicationTerminated(tt.id); got != tt.want {
				t.Errorf("ApplicationTerminated(%s) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}
