package apps

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Diagnostics an application shows, word for word as YARN writes them.
const (
	// DiagLifetimeExceeded is the diagnostics of an application killed by
	// its lifetime timer (RMAppLifetimeMonitor).
	DiagLifetimeExceeded = "Application is killed by ResourceManager as it has exceeded the lifetime period."
)

// Limits and defaults from YarnConfiguration.
const (
	defaultMaxAppAttempts = 2  // yarn.resourcemanager.am.max-attempts
	maxAppTypeLength      = 20 // YarnConfiguration.APPLICATION_TYPE_LENGTH
	defaultAppType        = "YARN"
	anyResource           = "*" // ResourceRequest.ANY
	labelNotSet           = "<Not set>"
	labelDefaultPartition = "<DEFAULT_PARTITION>"
)

// Config holds the RM settings an application needs. The same value is
// passed again when an application is rebuilt after a restart.
type Config struct {
	// WebAppURL is the RM's web address with scheme, e.g.
	// "http://rm.example:8088". Failed and killed attempts point their
	// tracking URL at WebAppURL/cluster/app/<id>.
	WebAppURL string
	// ProxyURL is the web proxy's address with scheme; empty means
	// WebAppURL (the proxy runs inside the RM, YARN's default). Tracking
	// URLs of running applications are ProxyURL/proxy/<id>/.
	ProxyURL string
	// MaxAppAttempts is yarn.resourcemanager.am.max-attempts, the cluster
	// limit on attempts; zero means YARN's default, 2.
	MaxAppAttempts int32
}

// Submission is a new application as the client service admitted it.
type Submission struct {
	ID   ApplicationID
	User string
	// Queue is the queue the application was placed in, as reports name
	// it (e.g. "root.default"); empty means the queue of Context.
	Queue string
	// Context is the client's submission; it is copied and kept verbatim.
	Context    *yarnpb.ApplicationSubmissionContextProto
	SubmitTime time.Time
	// AMRequests are the AM asks after the scheduler's normalisation; nil
	// derives them from Context as RMAppManager does.
	AMRequests []*yarnpb.ResourceRequestProto
}

// Application is the RM's record of one application, its attempts and their
// containers, with YARN's state machines (RMAppImpl, RMAppAttemptImpl,
// RMContainerImpl) behind one Handle. It does no I/O and reads no clock:
// Handle returns the effects the caller must carry out. It is not safe for
// concurrent use; the caller serialises calls per application.
type Application struct {
	cfg Config

	id         ApplicationID
	user       string
	queue      string
	name       string
	appType    string
	tags       []string
	priority   int32
	ctx        *yarnpb.ApplicationSubmissionContextProto
	amRequests []*yarnpb.ResourceRequestProto
	acls       map[yarnpb.ApplicationAccessTypeProto]string

	unmanaged      bool
	keepContainers bool
	maxAttempts    int32
	validity       time.Duration // attempt failures validity interval; 0: forever
	lifetime       time.Duration // LIFETIME asked for in the submission; 0: none

	submitTime, startTime, launchTime time.Time
	finishTime, storedFinishTime      time.Time
	expiry                            time.Time // lifetime expiry; zero: unlimited
	timerArmed                        bool

	state             AppState
	beforeFinalSaving AppState
	beforeKilling     AppState
	diagnostics       string
	pending           appPending
	recoveredFinal    AppState
	addedToScheduler  bool
	beyondThreshold   bool

	attempts           []*Attempt
	nextAttempt        int32
	firstStoredAttempt int32

	containers map[ContainerID]*Container
	order      []ContainerID // allocation order, for reports
	usage      Usage         // of ended containers and of recovered attempts
	// live and holdings are what the containers hold (Held), kept as they
	// change: every live container's, and per holding attempt its live
	// containers' and reservations'.
	live     Holding
	holdings map[AttemptID]*[2]Holding
	// labelled are holdings' part in each labelled partition.
	labelled map[holdKey]*[2]Holding

	fx []Effect // effects of the Handle call in progress

	// changes counts Handle calls, through which alone an application
	// changes; reports are Report's, without access and with, each valid
	// while its at is changes.
	changes uint64
	reports [2]*cachedReport
}

