package logs

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
)

// Version is the Hadoop version the node web services report.
const Version = "3.4.1"

// Config configures the NodeManager web port.
type Config struct {
	// NodeID is the node's NodeId ("host:port"). Required.
	NodeID string
	// WebAddress is the node's HTTP address ("host:port"), for the
	// containers' log links. Required.
	WebAddress string
	// Dirs are the node's log dirs. Required.
	Dirs Dirs
	// Source lists the node's containers. Required.
	Source Source
	// Access decides who reads which logs.
	Access Access
	// RMWebAddress is the RM's web address, linked from the HTML pages.
	RMWebAddress string
	// Aggregated, if set, is where the log pages find the logs of
	// containers that have left the node.
	Aggregated *Aggregated
	// MemoryMB and VCores are what the node offers containers.
	MemoryMB, VCores int64
	// Started is when knit-node started.
	Started time.Time
	// Location is the zone of printed times; nil means time.Local.
	Location *time.Location
	Logger   *slog.Logger
	Now      func() time.Time
}

type server struct {
	cfg    Config
	log    *slog.Logger
	signer *signer
}

// New returns the handler of the NodeManager web port.
func New(cfg Config) (*echo.Echo, error) {
	if cfg.NodeID == "" || cfg.WebAddress == "" || len(cfg.Dirs) == 0 || cfg.Source == nil {
		return nil, errors.New("logs: NodeID, WebAddress, Dirs and Source are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Started.IsZero() {
		cfg.Started = cfg.Now()
	}
	sg, err := newSigner()
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: cfg.Logger, signer: sg}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Pre: OPTIONS is answered for every path, as Jersey does.
	e.Pre(s.authenticate)
	g := e.Group("/ws/v1/node")
	g.GET("", s.info)
	g.GET("/", s.info)
	g.GET("/info", s.info)
	g.GET("/apps", s.apps)
	g.GET("/apps/:appid", s.app)
	g.GET("/containers", s.containers)
	g.GET("/containers/:cid", s.container)
	g.GET("/containers/:cid/logs", s.logList)
	g.GET("/containers/:cid/logs/:file", s.logFile)
	g.GET("/containerlogs/:cid/:file", s.logFile)
	e.GET("/node/containerlogs/:cid/:user", s.htmlList)
	e.GET("/node/containerlogs/:cid/:user/", s.htmlList)
	e.GET("/node/containerlogs/:cid/:user/:file", s.htmlFile)
	e.GET("/node/containerlogs/:cid/:user/:file/", s.htmlFile)
	return e, nil
}

func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var re *remoteException
	var he *echo.HTTPError
	switch {
	case errors.As(err, &re):
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		re = webAppError(http.StatusNotFound, yarnerr.NotFound, "Resource not found: "+c.Request().URL.Path)
	case errors.As(err, &he):
		re = &remoteException{status: he.Code, Exception: yarnerr.WebApplication.Simple(), Message: http.StatusText(he.Code), JavaClass: string(yarnerr.WebApplication)}
	default:
		s.log.Error("node web call failed", "path", c.Request().URL.Path, "err", err)
		re = &remoteException{status: http.StatusInternalServerError, Exception: yarnerr.Exception.Simple(), Message: err.Error(), JavaClass: string(yarnerr.Exception)}
	}
	_ = s.write(c, re.status, "RemoteException", re)
}

// webAppError is one of YARN's webapp exceptions wrapping a
// java.lang.Exception with msg.
func webAppError(status int, class yarnerr.Class, msg string) *remoteException {
	return &remoteException{status: status, text: msg, Exception: class.Simple(), Message: yarnerr.Exception.New(msg).Error(), JavaClass: string(class)}
}

// wantsXML reports whether the caller asked for XML over JSON.
func wantsXML(c echo.Context) bool {
	a := c.Request().Header.Get("Accept")
	x, j := strings.Index(a, "application/xml"), strings.Index(a, "application/json")
	return x >= 0 && (j < 0 || x < j)
}

// write answers v as {"root": v} in JSON, or as XML when asked.
func (s *server) write(c echo.Context, status int, root string, v any) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	if wantsXML(c) {
		b, err := xml.Marshal(v)
		if err != nil {
			return err
		}
		return c.Blob(status, "application/xml;charset=utf-8", append([]byte(xml.Header[:len(xml.Header)-1]), b...))
	}
	b, err := json.Marshal(map[string]any{root: v})
	if err != nil {
		return err
	}
	return c.Blob(status, "application/json;charset=utf-8", b)
}

