package rm

import (
	"context"
	"net"

	"github.com/knitdev/knit/protocols/ipc"
)

// Caller is who makes a call of the ResourceManager, whatever carried it:
// a Hadoop RPC (SIMPLE or TOKEN auth), a REST request, a web page. Every
// surface's checks read it (callerOf) and one authorizer decides
// (canAccess), so a user is allowed the same on each.
type Caller struct {
	// User is the effective user: the web or RPC user, or under TOKEN auth
	// the token's user (an application attempt id for an AM).
	User string
	// RealUser is the authenticated user behind a proxy user, if any.
	RealUser string
	// Token says the caller authenticated with a token, whose identifier
	// TokenIdentity holds as the RPC server's lookup decoded it.
	Token         bool
	TokenIdentity any
	// RemoteAddr is where the call came from, if known.
	RemoteAddr net.Addr
}

type callerKey struct{}

// WithCaller is ctx carrying c: how a surface other than the RPC server
// (REST, the web UI, the proxy) says who calls.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is the caller ctx carries: the one WithCaller set, else the RPC
// server's; the zero Caller (no user) when there is none.
func callerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	ic, ok := ipc.CallerFrom(ctx)
	if !ok {
		return Caller{}
	}
	return Caller{
		User: ic.User, RealUser: ic.RealUser,
		Token: ic.Auth == ipc.AuthToken, TokenIdentity: ic.TokenIdentity,
		RemoteAddr: ic.RemoteAddr,
	}
}
