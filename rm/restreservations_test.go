package rm

import (
	"encoding/json"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// TestRESTReservationsAreTheRPCsRefusal makes each reservation call over
// RPC and over REST: the REST answer is RMWebServices' of the refusal the
// RPC gives, which the client protocol's methods alone decide.
func TestRESTReservationsAreTheRPCsRefusal(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := restServer(t, e)
	c := e.client("alice")
	disabled := yarnerr.ReservationDisabled().Message
	const definition = `"reservation-definition":{"arrival":1,"deadline":2,"reservation-requests":{"reservation-request":` +
		`{"duration":60000,"num-containers":1,"min-concurrency":1,"capability":{"memory":1024,"vCores":1}}}}`
	tests := []struct {
		rpc                string
		req, resp          proto.Message
		method, path, body string
		status             int
		exception, message string
	}{
		{"getNewReservation", &yarnpb.GetNewReservationRequestProto{}, &yarnpb.GetNewReservationResponseProto{},
			http.MethodPost, "/new-reservation", "",
			http.StatusInternalServerError, "YarnRuntimeException", "Unable to create new reservation from RM web service"},
		{"submitReservation", &yarnpb.ReservationSubmissionRequestProto{}, &yarnpb.ReservationSubmissionResponseProto{},
			http.MethodPost, "/submit", `{"queue":"default","reservation-id":"reservation_1_0001",` + definition + `}`,
			http.StatusBadRequest, "BadRequestException", "java.lang.Exception: " + disabled},
		{"updateReservation", &yarnpb.ReservationUpdateRequestProto{}, &yarnpb.ReservationUpdateResponseProto{},
			http.MethodPost, "/update", `{"reservation-id":"reservation_1_0001",` + definition + `}`,
			http.StatusBadRequest, "BadRequestException", "java.lang.Exception: " + disabled},
		{"deleteReservation", &yarnpb.ReservationDeleteRequestProto{}, &yarnpb.ReservationDeleteResponseProto{},
			http.MethodPost, "/delete", `{"reservation-id":"reservation_1_0001"}`,
			http.StatusBadRequest, "BadRequestException", "java.lang.Exception: " + disabled},
		{"listReservations", &yarnpb.ReservationListRequestProto{}, &yarnpb.ReservationListResponseProto{},
			http.MethodGet, "/list", "",
			http.StatusBadRequest, "BadRequestException", "java.lang.Exception: " + disabled},
	}
	for _, tt := range tests {
		t.Run(tt.rpc, func(t *testing.T) {
			_, err := call(t, c, tt.rpc, tt.req, tt.resp)
			wantRemote(t, err, yarnerr.YarnException, disabled)

			code, b := doREST(t, tt.method, srv.URL+"/ws/v1/cluster/reservation"+tt.path+"?user.name=alice", tt.body)
			var answer struct {
				RemoteException struct{ Exception, Message string }
			}
			if err := json.Unmarshal(b, &answer); err != nil || code != tt.status ||
				answer.RemoteException.Exception != tt.exception || answer.RemoteException.Message != tt.message {
				t.Errorf("REST: %d %s\nwant %d %s: %s", code, b, tt.status, tt.exception, tt.message)
			}
		})
	}
}