type appAction uint8

const (
	// appActEnd appends the diagnostics and ends in the target state.
	appActEnd appAction = iota + 1
	// appActUnregistered moves to FINISHING (AttemptUnregisteredTransition).
	appActUnregistered
	// appActAttemptFinished ends FINISHED after the AM exited while the
	// unregistration was being saved (AppFinishedFinalStateSavedTransition).
	appActAttemptFinished
)

// appPending remembers, while the final state is being saved, what to do
// once it is.
type appPending struct {
	action appAction
	target AppState
	diag   string
}

// NewApplication returns an application in state NEW. It checks the AM
// resource request as RMAppManager does; errors wrap
// ErrInvalidResourceRequest. Nothing is stored until Handle(Start).
func NewApplication(cfg Config, s Submission) (*Application, error) {
	if s.Context == nil {
		return nil, errors.New("new application: no submission context")
	}
	ctx := proto.Clone(s.Context).(*yarnpb.ApplicationSubmissionContextProto)
	if ctx.ApplicationId == nil {
		ctx.ApplicationId = s.ID.Proto()
	} else if id, _ := yarnid.ApplicationIDFromProto(ctx.ApplicationId); id != s.ID {
		return nil, fmt.Errorf("new application %s: submission context is for %s", s.ID, id)
	}
	if cfg.MaxAppAttempts <= 0 {
		cfg.MaxAppAttempts = defaultMaxAppAttempts
	}
	a := &Application{
		cfg:                cfg,
		id:                 s.ID,
		user:               s.User,
		queue:              s.Queue,
		name:               ctx.GetApplicationName(),
		appType:            ctx.GetApplicationType(),
		tags:               normalizeTags(ctx.GetApplicationTags()),
		priority:           ctx.GetPriority().GetPriority(),
		ctx:                ctx,
		unmanaged:          ctx.GetUnmanagedAm(),
		keepContainers:     ctx.GetKeepContainersAcrossApplicationAttempts(),
		maxAttempts:        ctx.GetMaxAppAttempts(),
		submitTime:         s.SubmitTime,
		startTime:          s.SubmitTime,
		state:              AppStateNew,
		nextAttempt:        1,
		firstStoredAttempt: 1,
		containers:         map[ContainerID]*Container{},
	}
	if a.queue == "" {
		a.queue = ctx.GetQueue()
	}
	if len(a.appType) > maxAppTypeLength {
		a.appType = a.appType[:maxAppTypeLength]
	}
	if a.maxAttempts <= 0 || a.maxAttempts > cfg.MaxAppAttempts {
		a.maxAttempts = cfg.MaxAppAttempts
	}
	if v := ctx.GetAttemptFailuresValidityInterval(); v > 0 {
		a.validity = time.Duration(v) * time.Millisecond
	}
	for _, t := range ctx.GetApplicationTimeouts() {
		if t.GetApplicationTimeoutType() == yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME && t.GetTimeout() > 0 {
			a.lifetime = time.Duration(t.GetTimeout()) * time.Second
		}
	}
	a.acls = map[yarnpb.ApplicationAccessTypeProto]string{}
	for _, acl := range ctx.GetAmContainerSpec().GetApplication_ACLs() {
		a.acls[acl.GetAccessType()] = acl.GetAcl()
	}
	if !a.unmanaged {
		reqs, err := amRequests(ctx, s.AMRequests)
		if err != nil {
			return nil, fmt.Errorf("new application %s: %w", s.ID, err)
		}
		a.amRequests = reqs
	}
	return a, nil
}

