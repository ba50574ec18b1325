package eventually

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often Within and True poll: often enough for a unit
// test's goroutines; WithinEvery polls an API server or an RM less often.
const Interval = 10 * time.Millisecond

// Poll calls cond at once and then every interval until it returns nil,
// and returns nil then. When ctx ends first it returns an error wrapping
// ctx's and cond's last error, which should say what was seen ("phase
// Pending, want Running").
func Poll(ctx context.Context, interval time.Duration, cond func(ctx context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		last := cond(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %w", context.Cause(ctx), last)
		case <-t.C:
		}
	}
}

// Within fails t unless cond returns nil within timeout, polled every
// Interval. The context cond gets ends at the timeout or when the test
// ends.
func Within(t testing.TB, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	WithinEvery(t, timeout, Interval, cond)
}

// WithinEvery is Within polling every interval.
func WithinEvery(t testing.TB, timeout, interval time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, fmt.Errorf("not within %v", timeout))
	defer cancel()
	if err := Poll(ctx, interval, cond); err != nil {
		t.Fatal(err)
	}
}

// True is Within for a condition that is met or not; what says what is
// awaited, for the failure.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Within(t, timeout, func(context.Context) error {
		if cond() {
			return nil
		}
		return errors.New(what + ": not yet")
	})
}
