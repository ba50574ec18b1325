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
	// sub-cluster, a heartbeat's wait on it; zero means 30 s. A
	// sub-cluster where it failed is left out for RetryAfter (zero: a
	// minute), so that heartbeats do not wait on it each time.
	LaunchTimeout, RetryAfter time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// FederationInterceptor spreads an AM's asks over the federation's
// sub-clusters as YARN's FederationInterceptor does: the AMRMProxy policy
// of the application's queue splits each heartbeat's asks; the home
// sub-cluster's part goes to the next stage (the default interceptor, with
// the real AMRMToken), each secondary's to an unmanaged AM the interceptor
// registers there under the same application id, with that sub-cluster's
// own AMRMToken; the answers are merged into one. Releases go to the
// sub-cluster that allocated the container.
type FederationInterceptor struct {
	cfg  FederationSettings
	app  App
	next Interceptor
	log  *slog.Logger

	home     string
	register *yarnpb.RegisterApplicationMasterRequestProto
	policy   amrmPolicy
	// uams are the unmanaged AMs in secondary sub-clusters, by id.
	uams map[string]*uam
	// owner maps each container the AM was given to its sub-cluster.
	owner map[string]string
	// failed holds when an unmanaged AM last failed to launch, by
	// sub-cluster.
	failed map[string]time.Time
}

var (
	_ Interceptor = (*FederationInterceptor)(nil)
	_ Ender       = (*FederationInterceptor)(nil)
)

// uam is the attempt's unmanaged AM in one secondary sub-cluster.
type uam struct {
	rm *client.AMRMClient
	// clientRM is the sub-cluster's client address, where the unmanaged
	// application is killed if the AM never finishes.
	clientRM string
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
		return &FederationInterceptor{cfg: s, app: app, next: next, log: app.Logger, uams: map[string]*uam{}, owner: map[string]string{}, failed: map[string]time.Time{}}, nil
	}
}

// RegisterApplicationMaster registers with the home RM and reads the
// application's home and its queue's policy; unmanaged AMs register in
// secondary sub-clusters when they are first sent asks.
func (f *FederationInterceptor) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
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
	f.home, f.policy = home, policy
	f.register = proto.Clone(req).(*yarnpb.RegisterApplicationMasterRequestProto)
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

// Allocate splits the heartbeat, sends each part, and merges the answers.
func (f *FederationInterceptor) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	if f.register == nil {
		return f.next.Allocate(ctx, req)
	}
	active, err := f.cfg.Store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: sub-clusters: %w", err)
	}
	byID := map[string]store.SubClusterInfo{}
	var ids []string
	for _, sc := range active {
		byID[sc.ID] = sc
		ids = append(ids, sc.ID)
	}
	slices.Sort(ids)
	parts := f.split(req, ids)
	// Every secondary with an unmanaged AM heartbeats, asks or not, so its
	// allocations and completions come back.
	for id := range f.uams {
		if _, ok := parts[id]; !ok {
			parts[id] = &yarnpb.AllocateRequestProto{Progress: req.Progress}
		}
	}
	for id := range parts {
		if id == f.home || f.uams[id] != nil {
			continue
		}
		sc, ok := byID[id]
		if at, failed := f.failed[id]; !ok || failed && f.cfg.Now().Before(at.Add(f.cfg.RetryAfter)) {
			delete(parts, id)
			continue
		}
		u, err := f.launchUAM(ctx, sc)
		if err != nil {
			// As a secondary that fails a heartbeat: the AM goes on with
			// the others, and asks sent there after RetryAfter try again.
			f.log.Warn("no unmanaged AM in a secondary sub-cluster", "sub_cluster", id, "err", err)
			f.failed[id] = f.cfg.Now()
			delete(parts, id)
			continue
		}
		delete(f.failed, id)
		f.uams[id] = u
	}
	home := parts[f.home]
	if home == nil {
		home = &yarnpb.AllocateRequestProto{Progress: req.Progress}
	}
	home.ResponseId = req.ResponseId
	resps := map[string]*yarnpb.AllocateResponseProto{}
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, part := range parts {
		if id == f.home {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.uams[id].rm.Allocate(ctx, part)
			mu.Lock()
			defer mu.Unlock()
			resps[id], errs[id] = resp, err
		}()
	}
	homeResp, homeErr := f.next.Allocate(ctx, home)
	wg.Wait()
	if homeErr != nil {
		return nil, homeErr
	}
	merged := proto.Clone(homeResp).(*yarnpb.AllocateResponseProto)
	f.own(f.home, homeResp)
	for _, id := range slices.Sorted(maps.Keys(resps)) {
		if err := errs[id]; err != nil {
			// A secondary that fails loses its part of this heartbeat, not
			// the AM's home: YARN's interceptor goes on with the others.
			f.log.Warn("secondary sub-cluster heartbeat failed", "sub_cluster", id, "err", err)
			continue
		}
		f.own(id, resps[id])
		mergeInto(merged, resps[id])
	}
	return merged, nil
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

