package apps

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Every transition of the application's table that an outside event
// triggers, valid ones ignored included. Transitions driven by the attempt
// (registered, failed, ...) are covered in attempt_test.go.
func TestApplicationTakesEveryValidEvent(t *testing.T) {
	future := t0.Add(time.Hour)
	tests := []struct {
		name  string
		opts  []option
		path  []Event
		event Event
		want  AppState
		fx    []string
	}{
		{"NEW starts saving", nil, nil, Start{}, AppStateNewSaving, []string{"PersistApp"}},
		{"NEW starts saving and arms the lifetime timer", []option{lifetime(time.Minute)}, nil, Start{}, AppStateNewSaving, []string{"PersistApp", "ScheduleTimeout"}},
		{"NEW is killed at once", nil, nil, Kill{Diagnostics: "x"}, AppStateKilled, []string{"AppCompleted"}},
		{"NEW saves a rejection", nil, nil, Rejected{Diagnostics: "x"}, AppStateFinalSaving, []string{"PersistApp"}},
		{"NEW ignores a lifetime timer it never armed", nil, nil, TimeoutExpired{}, AppStateNew, nil},

		{"NEW_SAVING goes to the scheduler once saved", nil, toNewSaving, AppSaved{}, AppStateSubmitted, []string{"AddToScheduler"}},
		{"NEW_SAVING fails when it cannot be saved", nil, toNewSaving, AppSaveFailed{Diagnostics: "x"}, AppStateFailed, []string{"AppCompleted"}},
		{"NEW_SAVING fails and disarms its timer", []option{lifetime(time.Minute)}, toNewSaving, AppSaveFailed{}, AppStateFailed, []string{"CancelTimeout", "AppCompleted"}},
		{"NEW_SAVING saves a kill", nil, toNewSaving, Kill{}, AppStateFinalSaving, []string{"PersistApp"}},
		{"NEW_SAVING saves a rejection", nil, toNewSaving, Rejected{}, AppStateFinalSaving, []string{"PersistApp"}},
		{"NEW_SAVING moves queue", nil, toNewSaving, Move{Queue: "root.b"}, AppStateNewSaving, []string{"PersistApp"}},
		{"NEW_SAVING takes a new lifetime", nil, toNewSaving, UpdateTimeout{Expiry: future}, AppStateNewSaving, []string{"PersistApp", "ScheduleTimeout"}},

		{"SUBMITTED starts attempt 1 when accepted", nil, toSubmitted, Accepted{}, AppStateAccepted, []string{"AddAttemptToScheduler"}},
		{"SUBMITTED saves a rejection", nil, toSubmitted, Rejected{}, AppStateFinalSaving, []string{"PersistApp"}},
		{"SUBMITTED saves a kill", nil, toSubmitted, Kill{}, AppStateFinalSaving, []string{"PersistApp"}},
		{"SUBMITTED moves queue", nil, toSubmitted, Move{Queue: "root.b"}, AppStateSubmitted, []string{"PersistApp"}},
		{"SUBMITTED takes a new priority", nil, toSubmitted, UpdatePriority{Priority: 5}, AppStateSubmitted, []string{"PersistApp"}},
		{"SUBMITTED takes a new lifetime", nil, toSubmitted, UpdateTimeout{Expiry: future}, AppStateSubmitted, []string{"PersistApp", "ScheduleTimeout"}},

		{"ACCEPTED kills its attempt", nil, toAccepted, Kill{}, AppStateKilling, []string{"PersistAttempt"}},
		{"ACCEPTED is killed by its lifetime", []option{lifetime(time.Second)}, toAccepted, TimeoutExpired{}, AppStateKilling, []string{"PersistAttempt"}},
		{"ACCEPTED moves queue", nil, toAccepted, Move{Queue: "root.b"}, AppStateAccepted, []string{"PersistApp"}},
		{"ACCEPTED takes a new priority", nil, toAccepted, UpdatePriority{Priority: 5}, AppStateAccepted, []string{"PersistApp"}},
		{"ACCEPTED takes a new lifetime", nil, toAccepted, UpdateTimeout{Expiry: future}, AppStateAccepted, []string{"PersistApp", "ScheduleTimeout"}},

		{"RUNNING kills its attempt", nil, toRunning, Kill{}, AppStateKilling, []string{"PersistAttempt"}},
		{"RUNNING moves queue", nil, toRunning, Move{Queue: "root.b"}, AppStateRunning, []string{"PersistApp"}},
		{"RUNNING takes a new priority", nil, toRunning, UpdatePriority{Priority: 5}, AppStateRunning, []string{"PersistApp"}},
		{"RUNNING takes a new lifetime", nil, toRunning, UpdateTimeout{Expiry: future}, AppStateRunning, []string{"PersistApp", "ScheduleTimeout"}},
		{"RUNNING ignores a lifetime timer that is early", []option{lifetime(time.Hour)}, toRunning, TimeoutExpired{}, AppStateRunning, nil},

		{"FINAL_SAVING reaches FAILED once saved", nil, toRejecting, AppFinalSaved{}, AppStateFailed, []string{"RemoveFromScheduler", "AppCompleted"}},
		{"FINAL_SAVING reaches FINISHING once an unregistration is saved", nil, append(clip(toUnregistering), AttemptFinalSaved{Attempt: att1}), AppFinalSaved{}, AppStateFinishing, nil},
		{"FINAL_SAVING reaches KILLED once saved", nil, append(clip(toKilling), AttemptFinalSaved{Attempt: att1}), AppFinalSaved{}, AppStateKilled, []string{"RemoveFromScheduler", "AppCompleted"}},
		{"FINAL_SAVING disarms the lifetime timer", []option{lifetime(time.Hour)}, toRejecting, AppFinalSaved{}, AppStateFailed, []string{"CancelTimeout", "RemoveFromScheduler", "AppCompleted"}},
		{"FINAL_SAVING ignores the first save completing late", nil, append(clip(toNewSaving), Kill{}), AppSaved{}, AppStateFinalSaving, nil},
		{"FINAL_SAVING ignores a kill", nil, toRejecting, Kill{}, AppStateFinalSaving, nil},

		{"FINISHING ignores a kill", nil, toFinishing, Kill{}, AppStateFinishing, nil},
		{"KILLING ignores a second kill", nil, toKilling, Kill{}, AppStateKilling, nil},
		{"KILLING ignores an update save completing", nil, toKilling, AppFinalSaved{}, AppStateKilling, nil},
		{"FINISHED ignores a kill", nil, toFinished, Kill{}, AppStateFinished, nil},
		{"FINISHED ignores its lifetime timer", []option{lifetime(time.Second)}, toFinished, TimeoutExpired{}, AppStateFinished, nil},
		{"FAILED ignores a kill", nil, toFailed, Kill{}, AppStateFailed, nil},
		{"KILLED ignores a kill", nil, toKilled, Kill{}, AppStateKilled, nil},
		{"KILLED ignores a late acceptance", nil, []Event{Kill{}}, Accepted{}, AppStateKilled, nil},
		{"KILLED ignores a late rejection", nil, []Event{Kill{}}, Rejected{}, AppStateKilled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := drive(t, tt.path, tt.opts...)
			fx, err := a.Handle(tt.event, at(len(tt.path)+10))
			if err != nil {
				t.Fatal(err)
			}
			if a.State() != tt.want {
				t.Errorf("state = %s, want %s", a.State(), tt.want)
			}
			if got := effectNames(fx); !sameNames(got, tt.fx) {
				t.Errorf("effects = %v, want %v", got, tt.fx)
			}
		})
	}
}

