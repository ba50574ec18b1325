package eventually

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	err := Poll(context.Background(), time.Millisecond, func(context.Context) error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls.Load())
	}
}

func TestPollSaysWhatItLastSaw(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	err := Poll(ctx, time.Millisecond, func(context.Context) error {
		if calls.Add(1) == 2 {
			cancel()
		}
		return errors.New("phase Pending")
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "phase Pending") {
		t.Fatalf("Poll = %v, want the cancellation and the last error", err)
	}
}

func TestTrueChecksAtOnce(t *testing.T) {
	// A condition that already holds is not polled again.
	var calls int
	True(t, time.Minute, "ready", func() bool { calls++; return true })
	if calls != 1 {
		t.Fatalf("%d calls, want 1", calls)
	}
}
