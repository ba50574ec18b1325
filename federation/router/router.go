package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/tokens"
)

// defaultQueue is the queue of a submission that names none
// (YarnConfiguration.DEFAULT_QUEUE_NAME).
const defaultQueue = "default"

// Store is what the Router reads and writes of the federation store:
// store.Cache, as YARN's Router reads through its facade.
type Store interface {
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	GetSubCluster(ctx context.Context, id string) (store.SubClusterInfo, error)
	// GetSubClusterFlushed reads past the cache, after a call to a
	// sub-cluster's cached address failed.
	GetSubClusterFlushed(ctx context.Context, id string) (store.SubClusterInfo, error)
	AddApplicationHomeSubCluster(ctx context.Context, h store.ApplicationHome) (string, error)
	UpdateApplicationHomeSubCluster(ctx context.Context, h store.ApplicationHome) error
	GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error)
	GetPolicyConfiguration(ctx context.Context, queue string) (store.PolicyConfiguration, error)
	store.ReservationHomes
}

// Config configures a Router.
type Config struct {
	Store Store
	// DefaultPolicy is the policy of queues with none in the store, "*"
	// included (yarn.federation.policy-manager and its params).
	DefaultPolicy store.PolicyConfiguration
	// SubmitRetry is how many sub-clusters getNewApplication and
	// submitApplication try; SubmitInterval the pause between tries.
	SubmitRetry    int
	SubmitInterval time.Duration
	// ConnectBackOff paces the connection attempts to one sub-cluster
	// RM before the Router gives up on it for a call; nil means tries
	// for up to 5 s, so that a dead sub-cluster costs a submission that
	// long before the next is tried.
	ConnectBackOff func() backoff.BackOff
	// Machines puts nodes and racks in sub-clusters for
	// LocalityRouterPolicy (yarn.federation.machine-list); nil knows none,
	// so that policy places every submission by its weights.
	Machines *federation.MachineList
	// Tokens issues, renews and cancels RM delegation tokens and checks
	// them on the client port: a tokens.Manager Shared over the store's
	// RouterKeys (NewKeyStore), DelegationOnly. Nil refuses the delegation
	// token calls.
	Tokens *tokens.Manager
	// TokenService is the service of the tokens the Router issues: its
	// client address as "ip:port", where a client that holds one finds it.
	TokenService string
	// IDs, when set, lets the Router answer getNewApplication itself
	// with ids under a cluster timestamp it claims, once it knows the
	// chosen sub-cluster's maximum capability: a submission then makes
	// one round trip to a sub-cluster, not two. Nil asks the sub-cluster
	// every time, as YARN's Router does.
	IDs TimestampPicker
	// CapabilityTTL is how long a sub-cluster's maximum capability is
	// answered before the Router asks its RM again (with IDs only); zero
	// means a minute.
	CapabilityTTL time.Duration
	// Rand is the policies' Randomness; nil means math/rand/v2's.
	Rand Randomness
	// Now is the clock of the capabilities' TTL and of the first
	// timestamp the Router claims; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Router serves ApplicationClientProtocol over the sub-clusters of its
// store. Safe for concurrent use; Close closes its connections.
type Router struct {
	store         Store
	defaultPolicy store.PolicyConfiguration
	retries       int
	interval      time.Duration
	machines      *federation.MachineList
	connectBO     func() backoff.BackOff
	tokens        *tokens.Manager
	tokenService  string
	log           *slog.Logger
	// ids and limits are nil unless the Router hands out ids itself.
	ids    *applicationIDs
	limits *capabilities

	randMu sync.Mutex
	rand   Randomness

	mu     sync.Mutex
	conns  map[connKey]*ipc.Client
	closed bool
}

type connKey struct{ addr, user, realUser string }

// New returns the Router cfg describes; it does no I/O.
func New(cfg Config) (*Router, error) {
	if cfg.Store == nil {
		return nil, errors.New("router: needs a store")
	}
	if cfg.DefaultPolicy.Type == "" {
		cfg.DefaultPolicy = store.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.UniformBroadcastPolicyManager}
	}
	// A default that cannot route fails the Router's start, not each
	// submission.
	if _, err := newRouterPolicy(cfg.DefaultPolicy); err != nil {
		return nil, fmt.Errorf("router: default policy: %w", err)
	}
	r := &Router{
		store: cfg.Store, defaultPolicy: cfg.DefaultPolicy, retries: max(cfg.SubmitRetry, 1), interval: cfg.SubmitInterval,
		connectBO: cfg.ConnectBackOff, machines: cfg.Machines, tokens: cfg.Tokens, tokenService: cfg.TokenService,
		rand: cfg.Rand, log: cfg.Logger, conns: map[connKey]*ipc.Client{},
	}
	if r.connectBO == nil {
		r.connectBO = func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxElapsedTime(5*time.Second))
		}
	}
	if r.rand == nil {
		r.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if cfg.IDs != nil {
		now := cfg.Now
		if now == nil {
			now = time.Now
		}
		r.ids = &applicationIDs{picker: cfg.IDs, now: now}
		r.limits = &capabilities{ttl: cmp.Or(cfg.CapabilityTTL, defaultCapabilityTTL), now: now, kept: map[string]keptCapability{}}
	}
	return r, nil
}

