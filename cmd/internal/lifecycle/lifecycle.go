package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"go.uber.org/fx"
)

// ExitCode is the code a binary exits with when something it runs ended
// on its own.
const ExitCode = 1

// Runner is what a binary's wiring needs to run servers and loops: its fx
// lifecycle, the Shutdowner that stops the app when one of them fails, and
// the logger that says so. fx fills it in.
type Runner struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Logger     *slog.Logger
}

// Server is a server that serves a listener until Shutdown, as ipc.Server
// and http.Server do.
type Server interface {
	Serve(l net.Listener) error
	Shutdown(ctx context.Context) error
}

// Endpoint is one server on one address.
type Endpoint struct {
	// Name says what is served, in logs and errors ("client port").
	Name string
	// Address is where to listen (host:port).
	Address string
	// Server serves the listener.
	Server Server
	// Wrap, if set, wraps the listener before the server gets it; it runs
	// when the app starts.
	Wrap func(net.Listener) net.Listener
}

// Serve listens on e.Address when the app starts (a port in use fails the
// start) and serves it until the app stops, when it shuts the server down.
func (r Runner) Serve(e Endpoint) {
	var ln net.Listener
	r.run(e.Name, func(context.Context) error { return e.Server.Serve(ln) }, func(context.Context) error {
		l, err := net.Listen("tcp", e.Address)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		ln = l
		if e.Wrap != nil {
			ln = e.Wrap(l)
		}
		r.Logger.Info("serving", "name", e.Name, "address", l.Addr().String())
		return nil
	}, e.Server.Shutdown)
}

// ServeContext is Serve for a server that serves until its context ends,
// as nmrelay.Relay does.
func (r Runner) ServeContext(name, address string, serve func(ctx context.Context, l net.Listener) error) {
	var ln net.Listener
	r.run(name, func(ctx context.Context) error { return serve(ctx, ln) }, func(context.Context) error {
		l, err := net.Listen("tcp", address)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ln = l
		r.Logger.Info("serving", "name", name, "address", l.Addr().String())
		return nil
	}, nil)
}

// Background runs fn from the app's start until its stop, when fn's
// context is cancelled. fn is to return only when its context ends.
func (r Runner) Background(name string, fn func(ctx context.Context) error) {
	r.run(name, fn, nil, nil)
}

// run starts prepare, then fn in a goroutine, on start; on stop it calls
// shutdown (if any), cancels fn's context and waits for fn. fn ending
// before the stop stops the app.
func (r Runner) run(name string, fn func(context.Context) error, prepare, shutdown func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var stopping atomic.Bool
	started := false
	r.Lifecycle.Append(fx.Hook{
		OnStart: func(startCtx context.Context) error {
			if prepare != nil {
				if err := prepare(startCtx); err != nil {
					cancel()
					return err
				}
			}
			started = true
			go func() {
				defer close(done)
				err := fn(ctx)
				if stopping.Load() {
					return
				}
				if err == nil {
					err = errors.New("ended on its own")
				}
				r.Logger.Error("stopping the binary", "name", name, "err", err)
				if serr := r.Shutdowner.Shutdown(fx.ExitCode(ExitCode)); serr != nil {
					r.Logger.Error("shutdown", "name", name, "err", serr)
				}
			}()
			return nil
		},
		OnStop: func(stopCtx context.Context) error {
			stopping.Store(true)
			var err error
			if shutdown != nil && started {
				err = shutdown(stopCtx)
			}
			cancel()
			if !started {
				return err
			}
			select {
			case <-done:
				return err
			case <-stopCtx.Done():
				return errors.Join(err, fmt.Errorf("%s: %w", name, stopCtx.Err()))
			}
		},
	})
}
