package amrmproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// FederationInterceptorName names the FederationInterceptor in a pipeline.
const FederationInterceptorName = "org.apache.hadoop.yarn.server.nodemanager.amrmproxy.FederationInterceptor"

// FederationStore is what the federation interceptor reads of the
// federation's state and policy store (a store.StateStore or its Cache).
type FederationStore interface {
	GetApplicationHomeSubCluster(ctx context.Context, application string) (string, error)
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	GetPolicyConfiguration(ctx context.Context, queue string) (store.PolicyConfiguration, error)
}

// FederationSettings configure the federation interceptor.
type FederationSettings struct {
	// Store is the federation's state and policy store; required.
	Store FederationStore
	// DefaultPolicy and DefaultPolicyParams are the policy of queues
	// without one in the store, "*" included
	// (yarn.federation.policy-manager and its params).
	DefaultPolicy       string
	DefaultPolicyParams []byte
	// Resolver maps nodes and racks to sub-clusters for the locality
	// policy (yarn.federation.machine-list); nil knows none, so located
	// asks go to the home.
	Resolver *federation.MachineList
	// NewBackOff paces the calls to secondary sub-clusters' RMs and the
	// wait for an unmanaged AM's token; nil means exponential backoff for
	// at most a minute.
	NewBackOff func() backoff.BackOff
	// LaunchTimeout bounds registering an unmanaged AM in a secondary
	// sub-cluster; zero means 30 s. A sub-cluster where it failed is left
	// out for RetryAfter (zero: a minute).
	LaunchTimeout, RetryAfter time.Duration
	// HeartbeatMaxWait bounds an allocate's wait for the first
	// sub-cluster's answer (YARN's heartbeatMaxWaitTimeMs); zero means 5 s.
	HeartbeatMaxWait time.Duration
	// SubClusterTimeout is how long a sub-cluster may go without
	// answering before the policy leaves it out and its headroom is no
	// longer counted (YARN's subClusterTimeOut); zero means a minute.
	SubClusterTimeout time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// FederationInterceptor spreads an AM's asks over the federation's
// sub-clusters as YARN's FederationInterceptor does: the AMRMProxy policy
// of the application's queue splits each heartbeat's asks; the home
// sub-cluster's part goes to the next stage (the default interceptor, with
// the real AMRMToken), each secondary's to an unmanaged AM the interceptor
// registers there under the same application id, with that sub-cluster's
// own AMRMToken. Releases go to the sub-cluster that allocated the
// container.
//
// The parts are sent asynchronously, as YARN 3.4 sends them: each
// sub-cluster, the home included, has a heartbeater whose goroutine sends
// its parts in order; their answers gather in a sink, and an allocate
// answers the AM with every answer that arrived since the last one, once
// the first arrived (at most HeartbeatMaxWait) and the others had as long
// again to follow. The AM-facing response ids are the Service's, which
// checks and numbers them as YARN's interceptor does.
//
// What a restart of the node would lose, the home's registration answer
// and the unmanaged AMs' tokens, is kept in the attempt's state as it
// changes (App.Keep); Resume rebuilds the interceptor from it.
type FederationInterceptor struct {
	cfg  FederationSettings
	app  App
	next Interceptor
	log  *slog.Logger

	home     string
	register *yarnpb.RegisterApplicationMasterRequestProto
	// registered is the home's answer, given again to a repeat register.
	registered *yarnpb.RegisterApplicationMasterResponseProto
	policy     amrmPolicy
	sink       *sink
	// homeHB heartbeats the home, from the register on.
	homeHB *heartbeater
	// secondaries are the unmanaged AMs in secondary sub-clusters, by id.
	secondaries map[string]*secondary
	// owner maps each container the AM was given to its sub-cluster.
	owner map[string]string
	// failed holds when an unmanaged AM last failed to launch, by
	// sub-cluster.
	failed map[string]time.Time
	// finished is set by the AM's finish: later heartbeats get an empty
	// answer, as YARN's.
	finished bool
}

var (
	_ Interceptor = (*FederationInterceptor)(nil)
	_ Ender       = (*FederationInterceptor)(nil)
	_ Resumer     = (*FederationInterceptor)(nil)
)

// The keys of what the interceptor keeps in its attempt's state (App.Keep),
// YARN's NMSS_REG_RESPONSE_KEY and NMSS_SECONDARY_SC_PREFIX: the home's
// answer to the AM's register, and each secondary's unmanaged AM's
// AMRMToken under the sub-cluster's id. The register itself is the
// Service's.
const (
	keptRegistration = "FederationInterceptor/registerResponse"
	keptSecondary    = "FederationInterceptor/secondarySC/"
)

// uam is the attempt's unmanaged AM in one secondary sub-cluster.
type uam struct {
	rm *client.AMRMClient
	// token is the one it registered with.
	token token.Token
}

// secondary is a secondary sub-cluster the AM was sent asks for: its
// heartbeater, whose goroutine launches the unmanaged AM before it sends.
type secondary struct {
	sc store.SubClusterInfo
	hb *heartbeater

	// resumed marks an unmanaged AM that registered before the node
	// restarted, which the heartbeater re-attaches rather than launches.
	resumed bool

	mu sync.Mutex
	// uam is nil until registered.
	uam *uam
	// submitted is set once the unmanaged application may exist there.
	submitted bool
	// running are the containers a re-attach found there, until an
	// allocate maps them to the sub-cluster.
	running []*yarnpb.ContainerIdProto
}

func (s *secondary) launched() (*uam, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uam, s.submitted
}

// FederationStage returns the stage of a FederationInterceptor.
func FederationStage(s FederationSettings) Stage {
	if s.NewBackOff == nil {
		s.NewBackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval = 100 * time.Millisecond
			b.MaxElapsedTime = time.Minute
			return b
		}
	}
	if s.LaunchTimeout <= 0 {
		s.LaunchTimeout = 30 * time.Second
	}
	if s.RetryAfter <= 0 {
		s.RetryAfter = time.Minute
	}
	if s.HeartbeatMaxWait <= 0 {
		s.HeartbeatMaxWait = 5 * time.Second
	}
	if s.SubClusterTimeout <= 0 {
		s.SubClusterTimeout = time.Minute
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return func(app App, next Interceptor) (Interceptor, error) {
		if next == nil {
			return nil, errors.New("the federation interceptor forwards the home sub-cluster's part to the next stage: it cannot be last")
		}
		if s.Store == nil {
			return nil, errors.New("the federation interceptor has no federation store")
		}
		return &FederationInterceptor{cfg: s, app: app, next: next, log: app.Logger, sink: newSink(s.Now),
			secondaries: map[string]*secondary{}, owner: map[string]string{}, failed: map[string]time.Time{}}, nil
	}
}

// RegisterApplicationMaster registers with the home RM, reads the
// application's home and its queue's policy, and starts the home's
// heartbeater; unmanaged AMs register in secondary sub-clusters when they
// are first sent asks. A repeat register gets the first answer again, as
// from YARN's interceptor, which stands for an RM that never fails over.
func (f *FederationInterceptor) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	if f.registered != nil {
		return f.registered, nil
	}
	home, err := f.cfg.Store.GetApplicationHomeSubCluster(ctx, f.app.Attempt.App.String())
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: home sub-cluster of %s: %w", f.app.Attempt.App, err)
	}
	resp, err := f.next.RegisterApplicationMaster(ctx, req)
	if err != nil {
		return nil, err
	}
	policy, err := f.policyOf(ctx, resp.GetQueue())
	if err != nil {
		return nil, err
	}
	f.home, f.policy, f.registered = home, policy, resp
	f.register = proto.Clone(req).(*yarnpb.RegisterApplicationMasterRequestProto)
	if b, err := proto.Marshal(resp); err != nil {
		f.log.Warn("keeping the home's registration", "err", err)
	} else {
		f.app.keep(keptRegistration, b)
	}
	f.homeHB = startHeartbeater(ctx, &heartbeater{id: home, sink: f.sink, log: f.log, send: f.next.Allocate})
	f.log.Info("federated AM registered", "home", home, "queue", resp.GetQueue())
	return resp, nil
}

