package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// The reservation resources (/reservation/...). RMWebServices builds the
// client protocol's request of each from its query or body and calls
// ClientRMService, which refuses every call first thing while the RM has
// no reservation system; Knit's RM never has one. So what a caller can
// tell apart is the checks RMWebServices makes before that call, made
// here in its order, and how it answers the refusal.

// The XML root elements of the reservation bodies, their classes'
// @XmlRootElement.
const (
	reservationSubmissionRoot = "reservation-submission-context"
	reservationUpdateRoot     = "reservation-update-context"
	reservationDeleteRoot     = "reservation-delete-context"
)

// reservationSubmission is ReservationSubmissionRequestInfo, the body of
// POST /reservation/submit.
type reservationSubmission struct {
	Queue         *string                `json:"queue"`
	Definition    *reservationDefinition `json:"reservation-definition"`
	ReservationID *string                `json:"reservation-id"`
}

// reservationUpdate is ReservationUpdateRequestInfo, the body of POST
// /reservation/update.
type reservationUpdate struct {
	ReservationID *string                `json:"reservation-id"`
	Definition    *reservationDefinition `json:"reservation-definition"`
}

// reservationDeletion is ReservationDeleteRequestInfo, the body of POST
// /reservation/delete.
type reservationDeletion struct {
	ReservationID *string `json:"reservation-id"`
}

// reservationDefinition is ReservationDefinitionInfo.
type reservationDefinition struct {
	Arrival    int64                `json:"arrival"`
	Deadline   int64                `json:"deadline"`
	Requests   *reservationRequests `json:"reservation-requests"`
	Name       *string              `json:"reservation-name"`
	Priority   int32                `json:"priority"`
	Recurrence *string              `json:"recurrence-expression"`
}

// reservationRequests is ReservationRequestsInfo: the stages, and how
// they combine as an ordinal of ReservationRequestInterpreter.
type reservationRequests struct {
	Interpreter int32                    `json:"reservation-request-interpreter"`
	Request     list[reservationRequest] `json:"reservation-request"`
}

// reservationRequest is ReservationRequestInfo, one stage.
type reservationRequest struct {
	Capability *struct {
		Memory int64 `json:"memory"`
		VCores int32 `json:"vCores"`
	} `json:"capability"`
	MinConcurrency int32 `json:"min-concurrency"`
	NumContainers  int32 `json:"num-containers"`
	Duration       int64 `json:"duration"`
}

// capabilityNPE is the NullPointerException RMWebServices meets reading a
// stage without a capability (rInfo.getMemorySize()), worded as Java 15
// and later word it, the Java 17 of the recorded RM (Java 11 gives it no
// message).
const capabilityNPE = `Cannot invoke "org.apache.hadoop.yarn.server.resourcemanager.webapp.dao.ResourceInfo.getMemorySize()" because "rInfo" is null`

// request is createReservationSubmissionRequest's.
func (in *reservationSubmission) request() (*yarnpb.ReservationSubmissionRequestProto, error) {
	def, err := in.Definition.request()
	if err != nil {
		return nil, err
	}
	id, err := parseReservationID(in.ReservationID)
	if err != nil {
		return nil, err
	}
	return &yarnpb.ReservationSubmissionRequestProto{Queue: in.Queue, ReservationDefinition: def, ReservationId: id}, nil
}

// request is createReservationUpdateRequest's, which looks for the id
// between the definition's checks and its reading.
func (in *reservationUpdate) request() (*yarnpb.ReservationUpdateRequestProto, error) {
	if err := in.Definition.check(); err != nil {
		return nil, err
	}
	if in.ReservationID == nil {
		// Hadoop's spelling.
		return nil, badRequest("Update operations must specify an existing ReservaitonId")
	}
	def, err := in.Definition.request()
	if err != nil {
		return nil, err
	}
	id, err := parseReservationID(in.ReservationID)
	if err != nil {
		return nil, err
	}
	return &yarnpb.ReservationUpdateRequestProto{ReservationDefinition: def, ReservationId: id}, nil
}

