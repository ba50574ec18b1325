package ipc

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/knitdev/knit/protocols/digestmd5"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testProtocol     = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"
	classAppNotFound = "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
)

// quietLog keeps the expected connection errors of these tests out of their output.
var quietLog = slog.New(slog.DiscardHandler)

var testKey = []byte("knit-test-master-key")

// testTokens verifies tokens whose identifier is "user:<name>" and whose
// password is HMAC-SHA1(testKey, identifier), as Hadoop's secret managers do.
func testTokens(_ context.Context, id []byte) (Secret, error) {
	var user string
	if _, err := fmt.Sscanf(string(id), "user:%s", &user); err != nil {
		return Secret{}, Errorf(ClassInvalidToken, "unknown token identifier")
	}
	return Secret{Password: hmacSHA1(testKey, id), User: user, Identity: "identity of " + user}, nil
}

func hmacSHA1(key, msg []byte) []byte {
	m := hmac.New(sha1.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func testToken(user string) *commonpb.TokenProto {
	id := []byte("user:" + user)
	return &commonpb.TokenProto{Identifier: id, Password: hmacSHA1(testKey, id), Kind: proto.String("TEST"), Service: proto.String("")}
}

// clientProtocolMethods serves a few ApplicationClientProtocol methods with
// behaviour the tests can steer.
func clientProtocolMethods() []Method {
	return []Method{
		Handle("getNewApplication", func(ctx context.Context, _ *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			c, _ := CallerFrom(ctx)
			return &yarnpb.GetNewApplicationResponseProto{
				ApplicationId:     &yarnpb.ApplicationIdProto{Id: proto.Int32(c.CallID), ClusterTimestamp: proto.Int64(1)},
				MaximumCapability: &yarnpb.ResourceProto{Memory: proto.Int64(8192), VirtualCores: proto.Int32(4)},
			}, nil
		}),
		Handle("getApplicationReport", func(ctx context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			c, _ := CallerFrom(ctx)
			id := req.GetApplicationId().GetId()
			if id < 0 {
				return nil, Errorf(classAppNotFound, "Application with id '%d' doesn't exist in RM.", id)
			}
			// The id asks for a delay in milliseconds, so answers come back out of order.
			time.Sleep(time.Duration(id) * time.Millisecond)
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
				ApplicationId: req.GetApplicationId(),
				User:          proto.String(c.User),
				Name:          proto.String(fmt.Sprint(c.TokenIdentity)),
			}}, nil
		}),
	}
}

// testServer is a Server serving on a loopback port until its test ends.
type testServer struct {
	srv      *Server
	addr     string
	served   chan struct{}
	serveErr error
}

// serveTest serves srv on a loopback port and shuts it down when the test
// ends, checking that Serve then returns ErrServerClosed.
func serveTest(t *testing.T, srv *Server) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, addr: l.Addr().String(), served: make(chan struct{})}
	go func() {
		ts.serveErr = srv.Serve(l)
		close(ts.served)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := ts.wait(); !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return ts
}

// wait waits for Serve to return and gives its error.
func (ts *testServer) wait() error {
	<-ts.served
	return ts.serveErr
}

// newTestServer makes a server for cfg with methods registered under
// testProtocol, logging nothing unless cfg says otherwise.
func newTestServer(t *testing.T, cfg Config, methods ...Method) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(testProtocol, methods...); err != nil {
		t.Fatal(err)
	}
	return srv
}

// startServer serves the test protocol with cfg until the test ends.
func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	return serveTest(t, newTestServer(t, cfg, clientProtocolMethods()...))
}

func newTestClient(t *testing.T, addr string, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.Protocol == "" {
		cfg.Protocol = testProtocol
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	c, err := NewClient(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func report(t *testing.T, c *Client, id int32) (*yarnpb.ApplicationReportProto, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp yarnpb.GetApplicationReportResponseProto
	err := c.Call(ctx, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(id), ClusterTimestamp: proto.Int64(1)},
	}, &resp)
	return resp.GetApplicationReport(), err
}

func TestCallerIdentityPerAuthMode(t *testing.T) {
	tests := []struct {
		name         string
		server       Config
		client       ClientConfig
		wantUser     string
		wantIdentity string
	}{
		{"simple user from the connection context", Config{Simple: true}, ClientConfig{User: "alice"}, "alice", "<nil>"},
		{"token user over DIGEST-MD5", Config{Tokens: testTokens}, ClientConfig{Token: testToken("appattempt_1_0001_000001")}, "appattempt_1_0001_000001", "identity of appattempt_1_0001_000001"},
		{"token preferred where both are offered", Config{Simple: true, Tokens: testTokens}, ClientConfig{User: "bob", Token: testToken("carol")}, "carol", "identity of carol"},
		{"simple fallback when the server has no tokens", Config{Simple: true}, ClientConfig{User: "dave", Token: testToken("ignored")}, "dave", "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.server)
			c := newTestClient(t, ts.addr, tt.client)
			rep, err := report(t, c, 1)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if rep.GetUser() != tt.wantUser || rep.GetName() != tt.wantIdentity {
				t.Errorf("caller = %q / %q, want %q / %q", rep.GetUser(), rep.GetName(), tt.wantUser, tt.wantIdentity)
			}
		})
	}
}

func TestASlowCallDoesNotHoldBackLaterOnes(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	if _, err := report(t, c, 1); err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := report(t, c, 400) // the handler sleeps 400ms
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond) // the slow call is on the wire first
	if _, err := report(t, c, 0); err != nil {
		t.Fatalf("fast call: %v", err)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call answered (%v) before the fast one sent after it", err)
	default:
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow call: %v", err)
	}
}

func TestManyCallsInFlightEachGetTheirOwnAnswer(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(id int32) {
			defer wg.Done()
			rep, err := report(t, c, id)
			if err == nil && rep.GetApplicationId().GetId() != id {
				err = fmt.Errorf("asked for %d, got %d", id, rep.GetApplicationId().GetId())
			}
			if err != nil {
				errs <- err
			}
		}(int32(rand.IntN(30)))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func newTestDigestClient(tok *commonpb.TokenProto) *digestmd5.Client {
	return digestmd5.NewClient(digestmd5.ClientConfig{
		Username: base64.StdEncoding.EncodeToString(tok.GetIdentifier()),
		Password: base64.StdEncoding.EncodeToString(tok.GetPassword()),
	})
}

func TestManyConnectionsEachWithItsOwnIdentity(t *testing.T) {
	ts := startServer(t, Config{Simple: true, Tokens: testTokens})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			user := fmt.Sprintf("user%03d", i)
			cfg := ClientConfig{User: user}
			if i%2 == 1 {
				cfg = ClientConfig{Token: testToken(user)}
			}
			c := newTestClient(t, ts.addr, cfg)
			for j := 0; j < 5; j++ {
				rep, err := report(t, c, 1)
				if err == nil && rep.GetUser() != user {
					err = fmt.Errorf("connection of %s saw caller %s", user, rep.GetUser())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClientDialRetriesUntilTheServerListens(t *testing.T) {
	// Reserve a port, free it, and start serving on it only after the
	// client has begun dialling.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	srv := newTestServer(t, Config{Simple: true}, clientProtocolMethods()...)
	served := make(chan struct{})
	go func() {
		defer close(served)
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, ClientConfig{Protocol: testProtocol, User: "alice", Logger: quietLog})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := report(t, c, 1); err != nil {
		t.Fatal(err)
	}
}

func TestDialGivesUpWhenTheContextEnds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Dial(ctx, addr, ClientConfig{Protocol: testProtocol, User: "alice", Logger: quietLog}); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
}
