package apps

import (
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

var (
	amExited = func(id ContainerID, exit int32) Event {
		return ContainerFinished{Container: id, ExitStatus: exit, Diagnostics: "boom"}
	}
	toUnmanagedSubmitted = toAccepted
	toUnmanagedSaving    = append(clip(toAccepted), AttemptAdded{Attempt: att1})
	toUnmanagedLaunched  = append(clip(toUnmanagedSaving), AttemptSaved{Attempt: att1})
	toUnmanagedRunning   = append(clip(toUnmanagedLaunched), AttemptRegistered{Attempt: att1, Host: "laptop", RPCPort: 4040})
	toAttemptFinalSaving = append(clip(toRunning), AttemptFailed{Attempt: att1, Diagnostics: "failed by user"})
	toAttemptKilled      = toKilled
)

// Every transition of the attempt table (RMAppAttemptImpl), valid ones
// ignored included, with the application state that follows.
func TestAttemptTakesEveryValidEvent(t *testing.T) {
	tests := []struct {
		name    string
		opts    []option
		path    []Event
		event   Event
		attempt AttemptID
		want    AttemptState
		app     AppState
		fx      []string
	}{
		{"SUBMITTED asks for the AM container once added", nil, toAccepted, AttemptAdded{Attempt: att1}, att1, AttemptStateScheduled, AppStateAccepted, []string{"RequestAMContainer"}},
		{"SUBMITTED of an unmanaged AM is saved once added", []option{unmanaged()}, toUnmanagedSubmitted, AttemptAdded{Attempt: att1}, att1, AttemptStateLaunchedUnmanagedSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"SUBMITTED saves a failure", nil, toAccepted, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"SUBMITTED fails an AM registering too early", nil, toAccepted, AttemptRegistered{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"SUBMITTED takes scheduler diagnostics", nil, toAccepted, AttemptDiagnostics{Attempt: att1, Message: "waiting"}, att1, AttemptStateSubmitted, AppStateAccepted, nil},

		{"SCHEDULED saves its AM container", nil, toScheduled, AMContainerAllocated{Attempt: att1, Container: containerProto(am1, 1024, 1)}, att1, AttemptStateAllocatedSaving, AppStateAccepted, []string{"PersistAttempt", "WatchAllocation"}},
		{"SCHEDULED saves a failure", nil, toScheduled, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"SCHEDULED is killed with the app", nil, toScheduled, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},

		{"ALLOCATED_SAVING launches the AM once saved", nil, toAllocSave, AttemptSaved{Attempt: att1}, att1, AttemptStateAllocated, AppStateAccepted, []string{"LaunchAM"}},
		{"ALLOCATED_SAVING saves a failure", nil, toAllocSave, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"ALLOCATED_SAVING fails when the AM container ends", nil, toAllocSave, amExited(am1, 1), att1, AttemptStateFinalSaving, AppStateAccepted, []string{"UnwatchAllocation", "ContainerCompleted", "PersistAttempt"}},
		{"ALLOCATED_SAVING is killed with the app", nil, toAllocSave, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},

		{"LAUNCHED_UNMANAGED_SAVING is launched once saved", []option{unmanaged()}, toUnmanagedSaving, AttemptSaved{Attempt: att1}, att1, AttemptStateLaunched, AppStateAccepted, []string{"IssueAMRMToken", "WatchAM"}},
		{"LAUNCHED_UNMANAGED_SAVING fails an AM registering too early", []option{unmanaged()}, toUnmanagedSaving, AttemptRegistered{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"LAUNCHED_UNMANAGED_SAVING saves a failure", []option{unmanaged()}, toUnmanagedSaving, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"LAUNCHED_UNMANAGED_SAVING is killed with the app", []option{unmanaged()}, toUnmanagedSaving, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},

		{"ALLOCATED is launched, and the app stores its launch time", nil, toAllocated, AttemptLaunched{Attempt: att1}, att1, AttemptStateLaunched, AppStateAccepted, []string{"WatchAM", "PersistApp"}},
		{"ALLOCATED saves a launch failure", nil, toAllocated, AttemptLaunchFailed{Attempt: att1, Diagnostics: "no node"}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"ALLOCATED runs an AM that registers before the launch is reported", nil, toAllocated, AttemptRegistered{Attempt: att1}, att1, AttemptStateRunning, AppStateRunning, []string{"WatchAM", "PersistApp"}},
		{"ALLOCATED saves a failure", nil, toAllocated, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"ALLOCATED fails when the AM container ends", nil, toAllocated, amExited(am1, 1), att1, AttemptStateFinalSaving, AppStateAccepted, []string{"UnwatchAllocation", "ContainerCompleted", "PersistAttempt"}},
		{"ALLOCATED is killed with the app", nil, toAllocated, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},

		{"LAUNCHED runs once the AM registers", nil, toLaunched, AttemptRegistered{Attempt: att1, Host: "h", RPCPort: 1}, att1, AttemptStateRunning, AppStateRunning, nil},
		{"LAUNCHED fails when the AM container ends", nil, toLaunched, amExited(am1, 1), att1, AttemptStateFinalSaving, AppStateAccepted, []string{"ContainerCompleted", "PersistAttempt"}},
		{"LAUNCHED fails when the AM goes silent", nil, toLaunched, AttemptExpired{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"LAUNCHED saves a failure", nil, toLaunched, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, []string{"PersistAttempt"}},
		{"LAUNCHED is killed with the app", nil, toLaunched, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},
		{"LAUNCHED takes scheduler diagnostics", nil, toLaunched, AttemptDiagnostics{Attempt: att1, Message: "x"}, att1, AttemptStateLaunched, AppStateAccepted, nil},

		{"RUNNING saves the AM's unregistration, and so does the app", nil, toRunning, AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED}, att1, AttemptStateFinalSaving, AppStateFinalSaving, []string{"PersistAttempt", "PersistApp"}},
		{"RUNNING takes the AM's progress", nil, toRunning, AttemptStatusUpdate{Attempt: att1, Progress: 0.5}, att1, AttemptStateRunning, AppStateRunning, nil},
		{"RUNNING fails when the AM container ends", nil, toRunning, amExited(am1, 1), att1, AttemptStateFinalSaving, AppStateRunning, []string{"ContainerCompleted", "PersistAttempt"}},
		{"RUNNING fails when the AM goes silent", nil, toRunning, AttemptExpired{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateRunning, []string{"PersistAttempt"}},
		{"RUNNING saves a failure", nil, toRunning, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateRunning, []string{"PersistAttempt"}},
		{"RUNNING is killed with the app", nil, toRunning, Kill{}, att1, AttemptStateFinalSaving, AppStateKilling, []string{"PersistAttempt"}},
		{"RUNNING ignores a repeated launch", nil, toRunning, AttemptLaunched{Attempt: att1}, att1, AttemptStateRunning, AppStateRunning, nil},
		{"RUNNING ignores a re-registration", nil, toRunning, AttemptRegistered{Attempt: att1}, att1, AttemptStateRunning, AppStateRunning, nil},
		{"RUNNING stops a second AM container", nil, toRunning, AMContainerAllocated{Attempt: att1, Container: containerProto(task1, 1024, 1)}, att1, AttemptStateRunning, AppStateRunning, []string{"StopContainer"}},
		{"RUNNING ignores scheduler diagnostics", nil, toRunning, AttemptDiagnostics{Attempt: att1, Message: "x"}, att1, AttemptStateRunning, AppStateRunning, nil},

		{"FINAL_SAVING reaches FINISHING once an unregistration is saved", nil, toUnregistering, AttemptFinalSaved{Attempt: att1}, att1, AttemptStateFinishing, AppStateFinalSaving, []string{"WatchAM"}},
		{"FINAL_SAVING reaches FAILED and a new attempt starts", nil, toAttemptFinalSaving, AttemptFinalSaved{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, []string{"StopContainer", "ContainerCompleted", "ReleaseAttempt", "AddAttemptToScheduler"}},
		{"FINAL_SAVING reaches KILLED and the app saves its kill", nil, toKilling, AttemptFinalSaved{Attempt: att1}, att1, AttemptStateKilled, AppStateFinalSaving, []string{"StopContainer", "ContainerCompleted", "ReleaseAttempt", "PersistApp"}},
		{"FINAL_SAVING notes the AM container ending after its unregistration", nil, toUnregistering, amExited(am1, 0), att1, AttemptStateFinalSaving, AppStateFinalSaving, []string{"ContainerCompleted"}},
		{"FINAL_SAVING notes the AM going silent after its unregistration", nil, toUnregistering, AttemptExpired{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateFinalSaving, nil},
		{"FINAL_SAVING ignores a second unregistration", nil, toUnregistering, AttemptUnregistered{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateFinalSaving, nil},
		{"FINAL_SAVING ignores progress", nil, toUnregistering, AttemptStatusUpdate{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateFinalSaving, nil},
		{"FINAL_SAVING ignores a late launch", nil, append(clip(toAllocated), AttemptFailed{Attempt: att1}), AttemptLaunched{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, nil},
		{"FINAL_SAVING ignores a late launch failure", nil, append(clip(toAllocated), AttemptFailed{Attempt: att1}), AttemptLaunchFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, nil},
		{"FINAL_SAVING ignores the first save completing late", nil, append(clip(toAllocSave), AttemptFailed{Attempt: att1}), AttemptSaved{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateAccepted, nil},
		{"FINAL_SAVING ignores a failure", nil, toUnregistering, AttemptFailed{Attempt: att1}, att1, AttemptStateFinalSaving, AppStateFinalSaving, nil},

		{"FINISHING finishes when the AM container ends", nil, append(clip(toUnregistering), AttemptFinalSaved{Attempt: att1}), amExited(am1, 0), att1, AttemptStateFinished, AppStateFinalSaving, []string{"ContainerCompleted", "ReleaseAttempt"}},
		{"FINISHING finishes the app when the AM container ends", nil, toFinishing, amExited(am1, 0), att1, AttemptStateFinished, AppStateFinished, []string{"ContainerCompleted", "ReleaseAttempt", "RemoveFromScheduler", "AppCompleted"}},
		{"FINISHING finishes when the AM container outlives its time", nil, toFinishing, AttemptExpired{Attempt: att1}, att1, AttemptStateFinished, AppStateFinished, []string{"StopContainer", "ContainerCompleted", "ReleaseAttempt", "RemoveFromScheduler", "AppCompleted"}},
		{"FINISHING ignores a late launch", nil, toFinishing, AttemptLaunched{Attempt: att1}, att1, AttemptStateFinishing, AppStateFinishing, nil},
		{"FINISHING ignores a second unregistration", nil, toFinishing, AttemptUnregistered{Attempt: att1}, att1, AttemptStateFinishing, AppStateFinishing, nil},
		{"FINISHING ignores progress", nil, toFinishing, AttemptStatusUpdate{Attempt: att1}, att1, AttemptStateFinishing, AppStateFinishing, nil},
		{"FINISHING ignores a failure", nil, toFinishing, AttemptFailed{Attempt: att1}, att1, AttemptStateFinishing, AppStateFinishing, nil},

		{"FINISHED ignores a late launch", nil, toFinished, AttemptLaunched{Attempt: att1}, att1, AttemptStateFinished, AppStateFinished, nil},
		{"FINISHED ignores an expiry", nil, toFinished, AttemptExpired{Attempt: att1}, att1, AttemptStateFinished, AppStateFinished, nil},
		{"FINISHED ignores an unregistration", nil, toFinished, AttemptUnregistered{Attempt: att1}, att1, AttemptStateFinished, AppStateFinished, nil},
		{"FINISHED ignores a failure", nil, toFinished, AttemptFailed{Attempt: att1}, att1, AttemptStateFinished, AppStateFinished, nil},
		{"FINISHED stops a late AM container", nil, toFinished, AMContainerAllocated{Attempt: att1, Container: containerProto(task1, 1, 1)}, att1, AttemptStateFinished, AppStateFinished, []string{"StopContainer"}},

		{"FAILED ignores a late launch", nil, toRetrying, AttemptLaunched{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, nil},
		{"FAILED ignores an expiry", nil, toRetrying, AttemptExpired{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, nil},
		{"FAILED ignores a failure", nil, toRetrying, AttemptFailed{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, nil},
		{"FAILED ignores an unregistration", nil, toRetrying, AttemptUnregistered{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, nil},
		{"FAILED ignores progress", nil, toRetrying, AttemptStatusUpdate{Attempt: att1}, att1, AttemptStateFailed, AppStateAccepted, nil},

		{"KILLED ignores a late scheduler add", nil, append(clip(toAccepted), Kill{}, AttemptFinalSaved{Attempt: att1}), AttemptAdded{Attempt: att1}, att1, AttemptStateKilled, AppStateFinalSaving, nil},
		{"KILLED ignores a late launch", nil, toAttemptKilled, AttemptLaunched{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED ignores a late launch failure", nil, toAttemptKilled, AttemptLaunchFailed{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED ignores an expiry", nil, toAttemptKilled, AttemptExpired{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED ignores a late registration", nil, toAttemptKilled, AttemptRegistered{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED stops a late AM container", nil, append(clip(toScheduled), Kill{}, AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}), AMContainerAllocated{Attempt: att1, Container: containerProto(am1, 1, 1)}, att1, AttemptStateKilled, AppStateKilled, []string{"StopContainer"}},
		{"KILLED ignores an unregistration", nil, toAttemptKilled, AttemptUnregistered{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED ignores a failure", nil, toAttemptKilled, AttemptFailed{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
		{"KILLED ignores progress", nil, toAttemptKilled, AttemptStatusUpdate{Attempt: att1}, att1, AttemptStateKilled, AppStateKilled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := drive(t, tt.path, tt.opts...)
			fx, err := a.Handle(tt.event, at(len(tt.path)+10))
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Attempt(tt.attempt).State(); got != tt.want {
				t.Errorf("attempt state = %s, want %s", got, tt.want)
			}
			if a.State() != tt.app {
				t.Errorf("app state = %s, want %s", a.State(), tt.app)
			}
			if got := effectNames(fx); !sameNames(got, tt.fx) {
				t.Errorf("effects = %v, want %v", got, tt.fx)
			}
		})
	}
}

func TestAttemptRejectsInvalidEventsAndNothingChanges(t *testing.T) {
	tests := []struct {
		name  string
		path  []Event
		event Event
	}{
		{"SUBMITTED saved before it was stored", toAccepted, AttemptSaved{Attempt: att1}},
		{"SUBMITTED launched without a container", toAccepted, AttemptLaunched{Attempt: att1}},
		{"SUBMITTED given an AM container before the scheduler took it", toAccepted, AMContainerAllocated{Attempt: att1, Container: containerProto(am1, 1, 1)}},
		{"SCHEDULED saved", toScheduled, AttemptSaved{Attempt: att1}},
		{"SCHEDULED launched", toScheduled, AttemptLaunched{Attempt: att1}},
		{"SCHEDULED registered", toScheduled, AttemptRegistered{Attempt: att1}},
		{"SCHEDULED unregistered", toScheduled, AttemptUnregistered{Attempt: att1}},
		{"SCHEDULED expired", toScheduled, AttemptExpired{Attempt: att1}},
		{"ALLOCATED_SAVING given a second AM container", toAllocSave, AMContainerAllocated{Attempt: att1, Container: containerProto(task1, 1, 1)}},
		{"ALLOCATED unregistered", toAllocated, AttemptUnregistered{Attempt: att1}},
		{"ALLOCATED reports progress", toAllocated, AttemptStatusUpdate{Attempt: att1}},
		{"ALLOCATED expired", toAllocated, AttemptExpired{Attempt: att1}},
		{"RUNNING saved", toRunning, AttemptSaved{Attempt: att1}},
		{"RUNNING added to the scheduler", toRunning, AttemptAdded{Attempt: att1}},
		{"RUNNING with a final save", toRunning, AttemptFinalSaved{Attempt: att1}},
		{"RUNNING launch failed", toRunning, AttemptLaunchFailed{Attempt: att1}},
		{"FINAL_SAVING registered", toUnregistering, AttemptRegistered{Attempt: att1}},
		{"FINAL_SAVING added to the scheduler", toUnregistering, AttemptAdded{Attempt: att1}},
		{"FINISHING registered", toFinishing, AttemptRegistered{Attempt: att1}},
		{"FINISHED registered", toFinished, AttemptRegistered{Attempt: att1}},
		{"FINISHED reports progress", toFinished, AttemptStatusUpdate{Attempt: att1}},
		{"FINISHED with a final save", toFinished, AttemptFinalSaved{Attempt: att1}},
		{"FAILED registered", toRetrying, AttemptRegistered{Attempt: att1}},
		{"FAILED with a final save", toRetrying, AttemptFinalSaved{Attempt: att1}},
		{"KILLED with a final save", toAttemptKilled, AttemptFinalSaved{Attempt: att1}},
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

func TestEventsForAnUnknownAttemptAreRejected(t *testing.T) {
	a := drive(t, toRunning)
	_, err := a.Handle(AttemptRegistered{Attempt: att2}, at(50))
	if !strings.Contains(err.Error(), "unknown application attempt") {
		t.Errorf("err = %v", err)
	}
	other := AttemptID{App: ApplicationID{ClusterTimestamp: clusterTS, ID: 3}, ID: 1}
	if _, err := a.Handle(AttemptFailed{Attempt: other}, at(50)); err == nil {
		t.Error("event of another application taken")
	}
}

func TestAMFailureStartsANewAttemptUntilMaxAttempts(t *testing.T) {
	a := drive(t, toRetrying)
	if a.State() != AppStateAccepted || a.ClientState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Fatalf("after the first failure: %s", a.State())
	}
	if cur := a.CurrentAttempt(); cur.ID() != att2 || cur.State() != AttemptStateSubmitted {
		t.Fatalf("current attempt %s %s", cur.ID(), cur.State())
	}
	first := a.Attempt(att1)
	if first.AMContainerExitStatus() != 1 || first.Host() != "N/A" || first.RPCPort() != -1 {
		t.Errorf("failed attempt: exit=%d host=%s port=%d", first.AMContainerExitStatus(), first.Host(), first.RPCPort())
	}
	wantAttemptDiag := "AM Container for appattempt_1795333013199_0002_000001 exited with  exitCode: 1\n" +
		"Failing this attempt.Diagnostics: boomFor more detailed output, check the application tracking page: " +
		appPage + " Then click on links to logs of each attempt.\n"
	if got := first.Diagnostics(); got != wantAttemptDiag {
		t.Errorf("attempt diagnostics:\n got %q\nwant %q", got, wantAttemptDiag)
	}
	if first.TrackingURL() != appPage {
		t.Errorf("failed attempt tracking URL = %q, want the RM app page", first.TrackingURL())
	}

	second := []Event{
		AttemptAdded{Attempt: att2},
		AMContainerAllocated{Attempt: att2, Container: containerProto(am2, 1024, 1)},
		AttemptSaved{Attempt: att2},
		AttemptLaunched{Attempt: att2},
		ContainerLaunched{Container: am2},
		amExited(am2, 1),
		AttemptFinalSaved{Attempt: att2},
	}
	for i, ev := range second {
		if _, err := a.Handle(ev, at(20+i)); err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
	}
	if a.State() != AppStateFinalSaving || a.ClientState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Fatalf("after the second failure: %s / %s", a.State(), a.ClientState())
	}
	if _, err := a.Handle(AppFinalSaved{}, at(30)); err != nil {
		t.Fatal(err)
	}
	want := "Application application_1795333013199_0002 failed 2 times due to AM Container for appattempt_1795333013199_0002_000002 exited with  exitCode: 1\n" +
		"Failing this attempt.Diagnostics: boomFor more detailed output, check the application tracking page: " +
		appPage + " Then click on links to logs of each attempt.\n. Failing the application."
	if a.State() != AppStateFailed || a.Diagnostics() != want {
		t.Errorf("state=%s diagnostics:\n got %q\nwant %q", a.State(), a.Diagnostics(), want)
	}
	if a.FinalStatus() != yarnpb.FinalApplicationStatusProto_APP_FAILED {
		t.Errorf("final status = %s", a.FinalStatus())
	}
}

func TestFailureDiagnosticsNameLimitsAndValidity(t *testing.T) {
	a := drive(t, toRunning, maxAttempts(1), validity(time.Minute))
	for i, ev := range []Event{AttemptFailed{Attempt: att1, Diagnostics: "bad"}, AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}} {
		if _, err := a.Handle(ev, at(20+i)); err != nil {
			t.Fatal(err)
		}
	}
	want := "Application application_1795333013199_0002 failed 1 times in previous 60000 milliseconds (global limit =2; local limit is =1) due to bad. Failing the application."
	if a.State() != AppStateFailed || a.Diagnostics() != want {
		t.Errorf("state=%s\n got %q\nwant %q", a.State(), a.Diagnostics(), want)
	}
}

func TestFailuresThatAreNotTheAppsFaultDoNotCount(t *testing.T) {
	for _, exit := range []int32{ExitPreempted, ExitAborted, ExitDisksFailed, ExitKilledByResourceManager} {
		a := drive(t, toRunning)
		for i, ev := range []Event{amExited(am1, exit), AttemptFinalSaved{Attempt: att1}} {
			if _, err := a.Handle(ev, at(20+i)); err != nil {
				t.Fatal(err)
			}
		}
		// Attempt 2 fails for real: one counted failure of two allowed.
		for i, ev := range []Event{AttemptFailed{Attempt: att2, Diagnostics: "x"}, AttemptFinalSaved{Attempt: att2}} {
			if _, err := a.Handle(ev, at(30+i)); err != nil {
				t.Fatal(err)
			}
		}
		if cur := a.CurrentAttempt().ID(); cur != att3 || a.State() != AppStateAccepted {
			t.Errorf("exit %d: current attempt %s, app %s; want a third attempt", exit, cur, a.State())
		}
	}
}

func TestOldFailuresOutsideTheValidityIntervalAreForgotten(t *testing.T) {
	a := drive(t, toRetrying, validity(10*time.Second))
	// Each later attempt fails long after the one before: only one failure
	// ever counts, so attempts go on, and once more than MaxAttempts are
	// stored the oldest record goes (YARN's removeExcessAttempts).
	var removed []AttemptID
	for i, id := range []AttemptID{att2, att3} {
		late := t0.Add(time.Duration(i+1) * time.Hour)
		for _, ev := range []Event{AttemptFailed{Attempt: id, Diagnostics: "x"}, AttemptFinalSaved{Attempt: id}} {
			fx, err := a.Handle(ev, late)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range fx {
				if r, ok := e.(RemoveAttemptRecord); ok {
					removed = append(removed, r.Attempt)
				}
			}
		}
	}
	if got := a.CurrentAttempt().ID().ID; got != 4 || a.State() != AppStateAccepted {
		t.Fatalf("current attempt %d, app %s; want a fourth attempt", got, a.State())
	}
	if len(removed) != 1 || removed[0] != att1 {
		t.Errorf("removed records = %v, want attempt 1's", removed)
	}
}

func TestRunningContainersSurviveAnAMFailureWhenKept(t *testing.T) {
	for _, keep := range []bool{false, true} {
		var opts []option
		if keep {
			opts = append(opts, keepContainers())
		}
		a := drive(t, append(clip(toRunning),
			ContainerAllocated{Container: containerProto(task1, 2048, 2)},
			ContainerAcquired{Container: task1},
			ContainerLaunched{Container: task1},
			amExited(am1, 1),
			AttemptFinalSaved{Attempt: att1},
		), opts...)
		c := a.Container(task1)
		if keep {
			if c.State() != ContainerStateRunning || c.Attempt() != att2 {
				t.Errorf("kept: task %s held by %s, want RUNNING by attempt 2", c.State(), c.Attempt())
			}
			continue
		}
		st, diag, ok := c.ExitStatus()
		if c.State() != ContainerStateKilled || !ok || st != ExitAborted || diag != DiagCompletedApplication {
			t.Errorf("not kept: task %s exit=%d %q", c.State(), st, diag)
		}
	}
}

func TestUnmanagedAMFinishesWithoutAContainer(t *testing.T) {
	a := drive(t, toUnmanagedRunning, unmanaged())
	if a.State() != AppStateRunning {
		t.Fatalf("app %s", a.State())
	}
	unregister := AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED, TrackingURL: "http://laptop:4040"}
	var fx []Effect
	for i, ev := range []Event{unregister, AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}} {
		out, err := a.Handle(ev, at(30+i))
		if err != nil {
			t.Fatal(err)
		}
		fx = append(fx, out...)
	}
	if a.State() != AppStateFinished || a.CurrentAttempt().State() != AttemptStateFinished {
		t.Fatalf("app %s attempt %s", a.State(), a.CurrentAttempt().State())
	}
	if a.FinalStatus() != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED || a.Progress() != 1 {
		t.Errorf("final=%s progress=%v", a.FinalStatus(), a.Progress())
	}
	if got := a.CurrentAttempt().TrackingURL(); got != "http://laptop:4040" {
		t.Errorf("unmanaged tracking URL = %q, want the AM's own", got)
	}
	for _, e := range fx {
		if _, ok := e.(WatchAM); ok {
			t.Error("an unmanaged AM was given a finishing monitor")
		}
	}
}

func TestUnregisteredAMWhoseContainerEndsDuringTheSaveFinishes(t *testing.T) {
	a := drive(t, append(clip(toUnregistering), amExited(am1, 0), AttemptFinalSaved{Attempt: att1}))
	if a.CurrentAttempt().State() != AttemptStateFinished || a.State() != AppStateFinalSaving {
		t.Fatalf("attempt %s app %s", a.CurrentAttempt().State(), a.State())
	}
	if _, err := a.Handle(AppFinalSaved{}, at(40)); err != nil {
		t.Fatal(err)
	}
	if a.State() != AppStateFinished || a.FinalStatus() != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED {
		t.Errorf("app %s final %s", a.State(), a.FinalStatus())
	}
	if a.FinishTime().IsZero() {
		t.Error("no finish time")
	}
}

func TestAnAppWhoseAMUnregisteredFailedReportsFailed(t *testing.T) {
	a := drive(t, append(clip(toRunning),
		AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_FAILED, Diagnostics: "job failed"},
		AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}, amExited(am1, 0)))
	if a.State() != AppStateFinished || a.ClientState() != yarnpb.YarnApplicationStateProto_FINISHED {
		t.Errorf("state %s / %s", a.State(), a.ClientState())
	}
	if a.FinalStatus() != yarnpb.FinalApplicationStatusProto_APP_FAILED || a.Diagnostics() != "job failed" {
		t.Errorf("final %s diagnostics %q", a.FinalStatus(), a.Diagnostics())
	}
}

func TestExpiredAMGivesYARNsDiagnostics(t *testing.T) {
	a := drive(t, append(clip(toRunning), AttemptExpired{Attempt: att1}, AttemptFinalSaved{Attempt: att1}))
	if got, want := a.Attempt(att1).Diagnostics(), "ApplicationMaster for attempt appattempt_1795333013199_0002_000001 timed out"; got != want {
		t.Errorf("diagnostics %q, want %q", got, want)
	}
	if a.Attempt(att1).Progress() != 1 {
		t.Error("an expired running attempt keeps its progress below 1")
	}
}

func TestProgressIsClampedToZeroOne(t *testing.T) {
	nan := float32(0)
	nan = nan / nan
	for _, tt := range []struct{ in, want float32 }{{0.25, 0.25}, {-1, 0}, {7, 1}, {nan, 0}} {
		a := drive(t, append(clip(toRunning), AttemptStatusUpdate{Attempt: att1, Progress: tt.in}))
		if got := a.Progress(); got != tt.want {
			t.Errorf("progress %v → %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestAStatusUpdateChangesOnlyANewProgressOfARunningAttempt checks
// AttemptStatusUpdate.Changes against what Handle does: where it says no,
// the event leaves everything as it was.
func TestAStatusUpdateChangesOnlyANewProgressOfARunningAttempt(t *testing.T) {
	running := append(clip(toRunning), AttemptStatusUpdate{Attempt: att1, Progress: 1})
	tests := []struct {
		name    string
		path    []Event
		update  AttemptStatusUpdate
		changes bool
	}{
		{"the same progress", running, AttemptStatusUpdate{Attempt: att1, Progress: 1}, false},
		{"a progress that clamps to the same", running, AttemptStatusUpdate{Attempt: att1, Progress: 7}, false},
		{"a new progress", running, AttemptStatusUpdate{Attempt: att1, Progress: 0.5}, true},
		{"an attempt not yet running", toLaunched, AttemptStatusUpdate{Attempt: att1}, true},
		{"an unknown attempt", running, AttemptStatusUpdate{Attempt: att2, Progress: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := drive(t, tt.path)
			if got := tt.update.Changes(a); got != tt.changes {
				t.Fatalf("Changes = %v, want %v", got, tt.changes)
			}
			if tt.changes {
				return
			}
			before := snapshot(a)
			if fx, err := a.Handle(tt.update, at(50)); err != nil || len(fx) > 0 {
				t.Fatalf("Handle = %v, %v", fx, err)
			}
			if after := snapshot(a); after != before {
				t.Errorf("the update changed the application:\n%s\nwas\n%s", after, before)
			}
		})
	}
}
