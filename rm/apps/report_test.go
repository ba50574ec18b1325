package apps

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// recorded reads one message from a decoded recording of a real Hadoop 3.4.1
// RM: the first "<name> {" block after the line containing marker.
func recorded(t *testing.T, dir, marker, name string, into proto.Message) {
	t.Helper()
	f, err := os.Open(recordings.Path(t, "hadoop-wire-real", dir, "decoded.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var body strings.Builder
	found, in := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case !found:
			found = strings.Contains(line, marker)
		case !in:
			in = line == "  "+name+" {"
		case line == "  }":
			if err := prototext.Unmarshal([]byte(body.String()), into); err != nil {
				t.Fatalf("%s %s: %v", dir, marker, err)
			}
			return
		default:
			body.WriteString(line + "\n")
		}
	}
	t.Fatalf("%s: no %s after %q", dir, name, marker)
}

func recordedReport(t *testing.T, dir string, callID string) *yarnpb.ApplicationReportProto {
	t.Helper()
	var r yarnpb.GetApplicationReportResponseProto
	recorded(t, dir, "callId="+callID+" SUCCESS (answer to getApplicationReport)", "GetApplicationReportResponseProto", &r)
	return r.GetApplicationReport()
}

func recordedApp(t *testing.T, dir, callID string, submit time.Time) *Application {
	t.Helper()
	var req yarnpb.SubmitApplicationRequestProto
	recorded(t, dir, "callId="+callID+" call ApplicationClientProtocol.submitApplication", "SubmitApplicationRequestProto", &req)
	ctx := req.GetApplicationSubmissionContext()
	id, _ := yarnid.ApplicationIDFromProto(ctx.GetApplicationId())
	a, err := NewApplication(testCfg, Submission{ID: id, User: "root", Queue: "root.default", Context: ctx, SubmitTime: submit})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// withoutLiveFigures drops what depends on the scheduler's shares and on
// timing the recording cannot pin down: seconds used and usage percentages.
func withoutLiveFigures(r *yarnpb.ApplicationReportProto) *yarnpb.ApplicationReportProto {
	r = proto.Clone(r).(*yarnpb.ApplicationReportProto)
	u := r.GetAppResource_Usage()
	u.MemorySeconds, u.VcoreSeconds = nil, nil
	u.ApplicationResourceUsageMap = nil
	u.QueueUsagePercentage, u.ClusterUsagePercentage = nil, nil
	return r
}

func compareReports(t *testing.T, stage string, got, want *yarnpb.ApplicationReportProto) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s report differs from the real RM's\n--- ours\n%s\n--- real\n%s", stage, prototext.Format(got), prototext.Format(want))
	}
}

func ms(v int64) time.Time { return time.UnixMilli(v) }

func TestReportsMatchARealRMThroughADistributedShellRun(t *testing.T) {
	// Times are the recording's, so times in reports match it to the ms.
	submit := ms(1795333034629)
	a := recordedApp(t, "ds-client", "8", submit)
	am := ContainerID{Attempt: AttemptID{App: a.ID(), ID: 1}, Sequence: 1}
	task := ContainerID{Attempt: am.Attempt, Sequence: 2}
	attempt := am.Attempt
	step := func(when time.Time, evs ...Event) {
		t.Helper()
		for _, ev := range evs {
			if _, err := a.Handle(ev, when); err != nil {
				t.Fatalf("%T: %v", ev, err)
			}
		}
	}
	report := func() *yarnpb.ApplicationReportProto {
		return a.Report(ReportOptions{Now: submit.Add(time.Minute), Access: true})
	}

	step(submit, Start{}, AppSaved{}, Accepted{}, AttemptAdded{Attempt: attempt})
	got, want := report(), recordedReport(t, "ds-client", "9")
	// The CapacityScheduler adds its queue figures after the common text.
	if !strings.HasPrefix(want.GetDiagnostics(), got.GetDiagnostics()) || got.GetDiagnostics() == "" {
		t.Errorf("diagnostics %q do not begin the real %q", got.GetDiagnostics(), want.GetDiagnostics())
	}
	got.Diagnostics = want.Diagnostics
	compareReports(t, "ACCEPTED, waiting for the AM container", withoutLiveFigures(got), withoutLiveFigures(want))

	step(ms(1795333035100), AMContainerAllocated{Attempt: attempt, Container: containerProto(am, 1024, 1)}, AttemptSaved{Attempt: attempt})
	compareReports(t, "ACCEPTED, AM container assigned", withoutLiveFigures(report()), withoutLiveFigures(recordedReport(t, "ds-client", "10")))

	step(ms(1795333035847), AttemptLaunched{Attempt: attempt}, ContainerLaunched{Container: am})
	compareReports(t, "ACCEPTED, AM launched", withoutLiveFigures(report()), withoutLiveFigures(recordedReport(t, "ds-client", "11")))

	step(ms(1795333038000), AttemptRegistered{Attempt: attempt, Host: "vm/127.0.0.1", RPCPort: -1, TrackingURL: ""})
	compareReports(t, "RUNNING", withoutLiveFigures(report()), withoutLiveFigures(recordedReport(t, "ds-client", "14")))

	step(ms(1795333040000), ContainerAllocated{Container: containerProto(task, 1024, 1)}, ContainerAcquired{Container: task}, ContainerLaunched{Container: task})
	step(ms(1795333041000), ContainerFinished{Container: task, ExitStatus: 0})
	step(ms(1795333043707), AttemptUnregistered{Attempt: attempt, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED},
		AttemptFinalSaved{Attempt: attempt}, AppFinalSaved{})
	step(ms(1795333043800), ContainerFinished{Container: am, ExitStatus: 0})
	got, want = report(), recordedReport(t, "ds-client", "18")
	// The real report caught the scheduler before it dropped the attempt;
	// after that (and in Knit at once) a finished app shows -1 figures.
	got.AppResource_Usage, want.AppResource_Usage = nil, nil
	compareReports(t, "FINISHED", got, want)
	if u := report().GetAppResource_Usage(); u.GetNumUsedContainers() != -1 {
		t.Errorf("finished app still uses %d containers", u.GetNumUsedContainers())
	}
}