// Register serves the Router's ApplicationClientProtocol on srv.
func (r *Router) Register(srv *ipc.Server) error {
	return srv.Register(yarnrpc.ApplicationClientProtocolName, r.Methods()...)
}

// Methods are the Router's ApplicationClientProtocol methods. The calls
// about one application, and submissions, go to its home with their
// request and answer as the client and the RM encoded them: the Router
// decodes the request alone, to route it.
func (r *Router) Methods() []ipc.Method {
	return append(yarnrpc.ApplicationClientProtocolFuncs{
		GetNewApplication:        r.GetNewApplication,
		GetApplications:          r.GetApplications,
		GetClusterMetrics:        r.GetClusterMetrics,
		GetClusterNodes:          r.GetClusterNodes,
		GetQueueInfo:             r.GetQueueInfo,
		GetQueueUserAcls:         r.GetQueueUserAcls,
		GetResourceTypeInfo:      r.GetResourceTypeInfo,
		GetResourceProfiles:      r.GetResourceProfiles,
		GetResourceProfile:       r.GetResourceProfile,
		GetClusterNodeLabels:     r.GetClusterNodeLabels,
		GetNodeToLabels:          r.GetNodeToLabels,
		GetLabelsToNodes:         r.GetLabelsToNodes,
		GetClusterNodeAttributes: r.GetClusterNodeAttributes,
		GetAttributesToNodes:     r.GetAttributesToNodes,
		GetNodesToAttributes:     r.GetNodesToAttributes,
		GetNewReservation:        r.GetNewReservation,
		SubmitReservation:        r.SubmitReservation,
		UpdateReservation:        r.UpdateReservation,
		DeleteReservation:        r.DeleteReservation,
		ListReservations:         r.ListReservations,
		GetDelegationToken:       r.GetDelegationToken,
		RenewDelegationToken:     r.RenewDelegationToken,
		CancelDelegationToken:    r.CancelDelegationToken,
	}.Methods(),
		ipc.HandleRaw("submitApplication", r.submitApplication),
		routed(r, "getApplicationReport", "get the application report", (*yarnpb.GetApplicationReportRequestProto).GetApplicationId),
		routed(r, "forceKillApplication", "kill the application", (*yarnpb.KillApplicationRequestProto).GetApplicationId),
		routed(r, "getApplicationAttempts", "get the application attempts", (*yarnpb.GetApplicationAttemptsRequestProto).GetApplicationId),
		routed(r, "getApplicationAttemptReport", "get the application attempt report", func(q *yarnpb.GetApplicationAttemptReportRequestProto) *yarnpb.ApplicationIdProto {
			return q.GetApplicationAttemptId().GetApplicationId()
		}),
		routed(r, "getContainers", "get the containers", func(q *yarnpb.GetContainersRequestProto) *yarnpb.ApplicationIdProto {
			return q.GetApplicationAttemptId().GetApplicationId()
		}),
		routed(r, "getContainerReport", "get the container report", func(q *yarnpb.GetContainerReportRequestProto) *yarnpb.ApplicationIdProto {
			return containerApp(q.GetContainerId())
		}),
		routed(r, "failApplicationAttempt", "fail the application attempt", func(q *yarnpb.FailApplicationAttemptRequestProto) *yarnpb.ApplicationIdProto {
			return q.GetApplicationAttemptId().GetApplicationId()
		}),
		routed(r, "signalToContainer", "signal the container", func(q *yarnpb.SignalContainerRequestProto) *yarnpb.ApplicationIdProto {
			return containerApp(q.GetContainerId())
		}),
		routed(r, "moveApplicationAcrossQueues", "move the application across queues", (*yarnpb.MoveApplicationAcrossQueuesRequestProto).GetApplicationId),
		routed(r, "updateApplicationPriority", "update the application priority", (*yarnpb.UpdateApplicationPriorityRequestProto).GetApplicationId),
		routed(r, "updateApplicationTimeouts", "update the application timeouts", (*yarnpb.UpdateApplicationTimeoutsRequestProto).GetApplicationId),
	)
}

