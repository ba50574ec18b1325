package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnid"
)

// MaxBodyBytes caps request bodies.
const MaxBodyBytes = 1 << 20

// Config configures the REST API.
type Config struct {
	// Cluster answers every call. Required.
	Cluster Cluster
	// Logger logs errors the RM returns. If nil, slog.Default() is used.
	Logger *slog.Logger
	// AnonymousUser is the caller when a request has no user.name. If
	// empty, "dr.who" (Hadoop's hadoop.http.staticuser.user) is used.
	AnonymousUser string
	// RequireUser rejects writes, and the reservation list, without
	// user.name with 401 AuthorizationException, as an RM behind an
	// authentication filter does.
	RequireUser bool
	// Now is the clock for elapsed times. If nil, time.Now is used.
	Now func() time.Time
}

type server struct {
	cfg Config
	log *slog.Logger
}

// New returns the REST API's handler, serving /ws/v1/cluster/....
func New(cfg Config) *echo.Echo {
	if cfg.AnonymousUser == "" {
		cfg.AnonymousUser = "dr.who"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	Route(e, Resources{
		Info: s.info, Metrics: s.metrics, Scheduler: s.scheduler, Apps: s.apps, Submit: s.submit, NewApplication: s.newApplication,
		App: s.app, GetState: s.appView(stateOf), PutState: s.putState, Attempts: s.attempts, Nodes: s.nodes, Node: s.node,
		GetPriority: s.appView(priorityOf), PutPriority: s.putPriority, GetQueue: s.appView(queueOf), PutQueue: s.putQueue,
		GetTimeouts: s.appView(timeoutsOf), GetTimeout: s.getTimeout, PutTimeout: s.putTimeout,
		Attempt: s.attempt, Containers: s.containers, Container: s.container, AppStatistics: s.appStatistics,
		NodeLabels: s.labelsAs(NodeLabelsBody), NodeToLabels: s.labelsAs(NodeToLabelsBody), LabelsToNodes: s.labelsToNodes, LabelsOnNode: s.labelsOnNode,
		NewReservation:    s.newReservation,
		SubmitReservation: reservationWrite(s, reservationSubmissionRoot, (*reservationSubmission).request, Cluster.SubmitReservation),
		UpdateReservation: reservationWrite(s, reservationUpdateRoot, (*reservationUpdate).request, Cluster.UpdateReservation),
		DeleteReservation: reservationWrite(s, reservationDeleteRoot, (*reservationDeletion).request, Cluster.DeleteReservation),
		ListReservations:  s.listReservations,
	})
	return e
}

// Resources are the handlers of the REST API's resources, which the RM
// and the Router serve under the same paths; Route gives each its path.
type Resources struct {
	Info, Metrics, Scheduler          echo.HandlerFunc
	Apps, Submit, NewApplication      echo.HandlerFunc
	App, GetState, PutState, Attempts echo.HandlerFunc
	Nodes, Node                       echo.HandlerFunc
	// The application's priority, queue and timeouts.
	GetPriority, PutPriority, GetQueue, PutQueue echo.HandlerFunc
	GetTimeouts, GetTimeout, PutTimeout          echo.HandlerFunc
	// One attempt, its containers and one of them.
	Attempt, Containers, Container echo.HandlerFunc
	AppStatistics                  echo.HandlerFunc
	// The cluster's node labels, each node's, each label's nodes, and
	// one node's labels.
	NodeLabels, NodeToLabels, LabelsToNodes, LabelsOnNode echo.HandlerFunc
	// A new reservation id, a reservation's submission, update and
	// deletion, and the list of reservations.
	NewReservation, SubmitReservation, UpdateReservation, DeleteReservation, ListReservations echo.HandlerFunc
}

// Route serves r under /ws/v1/cluster on e and caps every body of e with
// LimitBody (as e's middleware: a group's would turn 405s into 404s); the
// application's id is the path parameter "appid", the node's "nodeid",
// an attempt's "appattemptid", a container's "containerid", a timeout
// type's "type".
func Route(e *echo.Echo, r Resources) {
	e.Use(LimitBody)
	g := e.Group("/ws/v1/cluster")
	g.GET("", r.Info)
	g.GET("/", r.Info)
	g.GET("/info", r.Info)
	g.GET("/metrics", r.Metrics)
	g.GET("/scheduler", r.Scheduler)
	g.GET("/apps", r.Apps)
	g.POST("/apps", r.Submit)
	g.POST("/apps/new-application", r.NewApplication)
	g.GET("/apps/:appid", r.App)
	g.GET("/apps/:appid/state", r.GetState)
	g.PUT("/apps/:appid/state", r.PutState)
	g.GET("/apps/:appid/appattempts", r.Attempts)
	g.GET("/apps/:appid/appattempts/:appattemptid", r.Attempt)
	g.GET("/apps/:appid/appattempts/:appattemptid/containers", r.Containers)
	g.GET("/apps/:appid/appattempts/:appattemptid/containers/:containerid", r.Container)
	g.GET("/apps/:appid/priority", r.GetPriority)
	g.PUT("/apps/:appid/priority", r.PutPriority)
	g.GET("/apps/:appid/queue", r.GetQueue)
	g.PUT("/apps/:appid/queue", r.PutQueue)
	g.GET("/apps/:appid/timeouts", r.GetTimeouts)
	g.GET("/apps/:appid/timeouts/:type", r.GetTimeout)
	g.PUT("/apps/:appid/timeout", r.PutTimeout)
	g.GET("/appstatistics", r.AppStatistics)
	g.GET("/nodes", r.Nodes)
	g.GET("/nodes/:nodeid", r.Node)
	g.GET("/nodes/:nodeid/get-labels", r.LabelsOnNode)
	g.GET("/get-node-labels", r.NodeLabels)
	g.GET("/get-node-to-labels", r.NodeToLabels)
	g.GET("/label-mappings", r.LabelsToNodes)
	g.POST("/reservation/new-reservation", r.NewReservation)
	g.POST("/reservation/submit", r.SubmitReservation)
	g.POST("/reservation/update", r.UpdateReservation)
	g.POST("/reservation/delete", r.DeleteReservation)
	g.GET("/reservation/list", r.ListReservations)
}

// LimitBody caps the request body at MaxBodyBytes; a handler reading more
// gets an *http.MaxBytesError.
func LimitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, MaxBodyBytes)
		return next(c)
	}
}

