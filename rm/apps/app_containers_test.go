package apps

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestTaskContainersBelongToTheCurrentAttempt(t *testing.T) {
	a := drive(t, toRunning)
	fx, err := a.Handle(ContainerAllocated{Container: containerProto(task1, 2048, 2)}, at(20))
	if err != nil || len(fx) != 0 {
		t.Fatalf("allocate: %v %v", fx, err)
	}
	c := a.Container(task1)
	if c == nil || c.State() != ContainerStateAllocated || c.Attempt() != att1 || c.IsAM() {
		t.Fatalf("container %+v", c)
	}
	if got := len(a.Containers()); got != 2 {
		t.Errorf("containers = %d, want the AM's and the task's", got)
	}
	// A second allocation of the same container is the container's to refuse.
	_, err = a.Handle(ContainerAllocated{Container: containerProto(task1, 2048, 2)}, at(21))
	wantInvalid(t, err)
}

func TestContainersAreRefusedForAnAttemptThatCannotUseThem(t *testing.T) {
	a := drive(t, toRetrying) // attempt 1 FAILED, attempt 2 SUBMITTED
	for _, id := range []ContainerID{
		{Attempt: att1, Sequence: 5}, // an ended attempt
		{Attempt: att2, Sequence: 5}, // not yet scheduled
	} {
		before := snapshot(a)
		_, err := a.Handle(ContainerAllocated{Container: containerProto(id, 1024, 1)}, at(30))
		wantInvalid(t, err)
		if snapshot(a) != before {
			t.Errorf("%s: application changed", id)
		}
	}
	_, err := a.Handle(ContainerAllocated{Container: containerProto(ContainerID{Attempt: att3, Sequence: 1}, 1024, 1)}, at(30))
	if !errors.Is(err, ErrUnknownAttempt) {
		t.Errorf("err = %v, want ErrUnknownAttempt", err)
	}
}

func TestEventsForAnUnknownContainerAreRejected(t *testing.T) {
	a := drive(t, toRunning)
	_, err := a.Handle(ContainerLaunched{Container: task1}, at(20))
	if !errors.Is(err, ErrUnknownContainer) {
		t.Errorf("err = %v, want ErrUnknownContainer", err)
	}
	if _, err := a.Handle(ContainerAllocated{Container: &yarnpb.ContainerProto{}}, at(20)); err == nil {
		t.Error("container without an id taken")
	}
}

func TestReservationsBecomeAllocations(t *testing.T) {
	a := drive(t, append(clip(toRunning), ContainerReserved{Container: containerProto(task1, 2048, 2)}))
	if a.Container(task1).State() != ContainerStateReserved {
		t.Fatalf("state %s", a.Container(task1).State())
	}
	r := a.Report(ReportOptions{Now: at(30), Access: true}).GetAppResource_Usage()
	if r.GetNumReservedContainers() != 1 || r.GetReservedResources().GetMemory() != 2048 || r.GetNeededResources().GetMemory() != 3072 {
		t.Errorf("usage report %v", r)
	}
	driveOn(t, a, []Event{ContainerAllocated{Container: containerProto(task1, 2048, 2)}})
	if a.Container(task1).State() != ContainerStateAllocated {
		t.Errorf("state %s", a.Container(task1).State())
	}
}

