// Package apptrace records each application's life as OpenTelemetry
// spans: a root span from submission to its end state, a submission span,
// the AM container's span (ask, pod created, bound, launched, registered)
// and each task container's span (pod created, bound, allocated, started).
//
// The Recorder only hears what the RM already does: the events its
// application state machines take and the containers RGS hands over. It
// does no I/O; the tracer provider's exporter does, off the RM's paths.
// Tracing is off unless the RM is given a tracer provider.
package apptrace

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/scheduling"
)

// Span names and attribute keys, declared once.
const (
	SpanApplication = "application"
	SpanSubmission  = "submission"
	SpanAMContainer = "am container"
	SpanContainer   = "container"

	AttrApplication = "yarn.application.id"
	AttrUser        = "yarn.user"
	AttrQueue       = "yarn.queue"
	AttrName        = "yarn.application.name"
	AttrAttempt     = "yarn.attempt.id"
	AttrContainer   = "yarn.container.id"
	AttrNode        = "yarn.node.id"
	AttrState       = "yarn.application.state"
	AttrRecovered   = "knit.recovered"

	EventPodCreated = "pod created"
	EventBound      = "bound"
	EventAllocated  = "allocated"
	EventLaunched   = "launched"
	EventRegistered = "registered"
	EventStarted    = "started"
)

// instrumentation is the tracer's name.
const instrumentation = "github.com/knitdev/knit/rm"

// Recorder turns the RM's events into spans. Its methods are cheap and
// never block: they run under an application's lock.
type Recorder struct {
	tracer trace.Tracer
	now    func() time.Time

	mu   sync.Mutex
	apps map[yarnid.ApplicationID]*appSpans
}

// appSpans are the open spans of one application.
type appSpans struct {
	root       trace.Span
	ctx        context.Context // carries root
	submission trace.Span
	am         trace.Span
	containers map[yarnid.ContainerID]trace.Span
}

// New returns a Recorder whose spans go to tp's tracer.
func New(tp trace.TracerProvider) *Recorder {
	return &Recorder{tracer: tp.Tracer(instrumentation), now: time.Now, apps: map[yarnid.ApplicationID]*appSpans{}}
}

// Event hears one event app took, after it took it.
func (r *Recorder) Event(ctx context.Context, app *apps.Application, ev apps.Event) {
	id := app.ID()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans(ctx, app, ev)
	if s == nil {
		return
	}
	switch x := ev.(type) {
	case apps.Accepted, apps.Rejected:
		if s.submission != nil {
			s.submission.SetAttributes(attribute.String(AttrState, app.State().String()))
			s.submission.End()
			s.submission = nil
		}
	case apps.AttemptAdded:
		if s.am == nil && !app.Submission().GetUnmanagedAm() {
			_, s.am = r.tracer.Start(s.ctx, SpanAMContainer, trace.WithAttributes(attribute.String(AttrAttempt, x.Attempt.String())))
		}
	case apps.AttemptLaunched:
		if s.am != nil {
			s.am.AddEvent(EventLaunched)
		}
	case apps.AttemptRegistered:
		s.root.AddEvent(EventRegistered, trace.WithAttributes(attribute.String(AttrAttempt, x.Attempt.String())))
		if s.am != nil {
			s.am.AddEvent(EventRegistered)
			s.am.End()
			s.am = nil
		}
	case apps.AttemptFailed, apps.AttemptLaunchFailed, apps.AttemptExpired:
		if s.am != nil {
			s.am.SetStatus(codes.Error, "attempt failed before it registered")
			s.am.End()
			s.am = nil
		}
	case apps.ContainerLaunched:
		if c, ok := s.containers[x.Container]; ok {
			c.AddEvent(EventStarted)
			c.End()
			delete(s.containers, x.Container)
		}
	case apps.ContainerFinished:
		r.endContainer(s, x.Container, "ended before it started")
	case apps.ContainerReleased:
		r.endContainer(s, x.Container, "released before it started")
	case apps.ContainerExpired:
		r.endContainer(s, x.Container, "not started in time")
	case apps.ContainerKilled:
		r.endContainer(s, x.Container, "killed before it started")
	}
	if st := app.State(); st.Final() {
		r.finish(id, s, st)
	}
}

