package webshell

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	wire "github.com/knitdev/knit/protocols/webshell"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// Access is what a user may do with an application, as the RM decides it.
type Access struct {
	// View and Modify are VIEW_APP and MODIFY_APP (yarn.acl.enable off
	// grants both to everyone).
	View, Modify bool
	// Owner is true for the user who submitted the application.
	Owner bool
	// Admin is true for a user on yarn.admin.acl with ACLs on.
	Admin bool
}

// allows applies the policy.
func (p Policy) allows(a Access) bool {
	if a.Admin {
		return true
	}
	switch p {
	case PolicyOwner:
		return a.Owner
	case PolicyView:
		return a.View
	default:
		return a.Modify
	}
}

func (p Policy) needs() string {
	switch p {
	case PolicyOwner:
		return "to own"
	case PolicyView:
		return "VIEW_APP on"
	default:
		return "MODIFY_APP on"
	}
}

// Container is the RM's view of a container a shell is asked for.
type Container struct {
	App    yarnid.ApplicationID
	Access Access
	// Ended is true once the RM holds the container as completed,
	// killed, released or expired.
	Ended bool
}

// ErrNoContainer is what Apps wraps for an application or container the RM
// does not know.
var ErrNoContainer = errors.New("no such container")

// Apps is what the shell needs from the RM.
type Apps interface {
	// ShellContainer returns the container and the user's access to its
	// application, or an error wrapping ErrNoContainer.
	ShellContainer(ctx context.Context, user string, id yarnid.ContainerID) (Container, error)
}

// Pods finds the pod of an allocated container (RGS's informer cache): the
// fields the RM keeps of it (its name, labels, node, containers and their
// states), in a pod of the caller's own.
type Pods interface {
	ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool)
}