func (s *server) info(c echo.Context) error {
	build := Version + " from knit"
	mem, cores := s.cfg.MemoryMB, s.cfg.VCores
	if cs, ok := s.cfg.Source.(CapacitySource); ok && mem == 0 && cores == 0 {
		mem, cores, _ = cs.Capacity()
	}
	return s.write(c, http.StatusOK, "nodeInfo", nodeInfo{
		// yarn.nodemanager.vmem-pmem-ratio is 2.1.
		TotalVmemAllocatedContainersMB: mem * 21 / 10,
		TotalPmemAllocatedContainersMB: mem,
		TotalVCoresAllocatedContainers: cores,
		LastNodeUpdateTime:             s.cfg.Now().UnixMilli(),
		ResourceTypes:                  "memory-mb (unit=Mi), vcores",
		NodeHealthy:                    true,
		NodeManagerVersion:             Version,
		NodeManagerBuildVersion:        build,
		HadoopVersion:                  Version,
		HadoopBuildVersion:             build,
		ID:                             s.cfg.NodeID,
		NodeHostName:                   host(s.cfg.NodeID),
		NMStartupTime:                  s.cfg.Started.UnixMilli(),
	})
}

func host(hostport string) string {
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		return hostport[:i]
	}
	return hostport
}

// view is the node's containers: those with pods, then those whose pods
// are gone but whose logs are still here (DONE).
func (s *server) view() ([]Container, error) {
	cs := s.cfg.Source.Containers()
	known := map[string]bool{}
	for _, c := range cs {
		known[c.ID] = true
	}
	apps, err := s.cfg.Dirs.Applications()
	if err != nil {
		return nil, err
	}
	for _, app := range apps {
		ids, err := s.cfg.Dirs.Containers(app)
		if err != nil {
			return nil, err
		}
		rec, _ := s.cfg.Dirs.Record(app)
		for _, id := range ids {
			if !known[id] {
				cs = append(cs, Container{ID: id, App: app, User: rec.Owner, State: "DONE", ExitCode: ExitInvalid, ExecutionType: "GUARANTEED"})
			}
		}
	}
	slices.SortFunc(cs, func(a, b Container) int { return strings.Compare(a.ID, b.ID) })
	return cs, nil
}

func (s *server) apps(c echo.Context) error {
	cs, err := s.view()
	if err != nil {
		return err
	}
	state, user := c.QueryParam("state"), c.QueryParam("user")
	var out appsInfo
	for _, a := range groupApps(cs) {
		if (state == "" || strings.EqualFold(state, a.State)) && (user == "" || user == a.User) {
			out.App = append(out.App, a)
		}
	}
	return s.write(c, http.StatusOK, "apps", out)
}

func groupApps(cs []Container) []appInfo {
	var out []appInfo
	idx := map[string]int{}
	for _, c := range cs {
		i, ok := idx[c.App]
		if !ok {
			i = len(out)
			idx[c.App] = i
			out = append(out, appInfo{ID: c.App, State: "FINISHED", User: c.User})
		}
		out[i].ContainerIDs = append(out[i].ContainerIDs, c.ID)
		if c.Running() {
			out[i].State = "RUNNING"
		}
	}
	return out
}

func (s *server) app(c echo.Context) error {
	id := c.Param("appid")
	if _, err := yarnid.ParseApplicationID(id); err != nil {
		return webAppError(http.StatusBadRequest, yarnerr.BadRequest, "Invalid ApplicationId: "+id)
	}
	cs, err := s.view()
	if err != nil {
		return err
	}
	for _, a := range groupApps(cs) {
		if a.ID == id {
			return s.write(c, http.StatusOK, "app", a)
		}
	}
	return webAppError(http.StatusNotFound, yarnerr.NotFound, "app with id "+id+" not found")
}

func (s *server) containerInfo(ctr Container) containerInfo {
	ci := containerInfo{
		ID: ctr.ID, State: ctr.State, ExitCode: ctr.ExitCode, Diagnostics: jstr(ctr.Diagnostics), User: ctr.User,
		TotalMemoryNeededMB: ctr.MemoryMB, TotalVCoresNeeded: ctr.VCores, ExecutionType: ctr.ExecutionType,
		ContainerLogsLink: "http://" + s.cfg.WebAddress + "/node/containerlogs/" + ctr.ID + "/" + ctr.User,
		NodeID:            s.cfg.NodeID,
	}
	files, _ := s.cfg.Dirs.Files(ctr.App, ctr.ID)
	for _, f := range files {
		ci.ContainerLogFiles = append(ci.ContainerLogFiles, f.Name)
	}
	return ci
}

func (s *server) containers(c echo.Context) error {
	cs, err := s.view()
	if err != nil {
		return err
	}
	var out containersInfo
	for _, ctr := range cs {
		out.Container = append(out.Container, s.containerInfo(ctr))
	}
	return s.write(c, http.StatusOK, "containers", out)
}

