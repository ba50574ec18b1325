package apps

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/knitdev/knit/protocols/yarnpb"
)

var (
	task2 = ContainerID{Attempt: att1, Sequence: 3}
	task3 = ContainerID{Attempt: att1, Sequence: 4}
)

// TestCachedReportIsTheFreshReportAfterEveryChange asks for both kinds of
// report before each event, so that each kind is cached, then checks that
// what Report answers after it is what buildReport makes from scratch, at
// the event's time and later (the lifetime's time left and the seconds
// used move with the clock, the rest must not).
func TestCachedReportIsTheFreshReportAfterEveryChange(t *testing.T) {
	task := func(id ContainerID) *yarnpb.ContainerProto { return containerProto(id, 2048, 2) }
	withTasks := append(clip(toRunning),
		ContainerAllocated{Container: task(task1)}, ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1},
		ContainerAllocated{Container: task(task2)}, ContainerReserved{Container: task(task3)})
	tests := []struct {
		name string
		opts []option
		path []Event
	}{
		{"state from submission to finished", nil, toFinished},
		{"state to killed", nil, toKilled},
		{"state to failed on rejection", nil, toFailed},
		{"diagnostics while waiting for the AM", nil, append(clip(toScheduled),
			AttemptDiagnostics{Attempt: att1, Message: "waiting for resources"},
			AttemptDiagnostics{Attempt: att1, Message: "waiting for more"})},
		{"progress, address and tracking URL", nil, append(clip(toLaunched),
			AttemptRegistered{Attempt: att1, Host: "am.example", RPCPort: 41000, TrackingURL: "http://am.example:4040"},
			AttemptStatusUpdate{Attempt: att1, Progress: 0.25}, AttemptStatusUpdate{Attempt: att1, Progress: 0.5},
			AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED,
				Diagnostics: "all done", TrackingURL: "http://history.example/app"},
			AttemptFinalSaved{Attempt: att1}, AppFinalSaved{}, ContainerFinished{Container: am1})},
		{"a new attempt after the AM failed", []option{maxAttempts(2)}, append(clip(toRetrying),
			AttemptAdded{Attempt: att2})},
		{"priority", nil, append(clip(toRunning), UpdatePriority{Priority: 7}, UpdatePriority{Priority: 3})},
		{"queue move", nil, append(clip(toRunning), Move{Queue: "root.b"})},
		{"lifetime ticking, extended, then ended", []option{lifetime(time.Hour)}, append(clip(toRunning),
			UpdateTimeout{Expiry: t0.Add(3 * time.Hour)}, Kill{Diagnostics: "enough"})},
		{"timeout set on an application without a lifetime", nil, append(clip(toRunning),
			UpdateTimeout{Expiry: t0.Add(2 * time.Hour)})},
		{"containers allocated, reserved, ended, preempted and released", nil, append(clip(withTasks),
			ContainerFinished{Container: task1, ExitStatus: 0, Diagnostics: "done"},
			ContainerKilled{Container: task2, ExitStatus: ExitPreempted, Diagnostics: "preempted"},
			ContainerReleased{Container: task3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp(t, tt.opts...)
			sameAsFresh(t, a, "before any event", at(0))
			for i, ev := range tt.path {
				if _, err := a.Handle(ev, at(i)); err != nil {
					t.Fatalf("event %d %T: %v", i, ev, err)
				}
				sameAsFresh(t, a, ev.Name(), at(i))
			}
		})
	}
}

// sameAsFresh compares Report with buildReport for each kind of caller at
// now and later, twice each (the second from the cache).
func sameAsFresh(t *testing.T, a *Application, after string, now time.Time) {
	t.Helper()
	for _, access := range []bool{false, true} {
		for _, later := range []time.Duration{0, 1500 * time.Millisecond, 3 * time.Hour} {
			o := ReportOptions{Now: now.Add(later), Access: access, Keep: true}
			for range 2 {
				if got, want := a.Report(o), a.buildReport(o); !proto.Equal(got, want) {
					t.Fatalf("after %s, access %v, %v later: cached report\n%s\nfresh\n%s", after, access, later,
						prototext.Format(got), prototext.Format(want))
				}
			}
		}
	}
}

