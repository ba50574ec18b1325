package amrmproxy

import (
	"context"
	"fmt"
	"time"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ThrottleInterceptorName names the ThrottleInterceptor in a pipeline; it
// is Knit's, so it has no YARN class name.
const ThrottleInterceptorName = "knit.ThrottleRequestInterceptor"

// ThrottleSettings bound what one AM may ask of the RM through the proxy.
type ThrottleSettings struct {
	// MaxPending bounds the containers an AM may have asked for and not
	// got (the sum of its outstanding "*" asks); 0 means no bound.
	MaxPending int64
	// MinInterval is the least time between two heartbeats that reach the
	// RM; a sooner one waits. 0 means none.
	MinInterval time.Duration
}

// ThrottleSettingsFromHadoop reads knit.amrmproxy.throttle.*.
func ThrottleSettingsFromHadoop(c *hadoopconf.Configuration) (ThrottleSettings, error) {
	var s ThrottleSettings
	var err error
	if s.MaxPending, err = c.GetInt64(hadoopconf.KeyAMRMProxyThrottleMaxPending, 0); err != nil {
		return ThrottleSettings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMProxyThrottleMaxPending, err)
	}
	if s.MinInterval, err = c.GetDuration(hadoopconf.KeyAMRMProxyThrottleMinInterval, 0, time.Millisecond); err != nil {
		return ThrottleSettings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMProxyThrottleMinInterval, err)
	}
	if s.MaxPending < 0 || s.MinInterval < 0 {
		return ThrottleSettings{}, fmt.Errorf("amrmproxy: negative %s or %s", hadoopconf.KeyAMRMProxyThrottleMaxPending, hadoopconf.KeyAMRMProxyThrottleMinInterval)
	}
	return s, nil
}

// ThrottleInterceptor slows an AM that heartbeats more often than
// MinInterval and refuses, with InvalidResourceRequestException, an
// allocate that would raise its pending containers above MaxPending; an
// allocate that lowers them, or keeps them, always goes through, so an AM
// over the bound (after the bound was lowered) can ask less.
type ThrottleInterceptor struct {
	cfg  ThrottleSettings
	next Interceptor
	now  func() time.Time

	// asks is the AM's outstanding total per "*" ask key, as the RM has
	// been told it.
	asks map[askKey]int64
	last time.Time // when the last heartbeat went on
}

var (
	_ Interceptor = (*ThrottleInterceptor)(nil)
	_ Resumer     = (*ThrottleInterceptor)(nil)
)

// askKey is what makes two "*" asks the same total (the RM's key, less the
// resource name).
type askKey struct {
	priority      int32
	capability    string
	executionType yarnpb.ExecutionTypeProto
	allocationID  int64
}

// ThrottleStage returns the stage of a ThrottleInterceptor; now is the
// clock, time.Now if nil.
func ThrottleStage(s ThrottleSettings, now func() time.Time) Stage {
	if now == nil {
		now = time.Now
	}
	return func(_ App, next Interceptor) (Interceptor, error) {
		if next == nil {
			return nil, fmt.Errorf("the throttling interceptor cannot be the last of the pipeline")
		}
		return &ThrottleInterceptor{cfg: s, next: next, now: now, asks: map[askKey]int64{}}, nil
	}
}

// RegisterApplicationMaster passes the register on.
func (t *ThrottleInterceptor) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	return t.next.RegisterApplicationMaster(ctx, req)
}

// Allocate waits out MinInterval, checks MaxPending, and passes the
// heartbeat on.
func (t *ThrottleInterceptor) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	if t.cfg.MinInterval > 0 && !t.last.IsZero() {
		if wait := t.last.Add(t.cfg.MinInterval).Sub(t.now()); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("amrmproxy: throttled heartbeat: %w", ctx.Err())
			case <-timer.C:
			}
		}
	}
	next := t.pendingAfter(req)
	if t.cfg.MaxPending > 0 {
		before, after := sum(t.asks), sum(next)
		if after > t.cfg.MaxPending && after > before {
			return nil, yarnerr.InvalidResourceRequest.Errorf("The AM asks for %d containers at once, more than the %d the AMRMProxy lets one AM ask for (%s)",
				after, t.cfg.MaxPending, hadoopconf.KeyAMRMProxyThrottleMaxPending)
		}
	}
	t.last = t.now()
	resp, err := t.next.Allocate(ctx, req)
	if err != nil {
		return nil, err
	}
	t.asks = next
	// Containers handed out are no longer pending; the AM states its new
	// totals on a later heartbeat, so count them off until it does.
	for _, c := range resp.GetAllocatedContainers() {
		k := askKey{priority: c.GetPriority().GetPriority(), capability: keyString(c.GetResource()), allocationID: c.GetAllocationRequestId(), executionType: c.GetExecutionType()}
		if t.asks[k] > 0 {
			t.asks[k]--
		}
	}
	return resp, nil
}

// askKeyOf is the key of an ask, less its resource name.
func askKeyOf(a *yarnpb.ResourceRequestProto) askKey {
	return askKey{priority: a.GetPriority().GetPriority(), capability: keyString(a.GetCapability()), executionType: a.GetExecutionTypeRequest().GetExecutionType(), allocationID: a.GetAllocationRequestId()}
}

// pendingAfter is the AM's outstanding "*" totals once req is taken in.
func (t *ThrottleInterceptor) pendingAfter(req *yarnpb.AllocateRequestProto) map[askKey]int64 {
	next := make(map[askKey]int64, len(t.asks))
	for k, v := range t.asks {
		next[k] = v
	}
	for _, a := range req.GetAsk() {
		if a.GetResourceName() != "*" {
			continue
		}
		k := askKeyOf(a)
		if n := int64(a.GetNumContainers()); n > 0 {
			next[k] = n
		} else {
			delete(next, k)
		}
	}
	return next
}

func sum(m map[askKey]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// FinishApplicationMaster passes the finish on.
func (t *ThrottleInterceptor) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	return t.next.FinishApplicationMaster(ctx, req)
}

// Close holds nothing to release.
func (t *ThrottleInterceptor) Close() error { return nil }

// Resume keeps nothing across the node's restart: the totals it bounds
// fill again as the AM states each ask anew, and the pace starts over.
func (t *ThrottleInterceptor) Resume(context.Context, *yarnpb.RegisterApplicationMasterRequestProto) error {
	return nil
}

// keyString is the part of a resource that tells asks apart: a
// container's resource and its ask's capability agree on memory and
// vcores, not necessarily on how other resource types are listed.
func keyString(r *yarnpb.ResourceProto) string {
	return fmt.Sprintf("%d/%d", r.GetMemory(), r.GetVirtualCores())
}