// policyOf is the AMRMProxy policy of queue's policy manager, else the
// "*" policy's, else the default manager's.
func (f *FederationInterceptor) policyOf(ctx context.Context, queue string) (amrmPolicy, error) {
	manager, params := f.cfg.DefaultPolicy, f.cfg.DefaultPolicyParams
	for _, q := range []string{queue, federation.DefaultPolicyQueue} {
		p, err := f.cfg.Store.GetPolicyConfiguration(ctx, q)
		if err == nil {
			manager, params = p.Type, p.Params
			break
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("amrmproxy: policy of queue %s: %w", q, err)
		}
	}
	return newAMRMPolicy(manager, params, f.cfg.Resolver)
}

// Allocate splits the heartbeat, queues each part on its sub-cluster's
// heartbeater, waits for answers as YARN's interceptor does, and answers
// with the ones that arrived.
func (f *FederationInterceptor) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	if f.register == nil {
		return f.next.Allocate(ctx, req)
	}
	if f.finished {
		return &yarnpb.AllocateResponseProto{}, nil
	}
	if err := f.awaitReattach(ctx, req); err != nil {
		return nil, fmt.Errorf("amrmproxy: allocate: %w", err)
	}
	active, err := f.cfg.Store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: sub-clusters: %w", err)
	}
	f.retireFailedLaunches()
	f.mapReattached()
	expired := f.sink.timedOut(f.cfg.SubClusterTimeout)
	byID := map[string]store.SubClusterInfo{}
	var ids []string
	for _, sc := range active {
		byID[sc.ID] = sc
		if sc.ID == f.home || !expired[sc.ID] {
			ids = append(ids, sc.ID)
		}
	}
	slices.Sort(ids)
	parts := f.split(req, ids)
	// Every secondary with an unmanaged AM heartbeats, asks or not, so its
	// allocations and completions come back.
	for id := range f.secondaries {
		if _, ok := parts[id]; !ok {
			parts[id] = &yarnpb.AllocateRequestProto{Progress: req.Progress}
		}
	}
	for id := range parts {
		if id == f.home || f.secondaries[id] != nil {
			continue
		}
		sc, ok := byID[id]
		if at, failed := f.failed[id]; !ok || failed && f.cfg.Now().Before(at.Add(f.cfg.RetryAfter)) {
			delete(parts, id)
			continue
		}
		delete(f.failed, id)
		f.secondaries[id] = f.startSecondary(ctx, sc)
	}
	changed := f.sink.changes()
	marks := map[*heartbeater]uint64{}
	for id, part := range parts {
		hb := f.homeHB
		if id != f.home {
			hb = f.secondaries[id].hb
		}
		marks[hb] = hb.enqueue(part)
	}
	if err := f.await(ctx, changed, marks); err != nil {
		return nil, fmt.Errorf("amrmproxy: allocate: %w", err)
	}
	return f.merge(), nil
}

