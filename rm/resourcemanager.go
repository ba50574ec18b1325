package rm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/tokens"
	"github.com/knitdev/knit/scheduling"
)

// StoredApp is one application as the AppStore lists it: the indexed fields
// and the opaque record the ResourceManager wrote.
type StoredApp struct {
	ID         string
	State      string
	User       string
	Queue      string
	FinishTime time.Time
	Data       []byte
}

// AppStore keeps application records durably (the RM state store). The
// ResourceManager writes a record before it acknowledges what the record
// says, so an implementation returns only once the write is durable. It
// retries what is worth retrying itself (an API server away or
// overloaded), for as long as ctx lasts: the ResourceManager takes an
// error as final for that write.
type AppStore interface {
	// Put creates or replaces the record of application id. state is the
	// RM state the record brings back; finish is zero while it runs. A
	// write refused because this RM no longer leads wraps ErrFenced.
	Put(ctx context.Context, id, state, user, queue string, finish time.Time, data []byte) error
	// Delete removes the record; deleting an absent record is no error.
	Delete(ctx context.Context, id string) error
	// List returns every stored record, in any order.
	List(ctx context.Context) ([]StoredApp, error)
}

// ErrFenced is what an AppStore's writes wrap once this RM may no longer
// write: another leads, or may by now. Such a write never succeeds again,
// so the RM does not retry it, and a client's call that needed it is told
// to go to the active RM (StandbyException).
var ErrFenced = errors.New("rm: store refuses the writes of a ResourceManager that no longer leads")

// IDSource hands out application ids that never repeat, across restarts
// and leaders: the cluster timestamp of the RM that issued them and a
// sequence number.
type IDSource interface {
	Next(ctx context.Context) (clusterTimestamp int64, seq int32, err error)
}

// NodeInfo is one node as YARN's NodeReport shows it. The Kubernetes-facing
// package rgs/nodes builds it; the RM only lists nodes through NodeLister.
type NodeInfo = nodes.Info

// NodeCensus is the cluster's nodes counted by state, with the capability
// and use of the running ones.
type NodeCensus = nodes.Census

// NodeLister lists the cluster's nodes (Kubernetes nodes, in Knit).
type NodeLister interface {
	Nodes(ctx context.Context) ([]NodeInfo, error)
	// Census counts what Nodes lists without listing it: the cluster
	// metrics ask for it on every call, and it must not cost more as the
	// cluster grows (nodes.CensusOf counts a list).
	Census(ctx context.Context) (NodeCensus, error)
}

// encodedNodeReports is a NodeLister that keeps each node's report encoded
// (nodes.Lister): getClusterNodes sends those encodings as they are.
type encodedNodeReports interface {
	// EncodedReports is the answer's reports of the nodes in states
	// (every node when none), encoded as field's elements, in parts to be
	// sent one after the other; shared, not to be modified.
	EncodedReports(field protowire.Number, states []yarnpb.NodeStateProto) ([][]byte, error)
}

// ContainerLauncher starts a container on its pod (RKS); the RM launches AM
// containers through it, as YARN's ApplicationMasterLauncher calls the
// NodeManager.
type ContainerLauncher interface {
	Launch(ctx context.Context, req rks.LaunchRequest) error
}

// ContainerSignaler delivers signalToContainer to a running container.
type ContainerSignaler interface {
	SignalContainer(ctx context.Context, id apps.ContainerID, node *yarnpb.NodeIdProto, cmd yarnpb.SignalContainerCommandProto) error
}

