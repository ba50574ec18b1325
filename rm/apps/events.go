package apps

import (
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Event is an input to Application.Handle. Events are plain values; the set
// is closed (the types below).
type Event interface {
	// Name is YARN's name for the event type (RMAppEventType,
	// RMAppAttemptEventType or RMContainerEventType), as errors show it.
	Name() string
	event()
}

// AttemptEvent is an event for one attempt of the application.
type AttemptEvent interface {
	Event
	AttemptID() AttemptID
}

// ContainerEvent is an event for one container of the application; a
// standalone Container takes these too.
type ContainerEvent interface {
	Event
	ContainerID() ContainerID
}

// --- application events ---

// Start begins the life of a submitted application: it is stored, and its
// lifetime timer set. The limits are the queue's, as the scheduler's
// checkAndGetApplicationLifetime applies them; zero means none.
type Start struct {
	DefaultLifetime time.Duration // used when the submission asks for none
	MaxLifetime     time.Duration // caps what the submission asks for
}

// AppSaved reports that the new application's record is stored.
type AppSaved struct{}

// AppSaveFailed reports that the new application could not be stored; the
// application fails with the diagnostics.
type AppSaveFailed struct{ Diagnostics string }

// Accepted reports that the queue admitted the application; its first
// attempt starts.
type Accepted struct{}

// Rejected reports that the queue (or a submission check) refused the
// application; it fails with the diagnostics.
type Rejected struct{ Diagnostics string }

// AppFinalSaved reports that the application's final state is stored.
type AppFinalSaved struct{}

// Kill asks to kill the application (a user's forceKillApplication, or the
// RM itself). UserKillDiagnostics builds YARN's text for a user's kill.
type Kill struct{ Diagnostics string }

// TimeoutExpired reports that the application's lifetime timer fired. It is
// ignored when the application has no lifetime or the lifetime was extended
// past now, so a stale timer does no harm.
type TimeoutExpired struct{}

// Move records that the scheduler moved the application to another queue.
type Move struct{ Queue string }

// UpdatePriority records a new application priority.
type UpdatePriority struct{ Priority int32 }

// UpdateTimeout sets a new absolute lifetime expiry; it must be after now.
type UpdateTimeout struct{ Expiry time.Time }

// Recover rebuilds a NEW application from its stored records after an RM
// restart: the application record and its attempt records, any order.
type Recover struct {
	App      AppRecord
	Attempts []AttemptRecord
}

// --- attempt events ---

// AttemptAdded reports that the scheduler took in the attempt; a managed AM
// then asks for its container, an unmanaged one is stored.
type AttemptAdded struct{ Attempt AttemptID }

// AMContainerAllocated hands the attempt its AM container.
type AMContainerAllocated struct {
	Attempt   AttemptID
	Container *yarnpb.ContainerProto
	// Partition is the node-label partition it runs in ("" the default).
	Partition string
}

// AttemptSaved reports that the attempt's record (with its AM container) is stored.
type AttemptSaved struct{ Attempt AttemptID }

// AttemptLaunched reports that the AM container was started.
type AttemptLaunched struct{ Attempt AttemptID }

// AttemptLaunchFailed reports that the AM container could not be started.
type AttemptLaunchFailed struct {
	Attempt     AttemptID
	Diagnostics string
}

// AttemptRegistered is the AM's registerApplicationMaster.
type AttemptRegistered struct {
	Attempt     AttemptID
	Host        string
	RPCPort     int32
	TrackingURL string
}

// AttemptStatusUpdate carries the progress from the AM's allocate heartbeat.
type AttemptStatusUpdate struct {
	Attempt  AttemptID
	Progress float32
}

// AttemptUnregistered is the AM's finishApplicationMaster.
type AttemptUnregistered struct {
	Attempt     AttemptID
	FinalStatus yarnpb.FinalApplicationStatusProto
	Diagnostics string
	TrackingURL string
}

// AttemptExpired reports that the AM stopped heartbeating (AM liveness), or
// that an unregistered AM's container did not end in time (AM finishing).
type AttemptExpired struct{ Attempt AttemptID }

// AttemptFailed fails the attempt (failApplicationAttempt, or any failure the
// caller detects); a new attempt follows if attempts remain. An AM container
// that exits reports itself through ContainerFinished instead.
type AttemptFailed struct {
	Attempt     AttemptID
	Diagnostics string
}

// AttemptFinalSaved reports that the attempt's final state is stored.
type AttemptFinalSaved struct{ Attempt AttemptID }

// AttemptDiagnostics replaces the scheduler's note on why the AM is not yet
// running ("Application is Activated, waiting for resources ..."). It is
// shown until the AM registers, and ignored after.
type AttemptDiagnostics struct {
	Attempt AttemptID
	Message string
}

// --- container events ---

// ContainerReserved records a reservation for a container on a node.
type ContainerReserved struct{ Container *yarnpb.ContainerProto }

// ContainerAllocated records a container allocated to the application's
// current attempt (its pod is bound to a node).
type ContainerAllocated struct {
	Container *yarnpb.ContainerProto
	// Partition is the node-label partition it runs in ("" the default).
	Partition string
}

// ContainerAcquired records that the AM pulled the container in allocate.
type ContainerAcquired struct{ Container ContainerID }

// ContainerLaunched records that the container's process runs.
type ContainerLaunched struct{ Container ContainerID }

// ContainerUpdated records a container the AM pulled at a new version:
// resized, promoted or demoted (YARN's ACQUIRE_UPDATED_CONTAINER).
type ContainerUpdated struct{ Container *yarnpb.ContainerProto }

// ContainerFinished records that the container's process ended.
type ContainerFinished struct {
	Container   ContainerID
	ExitStatus  int32
	Diagnostics string
}

// ContainerReleased records that the AM released the container.
type ContainerReleased struct{ Container ContainerID }

// ContainerExpired records that the AM did not start an acquired container in
// time (yarn.resourcemanager.rm.container-allocation.expiry-interval-ms).
type ContainerExpired struct{ Container ContainerID }

// ContainerKilled records that the RM ended the container, with the status
// the AM will see (e.g. ExitPreempted and DiagPreemptedContainer).
type ContainerKilled struct {
	Container   ContainerID
	ExitStatus  int32
	Diagnostics string
}

// ContainerRecovered rebuilds a container found after an RM restart, still
// running or already ended. Created is when it was allocated, for usage.
type ContainerRecovered struct {
	Container   *yarnpb.ContainerProto
	Partition   string // the node-label partition it runs in ("" the default)
	Created     time.Time
	Running     bool
	ExitStatus  int32 // when not Running
	Diagnostics string
}

// Each event type gives YARN's name for it (see Event.Name).

func (Start) Name() string                { return "START" }
func (AppSaved) Name() string             { return "APP_NEW_SAVED" }
func (AppSaveFailed) Name() string        { return "APP_SAVE_FAILED" }
func (Accepted) Name() string             { return "APP_ACCEPTED" }
func (Rejected) Name() string             { return "APP_REJECTED" }
func (AppFinalSaved) Name() string        { return "APP_UPDATE_SAVED" }
func (Kill) Name() string                 { return "KILL" }
func (TimeoutExpired) Name() string       { return "LIFETIME_EXPIRED" }
func (Move) Name() string                 { return "MOVE" }
func (UpdatePriority) Name() string       { return "UPDATE_PRIORITY" }
func (UpdateTimeout) Name() string        { return "UPDATE_TIMEOUT" }
func (Recover) Name() string              { return "RECOVER" }
func (AttemptAdded) Name() string         { return "ATTEMPT_ADDED" }
func (AMContainerAllocated) Name() string { return "CONTAINER_ALLOCATED" }
func (AttemptSaved) Name() string         { return "ATTEMPT_NEW_SAVED" }
func (AttemptLaunched) Name() string      { return "LAUNCHED" }
func (AttemptLaunchFailed) Name() string  { return "LAUNCH_FAILED" }
func (AttemptRegistered) Name() string    { return "REGISTERED" }
func (AttemptStatusUpdate) Name() string  { return "STATUS_UPDATE" }
func (AttemptUnregistered) Name() string  { return "UNREGISTERED" }
func (AttemptExpired) Name() string       { return "EXPIRE" }
func (AttemptFailed) Name() string        { return "FAIL" }
func (AttemptFinalSaved) Name() string    { return "ATTEMPT_UPDATE_SAVED" }
func (AttemptDiagnostics) Name() string   { return "AM_LAUNCH_DIAGNOSTICS" }
func (ContainerReserved) Name() string    { return "RESERVED" }
func (ContainerAllocated) Name() string   { return "START" }
func (ContainerAcquired) Name() string    { return "ACQUIRED" }
func (ContainerLaunched) Name() string    { return "LAUNCHED" }
func (ContainerUpdated) Name() string     { return "ACQUIRE_UPDATED_CONTAINER" }
func (ContainerFinished) Name() string    { return "FINISHED" }
func (ContainerReleased) Name() string    { return "RELEASED" }
func (ContainerExpired) Name() string     { return "EXPIRE" }
func (ContainerKilled) Name() string      { return "KILL" }
func (ContainerRecovered) Name() string   { return "RECOVER" }

// event closes the set of events to this package.

func (Start) event()                {}
func (AppSaved) event()             {}
func (AppSaveFailed) event()        {}
func (Accepted) event()             {}
func (Rejected) event()             {}
func (AppFinalSaved) event()        {}
func (Kill) event()                 {}
func (TimeoutExpired) event()       {}
func (Move) event()                 {}
func (UpdatePriority) event()       {}
func (UpdateTimeout) event()        {}
func (Recover) event()              {}
func (AttemptAdded) event()         {}
func (AMContainerAllocated) event() {}
func (AttemptSaved) event()         {}
func (AttemptLaunched) event()      {}
func (AttemptLaunchFailed) event()  {}
func (AttemptRegistered) event()    {}
func (AttemptStatusUpdate) event()  {}
func (AttemptUnregistered) event()  {}
func (AttemptExpired) event()       {}
func (AttemptFailed) event()        {}
func (AttemptFinalSaved) event()    {}
func (AttemptDiagnostics) event()   {}
func (ContainerReserved) event()    {}
func (ContainerAllocated) event()   {}
func (ContainerAcquired) event()    {}
func (ContainerLaunched) event()    {}
func (ContainerUpdated) event()     {}
func (ContainerFinished) event()    {}
func (ContainerReleased) event()    {}
func (ContainerExpired) event()     {}
func (ContainerKilled) event()      {}
func (ContainerRecovered) event()   {}

// Attempt events name their attempt (see AttemptEvent).

func (e AttemptAdded) AttemptID() AttemptID         { return e.Attempt }
func (e AMContainerAllocated) AttemptID() AttemptID { return e.Attempt }
func (e AttemptSaved) AttemptID() AttemptID         { return e.Attempt }
func (e AttemptLaunched) AttemptID() AttemptID      { return e.Attempt }
func (e AttemptLaunchFailed) AttemptID() AttemptID  { return e.Attempt }
func (e AttemptRegistered) AttemptID() AttemptID    { return e.Attempt }
func (e AttemptStatusUpdate) AttemptID() AttemptID  { return e.Attempt }
func (e AttemptUnregistered) AttemptID() AttemptID  { return e.Attempt }
func (e AttemptExpired) AttemptID() AttemptID       { return e.Attempt }
func (e AttemptFailed) AttemptID() AttemptID        { return e.Attempt }
func (e AttemptFinalSaved) AttemptID() AttemptID    { return e.Attempt }
func (e AttemptDiagnostics) AttemptID() AttemptID   { return e.Attempt }

// containerIDOf reads the id of a container message; events carrying a
// malformed one are rejected by Handle.
func containerIDOf(c *yarnpb.ContainerProto) (ContainerID, error) {
	return yarnid.ContainerIDFromProto(c.GetId())
}

// Container events name their container (see ContainerEvent); for those
// carrying a container message, a malformed id reads as the zero id.

func (e ContainerReserved) ContainerID() ContainerID  { id, _ := containerIDOf(e.Container); return id }
func (e ContainerAllocated) ContainerID() ContainerID { id, _ := containerIDOf(e.Container); return id }
func (e ContainerAcquired) ContainerID() ContainerID  { return e.Container }
func (e ContainerLaunched) ContainerID() ContainerID  { return e.Container }
func (e ContainerUpdated) ContainerID() ContainerID   { id, _ := containerIDOf(e.Container); return id }
func (e ContainerFinished) ContainerID() ContainerID  { return e.Container }
func (e ContainerReleased) ContainerID() ContainerID  { return e.Container }
func (e ContainerExpired) ContainerID() ContainerID   { return e.Container }
func (e ContainerKilled) ContainerID() ContainerID    { return e.Container }
func (e ContainerRecovered) ContainerID() ContainerID { id, _ := containerIDOf(e.Container); return id }