func TestAReportsTopLevelIsTheCallersOwn(t *testing.T) {
	a := drive(t, toRunning)
	o := ReportOptions{Now: at(20), Access: true, Keep: true}
	first := a.Report(o)
	first.AmRmToken = nil
	first.LogAggregationStatus = yarnpb.LogAggregationStatusProto_LOG_SUCCEEDED.Enum()
	first.User = proto.String("mallory")
	if got, want := a.Report(o), a.buildReport(o); !proto.Equal(got, want) {
		t.Errorf("a caller's change to its report reached the next:\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
	}
}

// TestShareReportCarriesEveryField fills every field of a report and of
// its usage, so that a field added to the messages is not silently dropped
// from cached reports.
func TestShareReportCarriesEveryField(t *testing.T) {
	r := &yarnpb.ApplicationReportProto{}
	fill(r.ProtoReflect())
	if got := shareReport(r); !proto.Equal(got, r) {
		t.Errorf("shareReport lost fields:\n%s\nwant\n%s", prototext.Format(got), prototext.Format(r))
	}
	u := r.GetAppResource_Usage()
	u.ApplicationResourceUsageMap = usageMap(1, 2)
	u.ApplicationPreemptedResourceUsageMap = usageMap(3, 4)
	u.MemorySeconds, u.VcoreSeconds, u.PreemptedMemorySeconds, u.PreemptedVcoreSeconds = proto.Int64(1), proto.Int64(2), proto.Int64(3), proto.Int64(4)
	if got := accrued(u, Usage{MemorySeconds: 1, VcoreSeconds: 2, PreemptedMemorySeconds: 3, PreemptedVcoreSeconds: 4}); !proto.Equal(got, u) {
		t.Errorf("accrued lost fields:\n%s\nwant\n%s", prototext.Format(got), prototext.Format(u))
	}
	ts := r.GetAppTimeouts()
	if got := ticking(ts, ts[0].GetApplicationTimeout().GetRemainingTime()); !proto.Equal(got[0], ts[0]) || len(got) != 1 {
		t.Errorf("ticking lost fields:\n%v\nwant\n%v", got, ts)
	}
}

// fill sets every field of m and of the messages it holds (one element of
// each list) to a value other than its default.
func fill(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.IsList() && f.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(f).List().AppendMutable().Message())
		case f.IsList():
			m.Mutable(f).List().Append(sample(f))
		case f.IsMap():
			continue // reports have none
		case f.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(f).Message())
		default:
			m.Set(f, sample(f))
		}
	}
}

func sample(f protoreflect.FieldDescriptor) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(f.Enum().Values().Get(f.Enum().Values().Len() - 1).Number())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0.5)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	}
	return protoreflect.ValueOfInt64(7)
}

func TestACachedReportCostsAFewAllocations(t *testing.T) {
	a := drive(t, append(clip(toRunning), ContainerAllocated{Container: containerProto(task1, 2048, 2)}), lifetime(time.Hour))
	o := ReportOptions{Now: at(20), Access: true, Keep: true}
	a.Report(o)
	// The top level, the usage with its seconds, the lifetime with its
	// time left.
	if n := testing.AllocsPerRun(100, func() { _ = a.Report(o) }); n != 3 {
		t.Errorf("a cached report makes %v allocations, want 3", n)
	}
}

func TestOnlyAReportAskedToBeKeptIsKept(t *testing.T) {
	a := drive(t, toRunning)
	listed := ReportOptions{Now: at(20), Access: true}
	a.Report(listed)
	if a.reports != [2]*cachedReport{} {
		t.Fatal("a report not asked to be kept was kept")
	}
	polled := listed
	polled.Keep = true
	a.Report(polled)
	kept := a.reports[1]
	if kept == nil {
		t.Fatal("a report asked to be kept was not")
	}
	if got := a.Report(listed); !proto.Equal(got, a.buildReport(listed)) || a.reports[1] != kept {
		t.Error("a listing did not use the kept report as it is")
	}
	driveOn(t, a, []Event{UpdatePriority{Priority: 2}})
	if got := a.Report(listed); !proto.Equal(got, a.buildReport(listed)) || a.reports[1] != nil {
		t.Error("a listing after a change kept the stale report or answered from it")
	}
}