// Config holds what a ResourceManager needs.
type Config struct {
	Settings conf.RMSettings
	// Queues is the queue hierarchy at start; refreshQueues replaces it
	// (read it through ResourceManager.queueTree).
	Queues *queues.Tree
	// Tokens may be nil: delegation-token calls are then refused as a
	// secure YARN RM refuses them to a caller without Kerberos.
	Tokens *tokens.Manager
	Store  AppStore
	IDs    IDSource
	Nodes  NodeLister
	// Scheduler places AM and task containers (RGS); nil leaves every
	// application waiting in ACCEPTED.
	Scheduler Scheduler
	// Launcher nil drops the AM launches (logged once): AMs are placed but
	// never started.
	Launcher ContainerLauncher
	// Signaler nil accepts signalToContainer and drops the signal (logged).
	Signaler ContainerSignaler
	// LiveAttempts is the set of live attempts the RM keeps for the token
	// manager (tokens.Config.AttemptValid); nil means one of its own.
	LiveAttempts *LiveAttempts
	// ContainerReports brings RKS's reports of started and updated
	// containers to Run; nil means none come.
	ContainerReports *ContainerReports
	// ResourceTypes answers getResourceTypeInfo; nil means the defaults.
	ResourceTypes []ResourceType
	// MaxApplicationPriority is yarn.cluster.max-application-priority
	// (YARN's default 0): priorities above it are lowered to it. Zero
	// means Settings.MaxApplicationPriority; refreshClusterMaxPriority
	// replaces it.
	MaxApplicationPriority int32
	// WebAppURL is the RM web address with scheme; empty means
	// "http://" + Settings.WebappAddress.
	WebAppURL string
	// Tracer, if set, hears every application's events and containers
	// (rm/apptrace); nil traces nothing.
	Tracer AppTracer
	// Clock nil means time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// AppTracer hears each event an application took, under its lock, and each
// container RGS handed over for it. It must not block.
type AppTracer interface {
	Event(ctx context.Context, app *apps.Application, ev apps.Event)
	Allocated(ctx context.Context, app *apps.Application, a scheduling.Allocation)
}

// ResourceManager holds every application and serves
// ApplicationClientProtocol. It is safe for concurrent use.
type ResourceManager struct {
	cfg     Config
	appsCfg apps.Config
	log     *slog.Logger
	now     func() time.Time

	// clusterMetrics is the last getClusterMetrics answer encoded
	// (encodedClusterMetrics).
	clusterMetrics atomic.Pointer[keptClusterMetrics]

	// admitMu serialises queue admission with the insertion of the new
	// application, so two submissions cannot both take a queue's last slot.
	admitMu sync.Mutex

	// mu guards the map, the retention list and the entries' index fields.
	// Lock order: an entry's mu before rm.mu, never the other way round.
	mu        sync.RWMutex
	apps      map[apps.ApplicationID]*entry
	completed []apps.ApplicationID // in completion order, oldest first
	// active counts the accepted, unfinished entries for admission, kept as
	// entries come, finish, move and go so a submission does not walk them all.
	active appCounts
	// usage adds the entries up per queue and user for the queue reports,
	// the headroom and the metrics (queueusage.go).
	usage queueUsage

	am           *amService
	launcherOnce sync.Once
	// life bounds the work the RM starts on its own (AM launches); Close
	// ends it and waits for launches, counted in launches while closed is
	// false.
	life     context.Context
	end      context.CancelFunc
	launchMu sync.Mutex
	closed   bool
	launches sync.WaitGroup

	// live is what the admin protocol replaces while the RM runs (the
	// queue tree, the cluster's maximum priority); see refresh.go.
	live liveConfig
}

// entry is one application with its two locks. turn serialises the
// application's events and the carrying out of their effects, in order,
// and is held through the effects' I/O (the store's writes). mu guards the
// application and the fields below and is never held across I/O: reports,
// the web and the metrics read through it while a write is in flight. Lock
// order: turn, then mu, then ResourceManager.mu.
type entry struct {
	turn sync.Mutex
	mu   sync.Mutex
	app  *apps.Application
	// attempts are the stored attempt records, written with the app record.
	attempts map[apps.AttemptID]apps.AttemptRecord
	record   apps.AppRecord
	// rejection is the queue's refusal the scheduler answers the
	// AddToScheduler effect with; empty means accept.
	rejection string
	expiry    time.Time // lifetime timer; zero when disarmed
	// amrmToken is an unmanaged AM's token, shown to its owner in reports.
	amrmToken *commonpb.TokenProto

	// Guarded by ResourceManager.mu, read by AppCounts.
	queue string
	user  string
	done  bool

	// use is what the entry counts for in rm.usage while indexed; both
	// are guarded by rm.usage.mu.
	use     appUse
	indexed bool
}

// New returns a ResourceManager with no applications; call Recover before
// serving.
func New(cfg Config) (*ResourceManager, error) {
	if cfg.Queues == nil || cfg.Store == nil || cfg.IDs == nil {
		return nil, errors.New("rm: Queues, Store and IDs are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LiveAttempts == nil {
		cfg.LiveAttempts = NewLiveAttempts()
	}
	web := cfg.WebAppURL
	if web == "" {
		web = "http://" + cfg.Settings.WebappAddress
	}
	rm := &ResourceManager{
		cfg:     cfg,
		appsCfg: apps.Config{WebAppURL: web, MaxAppAttempts: int32(cfg.Settings.AMMaxAttempts)},
		log:     cfg.Logger,
		now:     cfg.Clock,
		apps:    map[apps.ApplicationID]*entry{},
	}
	rm.life, rm.end = context.WithCancel(context.Background())
	if err := rm.live.init(cfg); err != nil {
		return nil, fmt.Errorf("rm: %w", err)
	}
	rm.am = newAMService(rm, cfg.Scheduler)
	// As refreshQueues logs them for a new hierarchy.
	for _, w := range cfg.Queues.Warnings() {
		rm.log.Warn("queue configuration", "warning", w)
	}
	return rm, nil
}

// storedRecord is the Data of a stored application: its record and its
// attempts, protos as their wire bytes so the encoding follows the protos.
type storedRecord struct {
	ID             apps.ApplicationID
	User, Queue    string
	SubmitTime     time.Time
	StartTime      time.Time
	LaunchTime     time.Time
	Context        []byte
	AMRequests     [][]byte
	State          apps.AppState
	Diagnostics    string
	FinishTime     time.Time
	LifetimeExpiry time.Time
	Attempts       []storedAttempt
}

type storedAttempt struct {
	ID                    apps.AttemptID
	AMContainer           []byte
	StartTime             time.Time
	State                 apps.AttemptState
	FinalTrackingURL      string
	Diagnostics           string
	FinalStatus           *yarnpb.FinalApplicationStatusProto
	AMContainerExitStatus int32
	FinishTime            time.Time
	Usage                 apps.Usage
}

func encodeRecord(r apps.AppRecord, attempts map[apps.AttemptID]apps.AttemptRecord) ([]byte, error) {
	s := storedRecord{
		ID: r.ID, User: r.User, Queue: r.Queue, SubmitTime: r.SubmitTime, StartTime: r.StartTime,
		LaunchTime: r.LaunchTime, State: r.State, Diagnostics: r.Diagnostics, FinishTime: r.FinishTime,
		LifetimeExpiry: r.LifetimeExpiry,
	}
	var err error
	if s.Context, err = proto.Marshal(r.Context); err != nil {
		return nil, fmt.Errorf("encode submission of %s: %w", r.ID, err)
	}
	for _, q := range r.AMRequests {
		b, err := proto.Marshal(q)
		if err != nil {
			return nil, fmt.Errorf("encode AM request of %s: %w", r.ID, err)
		}
		s.AMRequests = append(s.AMRequests, b)
	}
	for _, a := range attempts {
		sa := storedAttempt{
			ID: a.ID, StartTime: a.StartTime, State: a.State, FinalTrackingURL: a.FinalTrackingURL,
			Diagnostics: a.Diagnostics, FinalStatus: a.FinalStatus, AMContainerExitStatus: a.AMContainerExitStatus,
			FinishTime: a.FinishTime, Usage: a.Usage,
		}
		if a.AMContainer != nil {
			if sa.AMContainer, err = proto.Marshal(a.AMContainer); err != nil {
				return nil, fmt.Errorf("encode AM container of %s: %w", a.ID, err)
			}
		}
		s.Attempts = append(s.Attempts, sa)
	}
	slices.SortFunc(s.Attempts, func(x, y storedAttempt) int { return cmp.Compare(x.ID.ID, y.ID.ID) })
	return json.Marshal(s)
}

func decodeRecord(b []byte) (apps.AppRecord, []apps.AttemptRecord, error) {
	var s storedRecord
	if err := json.Unmarshal(b, &s); err != nil {
		return apps.AppRecord{}, nil, fmt.Errorf("decode application record: %w", err)
	}
	r := apps.AppRecord{
		ID: s.ID, User: s.User, Queue: s.Queue, SubmitTime: s.SubmitTime, StartTime: s.StartTime,
		LaunchTime: s.LaunchTime, State: s.State, Diagnostics: s.Diagnostics, FinishTime: s.FinishTime,
		LifetimeExpiry: s.LifetimeExpiry, Context: &yarnpb.ApplicationSubmissionContextProto{},
	}
	if err := proto.Unmarshal(s.Context, r.Context); err != nil {
		return r, nil, fmt.Errorf("decode submission of %s: %w", s.ID, err)
	}
	for _, q := range s.AMRequests {
		m := &yarnpb.ResourceRequestProto{}
		if err := proto.Unmarshal(q, m); err != nil {
			return r, nil, fmt.Errorf("decode AM request of %s: %w", s.ID, err)
		}
		r.AMRequests = append(r.AMRequests, m)
	}
	var out []apps.AttemptRecord
	for _, a := range s.Attempts {
		ar := apps.AttemptRecord{
			ID: a.ID, StartTime: a.StartTime, State: a.State, FinalTrackingURL: a.FinalTrackingURL,
			Diagnostics: a.Diagnostics, FinalStatus: a.FinalStatus, AMContainerExitStatus: a.AMContainerExitStatus,
			FinishTime: a.FinishTime, Usage: a.Usage,
		}
		if a.AMContainer != nil {
			ar.AMContainer = &yarnpb.ContainerProto{}
			if err := proto.Unmarshal(a.AMContainer, ar.AMContainer); err != nil {
				return r, nil, fmt.Errorf("decode AM container of %s: %w", a.ID, err)
			}
		}
		out = append(out, ar)
	}
	return r, out, nil
}

// Recover rebuilds every stored application through the apps package's
// Recover event, as a restarted YARN RM does from its state store. A record
// that cannot be read is logged and skipped rather than stopping the RM.
func (rm *ResourceManager) Recover(ctx context.Context) error {
	stored, err := rm.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("recover applications: %w", err)
	}
	type recovered struct {
		e      *entry
		finish time.Time
	}
	var done []recovered
	for _, s := range stored {
		rec, attempts, err := decodeRecord(s.Data)
		if err != nil {
			rm.log.ErrorContext(ctx, "skipping unreadable application record", "app", s.ID, "err", err)
			continue
		}
		app, err := apps.NewApplication(rm.appsCfg, apps.Submission{
			ID: rec.ID, User: rec.User, Queue: rec.Queue, Context: rec.Context,
			SubmitTime: rec.SubmitTime, AMRequests: rec.AMRequests,
		})
		if err != nil {
			rm.log.ErrorContext(ctx, "skipping application that cannot be rebuilt", "app", s.ID, "err", err)
			continue
		}
		e := &entry{app: app, attempts: map[apps.AttemptID]apps.AttemptRecord{}, record: rec,
			queue: app.Queue(), user: app.User()}
		for _, a := range attempts {
			e.attempts[a.ID] = a
		}
		rm.mu.Lock()
		rm.apps[rec.ID] = e
		rm.countLocked(e, 1)
		rm.usage.insert(e)
		rm.mu.Unlock()
		// Retention waits until every application is back, so that the
		// oldest are dropped, not the first listed.
		e.turn.Lock()
		err = rm.handleInTurn(ctx, e, apps.Recover{App: rec, Attempts: attempts})
		e.turn.Unlock()
		e.mu.Lock()
		if err != nil {
			e.mu.Unlock()
			rm.log.ErrorContext(ctx, "recovering application", "app", s.ID, "err", err)
			rm.mu.Lock()
			rm.countLocked(e, -1)
			rm.usage.remove(e)
			delete(rm.apps, rec.ID)
			rm.mu.Unlock()
			continue
		}
		if app.State().Final() {
			done = append(done, recovered{e, app.FinishTime()})
		} else if t := app.CurrentAttempt(); app.Unmanaged() && t != nil {
			// The token lives in memory only: a live unmanaged AM's
			// submitter must still find it in the report.
			rm.issueAMRMToken(e, t.ID())
		}
		e.mu.Unlock()
	}
	// The retention list is rebuilt oldest first; AppCompleted effects from
	// Recover may already have added some, so it is rebuilt from scratch.
	slices.SortFunc(done, func(a, b recovered) int { return a.finish.Compare(b.finish) })
	rm.mu.Lock()
	rm.completed = rm.completed[:0]
	for _, d := range done {
		if !d.e.done {
			rm.finishLocked(d.e)
		}
		rm.completed = append(rm.completed, d.e.app.ID())
	}
	rm.mu.Unlock()
	rm.enforceRetention(ctx)
	rm.log.InfoContext(ctx, "recovered applications", "count", len(stored), "completed", len(done))
	return nil
}

// Run fires application lifetime timers until ctx ends, checking every
// yarn.resourcemanager.application-timeouts.monitor.interval-ms, and the AM
// liveness and container allocation timers every second; it takes RKS's
// ContainerReports as they come.
func (rm *ResourceManager) Run(ctx context.Context) error {
	every := rm.cfg.Settings.AppTimeoutsMonitorInterval
	if every <= 0 {
		every = 3 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	mon := time.NewTicker(time.Second)
	defer mon.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			rm.fireTimeouts(ctx)
		case <-mon.C:
			rm.am.checkMonitors(ctx)
		case r := <-rm.cfg.ContainerReports.reports():
			rm.take(ctx, r)
		}
	}
}

