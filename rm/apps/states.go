package apps

import "github.com/knitdev/knit/protocols/yarnpb"

// AppState is the RM's state of an application (YARN's RMAppState). Clients
// see it through ClientState, which hides the RM-only states.
type AppState uint8

// Application states. The zero value is no state; stored records use it for
// "no final state saved yet".
const (
	AppStateNew AppState = iota + 1
	AppStateNewSaving
	AppStateSubmitted
	AppStateAccepted
	AppStateRunning
	AppStateFinalSaving
	AppStateFinishing
	AppStateFinished
	AppStateFailed
	AppStateKilling
	AppStateKilled
)

// String returns YARN's name of the state, e.g. "NEW_SAVING".
func (s AppState) String() string {
	switch s {
	case AppStateNew:
		return "NEW"
	case AppStateNewSaving:
		return "NEW_SAVING"
	case AppStateSubmitted:
		return "SUBMITTED"
	case AppStateAccepted:
		return "ACCEPTED"
	case AppStateRunning:
		return "RUNNING"
	case AppStateFinalSaving:
		return "FINAL_SAVING"
	case AppStateFinishing:
		return "FINISHING"
	case AppStateFinished:
		return "FINISHED"
	case AppStateFailed:
		return "FAILED"
	case AppStateKilling:
		return "KILLING"
	case AppStateKilled:
		return "KILLED"
	}
	return "NONE"
}

// Final reports whether the application has reached an end state.
func (s AppState) Final() bool {
	return s == AppStateFinished || s == AppStateFailed || s == AppStateKilled
}

// completed is YARN's isAppInCompletedStates: the application will not run
// an AM again, even if its end state is not yet saved.
func (s AppState) completed() bool {
	switch s {
	case AppStateFinalSaving, AppStateFinishing, AppStateFinished, AppStateFailed, AppStateKilling, AppStateKilled:
		return true
	}
	return false
}

// yarn maps an RM state to what clients see (RMServerUtils.createApplicationState).
// FINAL_SAVING and KILLING never reach it: the application substitutes the
// state it was in before.
func (s AppState) yarn() yarnpb.YarnApplicationStateProto {
	switch s {
	case AppStateNew:
		return yarnpb.YarnApplicationStateProto_NEW
	case AppStateNewSaving:
		return yarnpb.YarnApplicationStateProto_NEW_SAVING
	case AppStateSubmitted:
		return yarnpb.YarnApplicationStateProto_SUBMITTED
	case AppStateAccepted:
		return yarnpb.YarnApplicationStateProto_ACCEPTED
	case AppStateRunning:
		return yarnpb.YarnApplicationStateProto_RUNNING
	case AppStateFinishing, AppStateFinished:
		return yarnpb.YarnApplicationStateProto_FINISHED
	case AppStateKilling, AppStateKilled:
		return yarnpb.YarnApplicationStateProto_KILLED
	case AppStateFailed:
		return yarnpb.YarnApplicationStateProto_FAILED
	}
	return yarnpb.YarnApplicationStateProto_NEW
}

// AttemptState is the RM's state of an application attempt (YARN's
// RMAppAttemptState).
type AttemptState uint8

// Attempt states. The zero value is no state, as for AppState.
const (
	AttemptStateNew AttemptState = iota + 1
	AttemptStateSubmitted
	AttemptStateScheduled
	AttemptStateAllocatedSaving
	AttemptStateAllocated
	AttemptStateLaunchedUnmanagedSaving
	AttemptStateLaunched
	AttemptStateRunning
	AttemptStateFinalSaving
	AttemptStateFinishing
	AttemptStateFinished
	AttemptStateFailed
	AttemptStateKilled
)

// String returns YARN's name of the state, e.g. "ALLOCATED_SAVING".
func (s AttemptState) String() string {
	switch s {
	case AttemptStateNew:
		return "NEW"
	case AttemptStateSubmitted:
		return "SUBMITTED"
	case AttemptStateScheduled:
		return "SCHEDULED"
	case AttemptStateAllocatedSaving:
		return "ALLOCATED_SAVING"
	case AttemptStateAllocated:
		return "ALLOCATED"
	case AttemptStateLaunchedUnmanagedSaving:
		return "LAUNCHED_UNMANAGED_SAVING"
	case AttemptStateLaunched:
		return "LAUNCHED"
	case AttemptStateRunning:
		return "RUNNING"
	case AttemptStateFinalSaving:
		return "FINAL_SAVING"
	case AttemptStateFinishing:
		return "FINISHING"
	case AttemptStateFinished:
		return "FINISHED"
	case AttemptStateFailed:
		return "FAILED"
	case AttemptStateKilled:
		return "KILLED"
	}
	return "NONE"
}

