package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// dialErr is what client-go returns when nothing listens at the API
// server's address.
func dialErr(errno syscall.Errno) error {
	return &url.Error{Op: "Put", URL: "https://127.0.0.1:6443/api/v1/namespaces/knit/configmaps/x", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno),
	}}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyRetriesTransientErrorsOnly(t *testing.T) {
	gr := schema.GroupResource{Group: Group, Resource: Resource}
	tests := []struct {
		name      string
		err       error
		transient bool
		after     time.Duration
	}{
		{"connection refused", dialErr(syscall.ECONNREFUSED), true, 0},
		{"connection refused, wrapped", fmt.Errorf("put: %w", dialErr(syscall.ECONNREFUSED)), true, 0},
		{"connection reset", dialErr(syscall.ECONNRESET), true, 0},
		{"no route to host", dialErr(syscall.EHOSTUNREACH), true, 0},
		{"unexpected EOF", &url.Error{Op: "Get", URL: "https://x", Err: io.ErrUnexpectedEOF}, true, 0},
		{"EOF", io.EOF, true, 0},
		{"http2 connection lost", errors.New("http2: client connection lost"), true, 0},
		{"network timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true, 0},
		{"attempt deadline", context.DeadlineExceeded, true, 0},
		{"etcd leader changed, bare", errors.New("etcdserver: leader changed"), true, 0},
		{"etcd leader changed, as 500", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true, 0},
		{"etcd request timed out", errors.New("rpc error: etcdserver: request timed out"), true, 0},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), true, 0},
		{"service unavailable", apierrors.NewServiceUnavailable("down"), true, 0},
		{"bad gateway", apierrors.NewGenericServerResponse(502, "PUT", gr, "x", "", 0, true), true, 0},
		{"gateway timeout", apierrors.NewTimeoutError("slow", 0), true, 0},
		{"server timeout with retry-after", apierrors.NewServerTimeout(gr, "update", 2), true, 2 * time.Second},
		{"too many requests with retry-after", apierrors.NewTooManyRequests("slow down", 3), true, 3 * time.Second},
		{"too many requests without retry-after", apierrors.NewTooManyRequests("slow down", 0), true, 0},
		{"store's own try again", errContended, true, 0},

		{"nil", nil, false, 0},
		{"cancelled", context.Canceled, false, 0},
		{"cancelled inside url error", &url.Error{Op: "Put", URL: "https://x", Err: context.Canceled}, false, 0},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: Group, Kind: Kind}, "x", field.ErrorList{field.Required(field.NewPath("spec"), "")}), false, 0},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), false, 0},
		{"unauthorized", apierrors.NewUnauthorized("who"), false, 0},
		{"bad request", apierrors.NewBadRequest("bad"), false, 0},
		{"not found", apierrors.NewNotFound(gr, "x"), false, 0},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("modified")), false, 0},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), false, 0},
		{"too large", apierrors.NewRequestEntityTooLargeError("big"), false, 0},
		{"unknown local error", errors.New("json: unsupported value"), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transient, after := classify(tt.err)
			if transient != tt.transient || after != tt.after {
				t.Errorf("classify(%v) = %v, %v; want %v, %v", tt.err, transient, after, tt.transient, tt.after)
			}
		})
	}
}

// countingBackOff is a fast backoff that counts the failures it was asked
// to wait after.
type countingBackOff struct {
	backoff.BackOff
	failures *atomic.Int64
}

func (b countingBackOff) NextBackOff() time.Duration {
	b.failures.Add(1)
	return b.BackOff.NextBackOff()
}

func fastBackOff(failures *atomic.Int64) func() backoff.BackOff {
	return func() backoff.BackOff {
		return countingBackOff{
			BackOff: backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(10*time.Millisecond),
				backoff.WithMaxInterval(200*time.Millisecond),
				backoff.WithMaxElapsedTime(0),
			),
			failures: failures,
		}
	}
}

// retryStore is a Store with no clients, enough to drive retry.
func retryStore(t *testing.T, failures *atomic.Int64) *Store {
	return &Store{
		log:        slog.New(slog.NewTextHandler(t.Output(), nil)),
		newBackOff: fastBackOff(failures),
		now:        time.Now,
	}
}

