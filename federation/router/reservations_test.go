package router

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func reservationID(ts, id int64) *yarnpb.ReservationIdProto {
	return &yarnpb.ReservationIdProto{ClusterTimestamp: proto.Int64(ts), Id: proto.Int64(id)}
}

func reservationSubmission(id *yarnpb.ReservationIdProto, queue string) *yarnpb.ReservationSubmissionRequestProto {
	return &yarnpb.ReservationSubmissionRequestProto{ReservationId: id, Queue: proto.String(queue),
		ReservationDefinition: &yarnpb.ReservationDefinitionProto{Arrival: proto.Int64(1), Deadline: proto.Int64(2)}}
}

// A reservation lives in the home its queue's policy picks: its updates
// and its deletion go there, and a list shows every sub-cluster's.
func TestAReservationIsServedByTheHomeItsQueuesPolicyPicked(t *testing.T) {
	s := store.NewMemory(nil)
	rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
	join(t, s, rm1, rm2)
	addr, _ := serveRouter(t, s, routerOptions{policy: weighted(map[string]string{"sc1": "0", "sc2": "1"})})

	var newResp yarnpb.GetNewReservationResponseProto
	if err := rawCall(t, addr, "getNewReservation", &yarnpb.GetNewReservationRequestProto{}, &newResp); err != nil {
		t.Fatal(err)
	}
	id := newResp.GetReservationId()
	if id == nil {
		t.Fatal("no reservation id")
	}
	if err := rawCall(t, addr, "submitReservation", reservationSubmission(id, "default"), &yarnpb.ReservationSubmissionResponseProto{}); err != nil {
		t.Fatal(err)
	}
	key := reservationKey(id)
	if home, err := s.GetReservationHomeSubCluster(t.Context(), key); err != nil || home != "sc2" {
		t.Fatalf("home %q, %v; want sc2", home, err)
	}
	// A reservation of sc1's own, made there directly, shows in the list.
	rm1.mu.Lock()
	rm1.reservations["reservation_1_0099"] = reservationID(1, 99)
	rm1.mu.Unlock()
	update := &yarnpb.ReservationUpdateRequestProto{ReservationId: id, ReservationDefinition: &yarnpb.ReservationDefinitionProto{Deadline: proto.Int64(3)}}
	if err := rawCall(t, addr, "updateReservation", update, &yarnpb.ReservationUpdateResponseProto{}); err != nil {
		t.Fatal(err)
	}
	rm2.mu.Lock()
	updates := rm2.updates[key]
	rm2.mu.Unlock()
	if updates != 1 {
		t.Errorf("the home had %d updates, want 1", updates)
	}
	var list yarnpb.ReservationListResponseProto
	if err := rawCall(t, addr, "listReservations", &yarnpb.ReservationListRequestProto{Queue: proto.String("default")}, &list); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range list.GetReservations() {
		listed = append(listed, reservationKey(r.GetReservationId()))
	}
	want := []string{"reservation_1_0099", key}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("listed %v, want sc1's and the submitted one", listed)
	}
	if err := rawCall(t, addr, "deleteReservation", &yarnpb.ReservationDeleteRequestProto{ReservationId: id}, &yarnpb.ReservationDeleteResponseProto{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetReservationHomeSubCluster(t.Context(), key); err == nil {
		t.Error("the deleted reservation's home is still recorded")
	}
	err := rawCall(t, addr, "updateReservation", update, &yarnpb.ReservationUpdateResponseProto{})
	if want := "Can't find reservationId = " + key + " in home sub cluster."; !isYarnException(err, want) {
		t.Errorf("update after delete: %v, want YarnException %q", err, want)
	}
}

// A knit-rm has no reservation system: through the Router every
// reservation call is refused with the Java Router's YarnException for a
// call its sub-clusters refused, or for a request it lacks.
func TestWithoutAReservationSystemReservationCallsAreTheJavaRoutersRefusals(t *testing.T) {
	s := store.NewMemory(nil)
	// Three sub-clusters for the three tries of a new reservation: with
	// fewer, the last try finds none left, and the answer is YARN's "No
	// active SubCluster".
	rm1, rm2, rm3 := startRM(t, "sc1", 1), startRM(t, "sc2", 2), startRM(t, "sc3", 3)
	rm1.noReservations, rm2.noReservations, rm3.noReservations = true, true, true
	join(t, s, rm1, rm2, rm3)
	addr, _ := serveRouter(t, s, routerOptions{})
	id := reservationID(5, 1)
	tests := []struct {
		name, method string
		req, resp    proto.Message
		want         string
	}{
		{"a new reservation", "getNewReservation", &yarnpb.GetNewReservationRequestProto{}, &yarnpb.GetNewReservationResponseProto{},
			"Failed to create a new reservation."},
		{"a submission", "submitReservation", reservationSubmission(id, "default"), &yarnpb.ReservationSubmissionResponseProto{},
			"Reservation reservation_5_0001 failed to be submitted."},
		{"a submission without a queue", "submitReservation", &yarnpb.ReservationSubmissionRequestProto{ReservationId: id, ReservationDefinition: &yarnpb.ReservationDefinitionProto{}},
			&yarnpb.ReservationSubmissionResponseProto{}, "Missing submitReservation request or reservationId or reservation definition or queue."},
		{"a list", "listReservations", &yarnpb.ReservationListRequestProto{}, &yarnpb.ReservationListResponseProto{},
			"Unable to list reservations node due to exception."},
		{"an update of a reservation without a home", "updateReservation", &yarnpb.ReservationUpdateRequestProto{ReservationId: reservationID(5, 2), ReservationDefinition: &yarnpb.ReservationDefinitionProto{}},
			&yarnpb.ReservationUpdateResponseProto{}, "Can't find reservationId = reservation_5_0002 in home sub cluster."},
		{"an update without a definition", "updateReservation", &yarnpb.ReservationUpdateRequestProto{ReservationId: id},
			&yarnpb.ReservationUpdateResponseProto{}, "Missing updateReservation request or reservationId or reservation definition."},
		{"an update of the refused submission", "updateReservation", &yarnpb.ReservationUpdateRequestProto{ReservationId: id, ReservationDefinition: &yarnpb.ReservationDefinitionProto{}},
			&yarnpb.ReservationUpdateResponseProto{}, "Unable to reservation update due to exception."},
		{"a deletion of the refused submission", "deleteReservation", &yarnpb.ReservationDeleteRequestProto{ReservationId: id},
			&yarnpb.ReservationDeleteResponseProto{}, "Unable to reservation delete due to exception."},
		{"a deletion without an id", "deleteReservation", &yarnpb.ReservationDeleteRequestProto{},
			&yarnpb.ReservationDeleteResponseProto{}, "Missing deleteReservation request or reservationId."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := rawCall(t, addr, tt.method, tt.req, tt.resp); !isYarnException(err, tt.want) {
				t.Errorf("err %v, want YarnException %q", err, tt.want)
			}
		})
	}
}

