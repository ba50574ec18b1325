package routerweb

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestReservationCallsAnswerWhatAKnitRMAnswers sends each reservation
// call to a knit-rm and through the Router: both answer alike, the
// RM's checks of the caller, the query and the body included.
func TestReservationCallsAnswerWhatAKnitRMAnswers(t *testing.T) {
	sc1, sc2 := startKnitRM(t, "SC-1", 1700000000001, ""), startKnitRM(t, "SC-2", 1700000000002, "")
	_, router := routerOver(t, sc1, sc2)
	const (
		definition = `"reservation-definition":{"arrival":1,"deadline":2,"reservation-requests":{"reservation-request":` +
			`{"duration":60000,"num-containers":1,"min-concurrency":1,"capability":{"memory":1024,"vCores":1}}}}`
		submission    = `{"queue":"default","reservation-id":"reservation_1700000000001_0001",` + definition + `}`
		submissionXML = `<reservation-submission-context><queue>default</queue><reservation-definition><reservation-requests>` +
			`<reservation-request><capability><memory>1024</memory><vCores>1</vCores></capability></reservation-request>` +
			`</reservation-requests></reservation-definition></reservation-submission-context>`
	)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		status                                int
		want                                  string // a part of the answer
	}{
		{"a new reservation", http.MethodPost, "/new-reservation?user.name=alice", "", "", http.StatusInternalServerError,
			"Unable to create new reservation from RM web service"},
		{"a new reservation by the static user", http.MethodPost, "/new-reservation", "", "", http.StatusInternalServerError,
			"YarnRuntimeException"},
		{"a submission", http.MethodPost, "/submit?user.name=alice", "application/json", submission, http.StatusBadRequest,
			"Reservation is not enabled"},
		{"a submission in XML", http.MethodPost, "/submit?user.name=alice", "application/xml", submissionXML, http.StatusBadRequest,
			"Reservation is not enabled"},
		{"an unreadable submission", http.MethodPost, "/submit", "application/json", `{"queue":`, http.StatusBadRequest,
			"invalid JSON body"},
		{"a submission of an id of another prefix", http.MethodPost, "/submit?user.name=alice", "application/json",
			`{"reservation-id":"res_1",` + definition + `}`, http.StatusNotFound, "The specified reservation id is invalid: res_1"},
		{"an update without an id", http.MethodPost, "/update?user.name=alice", "application/json", `{` + definition + `}`,
			http.StatusBadRequest, "Update operations must specify an existing ReservaitonId"},
		{"a deletion", http.MethodPost, "/delete?user.name=alice", "application/json", `{"reservation-id":"reservation_1_0001"}`,
			http.StatusBadRequest, "Reservation is not enabled"},
		{"a list", http.MethodGet, "/list?queue=default&user.name=alice", "", "", http.StatusBadRequest, "BadRequestException"},
		{"a list of an unreadable end", http.MethodGet, "/list?end-time=never", "", "", http.StatusInternalServerError,
			"QueryParamException"},
	} {
		for _, accept := range []string{"application/json", "application/xml"} {
			t.Run(tc.name+"/"+accept, func(t *testing.T) {
				path := "/ws/v1/cluster/reservation" + tc.path
				wantStatus, wantHeader, wantBody := ask(t, tc.method, sc1.url+path, tc.contentType, accept, tc.body)
				status, header, body := ask(t, tc.method, router+path, tc.contentType, accept, tc.body)
				wantType, contentType := wantHeader.Get("Content-Type"), header.Get("Content-Type")
				if status != wantStatus || contentType != wantType || !bytes.Equal(body, wantBody) {
					t.Errorf("Router: %d %s %s\nRM:     %d %s %s", status, contentType, body, wantStatus, wantType, wantBody)
				}
				if wantStatus != tc.status || !strings.Contains(string(wantBody), tc.want) {
					t.Errorf("RM: %d %s, want %d and %q", wantStatus, wantBody, tc.status, tc.want)
				}
			})
		}
	}
}

// TestAReservationCallGoesToTheFirstSubClusterThatAnswers passes the
// call, its body and headers unchanged, past an unreachable sub-cluster.
func TestAReservationCallGoesToTheFirstSubClusterThatAnswers(t *testing.T) {
	down, up := startRM(t, "SC-1", "1700000000001"), startRM(t, "SC-2", "1700000000002")
	down.srv.Close()
	const path = "/ws/v1/cluster/reservation/submit?user.name=alice"
	refusal := []byte(`{"RemoteException":{"exception":"BadRequestException","message":"java.lang.Exception: refused","javaClassName":"org.apache.hadoop.yarn.webapp.BadRequestException"}}`)
	up.set(path, refusal)
	up.mu.Lock()
	up.statuses[path] = http.StatusBadRequest
	up.mu.Unlock()
	f := federationOf(t, uniform(), down, up)

	status, header, body := ask(t, http.MethodPost, f.web.URL+path, "application/xml", "application/json", "<reservation-submission-context/>")
	if contentType := header.Get("Content-Type"); status != http.StatusBadRequest || contentType != "application/json;charset=utf-8" || !bytes.Equal(body, refusal) {
		t.Errorf("%d %s %s", status, header.Get("Content-Type"), body)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.got) != 1 || up.got[0] != "POST "+path || string(up.bodies[0]) != "<reservation-submission-context/>" || up.types[0] != "application/xml" {
		t.Errorf("the RM got %v %q %q", up.got, up.bodies, up.types)
	}
}

func TestAReservationCallWithoutAnActiveSubClusterIsAYarnException(t *testing.T) {
	f := federationOf(t, uniform())
	status, _, body := ask(t, http.MethodGet, f.web.URL+"/ws/v1/cluster/reservation/list", "", "", "")
	if status != http.StatusInternalServerError || !strings.Contains(string(body), "No active SubCluster available to submit the request.") {
		t.Errorf("%d %s", status, body)
	}
}
