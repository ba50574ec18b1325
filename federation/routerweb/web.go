package routerweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/rm/rest"
)

// MaxAnswerBytes bounds what the Router reads of one sub-cluster's answer:
// a list of some ten thousand applications.
const MaxAnswerBytes = 64 << 20

// Store is what the web API reads of the federation store (store.Cache).
type Store interface {
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	GetSubCluster(ctx context.Context, id string) (store.SubClusterInfo, error)
	// GetSubClusterFlushed reads past the cache, after a call to a
	// sub-cluster's cached address failed.
	GetSubClusterFlushed(ctx context.Context, id string) (store.SubClusterInfo, error)
	GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error)
}

// Placer places new applications as the RPC Router does (router.Router).
type Placer interface {
	OnRandomActive(ctx context.Context, try func(context.Context, store.SubClusterInfo) error) error
	SubmitHome(ctx context.Context, sub router.Submission, submit func(ctx context.Context, home string) error) error
}

// Config configures the Router's web address.
type Config struct {
	Store  Store
	Placer Placer
	// Client calls the sub-clusters' RM web services; nil means one with
	// a 30 s timeout (yarn.router.webapp.read-timeout's default).
	Client *http.Client
	Logger *slog.Logger
	// Now is the page's clock; nil means time.Now.
	Now func() time.Time
}

// Web serves the Router's REST API and federation page.
type Web struct {
	store  Store
	placer Placer
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	page   *template.Template
}

// New returns the web API cfg describes; it does no I/O.
func New(cfg Config) (*Web, error) {
	if cfg.Store == nil || cfg.Placer == nil {
		return nil, errors.New("routerweb: needs a store and a placer")
	}
	w := &Web{store: cfg.Store, placer: cfg.Placer, client: cfg.Client, log: cfg.Logger, now: cfg.Now}
	if w.client == nil {
		w.client = &http.Client{Timeout: 30 * time.Second}
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.now == nil {
		w.now = time.Now
	}
	var err error
	if w.page, err = newPageTemplate(); err != nil {
		return nil, fmt.Errorf("routerweb: page template: %w", err)
	}
	return w, nil
}

// Handler serves /ws/v1/cluster/..., /cluster/federation and / (a
// redirect to the federation page, as the Router's web app does).
func (w *Web) Handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = rest.ErrorHandler(w.log)
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/cluster/federation") })
	e.GET("/cluster/federation", w.federationPage)
	// The resources about one application go to its home, as
	// FederationInterceptorREST sends them; the cluster-wide ones go to
	// every active sub-cluster, merged.
	rest.Route(e, rest.Resources{
		Info: w.info, Metrics: w.metrics, Scheduler: w.scheduler, Apps: w.apps, Submit: w.submit, NewApplication: w.newApplication,
		App: w.routed, GetState: w.routed, PutState: w.routed, Attempts: w.routed, Nodes: w.nodes, Node: w.node,
		GetPriority: w.routed, PutPriority: w.routed, GetQueue: w.routed, PutQueue: w.routed,
		GetTimeouts: w.routed, GetTimeout: w.routed, PutTimeout: w.routed,
		Attempt: w.routed, Containers: w.routed, Container: w.routed,
		AppStatistics: w.appStatistics,
		NodeLabels:    w.nodeLabels(rest.NodeLabelsBody), NodeToLabels: w.nodeLabels(rest.NodeToLabelsBody),
		LabelsToNodes: w.nodeLabels(func(l []rest.NodeLabel) any { return rest.LabelsToNodesBody(l, nil) }),
		LabelsOnNode:  w.nodeLabels(rest.NodeLabelsBody),
		// Every knit-rm answers a reservation call alike: one answers.
		NewReservation: w.reservation, SubmitReservation: w.reservation, UpdateReservation: w.reservation,
		DeleteReservation: w.reservation, ListReservations: w.reservation,
	})
	return e
}