func TestDelegationTokenCallsAreRefusedAsYARNsRouterRefusesACallerItMayNotGiveTokens(t *testing.T) {
	s := store.NewMemory(nil)
	join(t, s, startRM(t, "sc1", 1))
	addr, _ := serveRouter(t, s, routerOptions{})
	tok := &commonpb.TokenProto{Identifier: []byte{1}, Password: []byte{2}, Kind: proto.String("RM_DELEGATION_TOKEN"), Service: proto.String("")}
	tests := []struct {
		name, method string
		req, resp    proto.Message
		want         string
	}{
		{"an issue", "getDelegationToken", &commonpb.GetDelegationTokenRequestProto{Renewer: proto.String("yarn")}, &commonpb.GetDelegationTokenResponseProto{},
			"java.io.IOException: Delegation Token can be issued only with kerberos authentication."},
		{"a renewal", "renewDelegationToken", &commonpb.RenewDelegationTokenRequestProto{Token: tok}, &commonpb.RenewDelegationTokenResponseProto{},
			"java.io.IOException: Delegation Token can be renewed only with kerberos authentication"},
		{"a cancellation", "cancelDelegationToken", &commonpb.CancelDelegationTokenRequestProto{Token: tok}, &commonpb.CancelDelegationTokenResponseProto{},
			"java.io.IOException: Delegation Token can be cancelled only with kerberos authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := rawCall(t, addr, tt.method, tt.req, tt.resp); !isYarnException(err, tt.want) {
				t.Errorf("err %v, want YarnException %q", err, tt.want)
			}
		})
	}
}

// isYarnException reports whether err came as a YarnException whose
// message starts with want.
func isYarnException(err error, want string) bool {
	e, ok := yarnerr.Find(err)
	return ok && e.Class == yarnerr.YarnException && strings.HasPrefix(e.Message, want)
}
