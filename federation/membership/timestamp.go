package membership

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// TimestampStore is what Timestamps writes of the federation store.
type TimestampStore interface {
	ClaimClusterTimestamp(ctx context.Context, ts int64, id string) (holder string, err error)
}

// maxPickTries bounds how many later milliseconds Pick tries: each taken
// one is another sub-cluster's, and a federation has far fewer.
const maxPickTries = 1000

// Timestamps keeps one sub-cluster's cluster timestamp apart from every
// other member's: an RM picks its timestamp through it when it first fixes
// one, and holds it on each activation, before it hands out any id, so
// that no two sub-clusters give the same application ids. Safe for
// concurrent use.
type Timestamps struct {
	store TimestampStore
	id    string
	// held is the timestamp last picked or held; zero before.
	held atomic.Int64
}

// NewTimestamps returns the claims of sub-cluster id in s; it does no I/O.
func NewTimestamps(s TimestampStore, id string) (*Timestamps, error) {
	if s == nil || id == "" {
		return nil, errors.New("membership: timestamps need a store and a sub-cluster id")
	}
	return &Timestamps{store: s, id: id}, nil
}

// Pick claims the first millisecond from from on that no other
// sub-cluster holds, and returns it.
func (t *Timestamps) Pick(ctx context.Context, from int64) (int64, error) {
	for ts := from; ts < from+maxPickTries; ts++ {
		holder, err := t.store.ClaimClusterTimestamp(ctx, ts, t.id)
		if err != nil {
			return 0, fmt.Errorf("membership: pick a cluster timestamp: %w", err)
		}
		if holder == t.id {
			t.held.Store(ts)
			return ts, nil
		}
	}
	return 0, fmt.Errorf("membership: pick a cluster timestamp: %d milliseconds from %d all held by other sub-clusters", maxPickTries, from)
}

// Hold claims ts, the timestamp the RM fixed before, for the sub-cluster
// (again: a claim of its own holds), and reports whether the sub-cluster
// holds it: false when another does, as one that fixed the same timestamp
// before the federation guarded them, or whose state was copied, would.
func (t *Timestamps) Hold(ctx context.Context, ts int64) (bool, error) {
	holder, err := t.store.ClaimClusterTimestamp(ctx, ts, t.id)
	if err != nil {
		return false, fmt.Errorf("membership: hold cluster timestamp %d: %w", ts, err)
	}
	if holder != t.id {
		return false, nil
	}
	t.held.Store(ts)
	return true, nil
}

// Held is the timestamp last picked or held, in milliseconds; zero before.
func (t *Timestamps) Held() int64 { return t.held.Load() }
