// Package ipctest serves Hadoop RPC protocols on loopback for tests of the
// clients that call them.
package ipctest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/ipc"
)

// Serve runs a server for protocol on a loopback port until the test ends,
// then shuts it down (failing the test if that goes wrong), and returns its
// address. cfg's Logger, if nil, discards.
func Serve(t testing.TB, cfg ipc.Config, protocol string, methods ...ipc.Method) string {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := ipc.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(protocol, methods...); err != nil {
		t.Fatal(err)
	}
	return Run(t, srv)
}

// Run serves srv, with its protocols registered, on a loopback port until
// the test ends, then shuts it down (failing the test if that goes wrong),
// and returns its address: for servers of several protocols.
func Run(t testing.TB, srv *ipc.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ipc.ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return l.Addr().String()
}

// TokenLookup accepts every token whose password is "pw-" followed by its
// identifier, and takes the identifier as the user: test servers need no
// key to check the tokens their clients present.
func TokenLookup(_ context.Context, id []byte) (ipc.Secret, error) {
	return ipc.Secret{Password: []byte("pw-" + string(id)), User: string(id)}, nil
}
