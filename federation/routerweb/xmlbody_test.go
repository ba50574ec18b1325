package routerweb

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
)

// An XML submission is placed by the same policy as a JSON one, and the
// home gets the bytes and Content-Type the client sent, as a call about
// one application carries them too.
func TestXMLBodiesArePlacedAndReachTheHomeAsSent(t *testing.T) {
	sc1, sc2 := startRM(t, "SC-1", ts1), startRM(t, "SC-2", ts2)
	params, err := router.MarshalWeightedPolicyInfo(router.WeightedPolicyInfo{RouterWeights: map[string]float64{"SC-1": 0, "SC-2": 1}})
	if err != nil {
		t.Fatal(err)
	}
	f := federationOf(t, store.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.WeightedHomePolicyManager, Params: params}, sc1, sc2)
	app := "application_" + ts2 + "_0007"
	last := func(rm *fakeRM) (string, string) {
		rm.mu.Lock()
		defer rm.mu.Unlock()
		return string(rm.bodies[len(rm.bodies)-1]), rm.types[len(rm.types)-1]
	}

	sub := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" +
		`<application-submission-context><application-id>` + app + `</application-id><application-name>sleep</application-name>` +
		`<queue>default</queue></application-submission-context>`
	status, h, b := doAs(t, http.MethodPost, f.web.URL+"/ws/v1/cluster/apps?user.name=root", "application/xml; charset=UTF-8", sub)
	if status != http.StatusAccepted || h.Get("Location") != f.web.URL+"/ws/v1/cluster/apps/"+app {
		t.Fatalf("submission: %d %q %s", status, h.Get("Location"), b)
	}
	if home, err := f.store.GetApplicationHomeSubCluster(context.Background(), app); err != nil || home != "SC-2" {
		t.Errorf("home %q, %v; want SC-2", home, err)
	}
	if body, typ := last(sc2); body != sub || typ != "application/xml; charset=UTF-8" {
		t.Errorf("the home got %q as %q", body, typ)
	}

	path := "/ws/v1/cluster/apps/" + app + "/state?user.name=root"
	sc2.set(path, readRecorded(t, "cluster_apps_application_1795333013199_0002_state.json"))
	kill := `<appstate><state>KILLED</state></appstate>`
	if status, _, b := doAs(t, http.MethodPut, f.web.URL+path, "text/xml", kill); status != http.StatusOK {
		t.Fatalf("kill: %d %s", status, b)
	}
	if body, typ := last(sc2); body != kill || typ != "text/xml" {
		t.Errorf("the home got %q as %q", body, typ)
	}
}

// The Router refuses an XML submission it cannot place as the RM refuses
// it, before any sub-cluster sees it.
func TestXMLSubmissionsTheRouterCannotPlaceAreRefused(t *testing.T) {
	sc1 := startRM(t, "SC-1", ts1)
	f := federationOf(t, uniform(), sc1)
	const unreadable = "javax.xml.bind.UnmarshalException\n - with linked exception:\n[invalid XML body: "
	for _, tc := range []struct {
		name, body, exception, message string
	}{
		{"no id", `<application-submission-context><application-name>sleep</application-name></application-submission-context>`,
			"BadRequestException", "java.lang.Exception: Missing ApplicationSubmissionContextInfo or applicationSubmissionContex information."},
		{"another root", `<appstate><application-id>application_` + ts1 + `_0001</application-id></appstate>`,
			"WebApplicationException", unreadable + "root element <appstate>, want <application-submission-context>]"},
		{"a DOCTYPE", `<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><application-submission-context/>`,
			"WebApplicationException", unreadable + "a DOCTYPE or other declaration is not accepted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := doAs(t, http.MethodPost, f.web.URL+"/ws/v1/cluster/apps?user.name=root", "application/xml", tc.body)
			var body struct {
				RemoteException struct{ Exception, Message string }
			}
			if err := json.Unmarshal(b, &body); err != nil || status != http.StatusBadRequest ||
				body.RemoteException.Exception != tc.exception || body.RemoteException.Message != tc.message {
				t.Errorf("%d %s (%v)", status, b, err)
			}
		})
	}
	for _, c := range sc1.calls() {
		if c == "POST /ws/v1/cluster/apps?user.name=root" {
			t.Errorf("a refused submission reached the sub-cluster")
		}
	}
}