// await waits as YARN's allocate does: for the first answer since the
// parts were queued (changed closes at it), at most HeartbeatMaxWait,
// then as long again so that the others can make it into this answer.
// Unlike YARN's, which sleeps that time out, it ends once every
// sub-cluster sent a part answered it.
func (f *FederationInterceptor) await(ctx context.Context, changed <-chan struct{}, marks map[*heartbeater]uint64) error {
	answered := func() bool {
		for hb, mark := range marks {
			if !hb.answered(mark) {
				return false
			}
		}
		return true
	}
	start := time.Now()
	first := time.NewTimer(f.cfg.HeartbeatMaxWait)
	defer first.Stop()
	select {
	case <-changed:
	case <-first.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	extra := time.NewTimer(time.Since(start))
	defer extra.Stop()
	for {
		changed = f.sink.changes()
		if answered() {
			return nil
		}
		select {
		case <-changed:
		case <-extra.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// merge is the answer to the AM: the base of the last answers' headroom,
// with every answer in the sink merged in, the home's first, as YARN's
// mergeAllocateResponses does.
func (f *FederationInterceptor) merge() *yarnpb.AllocateResponseProto {
	out, arrived := f.sink.take(f.cfg.SubClusterTimeout)
	ids := slices.Sorted(maps.Keys(arrived))
	if i := slices.Index(ids, f.home); i > 0 {
		ids = append([]string{f.home}, slices.Delete(ids, i, i+1)...)
	}
	for _, id := range ids {
		for _, resp := range arrived[id] {
			f.own(id, resp)
			mergeInto(out, resp, id == f.home)
		}
	}
	return out
}

// startSecondary starts a secondary's heartbeater, whose first work is to
// launch the unmanaged AM there. The sub-cluster counts as timed out until
// it first answers, as in YARN, so that the policy sends it no more asks
// until it is known to serve.
func (f *FederationInterceptor) startSecondary(ctx context.Context, sc store.SubClusterInfo) *secondary {
	s := &secondary{sc: sc}
	f.sink.expectAt(sc.ID, f.cfg.Now().Add(-f.cfg.SubClusterTimeout))
	s.hb = startHeartbeater(ctx, &heartbeater{id: sc.ID, sink: f.sink, log: f.log,
		start: func(ctx context.Context) error {
			u, err := f.launchUAM(ctx, s)
			if err != nil {
				f.log.Warn("no unmanaged AM in a secondary sub-cluster", "sub_cluster", sc.ID, "err", err)
				return err
			}
			s.mu.Lock()
			s.uam = u
			s.mu.Unlock()
			f.keepToken(sc.ID, u.token)
			return nil
		},
		send: f.sendUAM(s),
	})
	return s
}

// sendUAM sends a secondary's parts with its unmanaged AM, keeping the
// AMRMToken the sub-cluster renews for the node's next life, as YARN's
// heartbeat callback stores it.
func (f *FederationInterceptor) sendUAM(s *secondary) func(context.Context, *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	return func(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
		u, _ := s.launched()
		resp, err := u.rm.Allocate(ctx, req)
		if t := resp.GetAmRmToken(); err == nil && t != nil {
			f.keepToken(s.sc.ID, amrmToken(t))
		}
		return resp, err
	}
}

// amrmToken is an AMRMToken as an RM hands it out, whose kind it may leave
// unset.
func amrmToken(t *commonpb.TokenProto) token.Token {
	tok := token.FromProto(t)
	tok.Kind = client.KindAMRMToken
	return tok
}

// keepToken keeps a secondary's unmanaged AM's token in the attempt's state.
func (f *FederationInterceptor) keepToken(id string, tok token.Token) {
	b, err := proto.Marshal(tok.Proto())
	if err != nil {
		f.log.Warn("keeping an unmanaged AM's token", "sub_cluster", id, "err", err)
		return
	}
	f.app.keep(keptSecondary+id, b)
}

// retireFailedLaunches stops the heartbeaters of secondaries whose
// unmanaged AM did not launch, or not re-attach (whose kept token goes
// too): as a secondary that fails a heartbeat, the AM goes on with the
// others, and asks sent there after RetryAfter launch a new one.
func (f *FederationInterceptor) retireFailedLaunches() {
	for _, id := range slices.Sorted(maps.Keys(f.secondaries)) {
		s := f.secondaries[id]
		if s.hb.launchFailed() == nil {
			continue
		}
		s.hb.stop()
		delete(f.secondaries, id)
		f.sink.forget(id)
		f.failed[id] = f.cfg.Now()
		if s.resumed {
			f.app.keep(keptSecondary+id, nil)
		}
	}
}

// own records which sub-cluster gave each container and forgets the
// completed ones; a policy that weighs headroom learns the sub-cluster's.
func (f *FederationInterceptor) own(id string, resp *yarnpb.AllocateResponseProto) {
	if o, ok := f.policy.(headroomObserver); ok {
		o.observe(id, resp)
	}
	for _, c := range resp.GetAllocatedContainers() {
		f.owner[containerKey(c.GetId())] = id
	}
	for _, st := range resp.GetCompletedContainerStatuses() {
		delete(f.owner, containerKey(st.GetContainerId()))
	}
}

func containerKey(id *yarnpb.ContainerIdProto) string {
	c, err := yarnid.ContainerIDFromProto(id)
	if err != nil {
		return ""
	}
	return c.String()
}

// mergeInto adds a sub-cluster's answer to the AM's, as YARN's
// mergeAllocateResponse: its containers, completions, NMTokens, node and
// container updates, and preemption; the AMRMToken, the AM command and the
// collector are the home's alone (a secondary's token stays with its
// unmanaged AM's client). Headroom and node count are the base's.
func mergeInto(dst, src *yarnpb.AllocateResponseProto, home bool) {
	dst.AllocatedContainers = append(dst.AllocatedContainers, src.GetAllocatedContainers()...)
	dst.CompletedContainerStatuses = append(dst.CompletedContainerStatuses, src.GetCompletedContainerStatuses()...)
	dst.NmTokens = append(dst.NmTokens, src.GetNmTokens()...)
	dst.UpdatedNodes = append(dst.UpdatedNodes, src.GetUpdatedNodes()...)
	dst.UpdatedContainers = append(dst.UpdatedContainers, src.GetUpdatedContainers()...)
	dst.UpdateErrors = append(dst.UpdateErrors, src.GetUpdateErrors()...)
	dst.ContainersFromPreviousAttempts = append(dst.ContainersFromPreviousAttempts, src.GetContainersFromPreviousAttempts()...)
	dst.RejectedSchedulingRequests = append(dst.RejectedSchedulingRequests, src.GetRejectedSchedulingRequests()...)
	if p := src.GetApplicationPriority(); p != nil {
		dst.ApplicationPriority = p
	}
	if p := src.GetPreempt(); p != nil {
		if dst.Preempt == nil {
			dst.Preempt = &yarnpb.PreemptionMessageProto{}
		}
		// Merging appends the contracts' containers and requests.
		proto.Merge(dst.Preempt, p)
	}
	if !home {
		return
	}
	if t := src.GetAmRmToken(); t != nil {
		dst.AmRmToken = t
	}
	if c := src.AMCommand; c != nil {
		dst.AMCommand = c
	}
	if c := src.GetCollectorInfo(); c != nil {
		dst.CollectorInfo = c
	}
}

// split divides a heartbeat among sub-clusters: asks by the policy,
// releases to the sub-cluster that allocated each container (the home for
// one it does not know), blacklist changes and the rest of the request
// to the home.
func (f *FederationInterceptor) split(req *yarnpb.AllocateRequestProto, active []string) map[string]*yarnpb.AllocateRequestProto {
	parts := map[string]*yarnpb.AllocateRequestProto{}
	part := func(id string) *yarnpb.AllocateRequestProto {
		p := parts[id]
		if p == nil {
			p = &yarnpb.AllocateRequestProto{Progress: req.Progress}
			parts[id] = p
		}
		return p
	}
	home := part(f.home)
	home.BlacklistRequest = req.BlacklistRequest
	home.UpdateRequests = req.UpdateRequests
	home.SchedulingRequests = req.SchedulingRequests
	home.TrackingUrl = req.TrackingUrl
	for id, asks := range f.policy.split(req.GetAsk(), f.home, active) {
		part(id).Ask = append(part(id).Ask, asks...)
	}
	for _, c := range req.GetRelease() {
		id, ok := f.owner[containerKey(c)]
		if !ok {
			id = f.home
		}
		part(id).Release = append(part(id).Release, c)
	}
	return parts
}

// launchUAM registers the attempt's unmanaged AM in a secondary
// sub-cluster: it submits the application there, under the same id and
// queue, as an unmanaged application of the same user, waits for the
// sub-cluster's AMRMToken in the report, and registers with the AM's own
// register request.
func (f *FederationInterceptor) launchUAM(ctx context.Context, s *secondary) (*uam, error) {
	sc := s.sc
	ctx, cancel := context.WithTimeout(ctx, f.cfg.LaunchTimeout)
	defer cancel()
	rmc, err := client.NewRMClient(sc.ClientRMServiceAddress, client.RMConfig{User: f.app.User, Logger: f.log})
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: sub-cluster %s: %w", sc.ID, err)
	}
	defer rmc.Close()
	appID := f.app.Attempt.App.Proto()
	asc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: appID, ApplicationName: proto.String(federation.UnmanagedAMName),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		KeepContainersAcrossApplicationAttempts: proto.Bool(true),
		Resource:                                &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}
	s.mu.Lock()
	s.submitted = true
	s.mu.Unlock()
	if err := rmc.SubmitApplication(ctx, asc); err != nil {
		return nil, fmt.Errorf("amrmproxy: unmanaged AM in %s: %w", sc.ID, err)
	}
	var report *yarnpb.ApplicationReportProto
	err = backoff.Retry(func() error {
		r, err := rmc.GetApplicationReport(ctx, appID)
		if err != nil {
			return err
		}
		if r.GetAmRmToken() == nil {
			return errors.New("no AMRMToken in the report yet")
		}
		report = r
		return nil
	}, backoff.WithContext(f.cfg.NewBackOff(), ctx))
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: AMRMToken of the unmanaged AM in %s: %w", sc.ID, err)
	}
	tok := amrmToken(report.GetAmRmToken())
	rm, err := f.uamClient(sc, tok)
	if err != nil {
		return nil, err
	}
	if _, err := rm.Register(ctx, f.register.GetHost(), f.register.GetRpcPort(), f.register.GetTrackingUrl()); err != nil {
		rm.Close()
		return nil, fmt.Errorf("amrmproxy: register the unmanaged AM in %s: %w", sc.ID, err)
	}
	f.log.Info("unmanaged AM registered in a secondary sub-cluster", "sub_cluster", sc.ID)
	return &uam{rm: rm, token: tok}, nil
}

// uamClient is the client of an unmanaged AM of tok in sc.
func (f *FederationInterceptor) uamClient(sc store.SubClusterInfo, tok token.Token) (*client.AMRMClient, error) {
	rm, err := client.NewAMRMClient(sc.AMRMServiceAddress, client.AMRMConfig{Token: tok, NewBackOff: f.cfg.NewBackOff, Logger: f.log.With("sub_cluster", sc.ID)})
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: unmanaged AM in %s: %w", sc.ID, err)
	}
	return rm, nil
}