// request is createReservationDeleteRequest's: the id alone, none if the
// body has none.
func (in *reservationDeletion) request() (*yarnpb.ReservationDeleteRequestProto, error) {
	id, err := parseReservationID(in.ReservationID)
	if err != nil {
		return nil, err
	}
	return &yarnpb.ReservationDeleteRequestProto{ReservationId: id}, nil
}

// check refuses a definition that is missing or has no stage, with
// RMWebServices' messages. A body that is missing altogether ("Input
// ReservationSubmissionContext should not be null") cannot get this far:
// one Jersey could not read is refused first.
func (d *reservationDefinition) check() error {
	if d == nil {
		return badRequest("Input ReservationDefinition should not be null")
	}
	if d.Requests == nil || len(d.Requests.Request) == 0 {
		return badRequest("The ReservationDefinition should contain at least one ReservationRequest")
	}
	return nil
}

// request checks the definition and makes its RPC form as RMWebServices
// does: the interpreter indexes ReservationRequestInterpreter.values()
// and each stage's capability is read unchecked, so either fails with
// the Java exception that indexing and reading throw.
func (d *reservationDefinition) request() (*yarnpb.ReservationDefinitionProto, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	n := int32(len(yarnpb.ReservationRequestInterpreterProto_name))
	if i := d.Requests.Interpreter; i < 0 || i >= n {
		return nil, exception(http.StatusInternalServerError,
			yarnerr.ArrayIndexOutOfBounds.New(fmt.Sprintf("Index %d out of bounds for length %d", i, n)))
	}
	reqs := &yarnpb.ReservationRequestsProto{Interpreter: yarnpb.ReservationRequestInterpreterProto(d.Requests.Interpreter).Enum()}
	for _, r := range d.Requests.Request {
		if r.Capability == nil {
			return nil, exception(http.StatusInternalServerError, yarnerr.NullPointer.New(capabilityNPE))
		}
		reqs.ReservationResources = append(reqs.ReservationResources, &yarnpb.ReservationRequestProto{
			Capability:    &yarnpb.ResourceProto{Memory: ptr(r.Capability.Memory), VirtualCores: ptr(r.Capability.VCores)},
			NumContainers: ptr(r.NumContainers),
			Concurrency:   ptr(r.MinConcurrency),
			Duration:      ptr(r.Duration),
		})
	}
	return &yarnpb.ReservationDefinitionProto{
		ReservationRequests:  reqs,
		Arrival:              ptr(d.Arrival),
		Deadline:             ptr(d.Deadline),
		ReservationName:      d.Name,
		RecurrenceExpression: d.Recurrence,
		Priority:             &yarnpb.PriorityProto{Priority: ptr(d.Priority)},
	}, nil
}

// parseReservationID is ReservationId.parseReservationId: none for none;
// an id without the prefix, or not of three '_'-separated fields, is an
// IOException, which GenericExceptionHandler answers 404; a field that is
// no long, Long.parseLong's NumberFormatException (400).
func parseReservationID(id *string) (*yarnpb.ReservationIdProto, error) {
	if id == nil {
		return nil, nil
	}
	s := *id
	if !strings.HasPrefix(s, "reservation_") {
		return nil, exception(http.StatusNotFound, yarnerr.IOException.New("The specified reservation id is invalid: "+s))
	}
	fields := strings.Split(s, "_")
	// String.split drops the trailing empty fields.
	for fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	if len(fields) != 3 {
		return nil, exception(http.StatusNotFound, yarnerr.IOException.New("The specified reservation id is not parseable: "+s))
	}
	var n [2]int64
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, exception(http.StatusBadRequest, numberFormat(f))
		}
		n[i] = v
	}
	return &yarnpb.ReservationIdProto{ClusterTimestamp: ptr(n[0]), Id: ptr(n[1])}, nil
}

