package amrmproxy

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

var quiet = slog.New(slog.DiscardHandler)

var testAttempt = yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}, ID: 1}

// rmToken is a real-looking token whose identifier is the user it
// authenticates as, so the fake RM checks it with ipctest.TokenLookup.
func rmToken(user string) token.Token {
	return token.Token{Identifier: []byte(user), Password: []byte("pw-" + user), Kind: client.KindAMRMToken}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeRM is the RM's scheduler port: it records the token user of every
// call and numbers allocate answers as ApplicationMasterService does.
type fakeRM struct {
	mu         sync.Mutex
	users      []string
	asks       [][]*yarnpb.ResourceRequestProto
	releases   []*yarnpb.ContainerIdProto
	lastID     int32
	registered bool
	finished   bool
	// renew, if set, is handed out in the next allocate answer.
	renew *token.Token
	// allocated is put in each allocate answer.
	allocated []*yarnpb.ContainerProto
	// fail, if set, is the next allocate's error.
	fail error
	// refuse, if set, is every register's error.
	refuse error
	// reregister makes a second register start the count again, as
	// Knit's RM does for an unmanaged AM keeping its containers, rather
	// than be refused as already registered.
	reregister bool
	// holdRegister, if set, holds every register until it is closed.
	holdRegister chan struct{}
	// hold, if set, keeps every allocate answer back until it is closed;
	// held is closed when the first such answer is held.
	hold, held chan struct{}
}

// holdAnswers makes the RM keep its allocate answers back until release
// (or the test's end), and returns a channel closed once one is held:
// from then on no answer sent before can still be on its way.
func (f *fakeRM) holdAnswers(t *testing.T) (held <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hold := make(chan struct{})
	f.hold, f.held = hold, make(chan struct{})
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.mu.Lock()
			f.hold = nil
			f.mu.Unlock()
			close(hold)
		})
	}
	t.Cleanup(release)
	return f.held, release
}

// waitFor waits until hold, if any, is closed, or ctx ends.
func waitFor(ctx context.Context, hold <-chan struct{}) error {
	if hold == nil {
		return nil
	}
	select {
	case <-hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeRM) user(ctx context.Context) {
	c, _ := ipc.CallerFrom(ctx)
	f.users = append(f.users, c.User)
}

func (f *fakeRM) serve(t *testing.T) string {
	return ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ApplicationMasterProtocolName, f.methods()...)
}

func (f *fakeRM) methods() []ipc.Method {
	return yarnrpc.ApplicationMasterProtocolFuncs{
		RegisterApplicationMaster: func(ctx context.Context, _ *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
			f.mu.Lock()
			hold := f.holdRegister
			f.mu.Unlock()
			if err := waitFor(ctx, hold); err != nil {
				return nil, err
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.user(ctx)
			if f.refuse != nil {
				return nil, f.refuse
			}
			if f.registered && !f.reregister {
				return nil, yarnerr.AlreadyRegistered(testAttempt.App.String())
			}
			f.registered, f.lastID = true, 0
			return &yarnpb.RegisterApplicationMasterResponseProto{Queue: proto.String("root.default")}, nil
		},
		Allocate: func(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			resp, err := f.allocate(ctx, req)
			f.mu.Lock()
			hold, held := f.hold, f.held
			if hold != nil {
				f.held = nil
			}
			f.mu.Unlock()
			if hold != nil {
				if held != nil {
					close(held)
				}
				if err := waitFor(ctx, hold); err != nil {
					return nil, err
				}
			}
			return resp, err
		},
		FinishApplicationMaster: func(ctx context.Context, _ *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.user(ctx)
			f.finished = true
			return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
		},
	}.Methods()
}

func (f *fakeRM) allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.user(ctx)
	if err := f.fail; err != nil {
		f.fail = nil
		return nil, err
	}
	if req.GetResponseId() != f.lastID {
		return nil, yarnerr.InvalidResponseID(testAttempt.String(), f.lastID, req.GetResponseId())
	}
	f.asks = append(f.asks, req.GetAsk())
	f.releases = append(f.releases, req.GetRelease()...)
	f.lastID++
	resp := &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(f.lastID), AllocatedContainers: f.allocated}
	if f.renew != nil {
		resp.AmRmToken = f.renew.Proto()
		f.renew = nil
	}
	return resp, nil
}

func (f *fakeRM) seenUsers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.users...)
}

func noRetries() backoff.BackOff { return &backoff.StopBackOff{} }

func testSecrets(t *testing.T) *Secrets {
	t.Helper()
	s, err := NewSecrets(SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveProxy serves a Service on loopback with the given pipeline until
// the test ends, and returns it and its address.
func serveProxy(t *testing.T, secrets *Secrets, pipeline []string, stages map[string]Stage) (*Service, string) {
	t.Helper()
	return serveProxyWith(t, Config{Secrets: secrets, Pipeline: pipeline, Stages: stages, Logger: quiet}, nil)
}

// serveProxyWith serves a Service of cfg, after before (if any) ran on it.
func serveProxyWith(t *testing.T, cfg Config, before func(*Service)) (*Service, string) {
	t.Helper()
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(svc)
	}
	srv, err := ipc.NewServer(ipc.Config{Tokens: cfg.Secrets.SecretLookup(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return svc, ipctest.Run(t, srv)
}

// registeredAM starts the attempt's pipeline with the real token "real-1"
// and returns a raw AM client of the proxy, registered.
func registeredAM(t *testing.T, svc *Service, proxy string) *yarnrpc.ApplicationMasterProtocolClient {
	t.Helper()
	_, am := registeredAMWithToken(t, svc, proxy)
	return am
}

// registeredAMWithToken is registeredAM, with the AM's local token.
func registeredAMWithToken(t *testing.T, svc *Service, proxy string) (token.Token, *yarnrpc.ApplicationMasterProtocolClient) {
	t.Helper()
	ctx := testCtx(t)
	local, err := svc.StartApplicationMaster(ctx, testAttempt, "alice", rmToken("real-1"))
	if err != nil {
		t.Fatal(err)
	}
	am := rawAM(t, proxy, local)
	if _, err := am.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am-host")}); err != nil {
		t.Fatal(err)
	}
	return local, am
}

// rawAM is an AM client that sends exactly the requests it is given.
func rawAM(t *testing.T, addr string, tok token.Token) *yarnrpc.ApplicationMasterProtocolClient {
	t.Helper()
	c, err := ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok.Proto(), Logger: quiet, Errors: yarnerr.FromRemote, NewBackOff: noRetries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return yarnrpc.NewApplicationMasterProtocolClient(c)
}