// FinishApplicationMaster sends what the heartbeaters hold still, stops
// them, and unregisters the unmanaged AMs, then the home.
func (f *FederationInterceptor) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	f.finished = true
	for _, hb := range f.heartbeaters() {
		if err := hb.drain(ctx); err != nil {
			return nil, fmt.Errorf("amrmproxy: finish: the heartbeats to sub-cluster %s: %w", hb.id, err)
		}
	}
	f.stopHeartbeats()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(f.secondaries)) {
		u, _ := f.secondaries[id].launched()
		if u == nil {
			delete(f.secondaries, id)
			continue
		}
		if err := u.rm.Finish(ctx, req.GetFinalApplicationStatus(), req.GetDiagnostics(), req.GetTrackingUrl()); err != nil {
			errs = append(errs, fmt.Errorf("sub-cluster %s: %w", id, err))
			continue
		}
		u.rm.Close()
		delete(f.secondaries, id)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("amrmproxy: finish the unmanaged AMs: %w", err)
	}
	return f.next.FinishApplicationMaster(ctx, req)
}

// heartbeaters lists the running heartbeaters, the home's first.
func (f *FederationInterceptor) heartbeaters() []*heartbeater {
	var out []*heartbeater
	if f.homeHB != nil {
		out = append(out, f.homeHB)
	}
	for _, id := range slices.Sorted(maps.Keys(f.secondaries)) {
		out = append(out, f.secondaries[id].hb)
	}
	return out
}

