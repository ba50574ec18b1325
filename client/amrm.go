package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// DefaultFinishInterval is how often Finish repeats finishApplicationMaster
// until the RM unregisters the attempt (AMRMClientImpl's 100 ms).
const DefaultFinishInterval = 100 * time.Millisecond

// AMRMConfig configures an AMRMClient.
type AMRMConfig struct {
	// Token is the attempt's AMRMToken (kind YARN_AM_RM_TOKEN), usually
	// from the credentials file HADOOP_TOKEN_FILE_LOCATION names (see
	// ReadCredentialsFile and AMRMToken); required.
	Token token.Token
	// NMTokens receives the NMTokens of every answer; nil means a new cache,
	// which NMTokens returns.
	NMTokens *NMTokenCache
	// FinishInterval paces Finish; zero means DefaultFinishInterval.
	FinishInterval time.Duration
	// NewBackOff paces resending allocate and finishApplicationMaster after
	// a transport failure or a standby answer; nil means exponential
	// backoff from 100 ms for at most 15 minutes, as long as Hadoop's
	// yarn.resourcemanager.connect.max-wait.ms.
	NewBackOff func() backoff.BackOff
	// Logger receives progress messages; nil means slog.Default().
	Logger *slog.Logger
}

// AskKey is what makes two resource requests the same ask: YARN keeps one
// outstanding total per key.
type AskKey struct {
	priority      int32
	resourceName  string
	capability    string // deterministic encoding of the ResourceProto
	executionType yarnpb.ExecutionTypeProto
	allocationID  int64
}

// AMRMClient speaks ApplicationMasterProtocol for one application attempt,
// as Hadoop's AMRMClientImpl does. It is safe for concurrent use; calls are
// made one at a time.
type AMRMClient struct {
	addr     string
	cfg      AMRMConfig
	log      *slog.Logger
	nmTokens *NMTokenCache
	dial     func(tok *commonpb.TokenProto) (caller, error)

	mu         sync.Mutex
	rpc        caller
	token      *commonpb.TokenProto
	register   *yarnpb.RegisterApplicationMasterRequestProto // nil until Register
	responseID int32

	// asks is the latest total stated for each key; dirty lists, in first
	// change order, the keys the RM has not yet acknowledged.
	asks    map[AskKey]*yarnpb.ResourceRequestProto
	dirty   []AskKey
	isDirty map[AskKey]bool
	// release holds releases not yet sent; pendingRelease those sent and not
	// yet reported complete, resent after a re-register.
	release        map[string]*yarnpb.ContainerIdProto
	pendingRelease map[string]*yarnpb.ContainerIdProto
	// blacklist is the current blacklist; blacklistAdd and blacklistRemove
	// the changes not yet sent.
	blacklist, blacklistAdd, blacklistRemove map[string]bool
}

// NewAMRMClient returns a client of the RM's scheduler service at addr
// (yarn.resourcemanager.scheduler.address); it connects on the first call.
// An addr listing several RMs (HA, see Addresses) fails over between them.
func NewAMRMClient(addr string, cfg AMRMConfig) (*AMRMClient, error) {
	if cfg.Token.Kind != KindAMRMToken {
		return nil, fmt.Errorf("client: new AMRM client: token of kind %q, want %s", cfg.Token.Kind, KindAMRMToken)
	}
	if cfg.FinishInterval <= 0 {
		cfg.FinishInterval = DefaultFinishInterval
	}
	if cfg.NewBackOff == nil {
		cfg.NewBackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval = 100 * time.Millisecond
			b.MaxInterval = 10 * time.Second
			b.MaxElapsedTime = 15 * time.Minute
			return b
		}
	}
	if cfg.NMTokens == nil {
		cfg.NMTokens = NewNMTokenCache()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &AMRMClient{
		addr:            addr,
		cfg:             cfg,
		log:             log.With("scheduler", addr),
		nmTokens:        cfg.NMTokens,
		token:           cfg.Token.Proto(),
		asks:            map[AskKey]*yarnpb.ResourceRequestProto{},
		isDirty:         map[AskKey]bool{},
		release:         map[string]*yarnpb.ContainerIdProto{},
		pendingRelease:  map[string]*yarnpb.ContainerIdProto{},
		blacklist:       map[string]bool{},
		blacklistAdd:    map[string]bool{},
		blacklistRemove: map[string]bool{},
	}
	c.dial = func(tok *commonpb.TokenProto) (caller, error) {
		addrs := Addresses(addr)
		if len(addrs) <= 1 {
			return ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok, Logger: log, Errors: yarnerr.FromRemote})
		}
		return newFailover(addrs, func(a string) (caller, error) {
			return ipc.NewClient(a, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok, Logger: log, Errors: yarnerr.FromRemote, NewBackOff: noConnectRetries})
		}, log)
	}
	return c, nil
}