func TestRetryRepeatsTransientFailuresUntilSuccess(t *testing.T) {
	var failures atomic.Int64
	s := retryStore(t, &failures)
	calls := 0
	err := s.retry(context.Background(), "test op", func(context.Context) error {
		calls++
		if calls < 4 {
			return dialErr(syscall.ECONNREFUSED)
		}
		return nil
	})
	if err != nil || calls != 4 || failures.Load() != 3 {
		t.Fatalf("retry = %v after %d calls and %d backoffs; want success after 4 calls and 3 backoffs", err, calls, failures.Load())
	}
}

func TestRetryStopsAtAPermanentError(t *testing.T) {
	var failures atomic.Int64
	s := retryStore(t, &failures)
	calls := 0
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no"))
	err := s.retry(context.Background(), "test op", func(context.Context) error {
		calls++
		return forbidden
	})
	if !apierrors.IsForbidden(err) || calls != 1 || failures.Load() != 0 {
		t.Fatalf("retry = %v after %d calls; want the forbidden error after 1 call", err, calls)
	}
}

func TestRetryEndsWithItsContextAndKeepsTheLastError(t *testing.T) {
	var failures atomic.Int64
	s := retryStore(t, &failures)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.retry(ctx, "test op", func(context.Context) error {
		if failures.Load() >= 3 {
			cancel()
		}
		return dialErr(syscall.ECONNREFUSED)
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("retry = %v; want it to wrap context.Canceled and the refused connection", err)
	}
}

func TestRetryGivesEachAttemptItsOwnDeadline(t *testing.T) {
	var failures atomic.Int64
	s := retryStore(t, &failures)
	err := s.retry(context.Background(), "test op", func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("attempt without a deadline")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A deposed leader's request in flight, held by a connection a partition
// left half-open, ends as soon as the fence fails, not at the attempt's
// deadline: the RM it serves can then stop and hand over.
func TestAnAttemptInFlightEndsWhenTheFenceFails(t *testing.T) {
	s := retryStore(t, nil)
	var lost atomic.Bool
	notLeader := errors.New("not the leader")
	s.fence = func() error {
		if lost.Load() {
			return notLeader
		}
		return nil
	}
	// Well below attemptTimeout: only the fence can end the attempt first.
	ctx, cancel := context.WithTimeout(t.Context(), attemptTimeout/3)
	defer cancel()
	err := s.retry(ctx, "test op", func(ctx context.Context) error {
		lost.Store(true)
		<-ctx.Done() // a request that gets no answer
		return ctx.Err()
	})
	if !errors.Is(err, ErrFenced) || !errors.Is(err, notLeader) {
		t.Fatalf("retry = %v, want ErrFenced wrapping the fence's error", err)
	}
}

func TestRetryStopsWhenTheBackOffStops(t *testing.T) {
	s := retryStore(t, nil)
	s.newBackOff = func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2) }
	calls := 0
	err := s.retry(context.Background(), "test op", func(context.Context) error {
		calls++
		return apierrors.NewServiceUnavailable("down")
	})
	if !apierrors.IsServiceUnavailable(err) || calls != 3 {
		t.Fatalf("retry = %v after %d calls; want the 503 after 3 calls", err, calls)
	}
}

func TestRetryWaitsAsLongAsTheServerAsks(t *testing.T) {
	var failures atomic.Int64
	s := retryStore(t, &failures)
	var log bytes.Buffer
	s.log = slog.New(slog.NewTextHandler(&log, nil))
	calls := 0
	err := s.retry(context.Background(), "test op", func(context.Context) error {
		calls++
		if calls == 1 {
			return apierrors.NewTooManyRequests("slow down", 1)
		}
		return nil
	})
	// The backoff alone would wait 10ms; the server asked for a second.
	if err != nil || calls != 2 || !strings.Contains(log.String(), "retryIn=1s") {
		t.Fatalf("retry = %v after %d calls, want success after waiting the 1s Retry-After; log:\n%s", err, calls, log.String())
	}
}
