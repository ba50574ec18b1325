package amrmproxy

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// heartbeater is one sub-cluster's heartbeat handler, as YARN's
// AMHeartbeatRequestHandler over an AMRMClientRelayer: its goroutine sends
// the parts of the AM's heartbeats meant for the sub-cluster, in the order
// they were queued, and puts each answer in the sink. Parts queued while
// one is in flight go as one request, folded as the relayer folds them
// into its asks not yet sent (a later total of an ask replaces the
// earlier one, releases and blacklist changes add up); the RM client
// under send keeps what the RM did not acknowledge and resends it.
type heartbeater struct {
	id   string
	sink *sink
	log  *slog.Logger
	// start runs before the first send (an unmanaged AM's launch); when it
	// fails, the heartbeater drops every part it is given.
	start func(context.Context) error
	send  func(context.Context, *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error)

	mu sync.Mutex
	// queued is the fold of the parts not yet sent, nil if none.
	queued *yarnpb.AllocateRequestProto
	// seq counts the parts queued, done those whose send ended, answered
	// or failed.
	seq, done uint64
	// failed is start's error.
	failed error

	wake chan struct{}
	// started is closed once start returned.
	started chan struct{}
	cancel  context.CancelFunc
	stopped chan struct{}
}

// startHeartbeater starts a heartbeater's goroutine, which runs until stop.
// ctx carries the values of the goroutine's calls, not its lifetime.
func startHeartbeater(ctx context.Context, h *heartbeater) *heartbeater {
	ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.wake = make(chan struct{}, 1)
	h.started = make(chan struct{})
	h.stopped = make(chan struct{})
	go h.run(ctx)
	return h
}

// enqueue queues part for sending and returns its mark, which answered
// reaches once the part's send ended.
func (h *heartbeater) enqueue(part *yarnpb.AllocateRequestProto) uint64 {
	h.mu.Lock()
	if h.queued == nil {
		h.queued = &yarnpb.AllocateRequestProto{}
	}
	foldRequest(h.queued, part)
	h.seq++
	mark := h.seq
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return mark
}

// answered reports whether every part up to mark was sent and answered
// (or failed).
func (h *heartbeater) answered(mark uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done >= mark
}

// idle reports whether every part queued was sent.
func (h *heartbeater) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done == h.seq
}

// launchFailed is start's error, nil if it succeeded or runs still.
func (h *heartbeater) launchFailed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

func (h *heartbeater) run(ctx context.Context) {
	defer close(h.stopped)
	if h.start != nil {
		if err := h.start(ctx); err != nil {
			h.mu.Lock()
			h.failed = err
			h.mu.Unlock()
		}
	}
	close(h.started)
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.mu.Lock()
		req, upTo, failed := h.queued, h.seq, h.failed
		h.queued = nil
		h.mu.Unlock()
		if req == nil {
			continue
		}
		if failed == nil {
			resp, err := h.send(ctx, req)
			if err != nil {
				// As YARN's handler: logged, and the AM goes on; the
				// client resends what the RM did not take.
				h.log.Warn("sub-cluster heartbeat failed", "sub_cluster", h.id, "err", err)
			} else {
				h.sink.add(h.id, resp)
			}
		}
		h.mu.Lock()
		h.done = upTo
		h.mu.Unlock()
		h.sink.signal()
	}
}

// drain waits until start returned and every part queued was sent, or
// ctx ends: an unmanaged AM being launched or re-attached is then one to
// finish, not one left behind.
func (h *heartbeater) drain(ctx context.Context) error {
	select {
	case <-h.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		changed := h.sink.changes()
		if h.idle() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop ends the goroutine, cancelling a send in flight, and waits for it.
func (h *heartbeater) stop() {
	h.cancel()
	<-h.stopped
}

// sink holds the sub-clusters' answers not yet merged into an answer to
// the AM (YARN's asyncResponseSink), and the last answer and its time of
// each, for the headroom of every answer and the sub-cluster timeout.
type sink struct {
	now func() time.Time

	mu      sync.Mutex
	changed chan struct{}
	pending map[string][]*yarnpb.AllocateResponseProto
	last    map[string]*yarnpb.AllocateResponseProto
	at      map[string]time.Time
}

func newSink(now func() time.Time) *sink {
	return &sink{now: now, changed: make(chan struct{}), pending: map[string][]*yarnpb.AllocateResponseProto{},
		last: map[string]*yarnpb.AllocateResponseProto{}, at: map[string]time.Time{}}
}

// changes is closed at the next signal.
func (s *sink) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *sink) signal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sink) add(id string, resp *yarnpb.AllocateResponseProto) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[id] = append(s.pending[id], resp)
	s.last[id], s.at[id] = resp, s.now()
}

