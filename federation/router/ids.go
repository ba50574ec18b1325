package router

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// TimestampPicker claims a cluster timestamp no other member of the
// federation holds: membership.Timestamps under a claimant id of the
// Router's own, the claims every Knit RM of the federation makes too.
type TimestampPicker interface {
	Pick(ctx context.Context, from int64) (int64, error)
}

// defaultCapabilityTTL is how long the Router answers getNewApplication
// with a sub-cluster's maximum capability before it asks that
// sub-cluster again.
const defaultCapabilityTTL = time.Minute

// applicationIDs hands out the Router's own application ids: a cluster
// timestamp it claimed, claimed on the first id and again whenever the
// sequence runs out, and a sequence from 1. A restarted Router claims a
// new timestamp, so it never needs its old sequence, and two Routers
// never share one. Safe for concurrent use.
type applicationIDs struct {
	picker TimestampPicker
	now    func() time.Time

	mu  sync.Mutex
	ts  int64
	seq int32
}

// next is a fresh id. The claim's store write happens under the lock,
// once per timestamp: the calls that wait for it need its answer anyway.
func (a *applicationIDs) next(ctx context.Context) (yarnid.ApplicationID, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ts == 0 || a.seq == math.MaxInt32 {
		ts, err := a.picker.Pick(ctx, max(a.now().UnixMilli(), a.ts+1))
		if err != nil {
			return yarnid.ApplicationID{}, fmt.Errorf("router: claim a cluster timestamp for new application ids: %w", err)
		}
		a.ts, a.seq = ts, 0
	}
	a.seq++
	return yarnid.ApplicationID{ClusterTimestamp: a.ts, ID: a.seq}, nil
}

// capabilities keeps the maximum capability each sub-cluster's RM last
// answered getNewApplication with, which the Router's own answers carry.
// Safe for concurrent use.
type capabilities struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	kept map[string]keptCapability
}

type keptCapability struct {
	limit *yarnpb.ResourceProto
	at    time.Time
}

// fresh is sub-cluster id's maximum capability if it was answered within
// the TTL; the caller owns the copy.
func (c *capabilities) fresh(id string) (*yarnpb.ResourceProto, bool) {
	c.mu.Lock()
	k, ok := c.kept[id]
	c.mu.Unlock()
	if !ok || c.now().Sub(k.at) >= c.ttl {
		return nil, false
	}
	return proto.Clone(k.limit).(*yarnpb.ResourceProto), true
}

// keep notes sub-cluster id's maximum capability as its RM answered it.
func (c *capabilities) keep(id string, limit *yarnpb.ResourceProto) {
	if limit == nil {
		return
	}
	k := keptCapability{limit: proto.Clone(limit).(*yarnpb.ResourceProto), at: c.now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept[id] = k
}