// NMTokens is the cache the client puts the NMTokens it receives in.
func (c *AMRMClient) NMTokens() *NMTokenCache { return c.nmTokens }

// Close closes the connection.
func (c *AMRMClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rpc == nil {
		return nil
	}
	err := c.rpc.Close()
	c.rpc = nil
	return err
}

// Register registers the attempt with the RM (registerApplicationMaster):
// host and rpcPort where clients reach the AM (-1 for none) and its
// tracking URL. The answer's NMTokens of containers kept from earlier
// attempts go into the cache. The arguments are kept for re-registering.
func (c *AMRMClient) Register(ctx context.Context, host string, rpcPort int32, trackingURL string) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := &yarnpb.RegisterApplicationMasterRequestProto{
		Host:        proto.String(host),
		RpcPort:     proto.Int32(rpcPort),
		TrackingUrl: proto.String(trackingURL),
	}
	return c.registerLocked(ctx, req)
}

func (c *AMRMClient) registerLocked(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	rpc, err := c.conn()
	if err != nil {
		return nil, err
	}
	// Not resent after a transport failure: a register the RM did take
	// would be refused the second time.
	resp, err := yarnrpc.NewApplicationMasterProtocolClient(rpc).RegisterApplicationMaster(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: register application master: %w", err)
	}
	c.register = req
	c.responseID = 0
	c.nmTokens.addAll(resp.GetNmTokensFromPreviousAttempts())
	c.log.Info("registered application master", "queue", resp.GetQueue(),
		"containers_from_previous_attempts", len(resp.GetContainersFromPreviousAttempts()))
	return resp, nil
}

// Resume makes the client that of an attempt req registered in an earlier
// life of its caller (a restarted AMRMProxy): it registers no more, and
// its first heartbeat takes the RM's response id from the RM's refusal.
// A later re-register (the RM lost the attempt) sends req again.
func (c *AMRMClient) Resume(req *yarnpb.RegisterApplicationMasterRequestProto) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.register = proto.Clone(req).(*yarnpb.RegisterApplicationMasterRequestProto)
}

// Allocate sends one heartbeat (allocate). Asks in req are absolute: each
// states the total now outstanding for its key (priority, resource name,
// capability, execution type, allocation request id), and a key keeps its
// last total until changed — send a key again only when its total changes,
// including after containers for it were allocated. Releases and blacklist
// changes are sent once. Whatever the RM has not acknowledged (after an
// error) goes again with the next call. The client sets response_id.
//
// If the RM no longer knows the attempt (an RM restart or failover), the
// client registers again and resends every outstanding ask, release and
// the whole blacklist, as AMRMClientImpl does. The answer's NMTokens go
// into the cache and a new AMRMToken replaces the old one for the next
// connection. Scheduling requests and update requests in req are passed
// through but not remembered.
func (c *AMRMClient) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.register == nil {
		return nil, fmt.Errorf("client: allocate: %w", ErrNotRegistered)
	}
	if req == nil {
		req = &yarnpb.AllocateRequestProto{}
	}
	c.merge(req)
	resp, err := c.allocateLocked(ctx, req)
	if expected, ok := yarnerr.ExpectedResponseID(err); ok {
		// Out of count with the RM (a restarted AMRMProxy resuming its
		// attempt): as YARN's AMRMClientRelayer, take the RM's number.
		c.log.Info("response id out of sync with the ResourceManager, taking its", "used", c.responseID, "expected", expected)
		c.responseID = expected
		resp, err = c.allocateLocked(ctx, req)
	}
	if errors.Is(err, yarnerr.ApplicationMasterNotRegistered) {
		c.log.Warn("application master out of sync with the ResourceManager, registering again", "err", err)
		if _, err := c.registerLocked(ctx, c.register); err != nil {
			return nil, fmt.Errorf("client: allocate: %w", err)
		}
		c.resendAll()
		resp, err = c.allocateLocked(ctx, req)
	}
	if err != nil {
		return nil, fmt.Errorf("client: allocate: %w", err)
	}
	return resp, nil
}

