package tokens

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

const (
	// mrProtocol stands for any protocol an AM serves its clients.
	mrProtocol = "org.apache.hadoop.mapreduce.v2.api.MRClientProtocolPB"
)

var quietLog = slog.New(slog.DiscardHandler)

// whoAmI answers registerApplicationMaster with the user the server
// authenticated, in the queue field: "user", or "user via real user" for
// a proxy user.
func whoAmI(ctx context.Context, _ *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	c, _ := ipc.CallerFrom(ctx)
	who := c.User
	if c.RealUser != "" {
		who += " via " + c.RealUser
	}
	return &yarnpb.RegisterApplicationMasterResponseProto{Queue: proto.String(who)}, nil
}

// serve starts a real ipc.Server that checks tokens with lookup, until the
// test ends.
func serve(t *testing.T, cfg ipc.Config, protocol string) string {
	t.Helper()
	cfg.Logger = quietLog
	srv, err := ipc.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(protocol, ipc.Handle("registerApplicationMaster", whoAmI)); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ipc.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// callAs connects with tok over SASL DIGEST-MD5 (a real Hadoop RPC
// handshake) and returns the user the server saw.
func callAs(t *testing.T, addr, protocol string, tok *commonpb.TokenProto) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ipc.Dial(ctx, addr, ipc.ClientConfig{Protocol: protocol, Token: tok, Logger: quietLog})
	if err != nil {
		return "", err
	}
	defer c.Close()
	var resp yarnpb.RegisterApplicationMasterResponseProto
	if err := c.Call(ctx, "registerApplicationMaster", &yarnpb.RegisterApplicationMasterRequestProto{}, &resp); err != nil {
		return "", err
	}
	return resp.GetQueue(), nil
}

