package router

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/tokens"
)

var tokenEpoch = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// routerTokens is a Router's delegation token secret manager over s, as
// knit-router makes it.
func routerTokens(t *testing.T, s store.RouterKeys, clock tokens.Clock) *tokens.Manager {
	t.Helper()
	m, err := tokens.New(tokens.Config{Store: NewKeyStore(s), Shared: true, DelegationOnly: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Activate(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	return m
}

// tokenFederation is one sub-cluster behind a Router that issues and takes
// delegation tokens, signed and checked at clock's time: the store, the
// sub-cluster, the clock, the Router's address and a client of it calling
// as alice.
func tokenFederation(t *testing.T) (*store.Memory, *fakeRM, *testingclock.FakeClock, string, *client.RMClient) {
	t.Helper()
	s := store.NewMemory(nil)
	rm := startRM(t, "sc1", 1)
	join(t, s, rm)
	// The time the Routers' secret managers sign and check by.
	clock := testingclock.NewFakeClock(tokenEpoch)
	addr, alice := serveRouter(t, s, routerOptions{tokens: routerTokens(t, s, clock)})
	return s, rm, clock, addr, alice
}

// clientOf is a Knit client of the Router at addr: calling as user, or,
// with a token, authenticated by it.
func clientOf(t *testing.T, addr, user string, tok *commonpb.TokenProto) *client.RMClient {
	t.Helper()
	c, err := client.NewRMClient(addr, client.RMConfig{User: user, Token: tok, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantTokenRefusal checks that err came as the Router sends the secret
// manager's refusals: a YarnException of the refusal's class, whose
// message starts with want.
func wantTokenRefusal(t *testing.T, err error, class yarnerr.Class, want string) {
	t.Helper()
	if !isYarnException(err, string(class)+": "+want) {
		t.Errorf("err %v, want a YarnException of %s %q", err, class, want)
	}
}

func TestTheRouterIssuesRenewsAndCancelsDelegationTokensAsAnRMDoes(t *testing.T) {
	_, _, clock, addr, alice := tokenFederation(t)
	yarn, mallory := clientOf(t, addr, "yarn/router@EXAMPLE.COM", nil), clientOf(t, addr, "mallory", nil)
	ctx := t.Context()

	tok, err := alice.GetDelegationToken(ctx, "yarn")
	if err != nil {
		t.Fatal(err)
	}
	id, err := tokens.ParseDelegationTokenIdentifier(tok.GetIdentifier())
	if err != nil {
		t.Fatal(err)
	}
	if tok.GetKind() != tokens.KindRMDelegation || tok.GetService() != testTokenService || id.Owner != "alice" || id.Renewer != "yarn" ||
		id.IssueDate != tokenEpoch.UnixMilli() || id.MaxDate != tokenEpoch.Add(7*24*time.Hour).UnixMilli() {
		t.Fatalf("token %v with identifier %+v", tok, id)
	}

	// Its renewer, by its short name, extends it a renew interval from now.
	clock.SetTime(tokenEpoch.Add(time.Hour))
	exp, err := yarn.RenewDelegationToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := tokenEpoch.Add(25 * time.Hour); !exp.Equal(want) {
		t.Errorf("renewed to %v, want %v", exp, want)
	}

	forged := proto.Clone(tok).(*commonpb.TokenProto)
	forged.Password = []byte("not the password")
	otherKey := id
	otherKey.MasterKeyID = 99
	tests := []struct {
		name  string
		call  func() error
		class yarnerr.Class
		want  string
	}{
		{"a renewal by someone else", func() error { _, err := mallory.RenewDelegationToken(ctx, tok); return err },
			yarnerr.AccessControl, "mallory tries to renew a token (RM_DELEGATION_TOKEN owner=alice, renewer=yarn"},
		{"a renewal of a forged token", func() error { _, err := yarn.RenewDelegationToken(ctx, forged); return err },
			yarnerr.AccessControl, "yarn is trying to renew a token (RM_DELEGATION_TOKEN owner=alice"},
		{"a renewal of a token under an unknown key", func() error {
			_, err := yarn.RenewDelegationToken(ctx, token.Token{Identifier: otherKey.Bytes(), Password: tok.GetPassword(), Kind: tokens.KindRMDelegation}.Proto())
			return err
		}, yarnerr.InvalidToken, "Unable to find master key for keyId=99 from cache."},
		{"a cancellation by someone else", func() error { return mallory.CancelDelegationToken(ctx, tok) },
			yarnerr.AccessControl, "mallory is not authorized to cancel the token (RM_DELEGATION_TOKEN owner=alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantTokenRefusal(t, tt.call(), tt.class, tt.want) })
	}

	// Its owner cancels it; then it is unknown.
	if err := alice.CancelDelegationToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	_, err = yarn.RenewDelegationToken(ctx, tok)
	wantTokenRefusal(t, err, yarnerr.InvalidToken, "Renewal request for unknown token (RM_DELEGATION_TOKEN owner=alice")

	// Past its maximum lifetime a token cannot be renewed.
	tok2, err := alice.GetDelegationToken(ctx, "yarn")
	if err != nil {
		t.Fatal(err)
	}
	clock.SetTime(tokenEpoch.Add(8 * 24 * time.Hour))
	_, err = yarn.RenewDelegationToken(ctx, tok2)
	wantTokenRefusal(t, err, yarnerr.InvalidToken, "yarn tried to renew an expired token (RM_DELEGATION_TOKEN owner=alice")
}

func TestACallerAuthenticatedByARouterTokenIsItsOwnerAndMayNotAskForAnother(t *testing.T) {
	_, rm, clock, addr, alice := tokenFederation(t)
	ctx := t.Context()
	newApp, err := alice.GetNewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.SubmitApplication(ctx, submission(newApp.GetApplicationId(), "default")); err != nil {
		t.Fatal(err)
	}
	tok, err := alice.GetDelegationToken(ctx, "yarn")
	if err != nil {
		t.Fatal(err)
	}

	// The connection context names nobody: the token says who calls.
	byToken := clientOf(t, addr, "", tok)
	report, err := byToken.GetApplicationReport(ctx, newApp.GetApplicationId())
	if err != nil {
		t.Fatalf("a report through a token-authenticated connection: %v", err)
	}
	if report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Errorf("report state %v", report.GetYarnApplicationState())
	}
	rm.mu.Lock()
	if last := rm.users[len(rm.users)-1]; last != "alice" {
		t.Errorf("the sub-cluster was called as %q, want the token's owner alice", last)
	}
	rm.mu.Unlock()

	_, err = byToken.GetDelegationToken(ctx, "yarn")
	if !isYarnException(err, "java.io.IOException: Delegation Token can be issued only with kerberos authentication.") {
		t.Errorf("a token asked for with a token: %v", err)
	}
	if _, err := byToken.RenewDelegationToken(ctx, tok); !isYarnException(err, "java.io.IOException: Delegation Token can be renewed only with kerberos authentication") {
		t.Errorf("a renewal asked for with a token: %v", err)
	}

	// A token past its renew date no longer opens a connection.
	clock.SetTime(tokenEpoch.Add(25 * time.Hour))
	if _, err := clientOf(t, addr, "", tok).GetApplicationReport(ctx, newApp.GetApplicationId()); err == nil || !strings.Contains(err.Error(), "has expired") {
		t.Errorf("a connection with an expired token: %v", err)
	}
}

// A token issued to a proxy user keeps its real user, and a caller
// authenticated by it goes on to the sub-cluster as its owner on behalf
// of that real user, as YARN's Router calls as the caller's UGI, a proxy
// user of the token's real user (RouterServerUtil.setupUser).
func TestARouterTokenOfAProxyUserGoesOnToTheSubClusterAsTheOwnerViaTheRealUser(t *testing.T) {
	_, rm, _, addr, _ := tokenFederation(t)
	ctx := t.Context()
	for _, tt := range []struct {
		name, user, realUser string
	}{
		{"a proxy user's token", "bob", "oozie"},
		{"a user's own token", "carol", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.NewRMClient(addr, client.RMConfig{User: tt.user, RealUser: tt.realUser, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tok, err := c.GetDelegationToken(ctx, "yarn")
			if err != nil {
				t.Fatal(err)
			}
			id, err := tokens.ParseDelegationTokenIdentifier(tok.GetIdentifier())
			if err != nil || id.Owner != tt.user || id.RealUser != tt.realUser {
				t.Fatalf("identifier %+v, %v; want owner %s, real user %q", id, err, tt.user, tt.realUser)
			}
			if _, err := clientOf(t, addr, "", tok).GetNewApplication(ctx); err != nil {
				t.Fatalf("a call through a token-authenticated connection: %v", err)
			}
			rm.mu.Lock()
			defer rm.mu.Unlock()
			last := len(rm.users) - 1
			if rm.users[last] != tt.user || rm.realUsers[last] != tt.realUser {
				t.Errorf("the sub-cluster was called as %q via %q, want %q via %q", rm.users[last], rm.realUsers[last], tt.user, tt.realUser)
			}
		})
	}
}

func TestASecondRouterOverTheSameStoreHonoursAndRenewsTheFirstsTokens(t *testing.T) {
	s, _, clock, _, alice := tokenFederation(t)
	second, _ := serveRouter(t, s, routerOptions{tokens: routerTokens(t, s, clock)})
	ctx := t.Context()
	tok, err := alice.GetDelegationToken(ctx, "yarn")
	if err != nil {
		t.Fatal(err)
	}

	clock.SetTime(tokenEpoch.Add(20 * time.Hour))
	exp, err := clientOf(t, second, "yarn", nil).RenewDelegationToken(ctx, tok)
	if err != nil {
		t.Fatalf("the second Router renewing the first's token: %v", err)
	}
	if want := tokenEpoch.Add(44 * time.Hour); !exp.Equal(want) {
		t.Errorf("renewed to %v, want %v", exp, want)
	}
	// Past the first renew date, the renewal the second Router made keeps
	// the token good on both.
	clock.SetTime(tokenEpoch.Add(30 * time.Hour))
	if _, err := clientOf(t, second, "", tok).GetResourceTypeInfo(ctx); err != nil {
		t.Errorf("a token-authenticated call on the second Router: %v", err)
	}
	if _, err := alice.GetDelegationToken(ctx, "yarn"); err != nil {
		t.Errorf("the first Router issuing after the second wrote: %v", err)
	}
}
