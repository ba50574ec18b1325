package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// javaDate is the layout of Java's Date.toString, in which YARN's Router
// admin answers times.
const javaDate = "Mon Jan 02 15:04:05 MST 2006"

// AdminStore is what the Router's admin protocol reads and writes of the
// store: the Router's own Cache, so that a policy an admin saves routes
// this Router's next submission (other Routers see it within their TTL).
// A deregistration judges a sub-cluster's heartbeat past the cache.
type AdminStore interface {
	GetSubClusterFlushed(ctx context.Context, id string) (store.SubClusterInfo, error)
	GetSubClusters(ctx context.Context, filterInactive bool) ([]store.SubClusterInfo, error)
	DeregisterSubCluster(ctx context.Context, id string, state store.State) error
	SetPolicyConfiguration(ctx context.Context, p store.PolicyConfiguration) error
	GetPoliciesConfigurations(ctx context.Context) ([]store.PolicyConfiguration, error)
	DeletePoliciesConfigurations(ctx context.Context, queues []string) error
	DeleteApplicationHomeSubCluster(ctx context.Context, application string) error
}

// AdminConfig configures an Admin.
type AdminConfig struct {
	Store AdminStore
	// AdminACL is yarn.admin.acl: who may call.
	AdminACL acl.ACL
	// Expiration is yarn.router.subcluster.heartbeat.expiration.time: a
	// sub-cluster deregistered by hand must have been silent this long.
	Expiration time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Admin is the federation part of the Router's
// ResourceManagerAdministrationProtocol (YARN's FederationRMAdminInterceptor,
// which `yarn routeradmin` calls): deregistering silent sub-clusters,
// saving, listing and deleting queue policies, listing sub-clusters,
// forgetting an application's home. The RM admin calls that YARN's Router forwards to a sub-cluster are
// not served.
type Admin struct {
	cfg AdminConfig
	log *slog.Logger
}

// NewAdmin returns the admin cfg describes; it does no I/O.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	if cfg.Store == nil || cfg.Expiration <= 0 {
		return nil, errors.New("router: the admin protocol needs a store and an expiration")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Admin{cfg: cfg, log: log}, nil
}

// Register serves the admin methods on srv.
func (a *Admin) Register(srv *ipc.Server) error {
	return srv.Register(yarnrpc.ResourceManagerAdministrationProtocolName, a.Methods()...)
}

// Methods are the admin protocol's methods the Router serves.
func (a *Admin) Methods() []ipc.Method {
	return yarnrpc.ResourceManagerAdministrationProtocolFuncs{
		DeregisterSubCluster:             adminOnly(a, "deregisterSubCluster", a.DeregisterSubCluster),
		SaveFederationQueuePolicy:        adminOnly(a, "saveFederationQueuePolicy", a.SaveFederationQueuePolicy),
		BatchSaveFederationQueuePolicies: adminOnly(a, "batchSaveFederationQueuePolicies", a.BatchSaveFederationQueuePolicies),
		ListFederationQueuePolicies:      adminOnly(a, "listFederationQueuePolicies", a.ListFederationQueuePolicies),
		DeleteFederationPoliciesByQueues: adminOnly(a, "deleteFederationPoliciesByQueues", a.DeleteFederationPoliciesByQueues),
		GetFederationSubClusters:         adminOnly(a, "getFederationSubClusters", a.GetFederationSubClusters),
		DeleteFederationApplication:      adminOnly(a, "deleteFederationApplication", a.DeleteFederationApplication),
	}.Methods()
}

// adminOnly answers fn for callers on yarn.admin.acl only.
func adminOnly[Req, Resp proto.Message](a *Admin, method string, fn func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		c, _ := ipc.CallerFrom(ctx)
		if !a.cfg.AdminACL.Allows(c.User, nil) {
			var none Resp
			a.log.WarnContext(ctx, "router admin call refused", "user", c.User, "operation", method)
			return none, yarnerr.YarnException.Errorf("User %s doesn't have permission to call '%s'", c.User, method)
		}
		resp, err := fn(ctx, req)
		if err == nil {
			a.log.InfoContext(ctx, "router admin call", "user", c.User, "operation", method)
		}
		return resp, err
	}
}

// DeregisterSubCluster marks SC_LOST the named sub-cluster, or every
// active one when none is named, whose heartbeat is older than the
// expiration, and answers what became of each.
func (a *Admin) DeregisterSubCluster(ctx context.Context, req *yarnpb.DeregisterSubClusterRequestProto) (*yarnpb.DeregisterSubClusterResponseProto, error) {
	ids := []string{req.GetSubClusterId()}
	if req.GetSubClusterId() == "" {
		active, err := a.cfg.Store.GetSubClusters(ctx, true)
		if err != nil {
			return nil, wrapped(err, "Unable to deregisterSubCluster due to exception. %v", err)
		}
		ids = ids[:0]
		for _, sc := range active {
			ids = append(ids, sc.ID)
		}
	}
	resp := &yarnpb.DeregisterSubClusterResponseProto{}
	for _, id := range ids {
		resp.DeregisterSubClusters = append(resp.DeregisterSubClusters, a.deregister(ctx, id))
	}
	return resp, nil
}

