package rm

import (
	"context"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apptrace"
	"github.com/knitdev/knit/scheduling"
	"github.com/knitdev/knit/test/eventually"
)

// TestOneApplicationsTraceFollowsItsLife drives an application through
// submission, registration, a container's allocation and start, and its
// end, and reads its trace from an in-memory exporter: one root span
// with the submission and the container as children, the container's
// events at the pod's times, every span ended.
func TestOneApplicationsTraceFollowsItsLife(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	rec := apptrace.New(tp)
	e := newEnv(t, envOptions{scheduler: &recordingScheduler{}, tracer: rec})
	attempt, ctx := unmanagedAM(t, e)

	id := yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 2}
	created := time.UnixMilli(1700000100000)
	bound := created.Add(1500 * time.Millisecond)
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		Resource: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr, Created: created, Bound: bound}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rm.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	e.rm.ContainerStarted(t.Context(), id)
	if _, err := e.rm.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}); err != nil {
		t.Fatal(err)
	}

	ended := spans.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = s
	}
	root, ok := byName[apptrace.SpanApplication]
	if !ok {
		t.Fatalf("no ended application span among %d ended spans (%d open applications)", len(ended), rec.Open())
	}
	attrs := map[string]string{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs[apptrace.AttrApplication] != attempt.App.String() || attrs[apptrace.AttrUser] != "alice" || attrs[apptrace.AttrState] != "FINISHED" {
		t.Errorf("root attributes %v", attrs)
	}
	if root.Parent().IsValid() {
		t.Error("the application's span is not a root: it would hang under the submitting RPC")
	}
	for _, name := range []string{apptrace.SpanSubmission, apptrace.SpanContainer} {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no %s span", name)
			continue
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s is not a child of the application's span", name)
		}
	}
	c := byName[apptrace.SpanContainer]
	var events []string
	for _, ev := range c.Events() {
		events = append(events, ev.Name)
	}
	if want := []string{apptrace.EventPodCreated, apptrace.EventBound, apptrace.EventAllocated, apptrace.EventStarted}; !slices.Equal(events, want) {
		t.Errorf("container events %v, want %v", events, want)
	}
	if !c.StartTime().Equal(created) || len(c.Events()) > 1 && !c.Events()[1].Time.Equal(bound) {
		t.Errorf("container span starts %v with bound at %v; want the pod's times %v and %v", c.StartTime(), c.Events()[1].Time, created, bound)
	}
	if n := rec.Open(); n != 0 {
		t.Errorf("%d applications still have open spans", n)
	}
}

// launched is a ContainerLauncher that starts every container at once.
type launched struct{}

func (launched) Launch(context.Context, rks.LaunchRequest) error { return nil }

// TestTheAMContainersSpanRunsFromItsPodToItsRegistration: a managed AM's
// span carries its pod's creation and binding, its launch and its
// registration, where it ends.
func TestTheAMContainersSpanRunsFromItsPodToItsRegistration(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	e := newEnv(t, envOptions{scheduler: &recordingScheduler{}, launcher: launched{}, tracer: apptrace.New(tp)})
	appID := appIDOf(t, e.mustSubmit(e.client("alice"), subOpts{}))
	attempt := yarnid.AttemptID{App: appID, ID: 1}
	am := &yarnpb.ContainerProto{Id: yarnid.ContainerID{Attempt: attempt, Epoch: 1, Sequence: 1}.Proto(),
		NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)}, Resource: yarnpb.NewResource(1024, 1)}
	created := time.UnixMilli(1700000100000)
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleAM, Container: am, Created: created, Bound: created.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "the AM launched", func() bool {
		return e.report(e.client("alice"), appID.Proto()).GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_ACCEPTED && hasEvent(spans, apptrace.EventLaunched)
	})
	ctx := ipc.WithCaller(t.Context(), ipc.Caller{User: attempt.String(), Auth: ipc.AuthToken,
		TokenIdentity: &yarnpb.AMRMTokenIdentifierProto{AppAttemptId: attempt.Proto(), KeyId: proto.Int32(1)}})
	if _, err := e.rm.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("node1"), RpcPort: proto.Int32(-1)}); err != nil {
		t.Fatal(err)
	}
	var amSpan sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == apptrace.SpanAMContainer {
			amSpan = s
		}
	}
	if amSpan == nil {
		t.Fatal("the AM container's span did not end at its registration")
	}
	var events []string
	for _, ev := range amSpan.Events() {
		events = append(events, ev.Name)
	}
	if want := []string{apptrace.EventPodCreated, apptrace.EventBound, apptrace.EventAllocated, apptrace.EventLaunched, apptrace.EventRegistered}; !slices.Equal(events, want) {
		t.Errorf("AM container events %v, want %v", events, want)
	}
}

// hasEvent reports whether a span still open carries the named event.
func hasEvent(spans *tracetest.SpanRecorder, name string) bool {
	for _, s := range spans.Started() {
		for _, ev := range s.Events() {
			if ev.Name == name {
				return true
			}
		}
	}
	return false
}