// merge records the asks, releases and blacklist changes of req.
func (c *AMRMClient) merge(req *yarnpb.AllocateRequestProto) {
	for _, ask := range req.GetAsk() {
		k := AskKeyOf(ask)
		c.markDirty(k)
		c.asks[k] = proto.Clone(ask).(*yarnpb.ResourceRequestProto)
	}
	for _, id := range req.GetRelease() {
		c.release[idKey(id)] = id
	}
	for _, n := range req.GetBlacklistRequest().GetBlacklistAdditions() {
		c.blacklist[n] = true
		c.blacklistAdd[n] = true
		delete(c.blacklistRemove, n)
	}
	for _, n := range req.GetBlacklistRequest().GetBlacklistRemovals() {
		delete(c.blacklist, n)
		delete(c.blacklistAdd, n)
		c.blacklistRemove[n] = true
	}
}

// markDirty queues k for the next allocate, in the order asks were first
// changed, so a request lists them as the caller stated them.
func (c *AMRMClient) markDirty(k AskKey) {
	if !c.isDirty[k] {
		c.isDirty[k] = true
		c.dirty = append(c.dirty, k)
	}
}

// resendAll marks everything the RM should know for sending again, after a
// re-register: asks still outstanding, releases not yet seen complete, the
// blacklist.
func (c *AMRMClient) resendAll() {
	for k, ask := range c.asks {
		if ask.GetNumContainers() > 0 {
			c.markDirty(k)
		}
	}
	for k, id := range c.pendingRelease {
		c.release[k] = id
	}
	for n := range c.blacklist {
		c.blacklistAdd[n] = true
	}
	clear(c.blacklistRemove)
}