// deregister is one sub-cluster's part of DeregisterSubCluster. YARN's
// marks one LOST when its last heartbeat is younger than the expiration,
// against its own documentation; Knit marks it when older, as documented.
func (a *Admin) deregister(ctx context.Context, id string) *yarnpb.DeregisterSubClustersProto {
	sc, err := a.cfg.Store.GetSubClusterFlushed(ctx, id)
	if err != nil {
		return &yarnpb.DeregisterSubClustersProto{SubClusterId: proto.String(id), DeregisterState: proto.String("FAILED"),
			LastHeartBeatTime: proto.String("UNKNOWN"), Information: proto.String(err.Error()), SubClusterState: proto.String("UNKNOWN")}
	}
	out := &yarnpb.DeregisterSubClustersProto{SubClusterId: proto.String(id), DeregisterState: proto.String("NONE"),
		LastHeartBeatTime: proto.String(sc.LastHeartBeat.Format(javaDate)), Information: proto.String("Normal Heartbeat"),
		SubClusterState: proto.String(sc.State.String())}
	if sc.State != store.StateRunning && sc.State != store.StateNew {
		out.DeregisterState = proto.String("FAILED")
		out.Information = proto.String("The subCluster is Unusable, So it can't be Deregistered")
		return out
	}
	if a.cfg.Now().Sub(sc.LastHeartBeat) < a.cfg.Expiration {
		return out
	}
	if err := a.cfg.Store.DeregisterSubCluster(ctx, id, store.StateLost); err != nil {
		out.DeregisterState = proto.String("FAILED")
		out.Information = proto.String("DeregisterSubClusters Failed.")
		return out
	}
	a.log.WarnContext(ctx, "sub-cluster deregistered by an admin", "subCluster", id, "lastHeartBeat", sc.LastHeartBeat)
	out.DeregisterState = proto.String("SUCCESS")
	out.SubClusterState = proto.String(store.StateLost.String())
	out.Information = proto.String(fmt.Sprintf("Heartbeat Time >= %dminutes", int64(a.cfg.Expiration/time.Minute)))
	return out
}

// SaveFederationQueuePolicy stores a queue's weighted policy.
func (a *Admin) SaveFederationQueuePolicy(ctx context.Context, req *yarnpb.SaveFederationQueuePolicyRequestProto) (*yarnpb.SaveFederationQueuePolicyResponseProto, error) {
	w := req.GetFederationQueueWeight()
	if w == nil {
		return nil, yarnerr.YarnException.New("Missing FederationQueueWeight information.")
	}
	if strings.TrimSpace(req.GetQueue()) == "" {
		return nil, yarnerr.YarnException.New("Missing Queue information.")
	}
	p, err := queuePolicy(req.GetQueue(), req.GetPolicyManagerClassName(), w)
	if err != nil {
		return nil, err
	}
	if err := a.cfg.Store.SetPolicyConfiguration(ctx, p); err != nil {
		return nil, wrapped(err, "Unable to saveFederationQueuePolicy due to exception. %v", err)
	}
	return &yarnpb.SaveFederationQueuePolicyResponseProto{Message: proto.String("save policy success.")}, nil
}

// BatchSaveFederationQueuePolicies stores several queues' policies, each
// naming its queue and policy manager.
func (a *Admin) BatchSaveFederationQueuePolicies(ctx context.Context, req *yarnpb.BatchSaveFederationQueuePoliciesRequestProto) (*yarnpb.BatchSaveFederationQueuePoliciesResponseProto, error) {
	var policies []store.PolicyConfiguration
	for _, w := range req.GetFederationQueueWeights() {
		if strings.TrimSpace(w.GetQueue()) == "" {
			return nil, yarnerr.YarnException.New("Missing Queue information.")
		}
		if strings.TrimSpace(w.GetPolicyManagerClassName()) == "" {
			return nil, yarnerr.YarnException.New("Missing PolicyManagerClassName information.")
		}
		p, err := queuePolicy(w.GetQueue(), w.GetPolicyManagerClassName(), w)
		if err != nil {
			return nil, err
		}
		policies = append(policies, p)
	}
	// All are checked before any is stored.
	for _, p := range policies {
		if err := a.cfg.Store.SetPolicyConfiguration(ctx, p); err != nil {
			return nil, wrapped(err, "Unable to batchSaveFederationQueuePolicies due to exception. %v", err)
		}
	}
	return &yarnpb.BatchSaveFederationQueuePoliciesResponseProto{Message: proto.String("batch save policies success.")}, nil
}

