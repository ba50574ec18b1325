package client

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

var quiet = slog.New(slog.DiscardHandler)

// testToken is a token whose identifier is the user it authenticates, so
// the test servers need no key: tokenLookup derives the password.
func testToken(kind, user string) token.Token {
	return token.Token{Identifier: []byte(user), Password: []byte("pw-" + user), Kind: kind}
}

func tokenLookup(_ context.Context, id []byte) (ipc.Secret, error) {
	return ipc.Secret{Password: []byte("pw-" + string(id)), User: string(id)}, nil
}

// serve runs an ipc server for protocol on a loopback port until the test
// ends and returns its address.
func serve(t *testing.T, cfg ipc.Config, protocol string, methods ...ipc.Method) string {
	t.Helper()
	cfg.Logger = quiet
	srv, err := ipc.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(protocol, methods...); err != nil {
		t.Fatal(err)
	}
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

// testCtx is a context that ends with the test or after 20 s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// callerUser is the authenticated user of the call whose context ctx is.
func callerUser(ctx context.Context) string {
	c, _ := ipc.CallerFrom(ctx)
	return c.User
}

var testApp = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}

func testContainerID(seq int64) *yarnpb.ContainerIdProto {
	return yarnid.ContainerID{Attempt: yarnid.AttemptID{App: testApp, ID: 1}, Sequence: seq}.Proto()
}
