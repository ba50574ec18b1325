package apps

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Events that move a standalone container from NEW to each state.
var containerPaths = map[ContainerState][]ContainerEvent{
	ContainerStateNew:       nil,
	ContainerStateReserved:  {ContainerReserved{Container: containerProto(task1, 2048, 2)}},
	ContainerStateAllocated: {ContainerAllocated{Container: containerProto(task1, 2048, 2)}},
	ContainerStateAcquired:  {ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerAcquired{Container: task1}},
	ContainerStateRunning:   {ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1}},
	ContainerStateCompleted: {ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1}, ContainerFinished{Container: task1}},
	ContainerStateExpired:   {ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerExpired{Container: task1}},
	ContainerStateReleased:  {ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerAcquired{Container: task1}, ContainerReleased{Container: task1}},
	ContainerStateKilled:    {ContainerKilled{Container: task1}},
}

func newContainerIn(t *testing.T, s ContainerState) *Container {
	t.Helper()
	c, err := NewContainer(containerProto(task1, 2048, 2), "root", t0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range containerPaths[s] {
		if _, err := c.Handle(ev, at(i+1)); err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
	}
	if c.State() != s {
		t.Fatalf("setup reached %s, want %s", c.State(), s)
	}
	return c
}

// Every transition of the container table (RMContainerImpl), valid ones
// ignored included.
func TestContainerTakesEveryValidEvent(t *testing.T) {
	killed := ContainerKilled{Container: task1, ExitStatus: ExitPreempted, Diagnostics: DiagPreemptedContainer}
	tests := []struct {
		from  ContainerState
		event ContainerEvent
		want  ContainerState
		fx    []string
	}{
		{ContainerStateNew, ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerStateAllocated, nil},
		{ContainerStateNew, ContainerReserved{Container: containerProto(task1, 2048, 2)}, ContainerStateReserved, nil},
		{ContainerStateNew, ContainerAcquired{Container: task1}, ContainerStateAcquired, []string{"WatchAllocation"}},
		{ContainerStateNew, killed, ContainerStateKilled, nil},

		{ContainerStateReserved, ContainerReserved{Container: containerProto(task1, 2048, 2)}, ContainerStateReserved, nil},
		{ContainerStateReserved, ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerStateAllocated, nil},
		{ContainerStateReserved, killed, ContainerStateKilled, nil},
		{ContainerStateReserved, ContainerReleased{Container: task1}, ContainerStateReleased, nil},

		{ContainerStateAllocated, ContainerAcquired{Container: task1}, ContainerStateAcquired, []string{"WatchAllocation"}},
		{ContainerStateAllocated, ContainerExpired{Container: task1}, ContainerStateExpired, []string{"StopContainer", "ContainerCompleted"}},
		{ContainerStateAllocated, killed, ContainerStateKilled, []string{"StopContainer", "ContainerCompleted"}},

		{ContainerStateAcquired, ContainerLaunched{Container: task1}, ContainerStateRunning, []string{"UnwatchAllocation"}},
		{ContainerStateAcquired, ContainerAcquired{Container: task1}, ContainerStateAcquired, nil},
		{ContainerStateAcquired, ContainerFinished{Container: task1, ExitStatus: 3}, ContainerStateCompleted, []string{"UnwatchAllocation", "ContainerCompleted"}},
		{ContainerStateAcquired, ContainerReleased{Container: task1}, ContainerStateReleased, []string{"UnwatchAllocation", "StopContainer", "ContainerCompleted"}},
		{ContainerStateAcquired, ContainerExpired{Container: task1}, ContainerStateExpired, []string{"UnwatchAllocation", "StopContainer", "ContainerCompleted"}},
		{ContainerStateAcquired, killed, ContainerStateKilled, []string{"UnwatchAllocation", "StopContainer", "ContainerCompleted"}},

		{ContainerStateRunning, ContainerFinished{Container: task1}, ContainerStateCompleted, []string{"ContainerCompleted"}},
		{ContainerStateRunning, killed, ContainerStateKilled, []string{"StopContainer", "ContainerCompleted"}},
		{ContainerStateRunning, ContainerReleased{Container: task1}, ContainerStateReleased, []string{"StopContainer", "ContainerCompleted"}},
		{ContainerStateRunning, ContainerAcquired{Container: task1}, ContainerStateRunning, nil},
		{ContainerStateRunning, ContainerReserved{Container: containerProto(task1, 4096, 2)}, ContainerStateRunning, nil},
		{ContainerStateRunning, ContainerUpdated{Container: containerProto(task1, 4096, 2)}, ContainerStateRunning, nil},
		{ContainerStateAcquired, ContainerUpdated{Container: containerProto(task1, 4096, 2)}, ContainerStateAcquired, nil},
		{ContainerStateCompleted, ContainerUpdated{Container: containerProto(task1, 4096, 2)}, ContainerStateCompleted, nil},

		{ContainerStateCompleted, ContainerExpired{Container: task1}, ContainerStateCompleted, nil},
		{ContainerStateCompleted, ContainerReleased{Container: task1}, ContainerStateCompleted, nil},
		{ContainerStateCompleted, killed, ContainerStateCompleted, nil},
		{ContainerStateExpired, ContainerReleased{Container: task1}, ContainerStateExpired, nil},
		{ContainerStateExpired, killed, ContainerStateExpired, nil},
		{ContainerStateReleased, ContainerExpired{Container: task1}, ContainerStateReleased, nil},
		{ContainerStateReleased, ContainerReleased{Container: task1}, ContainerStateReleased, nil},
		{ContainerStateReleased, killed, ContainerStateReleased, nil},
		{ContainerStateReleased, ContainerFinished{Container: task1}, ContainerStateReleased, nil},
		{ContainerStateKilled, ContainerExpired{Container: task1}, ContainerStateKilled, nil},
		{ContainerStateKilled, ContainerReleased{Container: task1}, ContainerStateKilled, nil},
		{ContainerStateKilled, killed, ContainerStateKilled, nil},
		{ContainerStateKilled, ContainerAcquired{Container: task1}, ContainerStateKilled, nil},
		{ContainerStateKilled, ContainerFinished{Container: task1}, ContainerStateKilled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.from.String()+" on "+tt.event.Name(), func(t *testing.T) {
			c := newContainerIn(t, tt.from)
			fx, err := c.Handle(tt.event, at(10))
			if err != nil {
				t.Fatal(err)
			}
			if c.State() != tt.want {
				t.Errorf("state = %s, want %s", c.State(), tt.want)
			}
			if got := effectNames(fx); !sameNames(got, tt.fx) {
				t.Errorf("effects = %v, want %v", got, tt.fx)
			}
		})
	}
}

func TestContainerRejectsInvalidEventsAndStaysUnchanged(t *testing.T) {
	tests := []struct {
		from  ContainerState
		event ContainerEvent
	}{
		{ContainerStateNew, ContainerLaunched{Container: task1}},
		{ContainerStateNew, ContainerUpdated{Container: containerProto(task1, 4096, 2)}},
		{ContainerStateAllocated, ContainerUpdated{Container: containerProto(task1, 4096, 2)}},
		{ContainerStateNew, ContainerFinished{Container: task1}},
		{ContainerStateNew, ContainerReleased{Container: task1}},
		{ContainerStateNew, ContainerExpired{Container: task1}},
		{ContainerStateReserved, ContainerAcquired{Container: task1}},
		{ContainerStateReserved, ContainerLaunched{Container: task1}},
		{ContainerStateReserved, ContainerFinished{Container: task1}},
		{ContainerStateReserved, ContainerExpired{Container: task1}},
		{ContainerStateAllocated, ContainerLaunched{Container: task1}},
		{ContainerStateAllocated, ContainerFinished{Container: task1}},
		{ContainerStateAllocated, ContainerReleased{Container: task1}},
		{ContainerStateAllocated, ContainerAllocated{Container: containerProto(task1, 1, 1)}},
		{ContainerStateAcquired, ContainerAllocated{Container: containerProto(task1, 1, 1)}},
		{ContainerStateAcquired, ContainerReserved{Container: containerProto(task1, 1, 1)}},
		{ContainerStateRunning, ContainerLaunched{Container: task1}},
		{ContainerStateRunning, ContainerExpired{Container: task1}},
		{ContainerStateRunning, ContainerAllocated{Container: containerProto(task1, 1, 1)}},
		{ContainerStateCompleted, ContainerFinished{Container: task1}},
		{ContainerStateCompleted, ContainerLaunched{Container: task1}},
		{ContainerStateCompleted, ContainerAcquired{Container: task1}},
		{ContainerStateExpired, ContainerExpired{Container: task1}},
		{ContainerStateExpired, ContainerFinished{Container: task1}},
		{ContainerStateExpired, ContainerAcquired{Container: task1}},
		{ContainerStateReleased, ContainerAcquired{Container: task1}},
		{ContainerStateReleased, ContainerLaunched{Container: task1}},
		{ContainerStateKilled, ContainerLaunched{Container: task1}},
		{ContainerStateKilled, ContainerAllocated{Container: containerProto(task1, 1, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.from.String()+" on "+tt.event.Name(), func(t *testing.T) {
			c := newContainerIn(t, tt.from)
			before := *c
			reportBefore := prototext.Format(c.Report())
			fx, err := c.Handle(tt.event, at(10))
			wantInvalid(t, err)
			if fx != nil {
				t.Errorf("effects = %v", fx)
			}
			if c.state != before.state || c.done != before.done || !c.finished.Equal(before.finished) ||
				prototext.Format(c.Report()) != reportBefore {
				t.Error("container changed")
			}
		})
	}
}

func TestContainerRejectsAnotherContainersEvent(t *testing.T) {
	c := newContainerIn(t, ContainerStateRunning)
	_, err := c.Handle(ContainerFinished{Container: am1}, at(10))
	if !errors.Is(err, ErrUnknownContainer) {
		t.Errorf("err = %v", err)
	}
}

func TestContainerCompletionCarriesTheStatusTheAMSees(t *testing.T) {
	tests := []struct {
		name     string
		from     ContainerState
		event    ContainerEvent
		exit     int32
		diag     string
		released bool
	}{
		{"process exit", ContainerStateRunning, ContainerFinished{Container: task1, ExitStatus: 143, Diagnostics: "Container killed on request. Exit code is 143"}, 143, "Container killed on request. Exit code is 143", false},
		{"released by the AM", ContainerStateRunning, ContainerReleased{Container: task1}, ExitAborted, "Container released by application", true},
		{"not started in time", ContainerStateAcquired, ContainerExpired{Container: task1}, ExitAborted, "Container expired since it was unused", true},
		{"preempted", ContainerStateRunning, ContainerKilled{Container: task1, ExitStatus: ExitPreempted, Diagnostics: DiagPreemptedContainer}, ExitPreempted, "Container preempted by scheduler", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newContainerIn(t, tt.from)
			fx, err := c.Handle(tt.event, at(10))
			if err != nil {
				t.Fatal(err)
			}
			var got *ContainerCompleted
			for _, e := range fx {
				if cc, ok := e.(ContainerCompleted); ok {
					got = &cc
				}
			}
			if got == nil {
				t.Fatalf("no ContainerCompleted in %v", fx)
			}
			want := &yarnpb.ContainerStatusProto{
				ContainerId: task1.Proto(),
				State:       yarnpb.ContainerStateProto_C_COMPLETE.Enum(),
				Diagnostics: proto.String(tt.diag),
				ExitStatus:  proto.Int32(tt.exit),
			}
			if !proto.Equal(got.Status, want) {
				t.Errorf("status = %v, want %v", got.Status, want)
			}
			if got.Attempt != att1 {
				t.Errorf("attempt = %s", got.Attempt)
			}
		})
	}
}

func TestContainerUsageCountsFromAllocationToEnd(t *testing.T) {
	c, err := NewContainer(containerProto(task1, 2048, 2), "root", t0)
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Usage(t0.Add(time.Hour)); u != (Usage{}) {
		t.Errorf("usage before allocation = %+v", u)
	}
	for _, ev := range []ContainerEvent{ContainerAllocated{Container: containerProto(task1, 2048, 2)}, ContainerAcquired{Container: task1}, ContainerLaunched{Container: task1}} {
		if _, err := c.Handle(ev, t0); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := c.Usage(t0.Add(1500*time.Millisecond)), (Usage{MemorySeconds: 3072, VcoreSeconds: 3}); got != want {
		t.Errorf("running usage = %+v, want %+v", got, want)
	}
	if _, err := c.Handle(ContainerKilled{Container: task1, ExitStatus: ExitPreempted}, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := Usage{MemorySeconds: 20480, VcoreSeconds: 20, PreemptedMemorySeconds: 20480, PreemptedVcoreSeconds: 20}
	if got := c.Usage(t0.Add(time.Hour)); got != want {
		t.Errorf("usage after preemption = %+v, want %+v", got, want)
	}
}

func TestNewContainerNeedsAnID(t *testing.T) {
	if _, err := NewContainer(&yarnpb.ContainerProto{}, "root", t0); err == nil {
		t.Error("no error")
	}
}

func TestContainerUpdatedTakesTheNewSizeAndVersion(t *testing.T) {
	c := newContainerIn(t, ContainerStateRunning)
	updated := containerProto(task1, 4096, 3)
	updated.Version = proto.Int32(1)
	if _, err := c.Handle(ContainerUpdated{Container: updated}, at(10)); err != nil {
		t.Fatal(err)
	}
	if mb, vc := c.Resource(); mb != 4096 || vc != 3 {
		t.Errorf("resource = %d MB, %d vcores; want 4096, 3", mb, vc)
	}
	if v := c.Proto().GetVersion(); v != 1 {
		t.Errorf("version = %d, want 1", v)
	}
}

// The container keeps its message marshalled; what it hands back is the
// message as allocated, with a token, and a caller changing either the
// message it gave or one it got changes nothing the container holds.
func TestContainerHandsBackTheMessageAsAllocatedWhateverCallersChange(t *testing.T) {
	given := containerProto(task1, 2048, 2)
	given.ContainerToken = &commonpb.TokenProto{Identifier: []byte{1, 2, 3}, Password: []byte{4}, Kind: proto.String("ContainerToken"), Service: proto.String("localhost:8141")}
	want := proto.Clone(given).(*yarnpb.ContainerProto)
	c, err := NewContainer(given, "root", t0)
	if err != nil {
		t.Fatal(err)
	}
	given.NodeId.Host = proto.String("elsewhere")
	given.Resource.Memory = proto.Int64(1)
	got := c.Proto()
	if !proto.Equal(got, want) {
		t.Fatalf("Proto() = %v, want %v", prototext.Format(got), prototext.Format(want))
	}
	got.NodeId.Port = proto.Int32(1)
	if n := c.Node(); n.GetHost() != "localhost" || n.GetPort() != 8141 {
		t.Errorf("Node() = %v, want localhost:8141", n)
	}
	if mem, vcores := c.Resource(); mem != 2048 || vcores != 2 {
		t.Errorf("Resource() = %d MB, %d vcores, want 2048, 2", mem, vcores)
	}

	// An allocation of a reserved container brings its node and token.
	moved := containerProto(task1, 4096, 3)
	moved.NodeId = &yarnpb.NodeIdProto{Host: proto.String("node-2"), Port: proto.Int32(8041)}
	c.update(moved)
	if !proto.Equal(c.Proto(), moved) || c.Node().GetHost() != "node-2" {
		t.Errorf("after update: Proto() = %v, want %v", prototext.Format(c.Proto()), prototext.Format(moved))
	}
	if mem, vcores := c.Resource(); mem != 4096 || vcores != 3 {
		t.Errorf("after update: Resource() = %d MB, %d vcores, want 4096, 3", mem, vcores)
	}
}
