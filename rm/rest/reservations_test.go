package rest

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

const reservations = "/ws/v1/cluster/reservation"

// The bodies of ResourceManagerRest.md's reservation examples.
const (
	docReservationSubmission = `{"queue":"dedicated","reservation-id":"reservation_1404198295326_0003",` +
		`"reservation-definition":{"arrival":1765541532000,"deadline":1765542252000,"reservation-name":"res_1",` +
		`"reservation-requests":{"reservation-request-interpreter":0,"reservation-request":[` +
		`{"duration":60000,"num-containers":220,"min-concurrency":220,"capability":{"memory":1024,"vCores":1}},` +
		`{"duration":120000,"num-containers":110,"min-concurrency":1,"capability":{"memory":1024,"vCores":1}}]}}}`
	docReservationSubmissionXML = `<reservation-submission-context>
  <queue>dedicated</queue>
  <reservation-id>reservation_1404198295326_0003</reservation-id>
  <reservation-definition>
     <arrival>1765541532000</arrival>
     <deadline>1765542252000</deadline>
     <reservation-name>res_1</reservation-name>
     <reservation-requests>
        <reservation-request-interpreter>0</reservation-request-interpreter>
        <reservation-request>
             <duration>60000</duration>
             <num-containers>220</num-containers>
             <min-concurrency>220</min-concurrency>
             <capability>
               <memory>1024</memory>
               <vCores>1</vCores>
             </capability>
        </reservation-request>
        <reservation-request>
             <duration>120000</duration>
             <num-containers>110</num-containers>
             <min-concurrency>1</min-concurrency>
             <capability>
               <memory>1024</memory>
               <vCores>1</vCores>
             </capability>
        </reservation-request>
     </reservation-requests>
  </reservation-definition>
</reservation-submission-context>`
	docReservationUpdate = `{"reservation-id":"reservation_1449259268893_0005","reservation-definition":{` +
		`"arrival":1765541532000,"deadline":1765542252000,"reservation-name":"res_1","reservation-requests":{` +
		`"reservation-request-interpreter":0,"reservation-request":[{"duration":60000,"num-containers":100,` +
		`"min-concurrency":1,"capability":{"memory":1024,"vCores":1}}]}}}`
	docReservationDeletion = `{"reservation-id":"reservation_1449259268893_0005"}`
)

// What RMWebServices answers a reservation call ClientRMService refused
// for want of a reservation system, and a caller without a name.
const (
	disabledMessage        = "java.lang.Exception: Reservation is not enabled. Please enable & try again"
	unauthenticatedMessage = "Unable to obtain user name, user not authenticated"
	yarnRuntimeClass       = "org.apache.hadoop.yarn.exceptions.YarnRuntimeException"
	badRequestClass        = "org.apache.hadoop.yarn.webapp.BadRequestException"
	webApplicationClass    = "javax.ws.rs.WebApplicationException"
	authorizationClass     = "org.apache.hadoop.security.authorize.AuthorizationException"
)

// remoteAnswer reads a RemoteException answer, written as JSON or as XML
// as the Accept asked, checking its Content-Type.
func remoteAnswer(t *testing.T, w *httptest.ResponseRecorder, asXML bool) remoteException {
	t.Helper()
	ct := w.Header().Get("Content-Type")
	if asXML {
		var doc struct {
			XMLName   xml.Name `xml:"RemoteException"`
			Exception string   `xml:"exception"`
			Message   string   `xml:"message"`
			JavaClass string   `xml:"javaClassName"`
		}
		if err := xml.Unmarshal(w.Body.Bytes(), &doc); err != nil || ct != xmlContentType {
			t.Fatalf("not an XML RemoteException (%v, %q): %s", err, ct, w.Body)
		}
		return remoteException{Exception: doc.Exception, Message: doc.Message, JavaClass: doc.JavaClass}
	}
	var doc struct{ RemoteException remoteException }
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || ct != "application/json;charset=utf-8" {
		t.Fatalf("not a JSON RemoteException (%v, %q): %s", err, ct, w.Body)
	}
	return doc.RemoteException
}

// remoteCase is a call and the RemoteException RMWebServices answers it
// with.
type remoteCase struct {
	name, method, target, contentType, body string
	// requireUser makes the RM refuse a caller without user.name.
	requireUser                   bool
	status                        int
	exception, message, javaClass string
}

