package webui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/rest"
)

// Cluster is what the pages need from the ResourceManager. Methods taking a
// user answer what that user may see (the REST API's ACLs); errors carry
// the Java exception the RM would answer with (yarnerr), so that
// ApplicationNotFoundException becomes 404 and an access refusal 403.
type Cluster interface {
	// Info describes the RM.
	Info(ctx context.Context) (rest.ClusterInfo, error)
	// Metrics returns the cluster-wide figures.
	Metrics(ctx context.Context) (rest.ClusterMetrics, error)
	// Applications lists the applications the filter selects, in the RM's
	// order (oldest first).
	Applications(ctx context.Context, user string, f apps.Filter) ([]rest.App, error)
	// Application returns one application.
	Application(ctx context.Context, user, id string) (rest.App, error)
	// Attempts returns an application's attempts, oldest first; an error if
	// the user may not view the application.
	Attempts(ctx context.Context, user, id string) ([]rest.Attempt, error)
	// Containers returns an application's containers, those that ended
	// included, oldest first; an error if the user may not view it.
	Containers(ctx context.Context, user, id string) ([]Container, error)
	// Nodes lists every node.
	Nodes(ctx context.Context) ([]Node, error)
	// Queues lists the queues depth first, root first.
	Queues(ctx context.Context) ([]Queue, error)
}

// Container is one container of an application and the pod that runs it.
type Container struct {
	Report *yarnpb.ContainerReportProto
	// AM is true for an attempt's AM container.
	AM bool
	// Namespace and Pod name the container's pod; empty when it is gone
	// or unknown.
	Namespace, Pod string
	// Shell is the page of the container's web shell, for a running
	// container the caller may open one into; the page fills it in.
	Shell string
}

// ShellLinks tells whether a user may open a web shell into a container,
// and where (the web shell's page, with user.name); "" if not.
type ShellLinks interface {
	Link(ctx context.Context, user, container string) string
}

// Node is one node as the scheduler sees it, with the Kubernetes node
// behind it.
type Node struct {
	Report *yarnpb.NodeReportProto
	// KubeNode is the Kubernetes Node's name.
	KubeNode string
}

// Queue is one queue's configuration and use. Percentages run 0-100.
type Queue struct {
	Path, Name string
	// Depth is 0 for root.
	Depth int
	Leaf  bool
	State string
	// Capacity and MaxCapacity are of the parent; the Absolute ones and
	// AbsoluteUsed are of the cluster. Used is of the queue's capacity.
	Capacity, MaxCapacity, AbsoluteCapacity, AbsoluteMaxCapacity float64
	Used, AbsoluteUsed                                           float64
	AllocatedMB, AllocatedVcores                                 int64
	Containers                                                   int32
	// The Pending figures are what waits in the queue: the containers
	// asked for and not yet placed, and what they ask for.
	PendingMB, PendingVcores, PendingContainers int64
	AppsRunning, AppsPending                    int32
	// The figures above are the default partition's; Partitions are the
	// queue's in each labelled node-label partition it reports, by name.
	Partitions []QueuePartition
}

// QueuePartition is a queue's capacities and use in one labelled
// node-label partition, as YARN's scheduler page shows each partition.
type QueuePartition struct {
	Name string
	// TotalMB and TotalVcores are what the partition's nodes hold.
	TotalMB, TotalVcores int64
	// Capacity and MaxCapacity are of the parent's share of the partition;
	// the Absolute ones and AbsoluteUsed of the partition. Used is of the
	// queue's guarantee there.
	Capacity, MaxCapacity, AbsoluteCapacity, AbsoluteMaxCapacity float64
	Used, AbsoluteUsed                                           float64
	UsedMB, UsedVcores, AMUsedMB                                 int64
	Containers                                                   int32
	PendingMB, PendingVcores, PendingContainers                  int64
}