// answer is one sub-cluster RM's answer.
type answer struct {
	sc     store.SubClusterInfo
	status int
	header http.Header
	body   []byte
}

// call sends one request to sc's RM web services; pathQuery is the path
// and query under the RM's address.
func (w *Web) call(ctx context.Context, sc store.SubClusterInfo, method, pathQuery string, body []byte, in http.Header) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+sc.RMWebServiceAddress+pathQuery, rd)
	if err != nil {
		return answer{}, fmt.Errorf("sub-cluster %s: %w", sc.ID, err)
	}
	for _, h := range []string{"Content-Type", "Accept"} {
		if v := in.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("sub-cluster %s: %w", sc.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return answer{}, fmt.Errorf("sub-cluster %s: reading the answer: %w", sc.ID, err)
	}
	if len(b) > MaxAnswerBytes {
		return answer{}, fmt.Errorf("sub-cluster %s: an answer over %d bytes", sc.ID, MaxAnswerBytes)
	}
	return answer{sc: sc, status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// fanOut sends a GET to every active sub-cluster at once. A sub-cluster
// that cannot be reached or fails (5xx) is logged and left out, as YARN's
// Router leaves out a sub-cluster it cannot read; a 4xx is the request's
// fault, and is returned as the answer to give. The answers are in
// sub-cluster id order.
func (w *Web) fanOut(ctx context.Context, pathQuery string) (ok []answer, refused *answer, err error) {
	active, err := w.active(ctx)
	if err != nil {
		return nil, nil, err
	}
	answers := make([]answer, len(active))
	errs := make([]error, len(active))
	var wg sync.WaitGroup
	for i, sc := range active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = w.call(ctx, sc, http.MethodGet, pathQuery, nil, nil)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			w.log.WarnContext(ctx, "sub-cluster left out of a merged answer", "subCluster", active[i].ID, "path", pathQuery, "err", errs[i])
		case a.status >= 500:
			w.log.WarnContext(ctx, "sub-cluster left out of a merged answer", "subCluster", a.sc.ID, "path", pathQuery, "status", a.status)
		case a.status >= 400:
			if refused == nil {
				refused = &answers[i]
			}
		default:
			ok = append(ok, a)
		}
	}
	return ok, refused, nil
}

// active returns the active sub-clusters in id order.
func (w *Web) active(ctx context.Context) ([]store.SubClusterInfo, error) {
	active, err := w.store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(fmt.Errorf("Unable to get the active SubClusters from the FederationStateStore: %w", err))
	}
	return slices.SortedFunc(slices.Values(active), func(a, b store.SubClusterInfo) int { return strings.Compare(a.ID, b.ID) }), nil
}