// runRemoteCases makes each call asking for JSON and for XML.
func runRemoteCases(t *testing.T, tests []remoteCase) {
	t.Helper()
	for _, tt := range tests {
		for _, accept := range []string{"application/json", "application/xml"} {
			t.Run(tt.name+"/"+accept, func(t *testing.T) {
				h := newServer(t, newFake(t), func(c *Config) { c.RequireUser = tt.requireUser })
				w := serveAs(t, h, tt.method, tt.target, tt.contentType, accept, tt.body)
				if w.Code != tt.status {
					t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
				}
				re := remoteAnswer(t, w, accept == "application/xml")
				if re.Exception != tt.exception || re.Message != tt.message || re.JavaClass != tt.javaClass {
					t.Errorf("got %s: %s (%s)\nwant %s: %s (%s)", re.Exception, re.Message, re.JavaClass, tt.exception, tt.message, tt.javaClass)
				}
			})
		}
	}
}

func TestReservationResourcesAnswerAsRMWebServicesWithoutAReservationSystem(t *testing.T) {
	const (
		jsonType = "application/json"
		xmlType  = "application/xml"
		notJSON  = `{"reservation-id":`
		newRes   = reservations + "/new-reservation"
		submit   = reservations + "/submit"
		update   = reservations + "/update"
		deletion = reservations + "/delete"
		list     = reservations + "/list"
	)
	unauthenticated := func(name, method, target, contentType, body string) remoteCase {
		return remoteCase{name: name, method: method, target: target, contentType: contentType, body: body, requireUser: true,
			status: http.StatusUnauthorized, exception: "AuthorizationException", message: unauthenticatedMessage, javaClass: authorizationClass}
	}
	disabled := func(name, method, target, contentType, body string) remoteCase {
		return remoteCase{name: name, method: method, target: target, contentType: contentType, body: body,
			status: http.StatusBadRequest, exception: "BadRequestException", message: disabledMessage, javaClass: badRequestClass}
	}
	unreadable := func(name, target, contentType, body, message string) remoteCase {
		return remoteCase{name: name, method: http.MethodPost, target: target, contentType: contentType, body: body, requireUser: true,
			status: http.StatusBadRequest, exception: "WebApplicationException", message: unreadableMessage(message), javaClass: webApplicationClass}
	}
	newReservationFailed := func(name, target string, requireUser bool) remoteCase {
		return remoteCase{name: name, method: http.MethodPost, target: target, requireUser: requireUser, status: http.StatusInternalServerError,
			exception: "YarnRuntimeException", message: "Unable to create new reservation from RM web service", javaClass: yarnRuntimeClass}
	}
	runRemoteCases(t, []remoteCase{
		newReservationFailed("a new reservation is the RM's failure wrapped", newRes+"?user.name=alice", false),
		newReservationFailed("a new reservation by the static user is the same failure", newRes, false),
		newReservationFailed("a new reservation named by user.name passes an RM requiring users", newRes+"?user.name=alice", true),
		unauthenticated("a new reservation without a user is refused before the RM", http.MethodPost, newRes, "", ""),

		disabled("a submission is the RM's refusal", http.MethodPost, submit+"?user.name=alice", jsonType, docReservationSubmission),
		disabled("a submission by the static user is the same refusal", http.MethodPost, submit, jsonType, docReservationSubmission),
		disabled("a submission in XML is the same refusal", http.MethodPost, submit+"?user.name=alice", xmlType, docReservationSubmissionXML),
		unauthenticated("a submission without a user is refused before the RM", http.MethodPost, submit, jsonType, docReservationSubmission),
		unreadable("an unreadable submission is refused before its caller", submit, jsonType, notJSON, "invalid JSON body: unexpected end of JSON input"),
		unreadable("a submission of another XML root is refused before its caller", submit, xmlType, `<reservation-update-context/>`,
			"invalid XML body: root element <reservation-update-context>, want <reservation-submission-context>"),

		disabled("an update is the RM's refusal", http.MethodPost, update+"?user.name=alice", jsonType, docReservationUpdate),
		disabled("an update by the static user is the same refusal", http.MethodPost, update, jsonType, docReservationUpdate),
		unauthenticated("an update without a user is refused before the RM", http.MethodPost, update, jsonType, docReservationUpdate),
		unreadable("an unreadable update is refused before its caller", update, jsonType, notJSON, "invalid JSON body: unexpected end of JSON input"),

		disabled("a deletion is the RM's refusal", http.MethodPost, deletion+"?user.name=alice", jsonType, docReservationDeletion),
		disabled("a deletion by the static user is the same refusal", http.MethodPost, deletion, jsonType, docReservationDeletion),
		disabled("a deletion in XML is the same refusal", http.MethodPost, deletion+"?user.name=alice", xmlType,
			`<reservation-delete-context><reservation-id>reservation_1449259268893_0005</reservation-id></reservation-delete-context>`),
		unauthenticated("a deletion without a user is refused before the RM", http.MethodPost, deletion, jsonType, docReservationDeletion),
		unreadable("an unreadable deletion is refused before its caller", deletion, jsonType, notJSON, "invalid JSON body: unexpected end of JSON input"),

		disabled("a list is the RM's refusal", http.MethodGet, list+"?queue=dedicated&user.name=alice", "", ""),
		disabled("a list by the static user is the same refusal", http.MethodGet, list, "", ""),
		unauthenticated("a list without a user is refused before the RM, although a GET", http.MethodGet, list, "", ""),
		{name: "a list's unreadable start is refused before its caller", method: http.MethodGet, target: list + "?start-time=soon", requireUser: true,
			status: http.StatusInternalServerError, exception: "QueryParamException",
			message: `java.lang.NumberFormatException: For input string: "soon"`, javaClass: "com.sun.jersey.api.ParamException$QueryParamException"},
	})
}