func TestApplicationRejectsInvalidEventsAndStaysUnchanged(t *testing.T) {
	tests := []struct {
		name  string
		path  []Event
		event Event
	}{
		{"NEW before it is started", nil, AppSaved{}},
		{"NEW accepted before it is stored", nil, Accepted{}},
		{"NEW with a final save", nil, AppFinalSaved{}},
		{"NEW moved", nil, Move{Queue: "root.b"}},
		{"NEW given a priority", nil, UpdatePriority{Priority: 1}},
		{"NEW given a lifetime", nil, UpdateTimeout{Expiry: t0.Add(time.Hour)}},
		{"NEW_SAVING started twice", toNewSaving, Start{}},
		{"NEW_SAVING accepted before it is stored", toNewSaving, Accepted{}},
		{"NEW_SAVING given a priority", toNewSaving, UpdatePriority{Priority: 1}},
		{"SUBMITTED saved twice", toSubmitted, AppSaved{}},
		{"SUBMITTED recovered", toSubmitted, Recover{App: AppRecord{ID: appID}}},
		{"ACCEPTED accepted twice", toAccepted, Accepted{}},
		{"ACCEPTED rejected", toAccepted, Rejected{}},
		{"RUNNING started again", toRunning, Start{}},
		{"RUNNING with a final save", toRunning, AppFinalSaved{}},
		{"FINAL_SAVING moved", toRejecting, Move{Queue: "root.b"}},
		{"FINAL_SAVING accepted", toRejecting, Accepted{}},
		{"FINISHING given a priority", toFinishing, UpdatePriority{Priority: 1}},
		{"KILLING moved", toKilling, Move{Queue: "root.b"}},
		{"FINISHED moved", toFinished, Move{Queue: "root.b"}},
		{"FINISHED given a priority", toFinished, UpdatePriority{Priority: 1}},
		{"FINISHED given a lifetime", toFinished, UpdateTimeout{Expiry: t0.Add(time.Hour)}},
		{"FINISHED accepted", toFinished, Accepted{}},
		{"FINISHED rejected", toFinished, Rejected{}},
		{"FAILED with a final save", toFailed, AppFinalSaved{}},
		{"KILLED saved", toKilled, AppSaved{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := drive(t, tt.path)
			before := snapshot(a)
			fx, err := a.Handle(tt.event, at(50))
			wantInvalid(t, err)
			if fx != nil {
				t.Errorf("effects = %v, want none", fx)
			}
			if after := snapshot(a); after != before {
				t.Errorf("application changed:\n--- before\n%s\n--- after\n%s", before, after)
			}
		})
	}
}