// TestSecretLookupsAuthenticateRealSASLClients runs each manager's
// ipc.SecretLookup behind a real ipc.Server and connects with ipc.Client:
// good tokens authenticate as Hadoop's token users, bad ones fail the
// handshake with Hadoop's exception class and message.
func TestSecretLookupsAuthenticateRealSASLClients(t *testing.T) {
	ctx := context.Background()
	clock := newClock(t0)
	var dead atomic.Bool // read by the servers' connection goroutines
	cfg := testConfig(clock, nil)
	cfg.AttemptValid = func(context.Context, *yarnpb.ApplicationAttemptIdProto) bool { return !dead.Load() }
	m := newManager(t, cfg)

	scheduler := serve(t, ipc.Config{Tokens: m.AMRM().SecretLookup()}, yarnrpc.ApplicationMasterProtocolName)
	nmPort := serve(t, ipc.Config{Tokens: m.NMTokens().SecretLookup(nil)}, yarnrpc.ApplicationMasterProtocolName)
	clientPort := serve(t, ipc.Config{Simple: true, Tokens: m.Delegation().SecretLookup()}, yarnrpc.ApplicationClientProtocolName)
	amService := serve(t, ipc.Config{Tokens: m.ClientToAM().SecretLookup()}, mrProtocol)

	amrm := m.AMRM().Create(testAttempt)
	nm := m.NMTokens().Create(testAttempt, testNode, "root")
	clientToAM := m.ClientToAM().Create(testAttempt, "alice")
	dt, _, err := m.Delegation().Issue(ctx, "alice", "yarn", "", clientPort)
	if err != nil {
		t.Fatal(err)
	}
	forged := amrm
	forged.Password = []byte("not the hmac of the identifier")
	tampered := amrm
	id := decodeAMRM(t, amrm)
	id.AppAttemptId.AttemptId = proto.Int32(7)
	tampered.Identifier = marshal(id)

	steps := []struct {
		name     string
		before   func()
		addr     string
		protocol string
		tok      *token.Token // read when the step runs
		wantUser string
		want     want
	}{
		{"AMRMToken", nil, scheduler, yarnrpc.ApplicationMasterProtocolName, &amrm, attemptStr, ok},
		{"NMToken", nil, nmPort, yarnrpc.ApplicationMasterProtocolName, &nm, attemptStr, ok},
		{"RM delegation token", nil, clientPort, yarnrpc.ApplicationClientProtocolName, &dt, "alice", ok},
		{"ClientToAM token", nil, amService, mrProtocol, &clientToAM, "alice", ok},
		{"forged password", nil, scheduler, yarnrpc.ApplicationMasterProtocolName, &forged, "", want{class: yarnerr.Class(ipc.ClassSaslException)}},
		{"tampered identifier", nil, scheduler, yarnrpc.ApplicationMasterProtocolName, &tampered, "", want{class: yarnerr.Class(ipc.ClassSaslException)}},
		// Java's parser, like protobuf-go, keeps the NMToken's nodeId as an
		// unknown field and reads keyId as its default, -1.
		{"NMToken on the scheduler port", nil, scheduler, yarnrpc.ApplicationMasterProtocolName, &nm, "",
			want{yarnerr.InvalidToken, "Invalid AMRMToken from " + attemptStr}},
		{"delegation token cancelled", func() {
			if _, err := m.Delegation().Cancel(ctx, dt, "alice"); err != nil {
				t.Fatal(err)
			}
		}, clientPort, yarnrpc.ApplicationClientProtocolName, &dt, "", want{yarnerr.InvalidToken, "Token for real user: , can't be found in cache"}},
		{"AMRMToken during a roll", func() { roll(t, m, clock, 24*time.Hour) }, scheduler, yarnrpc.ApplicationMasterProtocolName, &amrm, attemptStr, ok},
		{"AMRMToken after activation", func() { roll(t, m, clock, 24*time.Hour+15*time.Minute) }, scheduler, yarnrpc.ApplicationMasterProtocolName, &amrm, "",
			want{yarnerr.InvalidToken, "Invalid AMRMToken from " + attemptStr}},
		{"refreshed AMRMToken", func() { amrm = m.AMRM().Create(testAttempt) }, scheduler, yarnrpc.ApplicationMasterProtocolName, &amrm, attemptStr, ok},
		{"attempt finished", func() { dead.Store(true) }, scheduler, yarnrpc.ApplicationMasterProtocolName, &amrm, "",
			want{yarnerr.InvalidToken, attemptStr + " not found in AMRMTokenSecretManager."}},
		{"ClientToAM token of a finished attempt", nil, amService, mrProtocol, &clientToAM, "",
			want{yarnerr.InvalidToken, "Illegal client-token!"}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		tok := *s.tok
		t.Run(s.name, func(t *testing.T) {
			user, err := callAs(t, s.addr, s.protocol, tok.Proto())
			if s.want.class == "" {
				if err != nil || user != s.wantUser {
					t.Fatalf("user %q, err %v; want %q", user, err, s.wantUser)
				}
				return
			}
			var re *ipc.RemoteError
			if !errors.As(err, &re) || re.ClassName != string(s.want.class) || (s.want.msg != "" && re.Message != s.want.msg) {
				t.Fatalf("err = %v, want %s: %q", err, s.want.class, s.want.msg)
			}
		})
	}
}

// A delegation token issued to a proxy user authenticates its owner on
// behalf of its real user, as Hadoop's token identifier's getUser makes a
// proxy user of the owner when the real user is set and another.
func TestADelegationTokenOfAProxyUserAuthenticatesTheOwnerViaTheRealUser(t *testing.T) {
	m := newManager(t, testConfig(newClock(t0), nil))
	clientPort := serve(t, ipc.Config{Tokens: m.Delegation().SecretLookup()}, yarnrpc.ApplicationClientProtocolName)
	for _, tt := range []struct {
		name, owner, realUser, want string
	}{
		{"a user's own token", "alice", "", "alice"},
		{"a proxy user's token", "alice", "oozie", "alice via oozie"},
		{"a token whose real user is its owner", "alice", "alice", "alice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok, _, err := m.Delegation().Issue(t.Context(), tt.owner, "yarn", tt.realUser, clientPort)
			if err != nil {
				t.Fatal(err)
			}
			if who, err := callAs(t, clientPort, yarnrpc.ApplicationClientProtocolName, tok.Proto()); err != nil || who != tt.want {
				t.Errorf("authenticated as %q, %v; want %q", who, err, tt.want)
			}
		})
	}
}

func roll(t *testing.T, m *Manager, clock *fakeClock, at time.Duration) {
	t.Helper()
	clock.Set(t0.Add(at))
	if err := m.Roll(context.Background(), t0.Add(at)); err != nil {
		t.Fatal(err)
	}
}