// Config configures the pages.
type Config struct {
	// Cluster answers every page. Required.
	Cluster Cluster
	// Logger logs errors the RM returns. If nil, slog.Default() is used.
	Logger *slog.Logger
	// AnonymousUser is the caller when a request has no user.name. If
	// empty, "dr.who" (Hadoop's hadoop.http.staticuser.user) is used.
	AnonymousUser string
	// Now is the clock for elapsed times. If nil, time.Now is used.
	Now func() time.Time
	// Shells links running containers to their web shell; nil shows no
	// shell links.
	Shells ShellLinks
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// UI serves the pages. It holds no state beyond its parsed templates and is
// safe for concurrent use.
type UI struct {
	cfg   Config
	log   *slog.Logger
	pages map[string]*template.Template
}

// New parses the templates.
func New(cfg Config) (*UI, error) {
	if cfg.Cluster == nil {
		return nil, errors.New("webui: Config.Cluster is required")
	}
	if cfg.AnonymousUser == "" {
		cfg.AnonymousUser = "dr.who"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	u := &UI{cfg: cfg, log: cfg.Logger, pages: map[string]*template.Template{}}
	if u.log == nil {
		u.log = slog.Default()
	}
	for _, p := range []string{"apps", "app", "nodes", "scheduler", "about", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("webui: parsing %s: %w", p, err)
		}
		u.pages[p] = t
	}
	return u, nil
}

// Register serves the pages on e: /, /cluster and below, and /static/knit/.
func (u *UI) Register(e *echo.Echo) {
	e.GET("/", func(c echo.Context) error {
		return c.Redirect(http.StatusFound, withUser("/cluster", c.QueryParam("user.name")))
	})
	e.GET("/cluster", u.apps)
	e.GET("/cluster/", u.apps)
	e.GET("/cluster/cluster", u.about)
	e.GET("/cluster/apps", u.apps)
	e.GET("/cluster/apps/:state", u.apps)
	e.GET("/cluster/app/:appid", u.app)
	e.GET("/cluster/nodes", u.nodes)
	e.GET("/cluster/scheduler", u.scheduler)
	static, _ := fs.Sub(staticFS, "static")
	e.GET("/static/knit/*", echo.WrapHandler(http.StripPrefix("/static/knit/", http.FileServerFS(static))))
}

// page is what every template gets.
type page struct {
	Title   string
	User    string
	UserSet bool // user.name was given; links keep it
	Nav     string
	Metrics *rest.ClusterMetrics
	Now     time.Time
	Data    any
}

// Caller is who a request is from, as every page takes it: the user.name
// of Hadoop's pseudo authentication, else Config.AnonymousUser with ok
// false. The web shell authenticates its callers with it too.
func (u *UI) Caller(c echo.Context) (user string, ok bool) { return u.user(c) }

func (u *UI) user(c echo.Context) (string, bool) {
	if v := c.QueryParam("user.name"); v != "" {
		return v, true
	}
	return u.cfg.AnonymousUser, false
}

func (u *UI) newPage(c echo.Context, title, nav string) *page {
	user, set := u.user(c)
	return &page{Title: title, User: user, UserSet: set, Nav: nav, Now: u.cfg.Now()}
}

func (u *UI) render(c echo.Context, status int, name string, p *page) error {
	var b bytes.Buffer
	if err := u.pages[name].Execute(&b, p); err != nil {
		return fmt.Errorf("webui: rendering %s: %w", name, err)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	// Pages carry no script: forbid any, so injected markup stays inert
	// even where escaping were to miss it.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self' data:")
	return c.HTMLBlob(status, b.Bytes())
}

// fail renders an error page for err, with the status the REST API
// answers it with (its Java class chooses).
func (u *UI) fail(c echo.Context, err error) error {
	status, msg := rest.Status(err), err.Error()
	if status >= http.StatusInternalServerError {
		msg = "The ResourceManager could not answer: " + msg
		u.log.ErrorContext(c.Request().Context(), "web UI page failed", "path", c.Request().URL.Path, "err", err)
	}
	p := u.newPage(c, http.StatusText(status), "")
	p.Data = msg
	return u.render(c, status, "error", p)
}

// withMetrics adds the cluster metrics table every list page starts with.
func (u *UI) withMetrics(c echo.Context, p *page) error {
	m, err := u.cfg.Cluster.Metrics(c.Request().Context())
	if err != nil {
		return err
	}
	p.Metrics = &m
	return nil
}

// withUser appends user.name to a local link.
func withUser(path, user string) string {
	if user == "" {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "user.name=" + url.QueryEscape(user)
}

func (u *UI) app(c echo.Context) error {
	ctx := c.Request().Context()
	user, _ := u.user(c)
	id := c.Param("appid")
	if _, err := yarnid.ParseApplicationID(id); err != nil {
		return u.fail(c, yarnerr.BadRequest.Errorf("Invalid Application ID: %s", id))
	}
	a, err := u.cfg.Cluster.Application(ctx, user, id)
	if err != nil {
		return u.fail(c, err)
	}
	p := u.newPage(c, "Application "+id, "apps")
	v := appPage{ID: id, App: a, Now: p.Now}
	// A user without VIEW_APP sees the redacted report and nothing below
	// it, as on a Hadoop RM.
	if v.Attempts, err = u.cfg.Cluster.Attempts(ctx, user, id); err != nil {
		v.Denied = fmt.Sprintf("You (User %s) are not authorized to view the attempts and containers of application %s.", user, id)
	} else if v.Containers, err = u.cfg.Cluster.Containers(ctx, user, id); err != nil {
		return u.fail(c, err)
	} else if u.cfg.Shells != nil && p.UserSet {
		for i, ct := range v.Containers {
			cid, err := yarnid.ContainerIDFromProto(ct.Report.GetContainerId())
			if err == nil && ct.Report.GetContainerState() == yarnpb.ContainerStateProto_C_RUNNING {
				v.Containers[i].Shell = u.cfg.Shells.Link(ctx, user, cid.String())
			}
		}
	}
	p.Data = v
	return u.render(c, http.StatusOK, "app", p)
}

// about describes the RM, as /cluster/cluster does on YARN.
func (u *UI) about(c echo.Context) error {
	p := u.newPage(c, "About the Cluster", "about")
	if err := u.withMetrics(c, p); err != nil {
		return u.fail(c, err)
	}
	info, err := u.cfg.Cluster.Info(c.Request().Context())
	if err != nil {
		return u.fail(c, err)
	}
	p.Data = info
	return u.render(c, http.StatusOK, "about", p)
}

func (u *UI) nodes(c echo.Context) error {
	return listPage(u, c, "Nodes of the cluster", "nodes", u.cfg.Cluster.Nodes)
}

func (u *UI) scheduler(c echo.Context) error {
	return listPage(u, c, "Queues", "scheduler", u.cfg.Cluster.Queues)
}

// listPage renders a page of the cluster metrics and one list.
func listPage[T any](u *UI, c echo.Context, title, name string, list func(context.Context) ([]T, error)) error {
	p := u.newPage(c, title, name)
	if err := u.withMetrics(c, p); err != nil {
		return u.fail(c, err)
	}
	v, err := list(c.Request().Context())
	if err != nil {
		return u.fail(c, err)
	}
	p.Data = v
	return u.render(c, http.StatusOK, name, p)
}