func TestUsageAddsUpContainerLifetimes(t *testing.T) {
	a := newApp(t)
	driveOn(t, a, toRunning) // AM container allocated at at(4), 1024 MB, 1 vcore
	steps := []struct {
		ev Event
		at time.Time
	}{
		{ContainerAllocated{Container: containerProto(task1, 2048, 2)}, at(10)},
		{ContainerAcquired{Container: task1}, at(10)},
		{ContainerLaunched{Container: task1}, at(11)},
		{ContainerFinished{Container: task1, ExitStatus: 0}, at(20)},
	}
	for _, s := range steps {
		if _, err := a.Handle(s.ev, s.at); err != nil {
			t.Fatal(err)
		}
	}
	// Task: 10 s × 2048 MB, 2 vcores. AM: allocated at at(4), still running at at(30).
	want := Usage{MemorySeconds: 2048*10 + 1024*26, VcoreSeconds: 2*10 + 26}
	if got := a.Usage(at(30)); got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	r := a.Report(ReportOptions{Now: at(30), Access: true}).GetAppResource_Usage()
	if r.GetMemorySeconds() != want.MemorySeconds || r.GetVcoreSeconds() != want.VcoreSeconds {
		t.Errorf("report usage = %d MB-s, %d vcore-s", r.GetMemorySeconds(), r.GetVcoreSeconds())
	}
	if r.GetNumUsedContainers() != 1 || r.GetUsedResources().GetMemory() != 1024 {
		t.Errorf("live usage %v", r)
	}
	if rec := a.CurrentAttempt().Record(); rec.Usage.MemorySeconds != 2048*10 {
		t.Errorf("attempt record usage = %+v, want the ended task's", rec.Usage)
	}
}

func TestEndedAttemptsStopTheirRemainingContainers(t *testing.T) {
	a := drive(t, append(clip(toRunning),
		ContainerAllocated{Container: containerProto(task1, 2048, 2)},
		ContainerAcquired{Container: task1},
		ContainerLaunched{Container: task1},
		AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED},
		AttemptFinalSaved{Attempt: att1}, AppFinalSaved{},
	))
	fx, err := a.Handle(ContainerFinished{Container: am1}, at(30))
	if err != nil {
		t.Fatal(err)
	}
	var stopped []ContainerID
	for _, e := range fx {
		if s, ok := e.(StopContainer); ok {
			stopped = append(stopped, s.Container)
		}
	}
	if len(stopped) != 1 || stopped[0] != task1 {
		t.Errorf("stopped %v, want the task left running", stopped)
	}
	if a.State() != AppStateFinished {
		t.Errorf("app %s", a.State())
	}
}

// TestLiveUsageIsTheReportsLiveFigures: LiveUsage holds what a full report
// tells of the containers held and reserved now, and is nil before the
// scheduler holds an attempt.
func TestLiveUsageIsTheReportsLiveFigures(t *testing.T) {
	if u := newApp(t).LiveUsage(); u != nil {
		t.Errorf("a new application's live usage: %v", u)
	}
	a := drive(t, append(clip(toRunning), ContainerReserved{Container: containerProto(task1, 2048, 2)}))
	r := a.Report(ReportOptions{Now: at(30), Access: true}).GetAppResource_Usage()
	u := a.LiveUsage()
	if u.GetNumUsedContainers() != r.GetNumUsedContainers() || u.GetNumReservedContainers() != r.GetNumReservedContainers() ||
		!proto.Equal(u.GetUsedResources(), r.GetUsedResources()) || !proto.Equal(u.GetReservedResources(), r.GetReservedResources()) ||
		u.GetNumUsedContainers() != 1 || u.GetNumReservedContainers() != 1 {
		t.Errorf("live usage %v, report's %v", u, r)
	}
}

