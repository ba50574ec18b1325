package apps

import (
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// AppRecord is what the RM stores of an application (YARN's
// ApplicationStateData): enough to rebuild it with Recover after a restart.
// PersistApp carries it; the caller owns the value it is given.
type AppRecord struct {
	ID         ApplicationID
	User       string
	Queue      string
	SubmitTime time.Time
	StartTime  time.Time
	LaunchTime time.Time
	// Context is the submission, kept verbatim apart from the queue and
	// priority, which follow Move and UpdatePriority.
	Context *yarnpb.ApplicationSubmissionContextProto
	// AMRequests are the AM asks as the application uses them.
	AMRequests []*yarnpb.ResourceRequestProto
	// State is the final state once it is being saved (FINISHED, FAILED or
	// KILLED), else zero.
	State          AppState
	Diagnostics    string
	FinishTime     time.Time
	LifetimeExpiry time.Time // zero: no lifetime
}

// AttemptRecord is what the RM stores of an attempt (YARN's
// ApplicationAttemptStateData).
type AttemptRecord struct {
	ID          AttemptID
	AMContainer *yarnpb.ContainerProto
	StartTime   time.Time
	// State is the final state once it is being saved (FINISHED, FAILED or
	// KILLED), else zero.
	State                 AttemptState
	FinalTrackingURL      string
	Diagnostics           string
	FinalStatus           *yarnpb.FinalApplicationStatusProto // set by the AM's unregister
	AMContainerExitStatus int32
	FinishTime            time.Time
	Usage                 Usage
}

// Usage is aggregate resource use, in YARN's units: MB-seconds and
// vcore-seconds, each container counted from allocation to end.
type Usage struct {
	MemorySeconds          int64
	VcoreSeconds           int64
	PreemptedMemorySeconds int64
	PreemptedVcoreSeconds  int64
}

func (u *Usage) add(v Usage) {
	u.MemorySeconds += v.MemorySeconds
	u.VcoreSeconds += v.VcoreSeconds
	u.PreemptedMemorySeconds += v.PreemptedMemorySeconds
	u.PreemptedVcoreSeconds += v.PreemptedVcoreSeconds
}