// queuePolicy is the policy configuration of a queue weight, checked as
// FederationQueueWeight checks it.
func queuePolicy(queue, manager string, w *yarnpb.FederationQueueWeightProto) (store.PolicyConfiguration, error) {
	router, err := subClusterWeights(w.GetRouterWeight())
	if err != nil {
		return store.PolicyConfiguration{}, err
	}
	amrm, err := subClusterWeights(w.GetAmrmWeight())
	if err != nil {
		return store.PolicyConfiguration{}, err
	}
	alpha, err := strconv.ParseFloat(strings.TrimSpace(w.GetHeadRoomAlpha()), 64)
	if err != nil {
		return store.PolicyConfiguration{}, yarnerr.YarnException.New("HeadRoomAlpha must be a number.")
	}
	if !(alpha >= 0 && alpha <= 1) {
		return store.PolicyConfiguration{}, yarnerr.YarnException.New("HeadRoomAlpha must be between 0-1.")
	}
	params, err := MarshalWeightedPolicyInfo(WeightedPolicyInfo{RouterWeights: router, AMRMWeights: amrm, HeadroomAlpha: alpha})
	if err != nil {
		return store.PolicyConfiguration{}, yarnerr.YarnException.Wrap(err)
	}
	return store.PolicyConfiguration{Queue: queue, Type: manager, Params: params}, nil
}

// subClusterWeights reads "SC-1:0.7,SC-2:0.3", whose weights must add up
// to 1 (FederationQueueWeight.checkSubClusterQueueWeightRatioValid).
func subClusterWeights(s string) (map[string]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, yarnerr.YarnException.New("subClusterWeight can't be empty!")
	}
	out := map[string]float64{}
	var sum float64
	for _, item := range strings.Split(s, ",") {
		id, w, ok := strings.Cut(item, ":")
		if !ok || strings.Contains(w, ":") || id == "" {
			return nil, yarnerr.YarnException.New("The subClusterWeight cannot be empty, and the subClusterWeight size must be 2. (eg.SC-1,0.2)")
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil {
			return nil, yarnerr.NumberFormat.Errorf("For input string: %q", w)
		}
		out[id] = f
		sum += f
	}
	if math.Abs(sum-1) >= 1e-6 {
		return nil, yarnerr.YarnException.New("The sum of ratios for all subClusters must be equal to 1.")
	}
	return out, nil
}

// GetFederationSubClusters lists every sub-cluster with its state and
// last heartbeat.
func (a *Admin) GetFederationSubClusters(ctx context.Context, _ *yarnpb.GetSubClustersRequestProto) (*yarnpb.GetSubClustersResponseProto, error) {
	all, err := a.cfg.Store.GetSubClusters(ctx, false)
	if err != nil {
		return nil, wrapped(err, "Unable to getFederationSubClusters due to exception. %v", err)
	}
	resp := &yarnpb.GetSubClustersResponseProto{}
	for _, sc := range all {
		resp.SubClusters = append(resp.SubClusters, &yarnpb.FederationSubClusterProto{
			SubClusterId: proto.String(sc.ID), LastHeartBeatTime: proto.String(sc.LastHeartBeat.Format(javaDate)),
			SubClusterState: proto.String(sc.State.String()),
		})
	}
	return resp, nil
}

// DeleteFederationApplication forgets an application's home.
func (a *Admin) DeleteFederationApplication(ctx context.Context, req *yarnpb.DeleteFederationApplicationRequestProto) (*yarnpb.DeleteFederationApplicationResponseProto, error) {
	id, err := yarnid.ParseApplicationID(req.GetApplication())
	if err != nil {
		return nil, yarnerr.IllegalArgument.Wrap(err)
	}
	if err := a.cfg.Store.DeleteApplicationHomeSubCluster(ctx, id.String()); err != nil {
		return nil, wrapped(err, "Unable to deleteFederationApplication due to exception. %v", err)
	}
	return &yarnpb.DeleteFederationApplicationResponseProto{Message: proto.String(fmt.Sprintf("applicationId = %s delete success.", id))}, nil
}