// expectAt marks a sub-cluster as last heard of at t: a new secondary
// starts timed out, as YARN's does, until its first answer.
func (s *sink) expectAt(id string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[id]; !ok {
		s.at[id] = t
	}
}

// forget drops what the sink holds of a sub-cluster.
func (s *sink) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, id)
	delete(s.last, id)
	delete(s.at, id)
}

// timedOut lists the sub-clusters not heard of for longer than timeout.
func (s *sink) timedOut(timeout time.Duration) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := map[string]bool{}
	for id, at := range s.at {
		if now.Sub(at) > timeout {
			out[id] = true
		}
	}
	return out
}

// take returns the answers not yet merged, by sub-cluster in arrival
// order, and a base answer whose headroom and node count are the sums of
// the last answers of the sub-clusters not timed out (YARN's
// generateBaseAllocationResponse).
func (s *sink) take(timeout time.Duration) (*yarnpb.AllocateResponseProto, map[string][]*yarnpb.AllocateResponseProto) {
	expired := s.timedOut(timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	base := &yarnpb.AllocateResponseProto{Limit: &yarnpb.ResourceProto{Memory: proto.Int64(0), VirtualCores: proto.Int32(0)}, NumClusterNodes: proto.Int32(0)}
	for _, id := range slices.Sorted(maps.Keys(s.last)) {
		if expired[id] {
			continue
		}
		r := s.last[id]
		if l := r.GetLimit(); l != nil {
			base.Limit.Memory = proto.Int64(base.Limit.GetMemory() + l.GetMemory())
			base.Limit.VirtualCores = proto.Int32(base.Limit.GetVirtualCores() + l.GetVirtualCores())
		}
		base.NumClusterNodes = proto.Int32(base.GetNumClusterNodes() + r.GetNumClusterNodes())
	}
	out := s.pending
	s.pending = map[string][]*yarnpb.AllocateResponseProto{}
	return base, out
}

// foldRequest folds src, queued after dst, into dst, as AMRMClientRelayer
// folds a new request into the asks, releases and blacklist changes it has
// not yet sent: an ask replaces the earlier one of its key, releases and
// updates add up (an update replaces an earlier one of its container), a
// blacklist addition cancels a queued removal of the node and the reverse,
// and progress and tracking URL are the latest.
func foldRequest(dst, src *yarnpb.AllocateRequestProto) {
	dst.Progress = src.Progress
	if src.TrackingUrl != nil {
		dst.TrackingUrl = src.TrackingUrl
	}
	at := map[client.AskKey]int{}
	for i, a := range dst.Ask {
		at[client.AskKeyOf(a)] = i
	}
	for _, a := range src.GetAsk() {
		k := client.AskKeyOf(a)
		if i, ok := at[k]; ok {
			dst.Ask[i] = a
			continue
		}
		at[k] = len(dst.Ask)
		dst.Ask = append(dst.Ask, a)
	}
	released := map[string]bool{}
	for _, c := range dst.Release {
		released[containerKey(c)] = true
	}
	for _, c := range src.GetRelease() {
		if !released[containerKey(c)] {
			released[containerKey(c)] = true
			dst.Release = append(dst.Release, c)
		}
	}
	updated := map[string]int{}
	for i, u := range dst.UpdateRequests {
		updated[containerKey(u.GetContainerId())] = i
	}
	for _, u := range src.GetUpdateRequests() {
		if i, ok := updated[containerKey(u.GetContainerId())]; ok {
			dst.UpdateRequests[i] = u
			continue
		}
		updated[containerKey(u.GetContainerId())] = len(dst.UpdateRequests)
		dst.UpdateRequests = append(dst.UpdateRequests, u)
	}
	dst.SchedulingRequests = append(dst.SchedulingRequests, src.GetSchedulingRequests()...)
	if b := src.GetBlacklistRequest(); len(b.GetBlacklistAdditions())+len(b.GetBlacklistRemovals()) > 0 {
		if dst.BlacklistRequest == nil {
			dst.BlacklistRequest = &yarnpb.ResourceBlacklistRequestProto{}
		}
		d := dst.BlacklistRequest
		for _, n := range b.GetBlacklistAdditions() {
			d.BlacklistRemovals = slices.DeleteFunc(d.BlacklistRemovals, func(s string) bool { return s == n })
			if !slices.Contains(d.BlacklistAdditions, n) {
				d.BlacklistAdditions = append(d.BlacklistAdditions, n)
			}
		}
		for _, n := range b.GetBlacklistRemovals() {
			d.BlacklistAdditions = slices.DeleteFunc(d.BlacklistAdditions, func(s string) bool { return s == n })
			if !slices.Contains(d.BlacklistRemovals, n) {
				d.BlacklistRemovals = append(d.BlacklistRemovals, n)
			}
		}
	}
}
