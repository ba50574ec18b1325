package apps

import (
	"errors"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// stored runs a path and keeps the records the application asked to
// persist, as a store would: the latest of each.
func stored(t *testing.T, path []Event, opts ...option) (AppRecord, []AttemptRecord) {
	t.Helper()
	a := newApp(t, opts...)
	var app AppRecord
	atts := map[AttemptID]AttemptRecord{}
	var order []AttemptID
	for i, ev := range path {
		fx, err := a.Handle(ev, at(i))
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		for _, e := range fx {
			switch e := e.(type) {
			case PersistApp:
				app = e.Record
			case PersistAttempt:
				if _, ok := atts[e.Record.ID]; !ok {
					order = append(order, e.Record.ID)
				}
				atts[e.Record.ID] = e.Record
			case RemoveAttemptRecord:
				delete(atts, e.Attempt)
			}
		}
	}
	var out []AttemptRecord
	for _, id := range order {
		if r, ok := atts[id]; ok {
			out = append(out, r)
		}
	}
	return app, out
}

// restart builds a new application from records, as a new RM leader does.
func restart(t *testing.T, app AppRecord, atts []AttemptRecord) (*Application, []Effect) {
	t.Helper()
	a, err := NewApplication(testCfg, Submission{ID: app.ID, User: app.User, Queue: app.Queue, Context: app.Context, SubmitTime: app.SubmitTime, AMRequests: app.AMRequests})
	if err != nil {
		t.Fatal(err)
	}
	fx, err := a.Handle(Recover{App: app, Attempts: atts}, at(100))
	if err != nil {
		t.Fatal(err)
	}
	return a, fx
}

func TestRecoveryBringsBackARunningApplication(t *testing.T) {
	rec, atts := stored(t, toRunning, lifetime(3600e9))
	a, fx := restart(t, rec, atts)
	if a.State() != AppStateAccepted || a.CurrentAttempt().State() != AttemptStateLaunched {
		t.Fatalf("app %s attempt %s", a.State(), a.CurrentAttempt().State())
	}
	want := []string{"ScheduleTimeout", "AddToScheduler", "AddAttemptToScheduler", "WatchAM"}
	if got := effectNames(fx); !sameNames(got, want) {
		t.Errorf("effects = %v, want %v", got, want)
	}
	if add := fx[1].(AddToScheduler); !add.Recovering {
		t.Error("scheduler add not marked recovering")
	}
	if a.Diagnostics() != "Attempt recovered after RM restart" {
		t.Errorf("diagnostics %q", a.Diagnostics())
	}
	if a.LaunchTime() != at(6) {
		t.Errorf("launch time %v, want the stored one", a.LaunchTime())
	}
	// Pods come back, then the AM re-registers (ApplicationMasterNotRegistered).
	driveOn(t, a, []Event{
		ContainerRecovered{Container: containerProto(am1, 1024, 1), Created: at(4), Running: true},
		AttemptRegistered{Attempt: att1, Host: "vm", RPCPort: 1},
	})
	if a.State() != AppStateRunning || !a.Container(am1).IsAM() {
		t.Errorf("app %s, AM container recovered as AM: %v", a.State(), a.Container(am1).IsAM())
	}
}

func TestRecoveryFailsAnAttemptWhoseAMEndedDuringTheRestart(t *testing.T) {
	rec, atts := stored(t, toRunning)
	a, _ := restart(t, rec, atts)
	fx, err := a.Handle(ContainerRecovered{Container: containerProto(am1, 1024, 1), Created: at(4), ExitStatus: 1, Diagnostics: "lost"}, at(101))
	if err != nil {
		t.Fatal(err)
	}
	if a.CurrentAttempt().State() != AttemptStateFinalSaving {
		t.Fatalf("attempt %s, effects %v", a.CurrentAttempt().State(), fx)
	}
	driveOn(t, a, []Event{AttemptFinalSaved{Attempt: att1}})
	if a.CurrentAttempt().ID() != att2 || a.State() != AppStateAccepted {
		t.Errorf("current %s app %s, want a second attempt", a.CurrentAttempt().ID(), a.State())
	}
}

func TestRecoveryOfAnEndedApplicationRestoresItsReport(t *testing.T) {
	path := toFinished
	orig := drive(t, path)
	rec, atts := stored(t, path)
	a, fx := restart(t, rec, atts)
	if got := effectNames(fx); !sameNames(got, []string{"AppCompleted"}) {
		t.Errorf("effects = %v, want only AppCompleted", got)
	}
	if a.State() != AppStateFinished || a.CurrentAttempt().State() != AttemptStateFinished {
		t.Fatalf("app %s attempt %s", a.State(), a.CurrentAttempt().State())
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"final status", a.FinalStatus(), orig.FinalStatus()},
		{"finish time", a.FinishTime(), orig.FinishTime()},
		{"progress", a.Progress(), orig.Progress()},
		{"tracking URL", a.CurrentAttempt().TrackingURL(), orig.CurrentAttempt().TrackingURL()},
		{"client state", a.ClientState(), yarnpb.YarnApplicationStateProto_FINISHED},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestRecoveryWithoutAttemptsGoesBackToTheScheduler(t *testing.T) {
	rec, atts := stored(t, toSubmitted)
	a, fx := restart(t, rec, atts)
	if a.State() != AppStateSubmitted {
		t.Fatalf("app %s", a.State())
	}
	if add := fx[0].(AddToScheduler); add.Recovering {
		t.Error("an application never accepted must be admitted again")
	}
	driveOn(t, a, []Event{Accepted{}})
	if a.CurrentAttempt().ID() != att1 {
		t.Errorf("first attempt %s", a.CurrentAttempt().ID())
	}
}

func TestRecoveryReplaysAStoredAttemptFailure(t *testing.T) {
	// Attempt 1's failure was stored, the application's reaction was not.
	rec, atts := stored(t, append(clip(toRunning), AttemptFailed{Attempt: att1, Diagnostics: "x"}))
	a, fx := restart(t, rec, atts)
	if a.CurrentAttempt().ID() != att2 || a.State() != AppStateAccepted || a.Attempt(att1).State() != AttemptStateFailed {
		t.Fatalf("current %s app %s, effects %v", a.CurrentAttempt().ID(), a.State(), fx)
	}
}

func TestRecoveryCountsAnUnendedEarlierAttemptFailed(t *testing.T) {
	rec, atts := stored(t, append(clip(toRetrying), AttemptAdded{Attempt: att2},
		AMContainerAllocated{Attempt: att2, Container: containerProto(am2, 1024, 1)}, AttemptSaved{Attempt: att2}))
	atts[0].State = 0 // as if attempt 1's end was never stored
	a, _ := restart(t, rec, atts)
	if a.Attempt(att1).State() != AttemptStateFailed || a.Attempt(att2).State() != AttemptStateLaunched {
		t.Errorf("attempts %s, %s", a.Attempt(att1).State(), a.Attempt(att2).State())
	}
}

func TestRecoverRejectsRecordsOfAnotherApplication(t *testing.T) {
	rec, atts := stored(t, toRunning)
	a := newApp(t)
	bad := []Recover{
		{App: AppRecord{ID: ApplicationID{ClusterTimestamp: 1, ID: 1}}},
		{App: rec, Attempts: []AttemptRecord{{ID: AttemptID{App: ApplicationID{ClusterTimestamp: 1, ID: 1}, ID: 1}}}},
		{App: rec, Attempts: append(clip2(atts), atts...)},
		{App: AppRecord{ID: appID, State: AppStateRunning}},
	}
	for i, r := range bad {
		before := snapshot(a)
		if _, err := a.Handle(r, at(100)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%d: err = %v, want ErrInvalidRecord", i, err)
		}
		if snapshot(a) != before {
			t.Errorf("%d: application changed", i)
		}
	}
}

func clip2(r []AttemptRecord) []AttemptRecord { return append([]AttemptRecord(nil), r...) }
