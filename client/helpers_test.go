package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

var quiet = slog.New(slog.DiscardHandler)

// testToken is a token whose identifier is the user it authenticates, so
// the test servers need no key: ipctest.TokenLookup derives the password.
func testToken(kind, user string) token.Token {
	return token.Token{Identifier: []byte(user), Password: []byte("pw-" + user), Kind: kind}
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