// mergeInto adds a secondary's answer to the merged one: its containers,
// completions, NMTokens, node updates and headroom. The AMRMToken of a
// secondary stays with its unmanaged AM's client.
func mergeInto(dst, src *yarnpb.AllocateResponseProto) {
	dst.AllocatedContainers = append(dst.AllocatedContainers, src.GetAllocatedContainers()...)
	dst.CompletedContainerStatuses = append(dst.CompletedContainerStatuses, src.GetCompletedContainerStatuses()...)
	dst.NmTokens = append(dst.NmTokens, src.GetNmTokens()...)
	dst.UpdatedNodes = append(dst.UpdatedNodes, src.GetUpdatedNodes()...)
	if l := src.GetLimit(); l != nil {
		if dst.Limit == nil {
			dst.Limit = &yarnpb.ResourceProto{}
		}
		dst.Limit.Memory = proto.Int64(dst.Limit.GetMemory() + l.GetMemory())
		dst.Limit.VirtualCores = proto.Int32(dst.Limit.GetVirtualCores() + l.GetVirtualCores())
	}
	dst.NumClusterNodes = proto.Int32(dst.GetNumClusterNodes() + src.GetNumClusterNodes())
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
func (f *FederationInterceptor) launchUAM(ctx context.Context, sc store.SubClusterInfo) (*uam, error) {
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
	tok := report.GetAmRmToken()
	tok.Kind = proto.String(client.KindAMRMToken)
	rm, err := client.NewAMRMClient(sc.AMRMServiceAddress, client.AMRMConfig{Token: token.FromProto(tok), NewBackOff: f.cfg.NewBackOff, Logger: f.log.With("sub_cluster", sc.ID)})
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: unmanaged AM in %s: %w", sc.ID, err)
	}
	if _, err := rm.Register(ctx, f.register.GetHost(), f.register.GetRpcPort(), f.register.GetTrackingUrl()); err != nil {
		rm.Close()
		return nil, fmt.Errorf("amrmproxy: register the unmanaged AM in %s: %w", sc.ID, err)
	}
	f.log.Info("unmanaged AM registered in a secondary sub-cluster", "sub_cluster", sc.ID)
	return &uam{rm: rm, clientRM: sc.ClientRMServiceAddress}, nil
}

// FinishApplicationMaster unregisters the unmanaged AMs, then the home.
func (f *FederationInterceptor) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(f.uams)) {
		if err := f.uams[id].rm.Finish(ctx, req.GetFinalApplicationStatus(), req.GetDiagnostics(), req.GetTrackingUrl()); err != nil {
			errs = append(errs, fmt.Errorf("sub-cluster %s: %w", id, err))
			continue
		}
		f.uams[id].rm.Close()
		delete(f.uams, id)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("amrmproxy: finish the unmanaged AMs: %w", err)
	}
	return f.next.FinishApplicationMaster(ctx, req)
}

// End kills the unmanaged AMs' applications in the secondary
// sub-clusters, as YARN's interceptor does when the AM's application ends
// without it finishing; the home RM ended the home's already.
func (f *FederationInterceptor) End(ctx context.Context) error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(f.uams)) {
		if err := f.killUAM(ctx, f.uams[id].clientRM); err != nil {
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

// Close closes the connections to the secondary sub-clusters.
func (f *FederationInterceptor) Close() error {
	var errs []error
	for id, u := range f.uams {
		errs = append(errs, u.rm.Close())
		delete(f.uams, id)
	}
	return errors.Join(errs...)
}