// allocateLocked sends what is unacknowledged with req's other fields and
// takes in the answer.
func (c *AMRMClient) allocateLocked(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	send := &yarnpb.AllocateRequestProto{
		ResponseId:         proto.Int32(c.responseID),
		Progress:           proto.Float32(req.GetProgress()),
		UpdateRequests:     req.GetUpdateRequests(),
		SchedulingRequests: req.GetSchedulingRequests(),
		TrackingUrl:        req.TrackingUrl,
		// Java sends the blacklist request always, empty or not.
		BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{
			BlacklistAdditions: sortedKeys(c.blacklistAdd),
			BlacklistRemovals:  sortedKeys(c.blacklistRemove),
		},
	}
	for _, k := range c.dirty {
		send.Ask = append(send.Ask, c.asks[k])
	}
	for _, k := range sortedKeys(c.release) {
		send.Release = append(send.Release, c.release[k])
	}
	var resp *yarnpb.AllocateResponseProto
	err := c.callRetrying(ctx, func(am *yarnrpc.ApplicationMasterProtocolClient) (err error) {
		// The same request, response id included, goes again: an RM that did
		// process it answers the repeat with its previous answer.
		resp, err = am.Allocate(ctx, send)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.responseID = resp.GetResponseId()
	for _, k := range c.dirty {
		if c.asks[k].GetNumContainers() <= 0 {
			delete(c.asks, k)
		}
	}
	c.dirty = c.dirty[:0]
	clear(c.isDirty)
	for k, id := range c.release {
		c.pendingRelease[k] = id
	}
	clear(c.release)
	clear(c.blacklistAdd)
	clear(c.blacklistRemove)
	for _, st := range resp.GetCompletedContainerStatuses() {
		delete(c.pendingRelease, idKey(st.GetContainerId()))
	}
	c.nmTokens.addAll(resp.GetNmTokens())
	if t := resp.GetAmRmToken(); t != nil && !proto.Equal(t, c.token) {
		c.log.Info("AMRMToken renewed by the ResourceManager")
		c.token = proto.Clone(t).(*commonpb.TokenProto)
		if c.token.GetKind() == "" {
			c.token.Kind = proto.String(KindAMRMToken)
		}
		// The current connection stays authenticated; drop it so the next
		// one proves the new token, which is the one that will keep working.
		if c.rpc != nil {
			_ = c.rpc.Close()
			c.rpc = nil
		}
	}
	return resp, nil
}

// FinalStatus is how an application master ends its application.
type FinalStatus = yarnpb.FinalApplicationStatusProto

// Final statuses an application master reports to Finish.
const (
	StatusSucceeded = yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED
	StatusFailed    = yarnpb.FinalApplicationStatusProto_APP_FAILED
	StatusKilled    = yarnpb.FinalApplicationStatusProto_APP_KILLED
	StatusEnded     = yarnpb.FinalApplicationStatusProto_APP_ENDED
)

// Finish unregisters the attempt (finishApplicationMaster) with its final
// status, diagnostics and tracking URL, repeating the call every
// FinishInterval until the RM answers isUnregistered, as
// AMRMClientImpl.unregisterApplicationMaster does. If the RM no longer
// knows the attempt, the client registers again first.
func (c *AMRMClient) Finish(ctx context.Context, status FinalStatus, diagnostics, trackingURL string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.register == nil {
		return fmt.Errorf("client: finish application master: %w", ErrNotRegistered)
	}
	req := &yarnpb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: status.Enum(),
		Diagnostics:            proto.String(diagnostics),
		TrackingUrl:            proto.String(trackingURL),
	}
	reregistered := false
	for {
		var resp *yarnpb.FinishApplicationMasterResponseProto
		err := c.callRetrying(ctx, func(am *yarnrpc.ApplicationMasterProtocolClient) (err error) {
			resp, err = am.FinishApplicationMaster(ctx, req)
			return err
		})
		switch {
		case errors.Is(err, yarnerr.ApplicationMasterNotRegistered) && !reregistered:
			c.log.Warn("application master out of sync with the ResourceManager, registering again", "err", err)
			if _, err := c.registerLocked(ctx, c.register); err != nil {
				return fmt.Errorf("client: finish application master: %w", err)
			}
			reregistered = true
			continue
		case err != nil:
			return fmt.Errorf("client: finish application master: %w", err)
		case resp.GetIsUnregistered():
			c.log.Info("application master unregistered", "final_status", status.String())
			return nil
		}
		if err := sleep(ctx, c.cfg.FinishInterval); err != nil {
			return fmt.Errorf("client: wait for unregister: %w", err)
		}
	}
}

// callRetrying runs call on the current connection, again after transport
// failures and standby answers, under the configured backoff.
func (c *AMRMClient) callRetrying(ctx context.Context, call func(am *yarnrpc.ApplicationMasterProtocolClient) error) error {
	try := func() (retry bool, err error) {
		rpc, err := c.conn()
		if err != nil {
			return false, err
		}
		err = call(yarnrpc.NewApplicationMasterProtocolClient(rpc))
		return err != nil && retryable(err), err
	}
	// Nearly every call succeeds at once: the backoff, its timer and its
	// context are made only for one that did not (an AMRMProxy makes
	// this call for every heartbeat of its AMs).
	retry, failed := try()
	if !retry {
		return failed
	}
	op := func() error {
		if failed != nil {
			// The first try's failure, for the backoff to wait on.
			err := failed
			failed = nil
			return err
		}
		retry, err := try()
		if err != nil && !retry {
			return backoff.Permanent(err)
		}
		return err
	}
	notify := func(err error, wait time.Duration) {
		c.log.Warn("ResourceManager call failed, retrying", "err", err, "retry_in", wait)
	}
	err := backoff.RetryNotify(op, backoff.WithContext(c.cfg.NewBackOff(), ctx), notify)
	var perm *backoff.PermanentError
	if errors.As(err, &perm) {
		return perm.Err
	}
	return err
}

// conn returns the connection, making one with the current token if there
// is none.
func (c *AMRMClient) conn() (caller, error) {
	if c.rpc != nil {
		return c.rpc, nil
	}
	rpc, err := c.dial(c.token)
	if err != nil {
		return nil, fmt.Errorf("client: new scheduler client: %w", err)
	}
	c.rpc = rpc
	return rpc, nil
}

// AskKeyOf is the key of an ask: two asks with one key are one total, the
// later replacing the earlier, as the RM and AMRMClient take them.
func AskKeyOf(r *yarnpb.ResourceRequestProto) AskKey {
	return AskKey{
		priority:      r.GetPriority().GetPriority(),
		resourceName:  r.GetResourceName(),
		capability:    idKey(r.GetCapability()),
		executionType: r.GetExecutionTypeRequest().GetExecutionType(),
		allocationID:  r.GetAllocationRequestId(),
	}
}

// idKey is a map key for a message: its deterministic encoding.
func idKey(m proto.Message) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