// ExecRequest is one command to run in a pod's container.
type ExecRequest struct {
	Namespace, Pod, Container string
	Command                   []string
	// TTY asks for a terminal: Stderr is then nil (the terminal merges
	// it) and Sizes carries the terminal's sizes, the first one first,
	// until it is closed.
	TTY    bool
	Sizes  <-chan wire.Size
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Executor runs commands in pods. Exec returns when the command has ended,
// nil for a zero exit and an error with an ExitStatus() int method for
// another, or when ctx ends.
type Executor interface {
	Exec(ctx context.Context, r ExecRequest) error
}

// Recorder records Kubernetes Events (client-go's events.EventRecorder).
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// Config is what a Server needs.
type Config struct {
	// Apps, Pods, Exec and Events are required.
	Apps   Apps
	Pods   Pods
	Exec   Executor
	Events Recorder
	// Caller authenticates a request as the web pages do; ok is false
	// for an anonymous one. Required.
	Caller func(c echo.Context) (user string, ok bool)
	// Settings are the cluster owner's; zero fields take the defaults.
	Settings Settings
	// LaunchDir is the launch folder every pod mounts (launch.Dir of the
	// node root), where the shell finds the container's work folder.
	LaunchDir string
	// Logger logs every session. If nil, slog.Default() is used.
	Logger *slog.Logger
	// Clock times idleness and rechecks. If nil, the real clock.
	Clock clock.WithTicker
}

// Server serves the shell's page and WebSocket and owns every session.
type Server struct {
	cfg  Config
	log  *slog.Logger
	page *template.Template

	// ctx ends every session when the Server closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu           sync.Mutex
	closed       bool
	perUser      map[string]int
	perContainer map[yarnid.ContainerID]int
	sessions     sync.WaitGroup
}

// New checks the configuration and parses the page.
func New(cfg Config) (*Server, error) {
	if cfg.Apps == nil || cfg.Pods == nil || cfg.Exec == nil || cfg.Events == nil || cfg.Caller == nil {
		return nil, errors.New("webshell: Config.Apps, Pods, Exec, Events and Caller are required")
	}
	if err := cfg.Settings.validate(); err != nil {
		return nil, fmt.Errorf("webshell: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	page, err := template.ParseFS(assets, "assets/shell.html")
	if err != nil {
		return nil, fmt.Errorf("webshell: parsing the page: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, log: cfg.Logger, page: page, ctx: ctx, cancel: cancel,
		perUser: map[string]int{}, perContainer: map[yarnid.ContainerID]int{},
	}, nil
}

// Close ends every session (their clients get an Exit frame) and waits for
// them. Later handshakes are refused. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.sessions.Wait()
	return nil
}

// Register serves the page at /shell/<container id>, the WebSocket at
// /shell/<container id>/ws and the page's files under /static/webshell/.
// With the shell disabled it registers nothing.
func (s *Server) Register(e *echo.Echo) {
	if !s.cfg.Settings.Enabled {
		return
	}
	e.GET("/shell/:container", s.servePage)
	e.GET("/shell/:container/ws", s.serveSocket)
	e.GET("/static/webshell/*", echo.WrapHandler(http.StripPrefix("/static/webshell/", http.FileServerFS(staticFiles()))))
}

// Refusal is why a shell is not opened: an HTTP status and a reason.
type Refusal struct {
	Status int
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

func refuse(status int, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// Link is the page of a container's shell, with user.name, if user may
// open one now; "" if not. The web UI shows it on the container's row.
func (s *Server) Link(ctx context.Context, user, container string) string {
	if !s.cfg.Settings.Enabled {
		return ""
	}
	id, err := yarnid.ParseContainerID(container)
	if err != nil {
		return ""
	}
	if _, r := s.authorize(ctx, user, id); r != nil {
		return ""
	}
	return wire.PagePath(id.String()) + "?user.name=" + url.QueryEscape(user)
}

// target is who asks for which container.
func (s *Server) target(c echo.Context) (string, yarnid.ContainerID, *Refusal) {
	raw := c.Param("container")
	id, err := yarnid.ParseContainerID(raw)
	if err != nil {
		return "", id, refuse(http.StatusBadRequest, "Invalid container id %q: %v", raw, err)
	}
	user, ok := s.cfg.Caller(c)
	if !ok || user == "" {
		return "", id, refuse(http.StatusUnauthorized, "A shell needs an authenticated user: add ?user.name=<you> to the address.")
	}
	return user, id, nil
}

// checkOrigin refuses a browser's handshake from a page of another site.
func (s *Server) checkOrigin(r *http.Request) *Refusal {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	for _, ok := range s.cfg.Settings.Origins {
		if strings.EqualFold(o, ok) {
			return nil
		}
	}
	return refuse(http.StatusForbidden, "Origin %q may not open a shell: only pages of %s may (%s).", o, strings.Join(s.cfg.Settings.Origins, ", "), KeyOrigins)
}

// authorize decides whether user may open a shell into the container now,
// and returns its pod.
func (s *Server) authorize(ctx context.Context, user string, id yarnid.ContainerID) (*corev1.Pod, *Refusal) {
	c, err := s.cfg.Apps.ShellContainer(ctx, user, id)
	if errors.Is(err, ErrNoContainer) {
		return nil, refuse(http.StatusNotFound, "Container %s is unknown: %v", id, err)
	}
	if err != nil {
		return nil, refuse(http.StatusInternalServerError, "The ResourceManager could not answer for container %s: %v", id, err)
	}
	if !s.cfg.Settings.Policy.allows(c.Access) {
		return nil, refuse(http.StatusForbidden, "User %s may not open a shell into container %s: it needs %s application %s (%s=%s).",
			user, id, s.cfg.Settings.Policy.needs(), c.App, KeyPolicy, s.cfg.Settings.Policy)
	}
	if c.Ended {
		return nil, refuse(http.StatusConflict, "Container %s has ended.", id)
	}
	pod, ok := s.cfg.Pods.ContainerPod(id)
	if !ok {
		return nil, refuse(http.StatusConflict, "Container %s has no pod.", id)
	}
	if err := checkPod(pod, c.App, id); err != nil {
		return nil, refuse(http.StatusForbidden, "%v", err)
	}
	if why := notRunning(pod); why != "" {
		return nil, refuse(http.StatusConflict, "Container %s is not running: %s.", id, why)
	}
	return pod, nil
}

// checkPod refuses any pod but the Knit pod of the container.
func checkPod(pod *corev1.Pod, app yarnid.ApplicationID, id yarnid.ContainerID) error {
	l := pod.Labels
	role := l[launch.LabelRole]
	if l[launch.LabelContainer] != launch.LabelValue(id.String()) || l[launch.LabelApplication] != launch.LabelValue(app.String()) ||
		(role != launch.RoleAM && role != launch.RoleTask) {
		return fmt.Errorf("pod %s/%s is not the Knit pod of container %s", pod.Namespace, pod.Name, id)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == launch.ContainerName {
			return nil
		}
	}
	return fmt.Errorf("pod %s/%s has no container %q", pod.Namespace, pod.Name, launch.ContainerName)
}

// notRunning says why the pod's container is not running, "" if it is.
func notRunning(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "its pod is being deleted"
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Sprintf("its pod is %s", pod.Status.Phase)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == launch.ContainerName {
			if cs.State.Running != nil {
				return ""
			}
			return "its process is not running"
		}
	}
	return "its process has not started"
}

// acquire counts a session against the limits; release undoes it.
func (s *Server) acquire(user string, id yarnid.ContainerID) (release func(), r *Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, refuse(http.StatusServiceUnavailable, "The ResourceManager is shutting down.")
	case s.perUser[user] >= s.cfg.Settings.MaxPerUser:
		return nil, refuse(http.StatusTooManyRequests, "User %s has %d shells open, the most allowed (%s).", user, s.perUser[user], KeyMaxPerUser)
	case s.perContainer[id] >= s.cfg.Settings.MaxPerContainer:
		return nil, refuse(http.StatusTooManyRequests, "Container %s has %d shells open, the most allowed (%s).", id, s.perContainer[id], KeyMaxPerContainer)
	}
	s.perUser[user]++
	s.perContainer[id]++
	s.sessions.Add(1)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.perUser[user]--; s.perUser[user] == 0 {
			delete(s.perUser, user)
		}
		if s.perContainer[id]--; s.perContainer[id] == 0 {
			delete(s.perContainer, id)
		}
		s.sessions.Done()
	}, nil
}

// servePage serves the terminal page, or the refusal as a page.
func (s *Server) servePage(c echo.Context) error {
	user, id, r := s.target(c)
	if r == nil {
		_, r = s.authorize(c.Request().Context(), user, id)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// xterm.js sets its styles from script; scripts come only from here.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	v := pageData{Container: id.String(), User: user}
	status := http.StatusOK
	if r != nil {
		status, v.Refused = r.Status, r.Reason
	}
	var b strings.Builder
	if err := s.page.Execute(&b, v); err != nil {
		return fmt.Errorf("webshell: rendering the page: %w", err)
	}
	return c.HTML(status, b.String())
}

type pageData struct {
	Container, User, Refused string
}

// serveSocket checks everything, then runs the session on the WebSocket.
func (s *Server) serveSocket(c echo.Context) error {
	req := c.Request()
	user, id, r := s.target(c)
	if r == nil {
		r = s.checkOrigin(req)
	}
	var start wire.Start
	if r == nil {
		var err error
		if start, err = wire.ParseStart(req.URL.Query()); err != nil {
			r = refuse(http.StatusBadRequest, "%v", err)
		}
	}
	var pod *corev1.Pod
	if r == nil {
		pod, r = s.authorize(req.Context(), user, id)
	}
	var release func()
	if r == nil {
		release, r = s.acquire(user, id)
	}
	if r != nil {
		s.log.InfoContext(req.Context(), "web shell refused", "user", user, "container", c.Param("container"), "status", r.Status, "reason", r.Reason)
		return c.String(r.Status, r.Reason+"\n")
	}
	defer release()
	// The origin was checked above, against the RM's own addresses.
	conn, err := websocket.Accept(c.Response(), req, &websocket.AcceptOptions{Subprotocols: []string{wire.Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		// Accept has answered the handshake.
		s.log.InfoContext(req.Context(), "web shell handshake failed", "user", user, "container", id.String(), "err", err)
		return nil
	}
	if conn.Subprotocol() != wire.Subprotocol {
		conn.Close(websocket.StatusPolicyViolation, "the client must speak "+wire.Subprotocol)
		return nil
	}
	conn.SetReadLimit(wire.MaxFrame)
	s.run(req.Context(), conn, &session{user: user, id: id, pod: pod, start: start, remote: req.RemoteAddr})
	return nil
}
