package apps

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// The fixtures follow the recorded Hadoop 3.4.1 cluster in
// ../../../shared/testdata (cluster timestamp 1795333013199, RM web port 8188).
const clusterTS = 1795333013199

var (
	// t0 is when the DistributedShell app of the recordings was submitted.
	t0       = time.Date(2026, 11, 22, 7, 37, 14, 629_000_000, time.UTC)
	testCfg  = Config{WebAppURL: "http://localhost:8188"}
	appID    = ApplicationID{ClusterTimestamp: clusterTS, ID: 2}
	att1     = AttemptID{App: appID, ID: 1}
	att2     = AttemptID{App: appID, ID: 2}
	att3     = AttemptID{App: appID, ID: 3}
	am1      = ContainerID{Attempt: att1, Sequence: 1}
	task1    = ContainerID{Attempt: att1, Sequence: 2}
	am2      = ContainerID{Attempt: att2, Sequence: 1}
	am3      = ContainerID{Attempt: att3, Sequence: 1}
	proxyURL = "http://localhost:8188/proxy/application_1795333013199_0002/"
	appPage  = "http://localhost:8188/cluster/app/application_1795333013199_0002"
)

// dsContext is the DistributedShell submission of the recordings: an AM
// resource request (field 17) and no resource (field 9).
func dsContext() *yarnpb.ApplicationSubmissionContextProto {
	return &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   appID.Proto(),
		ApplicationName: proto.String("DistributedShell"),
		Queue:           proto.String("default"),
		Priority:        &yarnpb.PriorityProto{Priority: proto.Int32(0)},
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"java", "ApplicationMaster"}},
		AmContainerResourceRequest: []*yarnpb.ResourceRequestProto{{
			Priority:      &yarnpb.PriorityProto{Priority: proto.Int32(0)},
			ResourceName:  proto.String("*"),
			Capability:    &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
			NumContainers: proto.Int32(1),
			RelaxLocality: proto.Bool(true),
		}},
	}
}

type option func(*yarnpb.ApplicationSubmissionContextProto)

func maxAttempts(n int32) option {
	return func(c *yarnpb.ApplicationSubmissionContextProto) { c.MaxAppAttempts = proto.Int32(n) }
}

func unmanaged() option {
	return func(c *yarnpb.ApplicationSubmissionContextProto) {
		c.UnmanagedAm = proto.Bool(true)
		c.AmContainerResourceRequest = nil
	}
}

func keepContainers() option {
	return func(c *yarnpb.ApplicationSubmissionContextProto) {
		c.KeepContainersAcrossApplicationAttempts = proto.Bool(true)
	}
}

func validity(d time.Duration) option {
	return func(c *yarnpb.ApplicationSubmissionContextProto) {
		c.AttemptFailuresValidityInterval = proto.Int64(d.Milliseconds())
	}
}

func lifetime(d time.Duration) option {
	return func(c *yarnpb.ApplicationSubmissionContextProto) {
		c.ApplicationTimeouts = append(c.ApplicationTimeouts, &yarnpb.ApplicationTimeoutMapProto{
			ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
			Timeout:                proto.Int64(int64(d / time.Second)),
		})
	}
}