func (rm *ResourceManager) fireTimeouts(ctx context.Context) {
	now := rm.now()
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		due := !e.expiry.IsZero() && !e.expiry.After(now)
		e.mu.Unlock()
		if due {
			if err := rm.handle(ctx, e, apps.TimeoutExpired{}); err != nil {
				rm.log.WarnContext(ctx, "lifetime timer", "app", e.app.ID().String(), "err", err)
			}
		}
	}
}

// Handle feeds one event to an application, for the services that act on
// it (the AM launcher, the AM service), and carries out the effects.
func (rm *ResourceManager) Handle(ctx context.Context, id apps.ApplicationID, ev apps.Event) error {
	e := rm.lookup(id)
	if e == nil {
		return fmt.Errorf("handle %s for %s: %w", ev.Name(), id, errUnknownApp)
	}
	return rm.handle(ctx, e, ev)
}

var errUnknownApp = errors.New("unknown application")

func (rm *ResourceManager) lookup(id apps.ApplicationID) *entry {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	return rm.apps[id]
}

// snapshot returns the entries ordered by id, as reports list them.
func (rm *ResourceManager) snapshot() []*entry {
	rm.mu.RLock()
	out := make([]*entry, 0, len(rm.apps))
	for _, e := range rm.apps {
		out = append(out, e)
	}
	rm.mu.RUnlock()
	slices.SortFunc(out, func(a, b *entry) int {
		x, y := a.app.ID(), b.app.ID()
		if c := cmp.Compare(x.ClusterTimestamp, y.ClusterTimestamp); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out
}

// handle applies ev and every event its effects lead to (Done events,
// the scheduler's answers), in order, in the entry's turn. The first
// event's error is returned; errors of later ones are logged, since the
// caller's request has already taken effect.
func (rm *ResourceManager) handle(ctx context.Context, e *entry, ev apps.Event) error {
	e.turn.Lock()
	err := rm.handleInTurn(ctx, e, ev)
	e.turn.Unlock()
	e.mu.Lock()
	final := e.app.State().Final()
	e.mu.Unlock()
	if final {
		rm.enforceRetention(ctx)
	}
	return err
}

// handleInTurn is handle for a caller that holds e.turn (and not e.mu): one
// that must check the application and change it with no other event in
// between. Each event's step and the effects that only touch memory run
// under e.mu; the store's writes run with e.mu released.
func (rm *ResourceManager) handleInTurn(ctx context.Context, e *entry, first apps.Event) error {
	queue := []apps.Event{first}
	var firstErr error
	for i := 0; len(queue) > 0; i++ {
		ev := queue[0]
		queue = queue[1:]
		e.mu.Lock()
		effects, err := e.app.Handle(ev, rm.now())
		if err == nil && rm.cfg.Tracer != nil {
			rm.cfg.Tracer.Event(ctx, e.app, ev)
		}
		e.mu.Unlock()
		if err != nil {
			if i == 0 {
				firstErr = err
			} else {
				rm.log.WarnContext(ctx, "event refused", "app", e.app.ID().String(), "event", ev.Name(), "err", err)
			}
			continue
		}
		for _, eff := range effects {
			e.mu.Lock()
			next, write, err := rm.execute(ctx, e, eff)
			e.mu.Unlock()
			if write != nil {
				next, err = write(ctx)
			}
			if err != nil {
				if i == 0 && firstErr == nil {
					firstErr = err
				}
				rm.log.ErrorContext(ctx, "effect failed", "app", e.app.ID().String(), "effect", eff.String(), "err", err)
			}
			if next != nil {
				queue = append(queue, next)
			}
		}
	}
	e.mu.Lock()
	rm.usage.update(e)
	e.mu.Unlock()
	return firstErr
}

// storeWrite is the I/O an effect leaves for after e.mu is released: it
// returns the event to feed back, if any.
type storeWrite func(ctx context.Context) (apps.Event, error)

// execute carries out one effect, with e.mu held, and returns the event to
// feed back, if any, or the write that will return it.
func (rm *ResourceManager) execute(ctx context.Context, e *entry, eff apps.Effect) (apps.Event, storeWrite, error) {
	id := e.app.ID()
	switch x := eff.(type) {
	case apps.PersistApp:
		e.record = x.Record
		write := rm.recordWrite(e, x.Done)
		if _, ok := x.Done.(apps.AppSaved); ok {
			return nil, func(ctx context.Context) (apps.Event, error) {
				next, err := write(ctx)
				if err != nil {
					return apps.AppSaveFailed{Diagnostics: err.Error()}, err
				}
				return next, nil
			}, nil
		}
		return nil, write, nil
	case apps.PersistAttempt:
		e.attempts[x.Record.ID] = x.Record
		return nil, rm.recordWrite(e, x.Done), nil
	case apps.RemoveAttemptRecord:
		delete(e.attempts, x.Attempt)
		return nil, rm.recordWrite(e, nil), nil
	case apps.AddToScheduler:
		if x.Recovering {
			return nil, nil, nil
		}
		if e.rejection != "" {
			return apps.Rejected{Diagnostics: e.rejection}, nil, nil
		}
		return apps.Accepted{}, nil, nil
	case apps.ScheduleTimeout:
		e.expiry = x.Expiry
		return nil, nil, nil
	case apps.CancelTimeout:
		e.expiry = time.Time{}
		return nil, nil, nil
	case apps.AppCompleted:
		rm.mu.Lock()
		if !e.done {
			rm.finishLocked(e)
			rm.completed = append(rm.completed, id)
		}
		rm.mu.Unlock()
		return nil, nil, nil
	default:
		// Admission counts come from the entries' done flags; the rest is
		// the cluster's.
		next, err := rm.am.execute(ctx, e, eff)
		return next, nil, err
	}
}

func (rm *ResourceManager) launch(ctx context.Context, id apps.ApplicationID, eff apps.Effect) error {
	x, ok := eff.(apps.LaunchAM)
	if !ok {
		return fmt.Errorf("%s: effect not handled", eff)
	}
	if rm.cfg.Launcher == nil {
		rm.launcherOnce.Do(func() {
			rm.log.WarnContext(ctx, "no container launcher: AMs are placed but never started", "app", id.String(), "effect", eff.String())
		})
		return nil
	}
	rm.launchAM(ctx, x)
	return nil
}

// recordWrite takes the entry's record with its attempts as they are now
// (e.mu held) and returns their write, which feeds done back once durable.
// The store has the one retry policy of the RM's writes (AppStore): what it
// returns is final for this write, and fails the event that needed it
// rather than being tried again here: a permanent answer (a record the API
// server refuses as invalid, a write it forbids), this RM fenced, or ctx
// ended. The entry's turn, held until the write returns, keeps an
// application's writes in the order of its events.
func (rm *ResourceManager) recordWrite(e *entry, done apps.Event) storeWrite {
	r := e.record
	data, err := encodeRecord(r, e.attempts)
	state := e.app.State().String()
	if r.State != 0 {
		state = r.State.String()
	}
	return func(ctx context.Context) (apps.Event, error) {
		if err != nil {
			return nil, err
		}
		if err := rm.cfg.Store.Put(ctx, r.ID.String(), state, r.User, r.Queue, r.FinishTime, data); err != nil {
			return nil, fmt.Errorf("store application %s: %w", r.ID, err)
		}
		return done, nil
	}
}

// Close ends the work the RM started on its own and waits for it: AM
// launches in flight are cancelled (their attempts recover with the next
// leader). The servers and Run are their callers' to stop.
func (rm *ResourceManager) Close(ctx context.Context) error {
	rm.launchMu.Lock()
	rm.closed = true
	rm.launchMu.Unlock()
	rm.end()
	done := make(chan struct{})
	go func() {
		rm.launches.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rm: AM launches still running: %w", ctx.Err())
	}
}

// goLaunch runs f on a goroutine Close waits for, with ctx's values, for
// at most timeout, cancelled by Close; once closed, f does not run. The
// launch outlives the call that led to it, not the RM.
func (rm *ResourceManager) goLaunch(ctx context.Context, timeout time.Duration, f func(ctx context.Context)) {
	rm.launchMu.Lock()
	defer rm.launchMu.Unlock()
	if rm.closed {
		return
	}
	rm.launches.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(rm.life, cancel)
	go func() {
		defer rm.launches.Done()
		defer stop()
		defer cancel()
		f(ctx)
	}()
}

// enforceRetention forgets the oldest completed applications beyond
// yarn.resourcemanager.max-completed-applications, in memory and in the
// store (RMAppManager.checkAppNumCompletedLimit).
func (rm *ResourceManager) enforceRetention(ctx context.Context) {
	limit := rm.cfg.Settings.MaxCompletedApplications
	if limit < 0 {
		return
	}
	rm.mu.Lock()
	var drop []apps.ApplicationID
	for len(rm.completed) > limit {
		id := rm.completed[0]
		rm.completed = rm.completed[1:]
		if e := rm.apps[id]; e != nil {
			rm.countLocked(e, -1)
			rm.usage.remove(e)
		}
		delete(rm.apps, id)
		drop = append(drop, id)
	}
	rm.mu.Unlock()
	for _, id := range drop {
		if err := rm.cfg.Store.Delete(ctx, id.String()); err != nil {
			rm.log.WarnContext(ctx, "removing completed application from the store", "app", id.String(), "err", err)
			continue
		}
		rm.log.InfoContext(ctx, "removed completed application", "app", id.String())
	}
}

// appCounts counts accepted, unfinished applications for queue admission.
type appCounts struct {
	total  int
	queues map[string]int
	users  map[[2]string]int
}

func (c appCounts) Total() int { return c.total }

func (c appCounts) InQueue(path string) int {
	n := 0
	for q, k := range c.queues {
		if q == path || (len(q) > len(path) && q[:len(path)] == path && q[len(path)] == '.') {
			n += k
		}
	}
	return n
}

func (c appCounts) ByUser(path, user string) int {
	n := 0
	for qu, k := range c.users {
		q := qu[0]
		if qu[1] == user && (q == path || (len(q) > len(path) && q[:len(path)] == path && q[len(path)] == '.')) {
			n += k
		}
	}
	return n
}

// counts is a copy of the admission counts, for a check made outside rm.mu.
func (rm *ResourceManager) counts() appCounts {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	return appCounts{total: rm.active.total, queues: maps.Clone(rm.active.queues), users: maps.Clone(rm.active.users)}
}

// countLocked adds e to (n = 1) or removes it from (n = -1) the admission
// counts when it is one they count; rm.mu is held.
func (rm *ResourceManager) countLocked(e *entry, n int) {
	if e.done || e.rejection != "" {
		return
	}
	if rm.active.queues == nil {
		rm.active.queues, rm.active.users = map[string]int{}, map[[2]string]int{}
	}
	qu := [2]string{e.queue, e.user}
	rm.active.total += n
	rm.active.queues[e.queue] += n
	rm.active.users[qu] += n
	if rm.active.queues[e.queue] == 0 {
		delete(rm.active.queues, e.queue)
	}
	if rm.active.users[qu] == 0 {
		delete(rm.active.users, qu)
	}
}

// finishLocked marks e done, out of the admission counts; rm.mu is held.
func (rm *ResourceManager) finishLocked(e *entry) {
	rm.countLocked(e, -1)
	e.done = true
}
