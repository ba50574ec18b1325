package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newApp(t *testing.T, invoke any) *fx.App { return newAppLogging(t, io.Discard, invoke) }

func newAppLogging(t *testing.T, log io.Writer, invoke any) *fx.App {
	t.Helper()
	return fx.New(
		fx.NopLogger,
		fx.Supply(slog.New(slog.NewTextHandler(log, nil))),
		fx.Invoke(invoke),
	)
}

func start(t *testing.T, app *fx.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func stop(t *testing.T, app *fx.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// A loop that returns while the app runs stops the app with exit code 1.
func TestFailedLoopStopsTheApp(t *testing.T) {
	app := newApp(t, func(r Runner) {
		r.Background("failing", func(context.Context) error { return errors.New("lost the lease") })
	})
	start(t, app)
	select {
	case sig := <-app.Wait():
		if sig.ExitCode != ExitCode {
			t.Errorf("exit code %d, want %d", sig.ExitCode, ExitCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the app did not stop")
	}
	stop(t, app)
}

// A loop runs until the app stops, and stopping it is no failure.
func TestLoopStopsWithTheApp(t *testing.T) {
	ran := make(chan struct{})
	var log bytes.Buffer
	app := newAppLogging(t, &log, func(r Runner) {
		r.Background("waiting", func(ctx context.Context) error {
			close(ran)
			<-ctx.Done()
			return ctx.Err()
		})
	})
	start(t, app)
	<-ran
	stop(t, app)
	// stop waited for the loop, so its last word is in the log.
	if strings.Contains(log.String(), "stopping the binary") {
		t.Errorf("a loop ended by the stop stopped the binary:\n%s", log.String())
	}
}

// Serve listens on start, serves until stop, and a port in use fails the
// start.
func TestServeListensOnStartAndShutsDownOnStop(t *testing.T) {
	var addr string
	app := newApp(t, func(r Runner) {
		r.Serve(Endpoint{Name: "web", Address: "127.0.0.1:0", Server: &http.Server{
			Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
			ReadHeaderTimeout: time.Second,
		}, Wrap: func(l net.Listener) net.Listener { addr = l.Addr().String(); return l }})
	})
	start(t, app)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop(t, app)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	app = newApp(t, func(r Runner) {
		r.Serve(Endpoint{Name: "web", Address: busy.Addr().String(), Server: &http.Server{ReadHeaderTimeout: time.Second}})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = app.Start(ctx)
	// Stop also after a failed start: it ends fx's signal relay.
	stop(t, app)
	if err == nil {
		t.Fatal("started on a port in use")
	}
}