// pass answers with a sub-cluster's answer as it is.
func pass(c echo.Context, a answer) error {
	h := c.Response().Header()
	for _, k := range []string{"Content-Type", "Cache-Control", "Pragma", "X-Content-Type-Options", "Location"} {
		if v := a.header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	c.Response().WriteHeader(a.status)
	_, err := c.Response().Write(a.body)
	return err
}

// pathQuery is the request's path and raw query, which the sub-clusters
// serve under the same names.
func pathQuery(c echo.Context) string {
	u := c.Request().URL
	if u.RawQuery == "" {
		return u.EscapedPath()
	}
	return u.EscapedPath() + "?" + u.RawQuery
}

// routed sends a call about one application to its home, as
// FederationInterceptorREST does, and passes the home's answer on.
func (w *Web) routed(c echo.Context) error {
	ctx := c.Request().Context()
	appID := c.Param("appid")
	if err := rest.CheckApplicationID(appID); err != nil {
		return err
	}
	home, err := w.store.GetApplicationHomeSubCluster(ctx, appID)
	if errors.Is(err, store.ErrNotFound) {
		return rest.NotFound("app with id: " + appID + " not found")
	}
	if err != nil {
		return yarnerr.YarnException.Wrap(fmt.Errorf("Unable to get the home of %s from the FederationStateStore: %w", appID, err))
	}
	sc, err := w.store.GetSubCluster(ctx, home)
	if err != nil {
		return yarnerr.YarnException.Wrap(fmt.Errorf("Unable to get SubCluster %s of %s: %w", home, appID, err))
	}
	var body []byte
	if c.Request().Method != http.MethodGet {
		if body, err = readBody(c); err != nil {
			return err
		}
	}
	a, err := w.call(ctx, sc, c.Request().Method, pathQuery(c), body, c.Request().Header)
	if err != nil && ctx.Err() == nil {
		// The home's RM may have failed over since the cache read its
		// address, as the RPC Router allows for too.
		if now, ferr := w.store.GetSubClusterFlushed(ctx, home); ferr == nil && now.RMWebServiceAddress != sc.RMWebServiceAddress {
			w.log.InfoContext(ctx, "sub-cluster RM moved; calling its new web address", "subCluster", home, "from", sc.RMWebServiceAddress,
				"to", now.RMWebServiceAddress, "err", err)
			a, err = w.call(ctx, now, c.Request().Method, pathQuery(c), body, c.Request().Header)
		}
	}
	if err != nil {
		return yarnerr.YarnException.Wrap(fmt.Errorf("Unable to reach SubCluster %s for %s: %w", home, appID, err))
	}
	if loc := a.header.Get("Location"); loc != "" {
		// The home's Location names the RM; the client asked the Router.
		a.header = a.header.Clone()
		a.header.Set("Location", requestURL(c))
	}
	return pass(c, a)
}

func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return nil, rest.BadRequest(fmt.Sprintf("request body larger than %d bytes", rest.MaxBodyBytes))
	}
	if err != nil {
		return nil, rest.BadRequest("cannot read request body: " + err.Error())
	}
	return b, nil
}

// requestURL is the URL the client asked, without its query, as Hadoop's
// HttpServletRequest.getRequestURL.
func requestURL(c echo.Context) string {
	return c.Scheme() + "://" + c.Request().Host + c.Request().URL.EscapedPath()
}

// newApplication reserves an id on a random active sub-cluster, another
// if it fails, as the RPC Router's getNewApplication.
func (w *Web) newApplication(c echo.Context) error {
	var got answer
	err := w.placer.OnRandomActive(c.Request().Context(), func(ctx context.Context, sc store.SubClusterInfo) error {
		a, err := w.call(ctx, sc, http.MethodPost, pathQuery(c), nil, c.Request().Header)
		if err != nil {
			return err
		}
		if a.status != http.StatusOK {
			got = a
			return fmt.Errorf("sub-cluster %s answered %d", sc.ID, a.status)
		}
		got = a
		return nil
	})
	if err != nil && got.status >= 400 && got.status < 500 {
		// The caller's fault (no user, say): every sub-cluster says so.
		return pass(c, got)
	}
	if err != nil {
		return err
	}
	return pass(c, got)
}

// submit places a REST submission by its queue's policy, the RPC Router's
// way, and submits it to the home, unchanged.
func (w *Web) submit(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	sub, err := submissionOf(c.Request().Header.Get(echo.HeaderContentType), body)
	if err != nil {
		return err
	}
	var last answer
	err = w.placer.SubmitHome(c.Request().Context(), sub, func(ctx context.Context, home string) error {
		sc, err := w.store.GetSubCluster(ctx, home)
		if err != nil {
			return err
		}
		a, err := w.call(ctx, sc, http.MethodPost, pathQuery(c), body, c.Request().Header)
		if err != nil {
			return err
		}
		last = a
		if a.status != http.StatusAccepted {
			return fmt.Errorf("sub-cluster %s answered %d", home, a.status)
		}
		return nil
	})
	if err != nil && last.status >= 400 && last.status < 500 {
		// The submission's fault: the last home's answer says why.
		return pass(c, last)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, strings.TrimSuffix(requestURL(c), "/")+"/"+url.PathEscape(sub.Application))
	return c.NoContent(http.StatusAccepted)
}