// Final reports whether the attempt has ended.
func (s AttemptState) Final() bool {
	return s == AttemptStateFinished || s == AttemptStateFailed || s == AttemptStateKilled
}

// yarn maps an attempt state to what clients see
// (RMServerUtils.createApplicationAttemptState).
func (s AttemptState) yarn() yarnpb.YarnApplicationAttemptStateProto {
	switch s {
	case AttemptStateNew:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_NEW
	case AttemptStateSubmitted:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_SUBMITTED
	case AttemptStateScheduled:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_SCHEDULED
	case AttemptStateAllocatedSaving, AttemptStateLaunchedUnmanagedSaving:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_ALLOCATED_SAVING
	case AttemptStateAllocated:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_ALLOCATED
	case AttemptStateLaunched:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_LAUNCHED
	case AttemptStateRunning:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_RUNNING
	case AttemptStateFinishing:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_FINISHING
	case AttemptStateFinished:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_FINISHED
	case AttemptStateFailed:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_FAILED
	case AttemptStateKilled:
		return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_KILLED
	}
	return yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_NEW
}

// ContainerState is the RM's state of a container (YARN's RMContainerState).
// Clients see only RUNNING or COMPLETE (see Container.Report).
type ContainerState uint8

// Container states. The zero value is no state.
const (
	ContainerStateNew ContainerState = iota + 1
	ContainerStateReserved
	ContainerStateAllocated
	ContainerStateAcquired
	ContainerStateRunning
	ContainerStateCompleted
	ContainerStateExpired
	ContainerStateReleased
	ContainerStateKilled
)

// String returns YARN's name of the state, e.g. "ACQUIRED".
func (s ContainerState) String() string {
	switch s {
	case ContainerStateNew:
		return "NEW"
	case ContainerStateReserved:
		return "RESERVED"
	case ContainerStateAllocated:
		return "ALLOCATED"
	case ContainerStateAcquired:
		return "ACQUIRED"
	case ContainerStateRunning:
		return "RUNNING"
	case ContainerStateCompleted:
		return "COMPLETED"
	case ContainerStateExpired:
		return "EXPIRED"
	case ContainerStateReleased:
		return "RELEASED"
	case ContainerStateKilled:
		return "KILLED"
	}
	return "NONE"
}

// Final reports whether the container has ended.
func (s ContainerState) Final() bool {
	switch s {
	case ContainerStateCompleted, ContainerStateExpired, ContainerStateReleased, ContainerStateKilled:
		return true
	}
	return false
}

// live reports whether the container holds resources on a node: the
// scheduler's "live containers".
func (s ContainerState) live() bool {
	return s == ContainerStateAllocated || s == ContainerStateAcquired || s == ContainerStateRunning
}

// Container exit statuses the RM itself assigns (YARN's ContainerExitStatus).
const (
	ExitSuccess                  int32 = 0
	ExitInvalid                  int32 = -1000
	ExitAborted                  int32 = -100
	ExitDisksFailed              int32 = -101
	ExitPreempted                int32 = -102
	ExitKilledExceededVMem       int32 = -103
	ExitKilledExceededPMem       int32 = -104
	ExitKilledByAppMaster        int32 = -105
	ExitKilledByResourceManager  int32 = -106
	ExitKilledAfterAppCompletion int32 = -107
)

// Diagnostics the scheduler gives containers it ends itself
// (SchedulerUtils); AMs and users read them in completed-container statuses.
const (
	DiagReleasedContainer    = "Container released by application"
	DiagLostContainer        = "Container released on a *lost* node"
	DiagPreemptedContainer   = "Container preempted by scheduler"
	DiagCompletedApplication = "Container of a completed application"
	DiagExpiredContainer     = "Container expired since it was unused"
)