// Allocated hears a container RGS made of a bound pod: its span runs from
// the pod's creation, through its binding, to the container's start (the
// AM container's, to its AM's registration).
func (r *Recorder) Allocated(ctx context.Context, app *apps.Application, a scheduling.Allocation) {
	id, err := yarnid.ContainerIDFromProto(a.Container.GetId())
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans(ctx, app, nil)
	if s == nil {
		return
	}
	attrs := trace.WithAttributes(attribute.String(AttrContainer, id.String()),
		attribute.String(AttrNode, a.Container.GetNodeId().GetHost()+":"+strconv.Itoa(int(a.Container.GetNodeId().GetPort()))))
	created := a.Created
	if created.IsZero() {
		created = r.now()
	}
	var span trace.Span
	if a.Role == launch.RoleAM {
		if s.am == nil {
			return
		}
		span = s.am
		span.SetAttributes(attribute.String(AttrContainer, id.String()))
		span.AddEvent(EventPodCreated, trace.WithTimestamp(created))
	} else {
		if _, open := s.containers[id]; open {
			return
		}
		_, span = r.tracer.Start(s.ctx, SpanContainer, attrs, trace.WithTimestamp(created))
		span.AddEvent(EventPodCreated, trace.WithTimestamp(created))
		s.containers[id] = span
	}
	if !a.Bound.IsZero() {
		span.AddEvent(EventBound, trace.WithTimestamp(a.Bound))
	}
	span.AddEvent(EventAllocated)
}

// Open reports how many applications have open spans.
func (r *Recorder) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.apps)
}

// spans returns the application's open spans, opening them at its
// submission (ev Start), or at the first event seen after an RM restart.
// It returns nil for an application that has ended.
func (r *Recorder) spans(ctx context.Context, app *apps.Application, ev apps.Event) *appSpans {
	id := app.ID()
	if s, ok := r.apps[id]; ok {
		return s
	}
	if app.State().Final() {
		return nil
	}
	_, fresh := ev.(apps.Start)
	attrs := []attribute.KeyValue{
		attribute.String(AttrApplication, id.String()), attribute.String(AttrUser, app.User()),
		attribute.String(AttrQueue, app.Queue()), attribute.String(AttrName, app.Name()),
	}
	if !fresh {
		attrs = append(attrs, attribute.Bool(AttrRecovered, true))
	}
	// The root is a trace of its own, not a child of the RPC that
	// submitted it: it outlives that call by hours.
	rootCtx, root := r.tracer.Start(ctx, SpanApplication, trace.WithNewRoot(), trace.WithAttributes(attrs...))
	s := &appSpans{root: root, ctx: rootCtx, containers: map[yarnid.ContainerID]trace.Span{}}
	if fresh {
		_, s.submission = r.tracer.Start(rootCtx, SpanSubmission)
	}
	r.apps[id] = s
	return s
}

func (r *Recorder) endContainer(s *appSpans, id yarnid.ContainerID, why string) {
	if c, ok := s.containers[id]; ok {
		c.SetStatus(codes.Error, why)
		c.End()
		delete(s.containers, id)
	}
}

// finish ends every open span of an application that reached state.
func (r *Recorder) finish(id yarnid.ApplicationID, s *appSpans, state apps.AppState) {
	for cid, c := range s.containers {
		c.SetStatus(codes.Error, "the application ended before the container started")
		c.End()
		delete(s.containers, cid)
	}
	for _, open := range []trace.Span{s.submission, s.am} {
		if open != nil {
			open.End()
		}
	}
	s.root.SetAttributes(attribute.String(AttrState, state.String()))
	if state != apps.AppStateFinished {
		s.root.SetStatus(codes.Error, state.String())
	}
	s.root.End()
	delete(r.apps, id)
}