func TestReservationBodiesAreCheckedInRMWebServicesOrderBeforeTheRM(t *testing.T) {
	const (
		submit   = reservations + "/submit?user.name=alice"
		update   = reservations + "/update?user.name=alice"
		deletion = reservations + "/delete?user.name=alice"
		stage    = `{"duration":60000,"num-containers":1,"min-concurrency":1,"capability":{"memory":1024,"vCores":1}}`
		noCap    = `{"duration":60000,"num-containers":1,"min-concurrency":1}`
	)
	definition := func(interpreter, stages string) string {
		return `"reservation-definition":{"arrival":1,"deadline":2,"reservation-requests":{"reservation-request-interpreter":` +
			interpreter + `,"reservation-request":[` + stages + `]}}`
	}
	bad := func(name, target, body string, status int, exception, message, javaClass string) remoteCase {
		return remoteCase{name: name, method: http.MethodPost, target: target, contentType: "application/json", body: body,
			status: status, exception: exception, message: message, javaClass: javaClass}
	}
	badRequest := func(name, target, body, message string) remoteCase {
		return bad(name, target, body, http.StatusBadRequest, "BadRequestException", "java.lang.Exception: "+message, badRequestClass)
	}
	invalidID := func(name, target, body, message string) remoteCase {
		return bad(name, target, body, http.StatusNotFound, "IOException", message, "java.io.IOException")
	}
	notALong := func(name, target, body, field string) remoteCase {
		return bad(name, target, body, http.StatusBadRequest, "NumberFormatException", `For input string: "`+field+`"`, "java.lang.NumberFormatException")
	}
	outOfBounds := func(name, target, body, message string) remoteCase {
		return bad(name, target, body, http.StatusInternalServerError, "ArrayIndexOutOfBoundsException", message, "java.lang.ArrayIndexOutOfBoundsException")
	}
	noCapability := func(name, target, body string) remoteCase {
		return bad(name, target, body, http.StatusInternalServerError, "NullPointerException", capabilityNPE, "java.lang.NullPointerException")
	}
	tests := []remoteCase{
		badRequest("a submission without a definition", submit, `{"queue":"dedicated","reservation-id":"nonsense"}`,
			"Input ReservationDefinition should not be null"),
		badRequest("a submission without stages", submit, `{"reservation-definition":{"arrival":1,"reservation-requests":{}}}`,
			"The ReservationDefinition should contain at least one ReservationRequest"),
		badRequest("a submission with an empty list of stages", submit, `{`+definition("0", "")+`}`,
			"The ReservationDefinition should contain at least one ReservationRequest"),
		outOfBounds("a submission with an interpreter past the last", submit, `{`+definition("4", noCap)+`}`, "Index 4 out of bounds for length 4"),
		outOfBounds("a submission with a negative interpreter", submit, `{`+definition("-1", stage)+`}`, "Index -1 out of bounds for length 4"),
		noCapability("a submission with a stage without a capability", submit, `{"reservation-id":"nonsense",`+definition("3", stage+","+noCap)+`}`),
		invalidID("a submission with an id of another prefix", submit, `{"reservation-id":"res_1_2",`+definition("0", stage)+`}`,
			"The specified reservation id is invalid: res_1_2"),
		invalidID("a submission with an id of four fields", submit, `{"reservation-id":"reservation_1_2_3",`+definition("0", stage)+`}`,
			"The specified reservation id is not parseable: reservation_1_2_3"),
		invalidID("a submission with an id of two fields and trailing underscores", submit, `{"reservation-id":"reservation_1__",`+definition("0", stage)+`}`,
			"The specified reservation id is not parseable: reservation_1__"),
		notALong("a submission with an id of no cluster timestamp", submit, `{"reservation-id":"reservation_x_2",`+definition("0", stage)+`}`, "x"),
		notALong("a submission with an id of an empty number", submit, `{"reservation-id":"reservation__2",`+definition("0", stage)+`}`, ""),

		badRequest("an update without a definition, nor an id", update, `{}`, "Input ReservationDefinition should not be null"),
		badRequest("an update without an id", update, `{`+definition("9", noCap)+`}`,
			"Update operations must specify an existing ReservaitonId"),
		outOfBounds("an update with an interpreter past the last", update, `{"reservation-id":"nonsense",`+definition("5", stage)+`}`,
			"Index 5 out of bounds for length 4"),
		noCapability("an update with a stage without a capability", update, `{"reservation-id":"nonsense",`+definition("0", noCap)+`}`),
		invalidID("an update of an id of another prefix", update, `{"reservation-id":"nonsense",`+definition("0", stage)+`}`,
			"The specified reservation id is invalid: nonsense"),

		invalidID("a deletion of an id of another prefix", deletion, `{"reservation-id":"nonsense"}`, "The specified reservation id is invalid: nonsense"),
		notALong("a deletion of an id of no sequence number", deletion, `{"reservation-id":"reservation_1_0x1"}`, "0x1"),
	}
	runRemoteCases(t, tests)
	for _, tt := range tests {
		f := newFake(t)
		serveAs(t, newServer(t, f), tt.method, tt.target, tt.contentType, "", tt.body)
		if len(f.reservationCalls) != 0 {
			t.Errorf("%s: reached the RM: %v", tt.name, f.reservationCalls)
		}
	}
}