// amRequests derives the AM asks (RMAppManager.validateAndCreateResourceRequest):
// exactly one ANY request, first; every request one GUARANTEED container of
// the ANY capability at the AM priority 0; the ANY request carries the
// application's node label when it names none.
func amRequests(ctx *yarnpb.ApplicationSubmissionContextProto, given []*yarnpb.ResourceRequestProto) ([]*yarnpb.ResourceRequestProto, error) {
	src := given
	if len(src) == 0 {
		src = ctx.GetAmContainerResourceRequest()
	}
	var reqs []*yarnpb.ResourceRequestProto
	for _, r := range src {
		reqs = append(reqs, proto.Clone(r).(*yarnpb.ResourceRequestProto))
	}
	if len(reqs) == 0 {
		if ctx.Resource == nil {
			return nil, fmt.Errorf("%w: no resources requested", ErrInvalidResourceRequest)
		}
		reqs = []*yarnpb.ResourceRequestProto{{
			ResourceName:  proto.String(anyResource),
			Capability:    proto.Clone(ctx.Resource).(*yarnpb.ResourceProto),
			RelaxLocality: proto.Bool(true),
		}}
	}
	anyAt := -1
	for i, r := range reqs {
		if r.GetResourceName() != anyResource {
			continue
		}
		if anyAt >= 0 {
			return nil, fmt.Errorf("%w: only one resource request with %s is allowed", ErrInvalidResourceRequest, anyResource)
		}
		anyAt = i
	}
	if anyAt < 0 {
		return nil, fmt.Errorf("%w: no resource request specified with %s", ErrInvalidResourceRequest, anyResource)
	}
	anyReq := reqs[anyAt]
	if anyReq.NodeLabelExpression == nil {
		// The scheduler's normalisation turns "no label" into the default
		// partition, which reports show as <DEFAULT_PARTITION>.
		anyReq.NodeLabelExpression = proto.String(ctx.GetNodeLabelExpression())
	}
	for _, r := range reqs {
		r.Capability = proto.Clone(anyReq.GetCapability()).(*yarnpb.ResourceProto)
		r.ExecutionTypeRequest = &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum()}
		r.NumContainers = proto.Int32(1)
		r.Priority = &yarnpb.PriorityProto{Priority: proto.Int32(0)}
	}
	reqs = append(reqs[:anyAt], reqs[anyAt+1:]...)
	return append([]*yarnpb.ResourceRequestProto{anyReq}, reqs...), nil
}

// normalizeTags stores tags as YARN does: lower case, each once, sorted.
func normalizeTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		out = append(out, strings.ToLower(t))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// --- reading ---

// ID returns the application id.
func (a *Application) ID() ApplicationID { return a.id }

// User returns the submitting user.
func (a *Application) User() string { return a.user }

// Queue returns the queue the application runs in.
func (a *Application) Queue() string { return a.queue }

// Name returns the application name ("N/A" when the client gave none).
func (a *Application) Name() string { return a.name }

// Type returns the application type ("YARN" by default, at most 20 bytes).
func (a *Application) Type() string { return a.appType }

// Tags returns the tags, lower case and sorted.
func (a *Application) Tags() []string { return slices.Clone(a.tags) }

// Priority returns the application priority.
func (a *Application) Priority() int32 { return a.priority }

// State returns the RM state.
func (a *Application) State() AppState { return a.state }

// ClientState returns the state clients see: FINAL_SAVING and KILLING show
// the state before them, FINISHING shows FINISHED.
func (a *Application) ClientState() yarnpb.YarnApplicationStateProto {
	s := a.state
	if s == AppStateFinalSaving {
		s = a.beforeFinalSaving
	}
	if s == AppStateKilling {
		s = a.beforeKilling
	}
	return s.yarn()
}