// user is the caller; ok is false when the request named none.
func (s *server) user(c echo.Context) (string, bool) {
	if u := c.QueryParam("user.name"); u != "" {
		return u, true
	}
	return s.cfg.AnonymousUser, false
}

// writer is the caller of a write, or the 401 answer.
func (s *server) writer(c echo.Context) (string, error) {
	u, ok := s.user(c)
	if !ok && s.cfg.RequireUser {
		return "", notAuthenticated()
	}
	return u, nil
}

// ErrorHandler answers a handler's error as the REST API does: a
// RemoteException whose status the error's Java exception picks (see
// Cluster), and Hadoop's answers for unknown paths and methods. The
// Router's REST API answers its own errors with it.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	if log == nil {
		log = slog.Default()
	}
	return (&server{log: log}).handleError
}

func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	var re *remoteException
	switch {
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			re = notFound("Resource not found: " + c.Request().URL.Path)
		case http.StatusMethodNotAllowed:
			re = webApplicationError(he.Code, "HTTP 405 Method Not Allowed")
		case http.StatusRequestEntityTooLarge:
			re = badRequest("request body too large")
		default:
			re = webApplicationError(he.Code, http.StatusText(he.Code))
		}
	default:
		re = fromCluster(err, "")
	}
	if re.status >= 500 {
		s.log.Error("REST call failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	_ = writeJSON(c, re.status, map[string]*remoteException{"RemoteException": re})
}

// WriteJSON answers v as the REST API writes JSON: Jersey's escaping and
// the RM's cache headers; or, for a caller that prefers XML, the XML JAXB
// writes for it (xml.go).
func WriteJSON(c echo.Context, status int, v any) error { return writeJSON(c, status, v) }

func writeJSON(c echo.Context, status int, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if prefersXML(c.Request().Header.Get("Accept")) {
		x, err := answerXML(v, b)
		if err != nil {
			return fmt.Errorf("rest: the answer as XML: %w", err)
		}
		return c.Blob(status, xmlContentType, x)
	}
	return c.Blob(status, "application/json;charset=utf-8", b)
}

func (s *server) info(c echo.Context) error {
	ci, err := s.cfg.Cluster.Info(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		ClusterInfo ClusterInfo `json:"clusterInfo"`
	}{ci})
}

func (s *server) metrics(c echo.Context) error {
	m, err := s.cfg.Cluster.Metrics(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		ClusterMetrics ClusterMetrics `json:"clusterMetrics"`
	}{m})
}

