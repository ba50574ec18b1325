package apps

import (
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// notAvailable is what YARN reports for a value it does not have yet.
const notAvailable = "N/A"

// Diagnostics an attempt shows, word for word as RMAppAttemptImpl and the
// scheduler's AMState write them; clients print them while they wait.
const (
	diagAMActivated  = "Application is Activated, waiting for resources to be assigned for AM. "
	diagAMAssigned   = "Scheduler has assigned a container for AM, waiting for AM container to be launched"
	diagAMLaunched   = "AM container is launched, waiting for AM container to Register with RM"
	diagUnexpectedAM = "Unmanaged AM must register after AM attempt reaches LAUNCHED state."
	diagRecovered    = "Attempt recovered after RM restart"
)

// schedulerDateLayout is the "[EEE MMM dd HH:mm:ss Z yyyy]" stamp the
// CapacityScheduler puts before its AM diagnostics.
const schedulerDateLayout = "Mon Jan 02 15:04:05 -0700 2006"

// Attempt is one run of an application's AM (YARN's RMAppAttemptImpl). Its
// transitions are driven through the owning Application's Handle; the
// methods here only read.
type Attempt struct {
	id                AttemptID
	state             AttemptState
	beforeFinalSaving AttemptState
	unmanaged         bool

	host              string
	rpcPort           int32
	originalURL       string
	proxiedURL        string
	diagnostics       string
	launchDiagnostics string // shown while diagnostics is empty, until the AM registers

	amContainer    *yarnpb.ContainerProto
	amExitStatus   int32
	start, finish  time.Time
	finalStatus    yarnpb.FinalApplicationStatusProto
	hasFinalStatus bool
	progress       float32
	usage          Usage // of containers that ended while this was the current attempt

	pending        attemptPending
	recoveredFinal AttemptState
}

// attemptPending remembers, while the final state is being saved, what to do
// once it is (YARN's transitionTodo and targetedFinalState).
type attemptPending struct {
	target AttemptState // FINISHING, FINISHED, FAILED or KILLED
	cause  attemptCause
	// progress is set for YARN's FinalTransition, which moves progress to
	// 1, as opposed to BaseFinalTransition, which leaves it.
	progress bool
}

type causeKind uint8

const (
	causeKill causeKind = iota + 1
	causeFail
	causeLaunchFailed
	causeUnexpectedRegister
	causeUnregister
	causeAMExit
	causeExpire
)

// attemptCause is the event that started the final saving.
type attemptCause struct {
	kind       causeKind
	diag       string
	exit       int32
	unregister AttemptUnregistered
}

func newAttempt(id AttemptID, unmanaged bool, proxyURL string) *Attempt {
	return &Attempt{
		id:           id,
		state:        AttemptStateNew,
		unmanaged:    unmanaged,
		host:         notAvailable,
		rpcPort:      -1,
		originalURL:  notAvailable,
		proxiedURL:   proxyURL,
		amExitStatus: ExitInvalid,
	}
}

// ID returns the attempt's id.
func (t *Attempt) ID() AttemptID { return t.id }

// State returns the RM state.
func (t *Attempt) State() AttemptState { return t.state }

// ClientState returns the state clients see: during FINAL_SAVING the state
// before it.
func (t *Attempt) ClientState() yarnpb.YarnApplicationAttemptStateProto {
	if t.state == AttemptStateFinalSaving {
		return t.beforeFinalSaving.yarn()
	}
	return t.state.yarn()
}

// Host returns the AM's host as it registered, or "N/A".
func (t *Attempt) Host() string { return t.host }

// RPCPort returns the AM's RPC port as it registered, or -1.
func (t *Attempt) RPCPort() int32 { return t.rpcPort }

// TrackingURL is the URL clients follow: the web proxy's page for the
// application (an unmanaged AM's own URL), and the RM's application page
// once the attempt failed or was killed.
func (t *Attempt) TrackingURL() string {
	if t.unmanaged {
		return t.originalURL
	}
	return t.proxiedURL
}

// OriginalTrackingURL is the URL the AM gave, or "N/A".
func (t *Attempt) OriginalTrackingURL() string { return t.originalURL }

// Diagnostics returns what went wrong, or while the AM is not yet up, the
// scheduler's note on what it waits for.
func (t *Attempt) Diagnostics() string {
	if t.diagnostics == "" && t.launchDiagnostics != "" {
		return t.launchDiagnostics
	}
	return t.diagnostics
}

// AMContainer returns a copy of the AM container message, nil before one is
// allocated and for unmanaged AMs.
func (t *Attempt) AMContainer() *yarnpb.ContainerProto {
	if t.amContainer == nil {
		return nil
	}
	return proto.Clone(t.amContainer).(*yarnpb.ContainerProto)
}

// AMContainerExitStatus returns the AM container's exit status once it
// crashed, else ExitInvalid.
func (t *Attempt) AMContainerExitStatus() int32 { return t.amExitStatus }

// StartTime is when the attempt started.
func (t *Attempt) StartTime() time.Time { return t.start }

// FinishTime is when the attempt began to end (its final state was being
// saved); zero before.
func (t *Attempt) FinishTime() time.Time { return t.finish }

// FinalStatus returns the status the AM unregistered with; ok is false
// before it has.
func (t *Attempt) FinalStatus() (status yarnpb.FinalApplicationStatusProto, ok bool) {
	return t.finalStatus, t.hasFinalStatus
}

// Progress returns the AM's last reported progress, 0..1.
func (t *Attempt) Progress() float32 { return t.progress }

// Report builds the attempt report getApplicationAttemptReport returns, as
// RMAppAttemptImpl.createApplicationAttemptReport fills it.
func (t *Attempt) Report() *yarnpb.ApplicationAttemptReportProto {
	r := &yarnpb.ApplicationAttemptReportProto{
		ApplicationAttemptId:        t.id.Proto(),
		Host:                        proto.String(t.host),
		RpcPort:                     proto.Int32(t.rpcPort),
		TrackingUrl:                 proto.String(t.TrackingURL()),
		OriginalTrackingUrl:         proto.String(t.originalURL),
		Diagnostics:                 proto.String(t.Diagnostics()),
		YarnApplicationAttemptState: t.ClientState().Enum(),
		StartTime:                   proto.Int64(millis(t.start)),
		FinishTime:                  proto.Int64(millis(t.finish)),
	}
	if t.amContainer != nil {
		r.AmContainerId = proto.Clone(t.amContainer.GetId()).(*yarnpb.ContainerIdProto)
	}
	return r
}

// Record returns what the RM stores of the attempt now, with no final state.
func (t *Attempt) Record() AttemptRecord {
	r := AttemptRecord{
		ID:                    t.id,
		AMContainer:           t.AMContainer(),
		StartTime:             t.start,
		Diagnostics:           t.diagnostics,
		AMContainerExitStatus: t.amExitStatus,
		FinishTime:            t.finish,
		Usage:                 t.usage,
	}
	if t.hasFinalStatus {
		r.FinalStatus = t.finalStatus.Enum()
	}
	if t.originalURL != notAvailable {
		r.FinalTrackingURL = t.originalURL
	}
	return r
}

// amContainerID reports the AM container's id, if there is one.
func (t *Attempt) amContainerID() (ContainerID, bool) {
	if t.amContainer == nil {
		return ContainerID{}, false
	}
	id, err := containerIDOf(t.amContainer)
	return id, err == nil
}

// takesContainers reports whether the scheduler allocates for the attempt.
func (t *Attempt) takesContainers() bool {
	switch t.state {
	case AttemptStateScheduled, AttemptStateAllocatedSaving, AttemptStateAllocated, AttemptStateLaunched, AttemptStateRunning:
		return true
	}
	return false
}

// inScheduler reports whether the scheduler knows the attempt, and so can
// report its live resource use.
func (t *Attempt) inScheduler() bool {
	switch t.state {
	case AttemptStateScheduled, AttemptStateAllocatedSaving, AttemptStateAllocated, AttemptStateLaunchedUnmanagedSaving,
		AttemptStateLaunched, AttemptStateRunning, AttemptStateFinalSaving, AttemptStateFinishing:
		return true
	}
	return false
}

func (t *Attempt) appendDiagnostics(s string) { t.diagnostics += s }

// invalidateAMAddress forgets where a failed or killed AM was.
func (t *Attempt) invalidateAMAddress() {
	t.host = notAvailable
	t.rpcPort = -1
}

// updateOnUnregister takes what the AM said in finishApplicationMaster,
// once that is saved (YARN's updateInfoOnAMUnregister).
func (t *Attempt) updateOnUnregister(e AttemptUnregistered) {
	t.progress = 1
	t.appendDiagnostics(e.Diagnostics)
	t.originalURL = sanitizeURL(e.TrackingURL)
	t.finalStatus = e.FinalStatus
	t.hasFinalStatus = true
}

func (t *Attempt) applyRecord(r AttemptRecord) {
	// As in YARN, with no separator: clients see exactly this text.
	t.diagnostics = diagRecovered + r.Diagnostics
	t.amExitStatus = r.AMContainerExitStatus
	if r.AMContainer != nil {
		t.amContainer = proto.Clone(r.AMContainer).(*yarnpb.ContainerProto)
	}
	t.recoveredFinal = r.State
	if r.FinalTrackingURL != "" {
		t.originalURL = r.FinalTrackingURL
		if r.State == AttemptStateFailed || r.State == AttemptStateKilled {
			t.proxiedURL = r.FinalTrackingURL
		}
	}
	if r.FinalStatus != nil {
		t.finalStatus = *r.FinalStatus
		t.hasFinalStatus = true
	}
	t.start = r.StartTime
	t.finish = r.FinishTime
	t.usage = r.Usage
}

func sanitizeURL(u string) string {
	if strings.TrimSpace(u) == "" {
		return notAvailable
	}
	return u
}

// schedulerNote stamps a scheduler diagnostic as the CapacityScheduler does.
func schedulerNote(now time.Time, msg string) string {
	return "[" + now.UTC().Format(schedulerDateLayout) + "] " + msg
}

// Changes reports whether Handle(u) would change the application: not when
// its attempt runs at that progress already, as between most of an AM's
// heartbeats. The AM service asks, to skip the event's work then.
func (u AttemptStatusUpdate) Changes(a *Application) bool {
	t := a.Attempt(u.Attempt)
	return t == nil || t.state != AttemptStateRunning || t.progress != clampProgress(u.Progress)
}

// clampProgress keeps an AM's progress within 0..1, as the AM service does.
func clampProgress(p float32) float32 {
	switch {
	case p != p || p <= 0: // NaN, -Inf and negatives
		return 0
	case p >= 1: // includes +Inf
		return 1
	}
	return p
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