// FinalStatus returns the final status clients see: what the AM
// unregistered with, else UNDEFINED until the application ends, then FAILED
// or KILLED from the state (an AM that never unregistered failed).
func (a *Application) FinalStatus() yarnpb.FinalApplicationStatusProto {
	if t := a.CurrentAttempt(); t != nil && t.hasFinalStatus {
		return t.finalStatus
	}
	switch a.state {
	case AppStateFinishing, AppStateFinished, AppStateFailed:
		return yarnpb.FinalApplicationStatusProto_APP_FAILED
	case AppStateKilled:
		return yarnpb.FinalApplicationStatusProto_APP_KILLED
	}
	return yarnpb.FinalApplicationStatusProto_APP_UNDEFINED
}

// SubmitTime is when the client submitted the application.
func (a *Application) SubmitTime() time.Time { return a.submitTime }

// StartTime is when the RM took the application in (reports' startTime).
func (a *Application) StartTime() time.Time { return a.startTime }

// LaunchTime is when the latest AM container was launched; zero before.
func (a *Application) LaunchTime() time.Time { return a.launchTime }

// FinishTime is when the application ended; zero before.
func (a *Application) FinishTime() time.Time { return a.finishTime }

// Diagnostics returns the application's diagnostics, or while it has none,
// those of its current attempt.
func (a *Application) Diagnostics() string {
	if a.diagnostics == "" {
		if t := a.CurrentAttempt(); t != nil {
			return t.Diagnostics()
		}
	}
	return a.diagnostics
}

// Progress returns the current attempt's progress, 0..1.
func (a *Application) Progress() float32 {
	if t := a.CurrentAttempt(); t != nil {
		return t.progress
	}
	return 0
}

// Unmanaged reports whether the AM runs outside the cluster.
func (a *Application) Unmanaged() bool { return a.unmanaged }

// KeepContainersAcrossAttempts reports whether running containers survive
// an AM failure (work-preserving AM restart).
func (a *Application) KeepContainersAcrossAttempts() bool { return a.keepContainers }

// MaxAttempts returns the effective attempt limit: the submission's, within
// the cluster limit.
func (a *Application) MaxAttempts() int32 { return a.maxAttempts }

// AttemptFailuresValidityInterval returns how long a failure counts against
// MaxAttempts; zero means forever.
func (a *Application) AttemptFailuresValidityInterval() time.Duration { return a.validity }

// LifetimeExpiry returns when the lifetime timer kills the application;
// zero means never.
func (a *Application) LifetimeExpiry() time.Time { return a.expiry }

// AMRequests returns copies of the AM asks; nil for an unmanaged AM.
func (a *Application) AMRequests() []*yarnpb.ResourceRequestProto { return cloneRequests(a.amRequests) }

// ACL returns the application ACL of one access type, as the submission gave
// it; ok is false when it gave none (YARN then allows only the owner and
// admins).
func (a *Application) ACL(t yarnpb.ApplicationAccessTypeProto) (acl string, ok bool) {
	acl, ok = a.acls[t]
	return acl, ok
}

// Submission returns a copy of the submission context as stored.
func (a *Application) Submission() *yarnpb.ApplicationSubmissionContextProto {
	return proto.Clone(a.ctx).(*yarnpb.ApplicationSubmissionContextProto)
}

// NodeLabelExpression returns the submission's node label expression as
// given, "" when none: what the scheduler places the application's
// containers by. Unlike Submission it copies nothing.
func (a *Application) NodeLabelExpression() string { return a.ctx.GetNodeLabelExpression() }

// LogAggregationContext returns a copy of the submission's
// LogAggregationContext, nil when it gave none, without copying the rest of
// the submission (an AM's every heartbeat reads it).
func (a *Application) LogAggregationContext() *yarnpb.LogAggregationContextProto {
	if a.ctx.GetLogAggregationContext() == nil {
		return nil
	}
	return proto.CloneOf(a.ctx.GetLogAggregationContext())
}

// AppNodeLabelExpression returns the application's node label expression as
// reports show it: "<Not set>" when none was given, "<DEFAULT_PARTITION>"
// for a blank one.
func (a *Application) AppNodeLabelExpression() string {
	if a.ctx.NodeLabelExpression == nil {
		return labelNotSet
	}
	return labelOrDefault(a.ctx.GetNodeLabelExpression())
}