func TestReportsMatchARealRMForAnApplicationKilledWhileAccepted(t *testing.T) {
	submit := ms(1795333020043)
	a := recordedApp(t, "yarn-client", "4", submit)
	attempt := AttemptID{App: a.ID(), ID: 1}
	report := func() *yarnpb.ApplicationReportProto {
		return a.Report(ReportOptions{Now: submit.Add(time.Minute), Access: true})
	}
	for _, ev := range []Event{Start{}, AppSaved{}} {
		if _, err := a.Handle(ev, submit); err != nil {
			t.Fatal(err)
		}
	}
	compareReports(t, "SUBMITTED", report(), recordedReport(t, "yarn-client", "5"))

	if _, err := a.Handle(Accepted{}, submit); err != nil {
		t.Fatal(err)
	}
	compareReports(t, "ACCEPTED", report(), recordedReport(t, "yarn-client", "6"))

	killed := ms(1795333020674)
	for _, ev := range []Event{
		Kill{Diagnostics: UserKillDiagnostics(a.ID(), "root", "127.0.0.1", "")},
		AttemptFinalSaved{Attempt: attempt},
		AppFinalSaved{},
	} {
		if _, err := a.Handle(ev, killed); err != nil {
			t.Fatal(err)
		}
	}
	compareReports(t, "KILLED", report(), recordedReport(t, "yarn-client", "11"))
}

func TestReportWithoutAccessHidesTheAMAndItsUsage(t *testing.T) {
	a := drive(t, toRunning)
	r := a.Report(ReportOptions{Now: at(20)})
	if r.GetHost() != "N/A" || r.GetRpcPort() != -1 || r.GetTrackingUrl() != "N/A" || r.GetOriginalTrackingUrl() != "N/A" ||
		r.GetDiagnostics() != "N/A" || r.GetProgress() != 0 || r.GetCurrentApplicationAttemptId().GetAttemptId() != -1 ||
		r.GetAppResource_Usage().GetNumUsedContainers() != -1 || r.LogAggregationStatus != nil {
		t.Errorf("report shows too much:\n%s", prototext.Format(r))
	}
	if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_RUNNING || r.GetUser() != "root" {
		t.Errorf("state %s user %s", r.GetYarnApplicationState(), r.GetUser())
	}
}

func TestReportShowsTheLifetimeAndTimeLeft(t *testing.T) {
	a := drive(t, toRunning, lifetime(time.Hour))
	r := a.Report(ReportOptions{Now: t0.Add(20 * time.Minute), Access: true})
	to := r.GetAppTimeouts()[0].GetApplicationTimeout()
	if to.GetExpireTime() != "2026-11-22T08:37:14.629+0000" || to.GetRemainingTime() != 2400 {
		t.Errorf("timeout %v", to)
	}
	driveOn(t, a, []Event{Kill{}})
	to = a.Report(ReportOptions{Now: t0.Add(20 * time.Minute), Access: true}).GetAppTimeouts()[0].GetApplicationTimeout()
	if to.GetRemainingTime() != 0 {
		t.Errorf("a completing app has %d s left, want 0", to.GetRemainingTime())
	}
}