func containerApp(id *yarnpb.ContainerIdProto) *yarnpb.ApplicationIdProto {
	if a := id.GetAppAttemptId().GetApplicationId(); a != nil {
		return a
	}
	return id.GetAppId()
}

// Close closes the connections to the sub-clusters; calls after it fail.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for k, c := range r.conns {
		errs = append(errs, c.Close())
		delete(r.conns, k)
	}
	return errors.Join(errs...)
}

// rmOf is the client of a sub-cluster's RM that calls as ctx's caller:
// one connection per RM and caller, kept for the Router's life.
func (r *Router) rmOf(ctx context.Context, sc store.SubClusterInfo) (*ipc.Client, error) {
	caller, ok := ipc.CallerFrom(ctx)
	if !ok || caller.User == "" {
		return nil, yarnerr.YarnException.New("router: the call names no user")
	}
	k := connKey{addr: sc.ClientRMServiceAddress, user: caller.User, realUser: caller.RealUser}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("router: closed")
	}
	c, ok := r.conns[k]
	if !ok {
		var err error
		c, err = ipc.NewClient(k.addr, ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: k.user, RealUser: k.realUser,
			NewBackOff: r.connectBO, Errors: yarnerr.FromRemote, Logger: r.log,
		})
		if err != nil {
			return nil, fmt.Errorf("router: client of sub-cluster %s: %w", sc.ID, err)
		}
		r.conns[k] = c
	}
	return c, nil
}

// callID makes call on the RM of the sub-cluster known by id.
func (r *Router) callID(ctx context.Context, id string, call func(*ipc.Client) error) error {
	sc, err := r.store.GetSubCluster(ctx, id)
	if err != nil {
		return fmt.Errorf("router: sub-cluster %s: %w", id, err)
	}
	return r.call(ctx, sc, call)
}

// call makes call on sc's RM. If the RM cannot be reached, or answers as
// a standby, the sub-cluster may have failed over to an RM elsewhere
// since the cache read its address: the call is made once more at the
// address the store holds now, if it moved.
func (r *Router) call(ctx context.Context, sc store.SubClusterInfo, call func(*ipc.Client) error) error {
	rm, err := r.rmOf(ctx, sc)
	if err != nil {
		return err
	}
	err = call(rm)
	var remote *ipc.RemoteError
	if err == nil || (errors.As(err, &remote) && !errors.Is(err, yarnerr.Standby)) || ctx.Err() != nil {
		return err
	}
	now, ferr := r.store.GetSubClusterFlushed(ctx, sc.ID)
	if ferr != nil || now.ClientRMServiceAddress == sc.ClientRMServiceAddress {
		return err
	}
	r.log.InfoContext(ctx, "sub-cluster RM moved; calling its new address", "subCluster", sc.ID, "from", sc.ClientRMServiceAddress, "to", now.ClientRMServiceAddress, "err", err)
	if rm, err = r.rmOf(ctx, now); err != nil {
		return err
	}
	return call(rm)
}

// acp is the typed client of rm, for the calls the Router reads the
// answers of.
func acp(rm *ipc.Client) *yarnrpc.ApplicationClientProtocolClient {
	return yarnrpc.NewApplicationClientProtocolClient(rm)
}

func (r *Router) intN(n int) int {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	return r.rand.IntN(n)
}

// lockedRand is the Router's Randomness behind its lock, for the policies.
type lockedRand struct{ r *Router }

func (l lockedRand) IntN(n int) int { return l.r.intN(n) }

func (l lockedRand) Float64() float64 {
	l.r.randMu.Lock()
	defer l.r.randMu.Unlock()
	return l.r.rand.Float64()
}

// wrapped is a YarnException with YARN's message for a failed call and
// its cause, as RouterServerUtil.logAndThrowException throws it.
func wrapped(cause error, format string, args ...any) error {
	return &yarnerr.Error{Class: yarnerr.YarnException, Message: fmt.Sprintf(format, args...), Err: cause}
}

