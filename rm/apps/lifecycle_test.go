package apps

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.golden from the current output (review the diff before committing)")

// Whole lives of applications: every event, the states after it and the
// effects it asked for, compared with testdata/<name>.golden. They read as
// the sequence diagram of each case; -rewrite regenerates them.
func TestLifecycles(t *testing.T) {
	user := UserKillDiagnostics(appID, "root", "127.0.0.1", "")
	tests := []struct {
		name string
		opts []option
		path []Event
	}{
		{"distributed-shell-succeeds", nil, append(clip(toRunning),
			AttemptStatusUpdate{Attempt: att1, Progress: 0.5},
			ContainerAllocated{Container: containerProto(task1, 1024, 1)},
			ContainerAcquired{Container: task1},
			ContainerLaunched{Container: task1},
			ContainerFinished{Container: task1, ExitStatus: 0, Diagnostics: ""},
			AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED},
			AttemptFinalSaved{Attempt: att1},
			AppFinalSaved{},
			ContainerFinished{Container: am1, ExitStatus: 0},
		)},
		{"killed-while-accepted", nil, append(clip(toScheduled),
			Kill{Diagnostics: user},
			AttemptFinalSaved{Attempt: att1},
			AppFinalSaved{},
		)},
		{"am-fails-twice", nil, append(clip(toRetrying),
			AttemptAdded{Attempt: att2},
			AMContainerAllocated{Attempt: att2, Container: containerProto(am2, 1024, 1)},
			AttemptSaved{Attempt: att2},
			AttemptLaunched{Attempt: att2},
			ContainerLaunched{Container: am2},
			AttemptExpired{Attempt: att2},
			AttemptFinalSaved{Attempt: att2},
			AppFinalSaved{},
		)},
		{"unmanaged-am", []option{unmanaged()}, append(clip(toUnmanagedRunning),
			AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED, TrackingURL: "http://laptop:4040"},
			AttemptFinalSaved{Attempt: att1},
			AppFinalSaved{},
		)},
		{"lifetime-expires", []option{lifetime(5 * time.Second)}, append(clip(toRunning),
			TimeoutExpired{},
			AttemptFinalSaved{Attempt: att1},
			AppFinalSaved{},
		)},
		{"rejected-by-the-queue", nil, toFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp(t, tt.opts...)
			var b strings.Builder
			for i, ev := range tt.path {
				fx, err := a.Handle(ev, at(i))
				fmt.Fprintf(&b, "> %s\n", describe(ev))
				if err != nil {
					fmt.Fprintf(&b, "  error: %v\n", err)
					continue
				}
				fmt.Fprintf(&b, "  %s\n", states(a))
				for _, e := range fx {
					fmt.Fprintf(&b, "  - %s\n", e)
				}
			}
			r := a.Report(ReportOptions{Now: at(len(tt.path)), Access: true})
			fmt.Fprintf(&b, "= %s %s progress=%v tracking=%s\n  diagnostics=%q\n",
				r.GetYarnApplicationState(), r.GetFinalApplicationStatus(), r.GetProgress(), r.GetTrackingUrl(), r.GetDiagnostics())
			golden(t, filepath.Join("testdata", tt.name+".golden"), b.String())
		})
	}
}

func describe(ev Event) string {
	name := reflect.TypeOf(ev).Name()
	switch e := ev.(type) {
	case AttemptEvent:
		return name + " " + e.AttemptID().String()
	case ContainerEvent:
		return name + " " + e.ContainerID().String()
	}
	return name
}

func states(a *Application) string {
	s := fmt.Sprintf("app=%s (client %s)", a.State(), a.ClientState())
	for _, t := range a.Attempts() {
		s += fmt.Sprintf(" attempt%d=%s", t.ID().ID, t.State())
	}
	return s
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -rewrite, then review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