// listRequest is GET /reservation/list's query as Jersey hands it to
// listReservation, each parameter defaulted as it declares, in its order.
func listRequest(q url.Values) (*yarnpb.ReservationListRequestProto, error) {
	start, err := queryLong(q, "start-time", 0)
	if err != nil {
		return nil, err
	}
	end, err := queryLong(q, "end-time", -1)
	if err != nil {
		return nil, err
	}
	return &yarnpb.ReservationListRequestProto{
		Queue:                      ptr(queryString(q, "queue", "default")),
		ReservationId:              ptr(queryString(q, "reservation-id", "")),
		StartTime:                  &start,
		EndTime:                    &end,
		IncludeResourceAllocations: ptr(queryBool(q, "include-resource-allocations")),
	}, nil
}

// queryString is a String query parameter as Jersey reads one: its first
// value, even empty, or def when it is absent.
func queryString(q url.Values, name, def string) string {
	if v, ok := q[name]; ok && len(v) > 0 {
		return v[0]
	}
	return def
}

// queryLong is a long query parameter as Jersey 1 reads a primitive one:
// def for a blank first value, else Long.valueOf of it untrimmed. A value
// it refuses fails the request before the resource method runs, with a
// ParamException GenericExceptionHandler knows no status for (500).
func queryLong(q url.Values, name string, def int64) (int64, error) {
	v := q.Get(name)
	if javaTrim(v) == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, exception(http.StatusInternalServerError, yarnerr.QueryParam.New(yarnerr.JavaString(numberFormat(v))))
	}
	return n, nil
}

// queryBool is a boolean query parameter defaulting to false as Jersey 1
// reads a primitive one: Boolean.valueOf, true for "true" in any case and
// false for anything else, never an error.
func queryBool(q url.Values, name string) bool {
	return strings.EqualFold(q.Get(name), "true")
}

// javaTrim is String.trim, which cuts every character up to the space.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// errReservationTaken answers a reservation call the Cluster took, which
// Knit's RM never does (see Cluster).
var errReservationTaken = errors.New("rest: the RM took a reservation call, which the REST API has no answer for")

func (s *server) newReservation(c echo.Context) error {
	user, err := s.writer(c)
	if err != nil {
		return err
	}
	err = s.cfg.Cluster.NewReservation(c.Request().Context(), user)
	if e, ok := yarnerr.Find(err); ok && e.Class.IsYarnException() {
		// createNewReservation calls ClientRMService outside the caller's
		// doAs and wraps what it throws in one message of its own.
		return exception(http.StatusInternalServerError, yarnerr.YarnRuntime.New("Unable to create new reservation from RM web service"))
	}
	return refused(err)
}

// reservationWrite serves a reservation call with a body, read into a B
// whose XML root is root, as RMWebServices does: Jersey reads the body
// before the resource method runs, so one it cannot read is refused
// before the caller's 401; then the method makes the request (request)
// and calls ClientRMService in the caller's doAs (call, a Cluster method).
func reservationWrite[B, R any](s *server, root string, request func(*B) (R, error),
	call func(c Cluster, ctx context.Context, user string, req R) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in B
		if err := decodeBody(c, root, &in); err != nil {
			return err
		}
		user, err := s.writer(c)
		if err != nil {
			return err
		}
		req, err := request(&in)
		if err != nil {
			return err
		}
		return doAsRefusal(call(s.cfg.Cluster, c.Request().Context(), user, req))
	}
}

// listReservations reads the query before the caller, as Jersey and
// listReservation do; listReservation refuses a caller without a name
// as the writes do, although it is a GET.
func (s *server) listReservations(c echo.Context) error {
	req, err := listRequest(c.QueryParams())
	if err != nil {
		return err
	}
	user, err := s.writer(c)
	if err != nil {
		return err
	}
	return doAsRefusal(s.cfg.Cluster.ListReservations(c.Request().Context(), user, req))
}

// doAsRefusal answers the RM's refusal of a call RMWebServices makes in
// the caller's doAs: a YarnException, which doAs wraps in an
// UndeclaredThrowableException, becomes a BadRequestException of its
// message; anything else is answered as it is.
func doAsRefusal(err error) error {
	if e, ok := yarnerr.Find(err); ok && e.Class.IsYarnException() {
		return badRequest(e.Message)
	}
	return refused(err)
}

// refused is err, or errReservationTaken for none.
func refused(err error) error {
	if err == nil {
		return errReservationTaken
	}
	return err
}