// ListFederationQueuePolicies answers a page of the queues' weighted
// policies: the one queue asked for, else those of the queues asked for,
// else all, as FederationRMAdminInterceptor pages them.
func (a *Admin) ListFederationQueuePolicies(ctx context.Context, req *yarnpb.QueryFederationQueuePoliciesRequestProto) (*yarnpb.QueryFederationQueuePoliciesResponseProto, error) {
	size, page := int(req.GetPageSize()), int(req.GetCurrentPage())
	if size <= 0 {
		return nil, yarnerr.YarnException.New("PageSize cannot be negative or zero.")
	}
	if page <= 0 {
		return nil, yarnerr.YarnException.New("CurrentPage cannot be negative or zero.")
	}
	all, err := a.cfg.Store.GetPoliciesConfigurations(ctx)
	if err != nil {
		return nil, wrapped(err, "Unable to ListFederationQueuePolicies due to exception. %v", err)
	}
	byQueue := make(map[string]store.PolicyConfiguration, len(all))
	for _, p := range all {
		byQueue[p.Queue] = p
	}
	var chosen []store.PolicyConfiguration
	switch {
	case strings.TrimSpace(req.GetQueue()) != "":
		p, ok := byQueue[req.GetQueue()]
		if !ok {
			return &yarnpb.QueryFederationQueuePoliciesResponseProto{}, nil
		}
		w, err := queueWeight(p)
		if err != nil {
			return nil, err
		}
		// One queue is one page of one, whatever was asked.
		return &yarnpb.QueryFederationQueuePoliciesResponseProto{TotalSize: proto.Int32(1), TotalPage: proto.Int32(1),
			CurrentPage: proto.Int32(int32(page)), PageSize: proto.Int32(int32(size)), FederationQueueWeights: []*yarnpb.FederationQueueWeightProto{w}}, nil
	case len(req.GetQueues()) > 0:
		for _, q := range req.GetQueues() {
			if p, ok := byQueue[q]; ok {
				chosen = append(chosen, p)
			}
		}
	default:
		chosen = all
	}
	if len(chosen) == 0 {
		return &yarnpb.QueryFederationQueuePoliciesResponseProto{}, nil
	}
	weights := make([]*yarnpb.FederationQueueWeightProto, 0, len(chosen))
	for _, p := range chosen {
		w, err := queueWeight(p)
		if err != nil {
			return nil, err
		}
		weights = append(weights, w)
	}
	start := (page - 1) * size
	if start > len(weights) {
		return nil, yarnerr.YarnException.New("The index of the records to be retrieved has exceeded the maximum index.")
	}
	end := min(start+size, len(weights))
	return &yarnpb.QueryFederationQueuePoliciesResponseProto{
		TotalSize: proto.Int32(int32(len(weights))), TotalPage: proto.Int32(int32((len(weights) + size - 1) / size)),
		CurrentPage: proto.Int32(int32(page)), PageSize: proto.Int32(int32(size)), FederationQueueWeights: weights[start:end],
	}, nil
}

// queueWeight is a stored policy as a FederationQueueWeight: its weights
// written back as "SC-1:0.7,SC-2:0.3", checked as they were on the way in.
func queueWeight(p store.PolicyConfiguration) (*yarnpb.FederationQueueWeightProto, error) {
	info, err := ParseWeightedPolicyInfo(p.Params)
	if err != nil {
		return nil, yarnerr.YarnException.Wrap(err)
	}
	router, amrm := weightList(info.RouterWeights), weightList(info.AMRMWeights)
	for _, w := range []string{router, amrm} {
		if _, err := subClusterWeights(w); err != nil {
			return nil, err
		}
	}
	return &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String(router), AmrmWeight: proto.String(amrm),
		HeadRoomAlpha: proto.String(javaFloat(info.HeadroomAlpha)), Queue: proto.String(p.Queue), PolicyManagerClassName: proto.String(p.Type)}, nil
}

// weightList writes weights as "SC-1:0.7,SC-2:0.3", by sub-cluster id.
func weightList(weights map[string]float64) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(weights)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id + ":" + javaFloat(weights[id]))
	}
	return b.String()
}

// javaFloat is Java's Float.toString of f for the plain numbers weights
// are: "1.0", "0.7".
func javaFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 32)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// DeleteFederationPoliciesByQueues forgets the policies of queues.
func (a *Admin) DeleteFederationPoliciesByQueues(ctx context.Context, req *yarnpb.DeleteFederationQueuePoliciesRequestProto) (*yarnpb.DeleteFederationQueuePoliciesResponseProto, error) {
	if len(req.GetQueues()) == 0 {
		return nil, yarnerr.YarnException.New("queues cannot be null.")
	}
	if err := a.cfg.Store.DeletePoliciesConfigurations(ctx, req.GetQueues()); err != nil {
		return nil, wrapped(err, "Unable to deleteFederationPoliciesByQueues due to exception. %v", err)
	}
	return &yarnpb.DeleteFederationQueuePoliciesResponseProto{Message: proto.String("queues = " + strings.Join(req.GetQueues(), ",") + " delete success.")}, nil
}