// GetNewApplication asks a random active sub-cluster for a new
// application, another one if it fails, up to the retries. A Router with
// its own ids answers for that sub-cluster itself while it knows the
// sub-cluster's maximum capability.
func (r *Router) GetNewApplication(ctx context.Context, req *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
	var resp *yarnpb.GetNewApplicationResponseProto
	err := r.OnRandomActive(ctx, func(ctx context.Context, sc store.SubClusterInfo) (err error) {
		resp, err = r.newApplicationOn(ctx, sc, req)
		return err
	})
	return resp, err
}

// OnRandomActive calls try on a random active sub-cluster, on another one
// if it fails, up to the retries, as the Router places a new application;
// its REST API creates applications through it too.
func (r *Router) OnRandomActive(ctx context.Context, try func(context.Context, store.SubClusterInfo) error) error {
	return r.onRandomActive(ctx, "create a new application id", "Failed to create a new application.", try)
}

// onRandomActive is OnRandomActive for a call named what, which fails
// with failed once every try did.
func (r *Router) onRandomActive(ctx context.Context, what, failed string, try func(context.Context, store.SubClusterInfo) error) error {
	active, err := r.store.GetSubClusters(ctx, true)
	if err != nil {
		return wrapped(err, "Unable to get the active SubClusters from the FederationStateStore.")
	}
	active = slices.Clone(active)
	for i := 0; i < r.retries; i++ {
		if len(active) == 0 {
			return yarnerr.YarnException.New(NoActiveSubCluster)
		}
		j := r.intN(len(active))
		sc := active[j]
		err := try(ctx, sc)
		if err == nil {
			return nil
		}
		r.log.WarnContext(ctx, "unable to "+what, "subCluster", sc.ID, "try", i, "err", err)
		active = slices.Delete(active, j, j+1)
	}
	return yarnerr.YarnException.New(failed)
}

func (r *Router) newApplicationOn(ctx context.Context, sc store.SubClusterInfo, req *yarnpb.GetNewApplicationRequestProto) (resp *yarnpb.GetNewApplicationResponseProto, err error) {
	if r.ids != nil {
		if limit, ok := r.limits.fresh(sc.ID); ok {
			id, err := r.ids.next(ctx)
			if err == nil {
				return &yarnpb.GetNewApplicationResponseProto{ApplicationId: id.Proto(), MaximumCapability: limit}, nil
			}
			// The sub-cluster can still name the application.
			r.log.WarnContext(ctx, "asking the sub-cluster for an application id", "subCluster", sc.ID, "err", err)
		}
	}
	err = r.call(ctx, sc, func(rm *ipc.Client) error {
		resp, err = acp(rm).GetNewApplication(ctx, req)
		return err
	})
	if err == nil && r.limits != nil {
		r.limits.keep(sc.ID, resp.GetMaximumCapability())
	}
	return resp, err
}

// submitApplication submits to the home the queue's policy picks,
// recorded first; on a failure the sub-cluster is blacklisted and the
// next try moves the application's home. The request goes on as the
// client encoded it, and the answer as the RM encoded it.
func (r *Router) submitApplication(ctx context.Context, req *yarnpb.SubmitApplicationRequestProto, encoded []byte) ([]byte, error) {
	asc := req.GetApplicationSubmissionContext()
	if asc == nil || asc.GetApplicationId() == nil {
		return nil, yarnerr.YarnException.New("Missing submitApplication request or applicationSubmissionContext information.")
	}
	appID, err := yarnid.ApplicationIDFromProto(asc.GetApplicationId())
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(err)
	}
	var resp []byte
	sub := Submission{Application: appID.String(), Name: asc.GetApplicationName(), Queue: asc.GetQueue()}
	for _, rr := range asc.GetAmContainerResourceRequest() {
		sub.AMResourceNames = append(sub.AMResourceNames, rr.GetResourceName())
	}
	err = r.SubmitHome(ctx, sub,
		func(ctx context.Context, home string) (err error) {
			return r.callID(ctx, home, func(rm *ipc.Client) error {
				resp, err = rm.CallRaw(ctx, "submitApplication", encoded)
				return err
			})
		})
	return resp, err
}

// Submission names the application SubmitHome places.
type Submission struct {
	// Application is the application id's string form.
	Application string
	// Name and Queue are the application's; Queue picks the policy.
	Name, Queue string
	// AMResourceNames are the resource names of the AM container's
	// resource requests, in order: a node, its rack and ANY for an AM
	// asked on a node, which LocalityRouterPolicy places by. None for a
	// REST submission, whose AM asks for ANY.
	AMResourceNames []string
}