func TestInvalidTransitionErrorNamesObjectStateAndEvent(t *testing.T) {
	a := drive(t, toFinished)
	_, err := a.Handle(Move{Queue: "root.b"}, at(50))
	var it *InvalidTransitionError
	if !errors.As(err, &it) {
		t.Fatalf("err = %v", err)
	}
	want := InvalidTransitionError{Object: "application_1795333013199_0002", State: "FINISHED", Event: "MOVE"}
	if *it != want {
		t.Errorf("error = %+v, want %+v", *it, want)
	}
	if got := err.Error(); got != "application_1795333013199_0002: event MOVE is invalid in state FINISHED" {
		t.Errorf("message = %q", got)
	}
}

func TestNewApplicationTakesTheSubmissionAsYARNDoes(t *testing.T) {
	ctx := dsContext()
	ctx.ApplicationType = proto.String("A-VERY-LONG-APPLICATION-TYPE")
	ctx.ApplicationTags = []string{"Nightly", "etl", "nightly"}
	ctx.MaxAppAttempts = proto.Int32(7)
	ctx.AmContainerSpec.Application_ACLs = []*yarnpb.ApplicationACLMapProto{
		{AccessType: yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP.Enum(), Acl: proto.String("alice,bob ops")},
	}
	a, err := NewApplication(testCfg, Submission{ID: appID, User: "root", Context: ctx, SubmitTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Type(); got != "A-VERY-LONG-APPLICAT" {
		t.Errorf("type = %q, want the first 20 bytes", got)
	}
	if got := strings.Join(a.Tags(), ","); got != "etl,nightly" {
		t.Errorf("tags = %q, want lower case, once each, sorted", got)
	}
	if got := a.MaxAttempts(); got != 2 {
		t.Errorf("max attempts = %d, want the cluster limit 2", got)
	}
	if got := a.Queue(); got != "default" {
		t.Errorf("queue = %q, want the submission's", got)
	}
	if acl, ok := a.ACL(yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP); !ok || acl != "alice,bob ops" {
		t.Errorf("VIEW_APP ACL = %q, %v", acl, ok)
	}
	if _, ok := a.ACL(yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP); ok {
		t.Error("MODIFY_APP ACL present, want none")
	}
	if !proto.Equal(a.Submission(), ctx) {
		t.Error("submission not kept verbatim")
	}
	if a.Name() != "DistributedShell" || a.User() != "root" || a.State() != AppStateNew || !a.SubmitTime().Equal(t0) {
		t.Errorf("name=%q user=%q state=%s submit=%v", a.Name(), a.User(), a.State(), a.SubmitTime())
	}
}

func TestNewApplicationDerivesTheAMRequest(t *testing.T) {
	t.Run("from the resource field when no request is given", func(t *testing.T) {
		ctx := dsContext()
		ctx.AmContainerResourceRequest = nil
		ctx.Resource = &yarnpb.ResourceProto{Memory: proto.Int64(2048), VirtualCores: proto.Int32(2)}
		ctx.NodeLabelExpression = proto.String("gpu")
		a, err := NewApplication(testCfg, Submission{ID: appID, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		reqs := a.AMRequests()
		if len(reqs) != 1 {
			t.Fatalf("requests = %d", len(reqs))
		}
		r := reqs[0]
		if r.GetResourceName() != "*" || r.GetNumContainers() != 1 || r.GetPriority().GetPriority() != 0 ||
			r.GetCapability().GetMemory() != 2048 || r.GetNodeLabelExpression() != "gpu" || !r.GetRelaxLocality() {
			t.Errorf("request = %v", r)
		}
		if l, _ := a.AMNodeLabelExpression(); l != "gpu" {
			t.Errorf("AM label = %q", l)
		}
	})
	t.Run("ANY first, every request one container of the ANY capability", func(t *testing.T) {
		ctx := dsContext()
		ctx.AmContainerResourceRequest = []*yarnpb.ResourceRequestProto{
			{ResourceName: proto.String("rack1"), NumContainers: proto.Int32(3)},
			{ResourceName: proto.String("*"), Capability: &yarnpb.ResourceProto{Memory: proto.Int64(512)}, Priority: &yarnpb.PriorityProto{Priority: proto.Int32(9)}},
		}
		a, err := NewApplication(testCfg, Submission{ID: appID, Context: ctx})
		if err != nil {
			t.Fatal(err)
		}
		reqs := a.AMRequests()
		if reqs[0].GetResourceName() != "*" || reqs[1].GetResourceName() != "rack1" {
			t.Fatalf("order = %s, %s", reqs[0].GetResourceName(), reqs[1].GetResourceName())
		}
		for _, r := range reqs {
			if r.GetNumContainers() != 1 || r.GetPriority().GetPriority() != 0 || r.GetCapability().GetMemory() != 512 ||
				r.GetExecutionTypeRequest().GetExecutionType() != yarnpb.ExecutionTypeProto_GUARANTEED {
				t.Errorf("request = %v", r)
			}
		}
		if ctx.AmContainerResourceRequest[0].GetNumContainers() != 3 || ctx.AmContainerResourceRequest[0].Capability != nil {
			t.Error("the caller's submission was modified")
		}
	})
	bad := []struct {
		name string
		reqs []*yarnpb.ResourceRequestProto
	}{
		{"no request and no resource", nil},
		{"no ANY request", []*yarnpb.ResourceRequestProto{{ResourceName: proto.String("host1")}}},
		{"two ANY requests", []*yarnpb.ResourceRequestProto{{ResourceName: proto.String("*")}, {ResourceName: proto.String("*")}}},
	}
	for _, tt := range bad {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			ctx := dsContext()
			ctx.AmContainerResourceRequest = tt.reqs
			_, err := NewApplication(testCfg, Submission{ID: appID, Context: ctx})
			if !errors.Is(err, ErrInvalidResourceRequest) {
				t.Errorf("err = %v, want ErrInvalidResourceRequest", err)
			}
		})
	}
	t.Run("none for an unmanaged AM", func(t *testing.T) {
		a := newApp(t, unmanaged())
		if a.AMRequests() != nil {
			t.Error("unmanaged AM has AM requests")
		}
		if _, ok := a.AMNodeLabelExpression(); ok {
			t.Error("unmanaged AM has an AM label")
		}
	})
}

func TestNewApplicationRejectsAContextOfAnotherApplication(t *testing.T) {
	ctx := dsContext()
	ctx.ApplicationId = ApplicationID{ClusterTimestamp: clusterTS, ID: 9}.Proto()
	if _, err := NewApplication(testCfg, Submission{ID: appID, Context: ctx}); err == nil {
		t.Error("no error")
	}
	if _, err := NewApplication(testCfg, Submission{ID: appID}); err == nil {
		t.Error("no error for a missing context")
	}
}

func TestPlacementFieldsWithoutCopyingTheSubmission(t *testing.T) {
	t.Run("given", func(t *testing.T) {
		lac := &yarnpb.LogAggregationContextProto{IncludePattern: proto.String("*.log"), RolledLogsIncludePattern: proto.String("stderr")}
		a := newApp(t, func(c *yarnpb.ApplicationSubmissionContextProto) {
			c.NodeLabelExpression = proto.String("gpu")
			c.LogAggregationContext = proto.CloneOf(lac)
		})
		if got := a.NodeLabelExpression(); got != "gpu" {
			t.Errorf("node label expression = %q, want gpu", got)
		}
		got := a.LogAggregationContext()
		if !proto.Equal(got, lac) {
			t.Errorf("log aggregation context = %v, want %v", got, lac)
		}
		got.IncludePattern = proto.String("changed")
		if p := a.Submission().GetLogAggregationContext().GetIncludePattern(); p != "*.log" {
			t.Errorf("the caller's change reached the stored submission: include pattern %q", p)
		}
	})
	t.Run("none", func(t *testing.T) {
		a := newApp(t)
		if got := a.NodeLabelExpression(); got != "" {
			t.Errorf("node label expression = %q, want none", got)
		}
		if got := a.LogAggregationContext(); got != nil {
			t.Errorf("log aggregation context = %v, want nil", got)
		}
		// Every allocate heartbeat reads both: they must not copy the
		// submission as Submission does.
		if n := testing.AllocsPerRun(100, func() {
			_ = a.NodeLabelExpression()
			_ = a.LogAggregationContext()
		}); n != 0 {
			t.Errorf("%v allocations to read them, want 0", n)
		}
	})
}

func TestSubmissionFollowsMoveAndPriority(t *testing.T) {
	a := drive(t, append(clip(toRunning), Move{Queue: "root.b"}, UpdatePriority{Priority: 7}))
	if a.Queue() != "root.b" || a.Priority() != 7 {
		t.Errorf("queue=%s priority=%d", a.Queue(), a.Priority())
	}
	s := a.Submission()
	if s.GetQueue() != "root.b" || s.GetPriority().GetPriority() != 7 {
		t.Errorf("stored submission queue=%s priority=%d", s.GetQueue(), s.GetPriority().GetPriority())
	}
	if _, err := a.Handle(Move{}, at(50)); err == nil {
		t.Error("a move to no queue was taken")
	}
}

func TestLifetimeKillsTheApplicationWithYARNsDiagnostics(t *testing.T) {
	a := newApp(t, lifetime(10*time.Second))
	fx, err := a.Handle(Start{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := ScheduleTimeout{App: appID, Expiry: t0.Add(10 * time.Second)}
	if fx[len(fx)-1] != want {
		t.Fatalf("effects = %v, want last %v", fx, want)
	}
	driveOn(t, a, toRunning[1:])
	// A timer that fires early (say, before an UpdateTimeout moved it) is ignored.
	if fx, _ := a.Handle(TimeoutExpired{}, t0.Add(9*time.Second)); len(fx) != 0 || a.State() != AppStateRunning {
		t.Fatalf("early timer: state=%s effects=%v", a.State(), fx)
	}
	for _, ev := range []Event{TimeoutExpired{}, AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}} {
		if _, err := a.Handle(ev, t0.Add(11*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if a.State() != AppStateKilled || a.Diagnostics() != DiagLifetimeExceeded {
		t.Errorf("state=%s diagnostics=%q", a.State(), a.Diagnostics())
	}
	if a.FinalStatus() != yarnpb.FinalApplicationStatusProto_APP_KILLED {
		t.Errorf("final status = %s", a.FinalStatus())
	}
}

func TestLifetimeFollowsTheQueueLimits(t *testing.T) {
	tests := []struct {
		name  string
		asked time.Duration
		start Start
		want  time.Duration // 0: no timer
	}{
		{"none asked, none by default", 0, Start{}, 0},
		{"none asked, queue default", 0, Start{DefaultLifetime: time.Minute}, time.Minute},
		{"asked, within the queue maximum", 30 * time.Second, Start{MaxLifetime: time.Minute}, 30 * time.Second},
		{"asked, above the queue maximum", time.Hour, Start{MaxLifetime: time.Minute}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []option
			if tt.asked > 0 {
				opts = append(opts, lifetime(tt.asked))
			}
			a := newApp(t, opts...)
			if _, err := a.Handle(tt.start, t0); err != nil {
				t.Fatal(err)
			}
			var want time.Time
			if tt.want > 0 {
				want = t0.Add(tt.want)
			}
			if got := a.LifetimeExpiry(); !got.Equal(want) {
				t.Errorf("expiry = %v, want %v", got, want)
			}
		})
	}
}

func TestUpdateTimeoutRejectsAnExpiryInThePast(t *testing.T) {
	a := drive(t, toRunning)
	before := snapshot(a)
	_, err := a.Handle(UpdateTimeout{Expiry: at(50)}, at(50))
	if !errors.Is(err, ErrInvalidTimeout) {
		t.Fatalf("err = %v, want ErrInvalidTimeout", err)
	}
	if snapshot(a) != before {
		t.Error("application changed")
	}
}

func TestUserKillDiagnosticsReadLikeYARNs(t *testing.T) {
	id := ApplicationID{ClusterTimestamp: clusterTS, ID: 1}
	if got, want := UserKillDiagnostics(id, "root", "127.0.0.1", ""), "Application application_1795333013199_0001 was killed by user root at 127.0.0.1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := UserKillDiagnostics(id, "root", "10.0.0.1", "stuck"), "Application application_1795333013199_0001 was killed by user root at 10.0.0.1 with diagnostic message: stuck"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKillWhileAcceptedEndsKilledWithTheKillText(t *testing.T) {
	diag := UserKillDiagnostics(appID, "root", "127.0.0.1", "")
	a := drive(t, append(clip(toScheduled), Kill{Diagnostics: diag}))
	if a.ClientState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Errorf("client state while killing = %s, want ACCEPTED", a.ClientState())
	}
	driveOn(t, a, []Event{AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}})
	if a.State() != AppStateKilled || a.Diagnostics() != diag {
		t.Errorf("state=%s diagnostics=%q", a.State(), a.Diagnostics())
	}
	if s := a.CurrentAttempt().State(); s != AttemptStateKilled {
		t.Errorf("attempt = %s", s)
	}
}

func TestHandleRejectsANilEvent(t *testing.T) {
	a := newApp(t)
	if _, err := a.Handle(nil, t0); err == nil {
		t.Error("no error")
	}
}
