package rm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// TestRESTUpdatesAreTheRPCs changes an application over REST and reads
// it back over RPC, and the other way round: both reach one application
// through one implementation.
func TestRESTUpdatesAreTheRPCs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.rm.live.maxPriority.Store(5)
	srv := restServer(t, e)
	c := e.client("alice")
	pid := e.mustSubmit(c, subOpts{})
	id := appIDOf(t, pid).String()
	app := srv.URL + "/ws/v1/cluster/apps/" + id
	expiry := e.clock.Now().Add(time.Hour).UTC().Format(iso8601Layout)

	tests := []struct {
		name, method, path, body string
		want                     string
		// rpc checks the report the RPC gives afterwards.
		rpc func(r *yarnpb.ApplicationReportProto) bool
	}{
		{name: "priority", method: http.MethodPut, path: "/priority", body: `{"priority":3}`, want: `{"priority":3}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetPriority().GetPriority() == 3 }},
		{name: "priority above the maximum", method: http.MethodPut, path: "/priority", body: `{"priority":9}`, want: `{"priority":5}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetPriority().GetPriority() == 5 }},
		{name: "read priority", method: http.MethodGet, path: "/priority", want: `{"priority":5}`},
		{name: "move", method: http.MethodPut, path: "/queue", body: `{"queue":"b"}`, want: `{"queue":"root.b"}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool { return r.GetQueue() == "root.b" }},
		{name: "read queue", method: http.MethodGet, path: "/queue", want: `{"queue":"root.b"}`},
		{name: "timeout", method: http.MethodPut, path: "/timeout", body: `{"timeout":{"type":"LIFETIME","expiryTime":"` + expiry + `"}}`,
			want: `{"timeout":{"type":"LIFETIME","expiryTime":"` + expiry + `","remainingTimeInSeconds":3600}}`,
			rpc: func(r *yarnpb.ApplicationReportProto) bool {
				return r.GetAppTimeouts()[0].GetApplicationTimeout().GetExpireTime() == expiry
			}},
		{name: "read timeouts", method: http.MethodGet, path: "/timeouts",
			want: `{"timeouts":{"timeout":[{"type":"LIFETIME","expiryTime":"` + expiry + `","remainingTimeInSeconds":3600}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := doREST(t, tt.method, app+tt.path+"?user.name=alice", tt.body)
			if code != http.StatusOK || string(b) != tt.want {
				t.Fatalf("%d %s, want %s", code, b, tt.want)
			}
			if tt.rpc != nil && !tt.rpc(e.report(c, pid)) {
				t.Errorf("RPC report after REST: %v", e.report(c, pid))
			}
		})
	}
}

func TestRESTAttemptAndContainersAreTheRPCsReports(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	c := e.client("alice")
	pid := e.mustSubmit(c, subOpts{})
	id := appIDOf(t, pid)
	attempt := srv.URL + "/ws/v1/cluster/apps/" + id.String() + "/appattempts/appattempt_" + strings.TrimPrefix(id.String(), "application_") + "_000001"

	code, b := doREST(t, http.MethodGet, attempt+"?user.name=alice", "")
	if code != http.StatusOK {
		t.Fatalf("attempt: %d %s", code, b)
	}
	var got struct {
		AppAttempt struct {
			AppAttemptID, AppAttemptState string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	rpc := mustCall(t, c, "getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: pid},
		&yarnpb.GetApplicationAttemptsResponseProto{}).GetApplicationAttempts()
	if len(rpc) != 1 || got.AppAttempt.AppAttemptState != strings.TrimPrefix(rpc[0].GetYarnApplicationAttemptState().String(), "APP_ATTEMPT_") ||
		!strings.HasSuffix(got.AppAttempt.AppAttemptID, "_000001") {
		t.Errorf("REST attempt %+v, RPC %v", got.AppAttempt, rpc)
	}
	// No pod was bound: the attempt has no containers yet.
	if code, b := doREST(t, http.MethodGet, attempt+"/containers?user.name=alice", ""); code != http.StatusOK || string(b) != `{"containers":{}}` {
		t.Errorf("containers: %d %s", code, b)
	}
	code, b = doREST(t, http.MethodGet, attempt+"/containers/container_"+strings.TrimPrefix(id.String(), "application_")+"_01_000001?user.name=alice", "")
	if code != http.StatusNotFound || !strings.Contains(string(b), "ContainerNotFoundException") {
		t.Errorf("absent container: %d %s", code, b)
	}
}

func TestRESTAppStatisticsCountTheRMsApplications(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	c := e.client("alice")
	e.mustSubmit(c, subOpts{})
	killed := e.mustSubmit(c, subOpts{})
	mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: killed}, &yarnpb.KillApplicationResponseProto{})

	code, b := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/appstatistics?states=accepted,killed,running", "")
	want := `{"appStatInfo":{"statItem":[{"state":"ACCEPTED","type":"*","count":1},{"state":"RUNNING","type":"*","count":0},{"state":"KILLED","type":"*","count":1}]}}`
	if code != http.StatusOK || string(b) != want {
		t.Errorf("%d %s\nwant %s", code, b, want)
	}
}
