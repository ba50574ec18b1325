package apps

import (
	"fmt"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Effect is work Handle asks its caller to do. Effects come back in the order
// they must be carried out: a Persist effect comes before everything that
// depends on it, as raft's Ready is saved before its messages are sent.
// Effects whose Done field is set expect that event back once the work has
// succeeded; the caller retries the work until it does (an API-server outage
// delays, never loses), and feeds Done events back in the order the effects
// were given.
type Effect interface {
	fmt.Stringer
	effect()
}

// PersistApp writes the application record. Done (AppSaved, AppFinalSaved,
// or nil for updates nobody waits on) goes back to Handle once written.
type PersistApp struct {
	Record AppRecord
	Done   Event
}

// AddToScheduler asks the queue to admit the application (YARN's
// AppAddedSchedulerEvent). The caller answers with Accepted or Rejected;
// Recovering applications were admitted before and need no answer.
type AddToScheduler struct {
	App        ApplicationID
	User       string
	Queue      string
	Priority   int32
	Recovering bool
}

// RemoveFromScheduler tells the queue the application has ended.
type RemoveFromScheduler struct {
	App   ApplicationID
	State AppState
}

// ScheduleTimeout arms (or moves) the application's lifetime timer; when it
// fires, the caller sends TimeoutExpired.
type ScheduleTimeout struct {
	App    ApplicationID
	Expiry time.Time
}

// CancelTimeout disarms the lifetime timer.
type CancelTimeout struct{ App ApplicationID }

// AppCompleted tells the RM the application has ended: count it in metrics
// and in the retention of completed applications.
type AppCompleted struct {
	App   ApplicationID
	State AppState
}

// PersistAttempt writes an attempt record; Done goes back once written.
type PersistAttempt struct {
	Record AttemptRecord
	Done   Event
}

// RemoveAttemptRecord deletes the stored record of an old attempt whose
// failure no longer counts (attempt failures validity interval).
type RemoveAttemptRecord struct{ Attempt AttemptID }

// AddAttemptToScheduler registers a new attempt with the AM service and the
// scheduler; the caller answers with AttemptAdded. TransferState keeps the
// previous attempt's running containers (keep-containers-across-attempts).
// Recovering attempts need no answer.
type AddAttemptToScheduler struct {
	Attempt       AttemptID
	TransferState bool
	Recovering    bool
}

// RequestAMContainer asks for the AM container (the AM pod); the caller
// answers with AMContainerAllocated.
type RequestAMContainer struct {
	Attempt  AttemptID
	Requests []*yarnpb.ResourceRequestProto
}

// LaunchAM starts the AM in its container, with a fresh AMRMToken, as YARN's
// ApplicationMasterLauncher does; the caller answers with AttemptLaunched or
// AttemptLaunchFailed.
type LaunchAM struct {
	Attempt   AttemptID
	Container *yarnpb.ContainerProto
}

// IssueAMRMToken creates the AMRMToken of an unmanaged AM, which the
// submitting user then reads from the application report.
type IssueAMRMToken struct{ Attempt AttemptID }

// AMMonitor names the timer that watches an AM.
type AMMonitor uint8

// AM monitors.
const (
	// AMLiveness expires an AM that stops heartbeating
	// (yarn.am.liveness-monitor.expiry-interval-ms).
	AMLiveness AMMonitor = iota + 1
	// AMFinishing expires an unregistered AM whose container does not end.
	AMFinishing
)

// String names the monitor.
func (m AMMonitor) String() string {
	if m == AMFinishing {
		return "finishing"
	}
	return "liveness"
}

// WatchAM (re)starts the AM's monitor, replacing any other monitor of the
// attempt; when it fires the caller sends AttemptExpired.
type WatchAM struct {
	Attempt AttemptID
	Monitor AMMonitor
}

// ReleaseAttempt tells the AM service, the scheduler and the token managers
// that the attempt is over: forget its asks and tokens and stop its monitors.
// Its containers were already ended by the effects before, except those kept
// for the next attempt when KeepContainers is set.
type ReleaseAttempt struct {
	Attempt        AttemptID
	State          AttemptState
	KeepContainers bool
}

// StopContainer ends a container's process and removes its pod.
type StopContainer struct {
	Container ContainerID
	Node      *yarnpb.NodeIdProto
}

// ContainerCompleted hands a completed container's status to the AM: it is
// returned once, in the next allocate response.
type ContainerCompleted struct {
	Attempt AttemptID // the attempt holding the container
	Status  *yarnpb.ContainerStatusProto
}

// WatchAllocation starts the timer that expires a container the AM acquired
// but did not start; when it fires the caller sends ContainerExpired.
type WatchAllocation struct{ Container ContainerID }

// UnwatchAllocation stops that timer.
type UnwatchAllocation struct{ Container ContainerID }

// effect closes the set of effects to this package.

func (PersistApp) effect()            {}
func (AddToScheduler) effect()        {}
func (RemoveFromScheduler) effect()   {}
func (ScheduleTimeout) effect()       {}
func (CancelTimeout) effect()         {}
func (AppCompleted) effect()          {}
func (PersistAttempt) effect()        {}
func (RemoveAttemptRecord) effect()   {}
func (AddAttemptToScheduler) effect() {}
func (RequestAMContainer) effect()    {}
func (LaunchAM) effect()              {}
func (IssueAMRMToken) effect()        {}
func (WatchAM) effect()               {}
func (ReleaseAttempt) effect()        {}
func (StopContainer) effect()         {}
func (ContainerCompleted) effect()    {}
func (WatchAllocation) effect()       {}
func (UnwatchAllocation) effect()     {}

// The String methods give one line per effect, for logs and the golden
// lifecycle tests.

func doneName(e Event) string {
	if e == nil {
		return "-"
	}
	return e.Name()
}

func (e PersistApp) String() string {
	st := "-"
	if e.Record.State != 0 {
		st = e.Record.State.String()
	}
	return fmt.Sprintf("PersistApp %s state=%s done=%s", e.Record.ID, st, doneName(e.Done))
}

func (e AddToScheduler) String() string {
	return fmt.Sprintf("AddToScheduler %s queue=%s user=%s priority=%d recovering=%t", e.App, e.Queue, e.User, e.Priority, e.Recovering)
}

func (e RemoveFromScheduler) String() string {
	return fmt.Sprintf("RemoveFromScheduler %s state=%s", e.App, e.State)
}

func (e ScheduleTimeout) String() string {
	return fmt.Sprintf("ScheduleTimeout %s at=%s", e.App, e.Expiry.UTC().Format(time.RFC3339Nano))
}

func (e CancelTimeout) String() string { return "CancelTimeout " + e.App.String() }

func (e AppCompleted) String() string {
	return fmt.Sprintf("AppCompleted %s state=%s", e.App, e.State)
}

func (e PersistAttempt) String() string {
	st := "-"
	if e.Record.State != 0 {
		st = e.Record.State.String()
	}
	return fmt.Sprintf("PersistAttempt %s state=%s done=%s", e.Record.ID, st, doneName(e.Done))
}

func (e RemoveAttemptRecord) String() string { return "RemoveAttemptRecord " + e.Attempt.String() }

func (e AddAttemptToScheduler) String() string {
	return fmt.Sprintf("AddAttemptToScheduler %s transfer=%t recovering=%t", e.Attempt, e.TransferState, e.Recovering)
}

func (e RequestAMContainer) String() string {
	return fmt.Sprintf("RequestAMContainer %s asks=%d", e.Attempt, len(e.Requests))
}

func (e LaunchAM) String() string {
	id, _ := containerIDOf(e.Container)
	return fmt.Sprintf("LaunchAM %s container=%s", e.Attempt, id)
}

func (e IssueAMRMToken) String() string { return "IssueAMRMToken " + e.Attempt.String() }

func (e WatchAM) String() string {
	return fmt.Sprintf("WatchAM %s monitor=%s", e.Attempt, e.Monitor)
}

func (e ReleaseAttempt) String() string {
	return fmt.Sprintf("ReleaseAttempt %s state=%s keep=%t", e.Attempt, e.State, e.KeepContainers)
}

func (e StopContainer) String() string { return "StopContainer " + e.Container.String() }

func (e ContainerCompleted) String() string {
	id, _ := yarnid.ContainerIDFromProto(e.Status.GetContainerId())
	return fmt.Sprintf("ContainerCompleted %s exit=%d", id, e.Status.GetExitStatus())
}

func (e WatchAllocation) String() string   { return "WatchAllocation " + e.Container.String() }
func (e UnwatchAllocation) String() string { return "UnwatchAllocation " + e.Container.String() }