func (s *server) scheduler(c echo.Context) error {
	raw, err := s.cfg.Cluster.Scheduler(c.Request().Context())
	if err != nil {
		return err
	}
	var out struct {
		Scheduler struct {
			SchedulerInfo json.RawMessage `json:"schedulerInfo"`
		} `json:"scheduler"`
	}
	out.Scheduler.SchedulerInfo = raw
	return writeJSON(c, http.StatusOK, out)
}

func (s *server) clusterID(c echo.Context) (int64, error) {
	ci, err := s.cfg.Cluster.Info(c.Request().Context())
	return ci.ID, err
}

func (s *server) apps(c echo.Context) error {
	user, _ := s.user(c)
	q, err := parseAppsQuery(c.QueryParams())
	if err != nil {
		return err
	}
	list, err := s.cfg.Cluster.Applications(c.Request().Context(), user, q.filter)
	if err != nil {
		return err
	}
	id, err := s.clusterID(c)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	var out []appInfo
	for _, a := range list {
		if q.finalStatus != "" && !strings.EqualFold(strings.TrimPrefix(a.Report.GetFinalApplicationStatus().String(), "APP_"), q.finalStatus) {
			continue
		}
		out = append(out, newAppInfo(a, id, now, q.deSelects))
	}
	var body struct {
		Apps struct {
			App []appInfo `json:"app,omitempty"`
		} `json:"apps"`
	}
	body.Apps.App = out
	return writeJSON(c, http.StatusOK, body)
}

func (s *server) app(c echo.Context) error {
	user, _ := s.user(c)
	appID := c.Param("appid")
	a, err := s.lookup(c, user, appID)
	if err != nil {
		return err
	}
	ds, err := parseDeSelects(c.QueryParams()["deSelects"])
	if err != nil {
		return err
	}
	id, err := s.clusterID(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		App appInfo `json:"app"`
	}{newAppInfo(a, id, s.cfg.Now(), ds)})
}

// lookup checks the id as Hadoop's parseApplicationId does, then asks the
// Cluster, mapping not found onto Hadoop's message.
func (s *server) lookup(c echo.Context, user, appID string) (App, error) {
	if err := CheckApplicationID(appID); err != nil {
		return App{}, err
	}
	a, err := s.cfg.Cluster.Application(c.Request().Context(), user, appID)
	if err != nil {
		return App{}, fromCluster(err, appID)
	}
	if a.Report == nil {
		return App{}, notFound("app with id: " + appID + " not found")
	}
	return a, nil
}

// CheckApplicationID refuses an application id of a path as Hadoop's
// parseApplicationId does, with its answer; the Router checks ids before
// it looks for their home.
func CheckApplicationID(appID string) error {
	if appID == "" {
		return notFound("appId, " + appID + ", is empty or null")
	}
	if _, err := yarnid.ParseApplicationID(appID); err != nil {
		// BadRequestException(IllegalArgumentException from
		// ApplicationId.fromString): the cause's message, unwrapped.
		re := badRequest("")
		re.Message = "Invalid ApplicationId: " + appID
		if !strings.HasPrefix(appID, "application_") {
			re.Message = "Invalid ApplicationId prefix: " + appID + ". The valid ApplicationId should start with prefix application"
		}
		return re
	}
	return nil
}

// appView answers a GET about one application with view of its report,
// whoever asks: YARN reads these of the RMApp without an ACL check, and
// every report carries them.
func (s *server) appView(view func(App) any) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, _ := s.user(c)
		a, err := s.lookup(c, user, c.Param("appid"))
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, view(a))
	}
}

func stateOf(a App) any { return appState{State: a.Report.GetYarnApplicationState().String()} }

// update reads the body of a write about one application into target,
// whose XML root element is root, after the caller's 401 and before the
// application's 404, as RMWebServices does.
func (s *server) update(c echo.Context, root string, target any) (user, appID string, a App, err error) {
	if err = decodeBody(c, root, target); err != nil {
		return
	}
	if user, err = s.writer(c); err != nil {
		return
	}
	appID = c.Param("appid")
	a, err = s.lookup(c, user, appID)
	return
}