func newApp(t *testing.T, opts ...option) *Application {
	t.Helper()
	ctx := dsContext()
	for _, o := range opts {
		o(ctx)
	}
	a, err := NewApplication(testCfg, Submission{ID: appID, User: "root", Queue: "root.default", Context: ctx, SubmitTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// containerProto is a container on the recordings' one node.
func containerProto(id ContainerID, memoryMB int64, vcores int32) *yarnpb.ContainerProto {
	return &yarnpb.ContainerProto{
		Id:              id.Proto(),
		NodeId:          &yarnpb.NodeIdProto{Host: proto.String("localhost"), Port: proto.Int32(8141)},
		NodeHttpAddress: proto.String("localhost:8142"),
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(memoryMB), VirtualCores: proto.Int32(vcores)},
		Priority:        &yarnpb.PriorityProto{Priority: proto.Int32(0)},
		ExecutionType:   yarnpb.ExecutionTypeProto_GUARANTEED.Enum(),
	}
}

// Event paths from a new application to each state. Every path's events
// are sent one second apart from t0.
var (
	toNewSaving = []Event{Start{}}
	toSubmitted = append(clip(toNewSaving), AppSaved{})
	toAccepted  = append(clip(toSubmitted), Accepted{})                 // attempt 1 SUBMITTED
	toScheduled = append(clip(toAccepted), AttemptAdded{Attempt: att1}) // attempt 1 SCHEDULED
	toAllocSave = append(clip(toScheduled), AMContainerAllocated{Attempt: att1, Container: containerProto(am1, 1024, 1)})
	toAllocated = append(clip(toAllocSave), AttemptSaved{Attempt: att1})
	toLaunched  = append(clip(toAllocated), AttemptLaunched{Attempt: att1}, ContainerLaunched{Container: am1})
	toRunning   = append(clip(toLaunched), AttemptRegistered{Attempt: att1, Host: "vm/127.0.0.1", RPCPort: -1})
	// The AM unregistered; the app and the attempt are saving FINISHED.
	toUnregistering = append(clip(toRunning), AttemptUnregistered{Attempt: att1, FinalStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED})
	toFinishing     = append(clip(toUnregistering), AttemptFinalSaved{Attempt: att1}, AppFinalSaved{})
	toFinished      = append(clip(toFinishing), ContainerFinished{Container: am1, ExitStatus: 0})
	// A kill of the running app: the attempt is saving KILLED.
	toKilling = append(clip(toRunning), Kill{Diagnostics: "killed by test"})
	toKilled  = append(clip(toKilling), AttemptFinalSaved{Attempt: att1}, AppFinalSaved{})
	// A rejected submission: the app is saving FAILED, then FAILED.
	toRejecting = append(clip(toSubmitted), Rejected{Diagnostics: "queue is full"})
	toFailed    = append(clip(toRejecting), AppFinalSaved{})
	// The first AM crashed: attempt 1 FAILED, attempt 2 SUBMITTED.
	toRetrying = append(clip(toRunning), ContainerFinished{Container: am1, ExitStatus: 1, Diagnostics: "boom"}, AttemptFinalSaved{Attempt: att1})
)

// clip copies a path so that appending to it never writes into another.
func clip(evs []Event) []Event { return append([]Event(nil), evs...) }

// at is the time the i-th event of a path is sent.
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

// drive sends a path of events to a new application made with opts.
func drive(t *testing.T, path []Event, opts ...option) *Application {
	t.Helper()
	a := newApp(t, opts...)
	driveOn(t, a, path)
	return a
}

func driveOn(t *testing.T, a *Application, path []Event) {
	t.Helper()
	for i, ev := range path {
		if _, err := a.Handle(ev, at(i)); err != nil {
			t.Fatalf("event %d %T: %v", i, ev, err)
		}
		if got, want := a.Held(), heldRecount(a); !reflect.DeepEqual(got, want) {
			t.Fatalf("after event %d %T the application holds %+v, its containers %+v", i, ev, got, want)
		}
	}
}

// heldRecount is Held counted from every container, as Used and LiveUsage
// count them.
func heldRecount(a *Application) Held {
	h := Held{Containers: len(a.Containers())}
	one := func(c *Container) Holding {
		mb, vc := c.Resource()
		return Holding{1, mb, vc}
	}
	t := a.CurrentAttempt()
	parts := map[string]*PartitionHeld{}
	part := func(label string) *PartitionHeld {
		if parts[label] == nil {
			parts[label] = &PartitionHeld{Partition: label}
		}
		return parts[label]
	}
	for _, c := range a.Containers() {
		if c.State().live() {
			h.Live = h.Live.Add(one(c))
		}
		if t == nil || !t.inScheduler() || c.Attempt() != t.ID() {
			continue
		}
		switch {
		case c.State().live():
			h.Current = h.Current.Add(one(c))
			if c.Partition() != "" {
				part(c.Partition()).Current = part(c.Partition()).Current.Add(one(c))
			}
		case c.State() == ContainerStateReserved:
			h.Reserved = h.Reserved.Add(one(c))
			if c.Partition() != "" {
				part(c.Partition()).Reserved = part(c.Partition()).Reserved.Add(one(c))
			}
		}
	}
	if u := a.LiveUsage(); u != nil {
		live := Holding{u.GetNumUsedContainers(), u.GetUsedResources().GetMemory(), u.GetUsedResources().GetVirtualCores()}
		reserved := Holding{u.GetNumReservedContainers(), u.GetReservedResources().GetMemory(), u.GetReservedResources().GetVirtualCores()}
		if live != h.Current || reserved != h.Reserved {
			panic("heldRecount disagrees with LiveUsage")
		}
	}
	if t != nil {
		if c := t.AMContainer(); c != nil {
			h.AM = Holding{1, c.GetResource().GetMemory(), c.GetResource().GetVirtualCores()}
			if am, ok := t.amContainerID(); ok && a.Container(am) != nil && a.Container(am).Partition() != "" {
				part(a.Container(am).Partition()).AM = h.AM
			}
		}
	}
	for _, label := range slices.Sorted(maps.Keys(parts)) {
		h.Partitions = append(h.Partitions, *parts[label])
	}
	return h
}

// effectNames lists the effects' type names.
func effectNames(fx []Effect) []string {
	var out []string
	for _, e := range fx {
		out = append(out, reflect.TypeOf(e).Name())
	}
	return out
}

func sameNames(got, want []string) bool {
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	return reflect.DeepEqual(got, want)
}

// snapshot renders everything a client or the store could see of an
// application, to check an invalid event changed nothing.
func snapshot(a *Application) string {
	var b strings.Builder
	now := at(100)
	fmt.Fprintf(&b, "state=%s pending=%+v\n", a.state, a.pending)
	b.WriteString(prototext.Format(a.Report(ReportOptions{Now: now, Access: true})))
	rec := a.Record()
	fmt.Fprintf(&b, "record=%v %v %v %s\n", rec.State, rec.FinishTime, rec.LifetimeExpiry, prototext.Format(rec.Context))
	for _, t := range a.attempts {
		fmt.Fprintf(&b, "attempt %s %s pending=%+v\n%s", t.id, t.state, t.pending, prototext.Format(t.Report()))
	}
	for _, c := range a.Containers() {
		fmt.Fprintf(&b, "container %s %s holder=%s\n%s", c.id, c.state, c.holder, prototext.Format(c.Report()))
	}
	return b.String()
}

func wantInvalid(t *testing.T, err error) {
	t.Helper()
	var it *InvalidTransitionError
	if !errors.As(err, &it) {
		t.Fatalf("err = %v, want *InvalidTransitionError", err)
	}
}