// AMNodeLabelExpression returns the AM's node label expression as reports
// show it; ok is false for an unmanaged AM, which has none.
func (a *Application) AMNodeLabelExpression() (label string, ok bool) {
	if a.unmanaged {
		return "", false
	}
	if len(a.amRequests) == 0 || a.amRequests[0].NodeLabelExpression == nil {
		return labelNotSet, true
	}
	return labelOrDefault(a.amRequests[0].GetNodeLabelExpression()), true
}

func labelOrDefault(l string) string {
	if strings.TrimSpace(l) == "" {
		return labelDefaultPartition
	}
	return l
}

// Attempts returns the attempts, oldest first.
func (a *Application) Attempts() []*Attempt { return slices.Clone(a.attempts) }

// CurrentAttempt returns the latest attempt, or nil before the first.
func (a *Application) CurrentAttempt() *Attempt {
	if len(a.attempts) == 0 {
		return nil
	}
	return a.attempts[len(a.attempts)-1]
}

// Attempt returns one attempt, or nil.
func (a *Application) Attempt(id AttemptID) *Attempt {
	for _, t := range a.attempts {
		if t.id == id {
			return t
		}
	}
	return nil
}

// Containers returns the containers of all attempts, in allocation order.
func (a *Application) Containers() []*Container {
	out := make([]*Container, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, a.containers[id])
	}
	return out
}

// Container returns one container, or nil.
func (a *Application) Container(id ContainerID) *Container { return a.containers[id] }

// Usage returns the aggregate resource use up to now, counting containers
// that still run up to now.
func (a *Application) Usage(now time.Time) Usage {
	u := a.usage
	for _, c := range a.containers {
		if c.state.live() {
			u.add(c.Usage(now))
		}
	}
	return u
}

// Record returns what the RM stores of the application now, with no final
// state.
func (a *Application) Record() AppRecord { return a.record(0, a.diagnostics) }

func (a *Application) record(state AppState, diag string) AppRecord {
	return AppRecord{
		ID:             a.id,
		User:           a.user,
		Queue:          a.queue,
		SubmitTime:     a.submitTime,
		StartTime:      a.startTime,
		LaunchTime:     a.launchTime,
		Context:        a.Submission(),
		AMRequests:     a.AMRequests(),
		State:          state,
		Diagnostics:    diag,
		FinishTime:     a.storedFinishTime,
		LifetimeExpiry: a.expiry,
	}
}

func (a *Application) proxyURL() string {
	base := a.cfg.ProxyURL
	if base == "" {
		base = a.cfg.WebAppURL
	}
	return strings.TrimSuffix(base, "/") + "/proxy/" + a.id.String() + "/"
}

func (a *Application) rmAppPage() string {
	return strings.TrimSuffix(a.cfg.WebAppURL, "/") + "/cluster/app/" + a.id.String()
}

// UserKillDiagnostics is the diagnostics YARN gives an application a user
// killed with forceKillApplication (ClientRMService); message is the
// optional text the user sent.
func UserKillDiagnostics(id ApplicationID, user, remoteAddr, message string) string {
	d := "Application " + id.String() + " was killed by user " + user + " at " + remoteAddr
	if message != "" {
		d += " with diagnostic message: " + message
	}
	return d
}

func cloneRequests(in []*yarnpb.ResourceRequestProto) []*yarnpb.ResourceRequestProto {
	if in == nil {
		return nil
	}
	out := make([]*yarnpb.ResourceRequestProto, len(in))
	for i, r := range in {
		out[i] = proto.Clone(r).(*yarnpb.ResourceRequestProto)
	}
	return out
}

// formatISO8601 formats a time as YARN's Times.formatISO8601
// (yyyy-MM-dd'T'HH:mm:ss.SSSZ), in UTC.
func formatISO8601(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000-0700")
}