// SubmitHome places an application: it records the home the queue's
// policy picks, then calls submit with it; on a failure the sub-cluster is
// blacklisted and the next try moves the application's home. The RPC and
// REST submissions share it, so both route alike.
func (r *Router) SubmitHome(ctx context.Context, sub Submission, submit func(ctx context.Context, home string) error) error {
	app := sub.Application
	policy, err := r.policyFor(ctx, sub.Queue)
	if err != nil {
		return err
	}
	sub.Queue = cmp.Or(sub.Queue, defaultQueue)
	policy = forSubmission(policy, sub, r.machines)
	blacklist := map[string]bool{}
	for i := 0; i < r.retries; i++ {
		if i > 0 && r.interval > 0 {
			if err := sleep(ctx, r.interval); err != nil {
				return err
			}
		}
		active, err := r.store.GetSubClusters(ctx, true)
		if err != nil {
			return wrapped(err, "Unable to get the active SubClusters from the FederationStateStore.")
		}
		home, err := policy.home(active, blacklist, lockedRand{r})
		if err != nil {
			return err
		}
		if i == 0 {
			// A resubmission (a client retrying through another Router)
			// finds the home recorded first, and goes there.
			if home, err = r.store.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: home}); err != nil {
				return wrapped(err, "Unable to insert the ApplicationId %s into the FederationStateStore.", app)
			}
		} else if err := r.store.UpdateApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: home}); err != nil {
			stored, getErr := r.store.GetApplicationHomeSubCluster(ctx, app)
			if getErr != nil || stored != home {
				return wrapped(err, "Unable to update the ApplicationId %s into the FederationStateStore.", app)
			}
		}
		err = submit(ctx, home)
		if err == nil {
			r.log.InfoContext(ctx, "application submitted", "application", app, "subCluster", home, "try", i)
			return nil
		}
		r.log.WarnContext(ctx, "unable to submit the application", "application", app, "subCluster", home, "try", i, "err", err)
		blacklist[home] = true
	}
	return yarnerr.YarnException.Errorf("Application %s with appId %s failed to be submitted.", sub.Name, app)
}

// policyFor is the router policy of queue: the queue's own in the store,
// else the "*" one, else the configured default (RouterPolicyFacade).
func (r *Router) policyFor(ctx context.Context, queue string) (routerPolicy, error) {
	if queue == "" {
		queue = defaultQueue
	}
	p, err := r.store.GetPolicyConfiguration(ctx, queue)
	if errors.Is(err, store.ErrNotFound) {
		p, err = r.store.GetPolicyConfiguration(ctx, federation.DefaultPolicyQueue)
	}
	if errors.Is(err, store.ErrNotFound) {
		p, err = r.defaultPolicy, nil
	}
	if err != nil {
		return nil, wrapped(err, "Unable to get the policy of queue %s from the FederationStateStore.", queue)
	}
	return newRouterPolicy(p)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// routed is the handler of method that sends the call to the home of the
// application appOf names, the request as the client encoded it and the
// home's answer as the RM encoded it: the hop decodes the small request
// (the engine does, refusing one it cannot read) and never the answer,
// which the client decodes. A call about an application without one, or
// that its home fails, is answered with the YarnException YARN's Router
// throws.
func routed[Req proto.Message](r *Router, method, what string, appOf func(Req) *yarnpb.ApplicationIdProto) ipc.Method {
	return ipc.HandleRaw(method, func(ctx context.Context, req Req, encoded []byte) ([]byte, error) {
		id := appOf(req)
		if id == nil {
			return nil, yarnerr.YarnException.Errorf("Missing request to %s or applicationId information.", what)
		}
		appID, err := yarnid.ApplicationIDFromProto(id)
		if err != nil {
			return nil, yarnerr.YarnException.Wrap(err)
		}
		home, err := r.store.GetApplicationHomeSubCluster(ctx, appID.String())
		if err != nil {
			return nil, wrapped(err, "Application %s does not exist in FederationStateStore.", appID)
		}
		var resp []byte
		err = r.callID(ctx, home, func(rm *ipc.Client) error {
			resp, err = rm.CallRaw(ctx, method, encoded)
			return err
		})
		if err != nil {
			return nil, wrapped(err, "Unable to %s for %s to SubCluster %s.", what, appID, home)
		}
		return resp, nil
	})
}