// TestHeldFollowsReservationsResizesAndKeptContainers: what Held says the
// containers hold follows a reservation becoming an allocation, a resize,
// an AM failure that keeps the running task for the next attempt, and the
// task's end; driveOn checks it against a recount after every event.
func TestHeldFollowsReservationsResizesAndKeptContainers(t *testing.T) {
	task2 := ContainerID{Attempt: att1, Sequence: 3}
	a := drive(t, append(clip(toRunning),
		ContainerReserved{Container: containerProto(task1, 2048, 2)},
		ContainerAllocated{Container: containerProto(task1, 2048, 2)},
		ContainerAcquired{Container: task1},
		ContainerLaunched{Container: task1},
		ContainerUpdated{Container: containerProto(task1, 4096, 3)},
		ContainerReserved{Container: containerProto(task2, 1024, 1)},
	), keepContainers())
	want := Held{
		Live: Holding{2, 1024 + 4096, 1 + 3}, Current: Holding{2, 1024 + 4096, 1 + 3},
		Reserved: Holding{1, 1024, 1}, AM: Holding{1, 1024, 1}, Containers: 3,
	}
	if got := a.Held(); !reflect.DeepEqual(got, want) {
		t.Fatalf("running with a resized task and a reservation: %+v, want %+v", got, want)
	}
	driveOn(t, a, []Event{amExited(am1, 1), AttemptFinalSaved{Attempt: att1}})
	// Attempt 2 holds the kept task; the scheduler holds it once it is added.
	if got := a.Held(); got.Live != (Holding{1, 4096, 3}) || got.Current != (Holding{}) || got.AM != (Holding{}) {
		t.Fatalf("after the AM failed: %+v", got)
	}
	driveOn(t, a, []Event{AttemptAdded{Attempt: att2}, ContainerFinished{Container: task1}})
	if got := a.Held(); got.Live != (Holding{}) || got.Current != (Holding{}) || got.Containers != 3 {
		t.Errorf("after the kept task ended: %+v", got)
	}
}

// TestHeldKeepsEachLabelledPartitionsPart: Held's Partitions are the
// current attempt's containers, reservations and AM in each labelled
// partition, the one the pod's ask named; the default partition's is the
// rest. driveOn checks each step against a recount.
func TestHeldKeepsEachLabelledPartitionsPart(t *testing.T) {
	task2 := ContainerID{Attempt: att1, Sequence: 3}
	gpuAM := func(path []Event) []Event {
		out := clip(path)
		for i, ev := range out {
			if e, ok := ev.(AMContainerAllocated); ok {
				e.Partition = "gpu"
				out[i] = e
			}
		}
		return out
	}
	tests := []struct {
		name string
		path []Event
		want []PartitionHeld
	}{
		{
			name: "containers of the default partition leave no labelled part",
			path: append(clip(toRunning), ContainerAllocated{Container: containerProto(task1, 2048, 2)}),
			want: nil,
		},
		{
			name: "a labelled container counts in its partition",
			path: append(clip(toRunning), ContainerAllocated{Container: containerProto(task1, 2048, 2), Partition: "gpu"},
				ContainerAllocated{Container: containerProto(task2, 1024, 1)}),
			want: []PartitionHeld{{Partition: "gpu", Current: Holding{1, 2048, 2}}},
		},
		{
			name: "a reservation becoming a labelled container moves to its partition",
			path: append(clip(toRunning), ContainerReserved{Container: containerProto(task1, 2048, 2)},
				ContainerAllocated{Container: containerProto(task1, 2048, 2), Partition: "gpu"}),
			want: []PartitionHeld{{Partition: "gpu", Current: Holding{1, 2048, 2}}},
		},
		{
			name: "partitions come by name, the AM in its own",
			path: append(gpuAM(toRunning), ContainerAllocated{Container: containerProto(task1, 2048, 2), Partition: "ssd"}),
			want: []PartitionHeld{{Partition: "gpu", Current: Holding{1, 1024, 1}, AM: Holding{1, 1024, 1}},
				{Partition: "ssd", Current: Holding{1, 2048, 2}}},
		},
		{
			name: "an ended container leaves its partition",
			path: append(clip(toRunning), ContainerAllocated{Container: containerProto(task1, 2048, 2), Partition: "gpu"},
				ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1}, ContainerFinished{Container: task1}),
			want: nil,
		},
		{
			name: "a recovered container counts in its partition",
			path: append(clip(toRunning), ContainerRecovered{Container: containerProto(task1, 2048, 2), Running: true, Partition: "gpu"}),
			want: []PartitionHeld{{Partition: "gpu", Current: Holding{1, 2048, 2}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := drive(t, tt.path)
			if got := a.Held().Partitions; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("partitions %+v, want %+v", got, tt.want)
			}
		})
	}
}