// stopHeartbeats stops every heartbeater and waits for its goroutine.
func (f *FederationInterceptor) stopHeartbeats() {
	for _, hb := range f.heartbeaters() {
		hb.stop()
	}
}

// End kills the unmanaged AMs' applications in the secondary
// sub-clusters, as YARN's interceptor does when the AM's application ends
// without it finishing; the home RM ended the home's already.
func (f *FederationInterceptor) End(ctx context.Context) error {
	f.stopHeartbeats()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(f.secondaries)) {
		s := f.secondaries[id]
		if _, submitted := s.launched(); !submitted {
			continue
		}
		if err := f.killUAM(ctx, s.sc.ClientRMServiceAddress); err != nil {
			errs = append(errs, fmt.Errorf("sub-cluster %s: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("amrmproxy: kill the unmanaged AMs: %w", err)
	}
	return nil
}

func (f *FederationInterceptor) killUAM(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.LaunchTimeout)
	defer cancel()
	rmc, err := client.NewRMClient(addr, client.RMConfig{User: f.app.User, Logger: f.log})
	if err != nil {
		return err
	}
	defer rmc.Close()
	return rmc.KillApplication(ctx, f.app.Attempt.App.Proto(), "the application ended in its home sub-cluster")
}

// Close stops the heartbeaters and closes the connections to the
// secondary sub-clusters.
func (f *FederationInterceptor) Close() error {
	f.stopHeartbeats()
	var errs []error
	for id, s := range f.secondaries {
		if u, _ := s.launched(); u != nil {
			errs = append(errs, u.rm.Close())
		}
		delete(f.secondaries, id)
	}
	return errors.Join(errs...)
}
