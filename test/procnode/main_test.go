package procnode

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// TestMain serves the shim when the test binary is re-executed as one.
func TestMain(m *testing.M) {
	RunShimIfRequested()
	goleak.VerifyTestMain(m)
}

// testLogger writes to the test log when -v is given, else nowhere.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

var _ io.Writer = tWriter{}