func TestReservationCallsReachTheRMAsRMWebServicesMakesThem(t *testing.T) {
	stage := func(duration int64, containers, concurrency int32) *yarnpb.ReservationRequestProto {
		return &yarnpb.ReservationRequestProto{Capability: res(1024, 1), NumContainers: i32(containers), Concurrency: i32(concurrency), Duration: i64(duration)}
	}
	definition := func(stages ...*yarnpb.ReservationRequestProto) *yarnpb.ReservationDefinitionProto {
		return &yarnpb.ReservationDefinitionProto{
			ReservationRequests: &yarnpb.ReservationRequestsProto{ReservationResources: stages, Interpreter: yarnpb.ReservationRequestInterpreterProto_R_ANY.Enum()},
			Arrival:             i64(1765541532000), Deadline: i64(1765542252000), ReservationName: str("res_1"),
			Priority: &yarnpb.PriorityProto{Priority: i32(0)},
		}
	}
	docSubmission := &yarnpb.ReservationSubmissionRequestProto{
		Queue: str("dedicated"), ReservationDefinition: definition(stage(60000, 220, 220), stage(120000, 110, 1)),
		ReservationId: &yarnpb.ReservationIdProto{ClusterTimestamp: i64(1404198295326), Id: i64(3)},
	}
	listOf := func(queue, id string, start, end int64, include bool) *yarnpb.ReservationListRequestProto {
		return &yarnpb.ReservationListRequestProto{Queue: str(queue), ReservationId: str(id), StartTime: i64(start), EndTime: i64(end),
			IncludeResourceAllocations: proto.Bool(include)}
	}
	tests := []struct {
		name, method, target, contentType, body string
		want                                    reservationCall
	}{
		{"a new reservation, as its caller", http.MethodPost, "/new-reservation?user.name=alice", "", "",
			reservationCall{name: "getNewReservation", user: "alice"}},
		{"a new reservation, as the static user", http.MethodPost, "/new-reservation", "", "",
			reservationCall{name: "getNewReservation", user: "dr.who"}},
		{"a submission", http.MethodPost, "/submit?user.name=alice", "application/json", docReservationSubmission,
			reservationCall{"submitReservation", "alice", docSubmission}},
		{"a submission in XML", http.MethodPost, "/submit?user.name=alice", "application/xml", docReservationSubmissionXML,
			reservationCall{"submitReservation", "alice", docSubmission}},
		{"a submission without an id, nor a queue", http.MethodPost, "/submit?user.name=alice", "application/json",
			`{"reservation-definition":{"arrival":1765541532000,"deadline":1765542252000,"reservation-name":"res_1","reservation-requests":` +
				`{"reservation-request":{"duration":60000,"num-containers":220,"min-concurrency":220,"capability":{"memory":1024,"vCores":1}}}}}`,
			reservationCall{"submitReservation", "alice", &yarnpb.ReservationSubmissionRequestProto{ReservationDefinition: definition(stage(60000, 220, 220))}}},
		{"a submission whose id ends in underscores, which split drops", http.MethodPost, "/submit?user.name=alice", "application/json",
			`{"reservation-id":"reservation_7_8__","reservation-definition":{"reservation-requests":{"reservation-request-interpreter":3,` +
				`"reservation-request":[{"capability":{"memory":1,"vCores":2}}]},"priority":2,"recurrence-expression":"86400000"}}`,
			reservationCall{"submitReservation", "alice", &yarnpb.ReservationSubmissionRequestProto{
				ReservationDefinition: &yarnpb.ReservationDefinitionProto{
					ReservationRequests: &yarnpb.ReservationRequestsProto{
						ReservationResources: []*yarnpb.ReservationRequestProto{{Capability: res(1, 2), NumContainers: i32(0), Concurrency: i32(0), Duration: i64(0)}},
						Interpreter:          yarnpb.ReservationRequestInterpreterProto_R_ORDER_NO_GAP.Enum(),
					},
					Arrival: i64(0), Deadline: i64(0), RecurrenceExpression: str("86400000"), Priority: &yarnpb.PriorityProto{Priority: i32(2)},
				},
				ReservationId: &yarnpb.ReservationIdProto{ClusterTimestamp: i64(7), Id: i64(8)},
			}}},
		{"an update", http.MethodPost, "/update?user.name=alice", "application/json", docReservationUpdate,
			reservationCall{"updateReservation", "alice", &yarnpb.ReservationUpdateRequestProto{
				ReservationDefinition: definition(stage(60000, 100, 1)),
				ReservationId:         &yarnpb.ReservationIdProto{ClusterTimestamp: i64(1449259268893), Id: i64(5)},
			}}},
		{"a deletion", http.MethodPost, "/delete?user.name=alice", "application/json", docReservationDeletion,
			reservationCall{"deleteReservation", "alice", &yarnpb.ReservationDeleteRequestProto{
				ReservationId: &yarnpb.ReservationIdProto{ClusterTimestamp: i64(1449259268893), Id: i64(5)},
			}}},
		{"a deletion without an id", http.MethodPost, "/delete?user.name=alice", "application/json", `{}`,
			reservationCall{"deleteReservation", "alice", &yarnpb.ReservationDeleteRequestProto{}}},
		{"a list of the defaults", http.MethodGet, "/list?user.name=alice", "", "",
			reservationCall{"listReservations", "alice", listOf("default", "", 0, -1, false)}},
		{"a list of ResourceManagerRest.md's example", http.MethodGet,
			"/list?queue=dedicated&start-time=1455159355000&end-time=1475160036000&include-resource-allocations=true&user.name=alice", "", "",
			reservationCall{"listReservations", "alice", listOf("dedicated", "", 1455159355000, 1475160036000, true)}},
		{"a list of one reservation, its first values", http.MethodGet,
			"/list?reservation-id=reservation_1_0001&reservation-id=other&start-time=5&start-time=x&include-resource-allocations=TRUE", "", "",
			reservationCall{"listReservations", "dr.who", listOf("default", "reservation_1_0001", 5, -1, true)}},
		{"a list of blank times, their defaults, and an empty queue, not its default", http.MethodGet,
			"/list?queue=&start-time=&end-time=%20%09&include-resource-allocations=", "", "",
			reservationCall{"listReservations", "dr.who", listOf("", "", 0, -1, false)}},
		{"a list with signed times and an allocations flag Boolean.valueOf reads false", http.MethodGet,
			"/list?start-time=%2B7&end-time=-3&include-resource-allocations=yes", "", "",
			reservationCall{"listReservations", "dr.who", listOf("default", "", 7, -3, false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			w := serveAs(t, newServer(t, f), tt.method, reservations+tt.target, tt.contentType, "", tt.body)
			if w.Code >= 500 && tt.want.name != "getNewReservation" {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if len(f.reservationCalls) != 1 {
				t.Fatalf("RM calls %v, want one", f.reservationCalls)
			}
			got := f.reservationCalls[0]
			if got.name != tt.want.name || got.user != tt.want.user || !proto.Equal(got.req, tt.want.req) {
				t.Errorf("RM got %s as %s: %v\nwant %s as %s: %v", got.name, got.user, got.req, tt.want.name, tt.want.user, tt.want.req)
			}
		})
	}
}

func TestAListsQueryIsReadAsJerseyReadsItBeforeTheCaller(t *testing.T) {
	const class = "com.sun.jersey.api.ParamException$QueryParamException"
	queryParam := func(name, query, input string) remoteCase {
		return remoteCase{name: name, method: http.MethodGet, target: reservations + "/list?" + query, requireUser: true,
			status: http.StatusInternalServerError, exception: "QueryParamException",
			message: `java.lang.NumberFormatException: For input string: "` + input + `"`, javaClass: class}
	}
	runRemoteCases(t, []remoteCase{
		queryParam("a start that is no number", "start-time=soon", "soon"),
		queryParam("an end with a fraction", "end-time=1.5", "1.5"),
		queryParam("a start padded, which Long.valueOf does not trim", "start-time=%207", " 7"),
		queryParam("a start past a long", "start-time=9223372036854775808", "9223372036854775808"),
		queryParam("both bad, the start first as declared", "end-time=never&start-time=soon", "soon"),
	})
}

func TestReservationResourcesTakeOnlyTheirMethods(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/new-reservation"},
		{http.MethodGet, "/submit"},
		{http.MethodPut, "/update"},
		{http.MethodDelete, "/delete"},
		{http.MethodPost, "/list"},
	} {
		w := serve(t, newServer(t, newFake(t)), tc.method, reservations+tc.path+"?user.name=alice", "")
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, w.Code, w.Body)
		}
	}
}

func TestAReservationCallTheRMTookHasNoAnswer(t *testing.T) {
	for _, target := range []string{"/new-reservation", "/list"} {
		f := newFake(t)
		f.reservationErr = nil
		method := http.MethodPost
		if target == "/list" {
			method = http.MethodGet
		}
		w := serve(t, newServer(t, f), method, reservations+target, "")
		var body struct{ RemoteException remoteException }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusInternalServerError ||
			body.RemoteException.Message != errReservationTaken.Error() {
			t.Errorf("%s: %d %s", target, w.Code, w.Body)
		}
	}
}

func TestTheRMsRefusalIsWrittenAsJerseyWritesIt(t *testing.T) {
	w := serve(t, newServer(t, newFake(t)), http.MethodGet, reservations+"/list?user.name=alice", "")
	want := `{"RemoteException":{"exception":"BadRequestException","message":"` + disabledMessage + `","javaClassName":"` + badRequestClass + `"}}`
	if w.Code != http.StatusBadRequest || w.Body.String() != want {
		t.Errorf("%d %s\nwant %s", w.Code, w.Body, want)
	}
}