func (s *server) putState(c echo.Context) error {
	var target appState
	user, appID, a, err := s.update(c, appStateRoot, &target)
	if err != nil {
		return err
	}
	current := a.Report.GetYarnApplicationState().String()
	if current == target.State {
		return writeJSON(c, http.StatusOK, appState{State: current})
	}
	if target.State != "KILLED" {
		return badRequest("Only 'KILLED' is allowed as a target state.")
	}
	killed, err := s.cfg.Cluster.Kill(c.Request().Context(), user, appID, target.Diagnostics)
	if err != nil {
		re := fromCluster(err, appID)
		if re.status == http.StatusForbidden {
			re = forbidden("Unauthorized attempt to kill appid " + appID + " by remote user " + user)
		}
		return re
	}
	if a, err = s.lookup(c, user, appID); err != nil {
		return err
	}
	body := appState{State: a.Report.GetYarnApplicationState().String()}
	if !killed {
		c.Response().Header().Set(echo.HeaderLocation, requestURL(c))
		return writeJSON(c, http.StatusAccepted, body)
	}
	return writeJSON(c, http.StatusOK, body)
}

func (s *server) attempts(c echo.Context) error {
	user, _ := s.user(c)
	appID := c.Param("appid")
	a, err := s.lookup(c, user, appID)
	if err != nil {
		return err
	}
	list, err := s.cfg.Cluster.Attempts(c.Request().Context(), user, appID)
	if err != nil {
		return fromCluster(err, appID)
	}
	var body struct {
		AppAttempts struct {
			AppAttempt []appAttemptInfo `json:"appAttempt,omitempty"`
		} `json:"appAttempts"`
	}
	for _, at := range list {
		body.AppAttempts.AppAttempt = append(body.AppAttempts.AppAttempt, newAppAttemptInfo(at, a.Report.GetUser()))
	}
	return writeJSON(c, http.StatusOK, body)
}

func (s *server) newApplication(c echo.Context) error {
	user, err := s.writer(c)
	if err != nil {
		return err
	}
	resp, err := s.cfg.Cluster.NewApplication(c.Request().Context(), user)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, newApplication{
		ApplicationID:             appID(resp.GetApplicationId()),
		MaximumResourceCapability: ResourceFromProto(resp.GetMaximumCapability()),
	})
}

func (s *server) submit(c echo.Context) error {
	// Jersey reads the entity before the resource method runs: a body it
	// cannot read is refused before the caller is asked for.
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return bodyError(err)
	}
	var in submissionContext
	if err := DecodeBody(c.Request().Header.Get(echo.HeaderContentType), SubmissionRoot, body, &in); err != nil {
		return err
	}
	user, err := s.writer(c)
	if err != nil {
		return err
	}
	sc, err := submissionProto(in)
	if err != nil {
		return err
	}
	id := appID(sc.GetApplicationId())
	if err := s.cfg.Cluster.Submit(c.Request().Context(), user, sc); err != nil {
		return fromCluster(err, "")
	}
	c.Response().Header().Set(echo.HeaderLocation, strings.TrimSuffix(requestURL(c), "/")+"/"+id)
	return c.NoContent(http.StatusAccepted)
}

func (s *server) nodes(c echo.Context) error {
	states, err := parseNodeStates(c.QueryParams()["states"])
	if err != nil {
		return err
	}
	list, err := s.cfg.Cluster.Nodes(c.Request().Context(), states)
	if err != nil {
		return err
	}
	var body struct {
		Nodes struct {
			Node []nodeInfo `json:"node,omitempty"`
		} `json:"nodes"`
	}
	for _, n := range list {
		body.Nodes.Node = append(body.Nodes.Node, newNodeInfo(n))
	}
	return writeJSON(c, http.StatusOK, body)
}

func (s *server) node(c echo.Context) error {
	id := c.Param("nodeid")
	n, err := s.cfg.Cluster.Node(c.Request().Context(), id)
	if errors.Is(err, ErrNodeNotFound) || (err == nil && n.Report == nil) {
		return notFound("nodeId, " + id + ", is not found")
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		Node nodeInfo `json:"node"`
	}{newNodeInfo(n)})
}

// decodeBody reads the request's body into v with DecodeBody.
func decodeBody(c echo.Context, root string, v any) error {
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return bodyError(err)
	}
	return DecodeBody(c.Request().Header.Get(echo.HeaderContentType), root, b, v)
}

func bodyError(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return badRequest("request body larger than " + strconv.Itoa(MaxBodyBytes) + " bytes")
	}
	return badRequest("cannot read request body: " + err.Error())
}

// requestURL is Hadoop's HttpServletRequest.getRequestURL: scheme, host and
// path, no query.
func requestURL(c echo.Context) string {
	return c.Scheme() + "://" + c.Request().Host + c.Request().URL.Path
}