// find returns the container of id, if it is on the node.
func (s *server) find(id string) (Container, bool, error) {
	cid, err := yarnid.ParseContainerID(id)
	if err != nil {
		return Container{}, false, webAppError(http.StatusBadRequest, yarnerr.BadRequest, "invalid container id, "+id)
	}
	for _, ctr := range s.cfg.Source.Containers() {
		if ctr.ID == id {
			return ctr, true, nil
		}
	}
	app := cid.Attempt.App.String()
	ids, err := s.cfg.Dirs.Containers(app)
	if err != nil {
		return Container{}, false, err
	}
	if slices.Contains(ids, id) {
		rec, _ := s.cfg.Dirs.Record(app)
		return Container{ID: id, App: app, User: rec.Owner, State: "DONE", ExitCode: ExitInvalid, ExecutionType: "GUARANTEED"}, true, nil
	}
	return Container{ID: id, App: app}, false, nil
}

func (s *server) container(c echo.Context) error {
	ctr, ok, err := s.find(c.Param("cid"))
	if err != nil {
		return err
	}
	if !ok {
		return webAppError(http.StatusNotFound, yarnerr.NotFound, "container with id, "+ctr.ID+", not found")
	}
	return s.write(c, http.StatusOK, "container", s.containerInfo(ctr))
}

// allowed checks the caller against the container's application.
func (s *server) allowed(c echo.Context, ctr Container) error {
	rec, ok := s.cfg.Dirs.Record(ctr.App)
	owner := ctr.User
	if ok && owner == "" {
		owner = rec.Owner
	}
	who := caller(c)
	if !s.cfg.Access.CanView(who, owner, rec.ACLs) {
		return webAppError(http.StatusForbidden, yarnerr.Forbidden,
			"User ["+who+"] is not authorized to view the logs for "+ctr.ID)
	}
	return nil
}

func (s *server) logList(c echo.Context) error {
	ctr, ok, err := s.find(c.Param("cid"))
	if err != nil {
		return err
	}
	out := containerLogsInfo{LogAggregationType: string(aggregated.Local), ContainerID: ctr.ID, NodeID: s.cfg.NodeID}
	if ok {
		if err := s.allowed(c, ctr); err != nil {
			return err
		}
		files, err := s.cfg.Dirs.Files(ctr.App, ctr.ID)
		if err != nil {
			return err
		}
		for _, f := range files {
			out.ContainerLogInfo = append(out.ContainerLogInfo, containerLogInfo{
				FileName: f.Name, FileSize: strconv.FormatInt(f.Info.Size(), 10),
				LastModifiedTime: f.Info.ModTime().In(s.cfg.Location).Format(aggregated.TimeLayout),
			})
		}
	}
	return s.write(c, http.StatusOK, "containerLogsInfo", out)
}

// plainError answers a webapp exception as the plain-text log endpoint
// does, its status and bare message; any other error goes to handleError.
func plainError(c echo.Context, err error) error {
	var re *remoteException
	if errors.As(err, &re) && re.text != "" {
		return c.String(re.status, re.text)
	}
	return err
}

// logFile answers one log in the text envelope of `yarn logs`.
func (s *server) logFile(c echo.Context) error {
	size := int64(math.MaxInt64)
	if v := c.QueryParam("size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c.String(http.StatusBadRequest, "Invalid log size: "+v)
		}
		size = n
	}
	ctr, ok, err := s.find(c.Param("cid"))
	if err != nil {
		return plainError(c, err)
	}
	name := c.Param("file")
	if ok {
		if err := s.allowed(c, ctr); err != nil {
			return plainError(c, err)
		}
	}
	f, found := s.cfg.Dirs.File(ctr.App, ctr.ID, name)
	if !ok || !found {
		return c.String(http.StatusNotFound, "Can not find the log file:"+name+" for the container:"+ctr.ID)
	}
	file, err := os.Open(f.Path)
	if err != nil {
		return c.String(http.StatusNotFound, "Can not find the log file:"+name+" for the container:"+ctr.ID)
	}
	defer file.Close()
	length := f.Info.Size()
	e := aggregated.Envelope{
		ContainerID: ctr.ID, Node: s.cfg.NodeID, Type: aggregated.Local, Name: name,
		Length: length, ModTime: f.Info.ModTime(), Location: s.cfg.Location,
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(echo.HeaderContentType, "text/plain;charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	w := c.Response()
	if _, err := io.WriteString(w, e.Header()); err != nil {
		return nil
	}
	skip, count := aggregated.Range(length, size)
	if _, err := io.Copy(w, io.NewSectionReader(file, skip, count)); err != nil {
		s.log.Warn("send log", "container", ctr.ID, "file", name, "err", err)
		return nil
	}
	footer := "End of LogType:" + name + ".\n" + strings.Repeat("*", len("End of LogType:"+name)+50) + "\n\n"
	if ctr.Running() {
		footer = e.RunningFooter()
	}
	_, _ = io.WriteString(w, footer)
	return nil
}