func TestReportGivesTheAMsProgressAndAddress(t *testing.T) {
	a := drive(t, append(clip(toLaunched),
		AttemptRegistered{Attempt: att1, Host: "am.example", RPCPort: 41000, TrackingURL: "http://am.example:4040"},
		AttemptStatusUpdate{Attempt: att1, Progress: 0.4}))
	r := a.Report(ReportOptions{Now: at(20), Access: true})
	if r.GetHost() != "am.example" || r.GetRpcPort() != 41000 || r.GetProgress() != 0.4 {
		t.Errorf("host %s port %d progress %v", r.GetHost(), r.GetRpcPort(), r.GetProgress())
	}
	if r.GetTrackingUrl() != proxyURL || r.GetOriginalTrackingUrl() != "http://am.example:4040" {
		t.Errorf("tracking %q original %q", r.GetTrackingUrl(), r.GetOriginalTrackingUrl())
	}
	if r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_UNDEFINED {
		t.Errorf("final status %s before the end", r.GetFinalApplicationStatus())
	}
}

func TestAttemptReportFollowsTheAttempt(t *testing.T) {
	a := drive(t, toFinished)
	r := a.Attempt(att1).Report()
	var want yarnpb.ApplicationAttemptReportProto
	if err := prototext.Unmarshal([]byte(`
		application_attempt_id { application_id { id: 2 cluster_timestamp: 1795333013199 } attemptId: 1 }
		host: "vm/127.0.0.1"
		rpc_port: -1
		tracking_url: "`+proxyURL+`"
		diagnostics: ""
		yarn_application_attempt_state: APP_ATTEMPT_FINISHED
		am_container_id { app_attempt_id { application_id { id: 2 cluster_timestamp: 1795333013199 } attemptId: 1 } id: 1 }
		original_tracking_url: "N/A"
		startTime: `+itoa(at(2).UnixMilli())+`
		finishTime: `+itoa(at(9).UnixMilli())), &want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(r, &want) {
		t.Errorf("report\n%s\nwant\n%s", prototext.Format(r), prototext.Format(&want))
	}

	s := drive(t, toAllocSave).Attempt(att1).Report()
	if s.GetYarnApplicationAttemptState() != yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_ALLOCATED_SAVING ||
		s.GetHost() != "N/A" || s.GetTrackingUrl() != proxyURL || s.GetFinishTime() != 0 {
		t.Errorf("allocated-saving report %v", s)
	}
	// While the final state is saved, clients see the state before.
	u := drive(t, toUnregistering).Attempt(att1).Report()
	if u.GetYarnApplicationAttemptState() != yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_RUNNING {
		t.Errorf("saving attempt shows %s", u.GetYarnApplicationAttemptState())
	}
}

func TestContainerReportFollowsTheContainer(t *testing.T) {
	a := drive(t, append(clip(toRunning),
		ContainerAllocated{Container: containerProto(task1, 2048, 2)},
		ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1}))
	r := a.Container(task1).Report()
	var want yarnpb.ContainerReportProto
	if err := prototext.Unmarshal([]byte(`
		container_id { app_attempt_id { application_id { id: 2 cluster_timestamp: 1795333013199 } attemptId: 1 } id: 2 }
		resource { memory: 2048 virtual_cores: 2 }
		node_id { host: "localhost" port: 8141 }
		priority { priority: 0 }
		creation_time: `+itoa(at(9).UnixMilli())+`
		finish_time: 0
		log_url: "http://localhost:8142/node/containerlogs/container_1795333013199_0002_01_000002/root"
		container_exit_status: 0
		container_state: C_RUNNING
		node_http_address: "http://localhost:8142"
		executionType: GUARANTEED`), &want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(r, &want) {
		t.Errorf("report\n%s\nwant\n%s", prototext.Format(r), prototext.Format(&want))
	}
	if _, err := a.Handle(ContainerFinished{Container: task1, ExitStatus: 1, Diagnostics: "Exception from container-launch."}, at(30)); err != nil {
		t.Fatal(err)
	}
	r = a.Container(task1).Report()
	if r.GetContainerState() != yarnpb.ContainerStateProto_C_COMPLETE || r.GetContainerExitStatus() != 1 ||
		r.GetDiagnosticsInfo() != "Exception from container-launch." || r.GetFinishTime() != at(30).UnixMilli() {
		t.Errorf("completed report %v", r)
	}
	// A container that has not completed reports no diagnostics: the proto default "N/A".
	if d := a.Container(am1).Report(); d.DiagnosticsInfo != nil || d.GetDiagnosticsInfo() != "N/A" {
		t.Errorf("running AM container diagnostics %q", d.GetDiagnosticsInfo())
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
