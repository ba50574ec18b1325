package rm

import (
	"context"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/tokens"
)

// TestReportsDifferByCallerWhateverOrderTheyAsk checks that the reports an
// application keeps between changes still differ by caller as YARN's do:
// the owner of an unmanaged AM gets its AMRMToken, a user with VIEW_APP
// (here the admin) the same report without it, a user without VIEW_APP the
// redacted one. Each asks twice, in every order, before and after changes,
// and each gets the same report whoever asked first.
func TestReportsDifferByCallerWhateverOrderTheyAsk(t *testing.T) {
	tm, err := tokens.New(tokens.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Activate(t.Context(), 1700000000000); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{aclEnable: true, adminACL: "admin", scheduler: &recordingScheduler{}, tokens: tm})
	attempt, amCtx := unmanagedAM(t, e, "http://am.example:4040")
	id := attempt.App.Proto()
	as := func(user string) context.Context { return ipc.WithCaller(t.Context(), ipc.Caller{User: user}) }
	orders := [][]string{{"alice", "admin", "bob"}, {"bob", "admin", "alice"}, {"admin", "bob", "alice"}}
	check := func(t *testing.T) {
		t.Helper()
		first := map[string]*yarnpb.ApplicationReportProto{}
		for _, order := range orders {
			// The application changes before each order and comes back
			// (the AM's progress), so that its first caller builds the
			// reports of the same application.
			for _, p := range []float32{0.9, 0.5} {
				if _, err := e.rm.Allocate(amCtx, &yarnpb.AllocateRequestProto{
					ResponseId: proto.Int32(e.rm.am.state(attempt).last.GetResponseId()), Progress: proto.Float32(p),
				}); err != nil {
					t.Fatal(err)
				}
			}
			for _, user := range order {
				for range 2 {
					resp, err := e.rm.GetApplicationReport(as(user), &yarnpb.GetApplicationReportRequestProto{ApplicationId: id})
					if err != nil {
						t.Fatal(err)
					}
					r := resp.GetApplicationReport()
					if f, ok := first[user]; !ok {
						first[user] = r
					} else if !proto.Equal(r, f) {
						t.Errorf("order %v: %s's report\n%s\nfirst\n%s", order, user, prototext.Format(r), prototext.Format(f))
					}
				}
			}
		}
		owner, admin, other := first["alice"], first["admin"], first["bob"]
		if owner.GetAmRmToken() == nil || admin.GetAmRmToken() != nil || other.GetAmRmToken() != nil {
			t.Errorf("AMRMTokens: owner %v, admin %v, other %v; want the owner's alone", owner.GetAmRmToken() != nil, admin.GetAmRmToken() != nil, other.GetAmRmToken() != nil)
		}
		withoutToken := proto.Clone(owner).(*yarnpb.ApplicationReportProto)
		withoutToken.AmRmToken = nil
		if !proto.Equal(withoutToken, admin) {
			t.Errorf("admin's report\n%s\nis not the owner's without its token\n%s", prototext.Format(admin), prototext.Format(withoutToken))
		}
		if other.GetHost() != "N/A" || other.GetOriginalTrackingUrl() != "N/A" || other.GetAppResource_Usage().GetNumUsedContainers() != -1 ||
			admin.GetHost() != "am" || admin.GetOriginalTrackingUrl() != "http://am.example:4040" {
			t.Errorf("redaction: other sees host %q, tracking %q, %d containers; admin host %q, tracking %q", other.GetHost(),
				other.GetOriginalTrackingUrl(), other.GetAppResource_Usage().GetNumUsedContainers(), admin.GetHost(), admin.GetOriginalTrackingUrl())
		}
	}
	t.Run("running", check)
	if _, err := e.rm.UpdateApplicationPriority(as("alice"), &yarnpb.UpdateApplicationPriorityRequestProto{
		ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(0)},
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(90_000_000_000) // 90 s: nothing the clock moves may be stale
	t.Run("after a priority update and 90 s", check)
}
