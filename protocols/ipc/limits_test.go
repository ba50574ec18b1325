package ipc

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// blockingKill serves forceKillApplication by waiting for release; entered
// gets one value per call that started and peak the most running at once.
type blockingKill struct {
	release chan struct{}
	entered chan struct{}

	mu            sync.Mutex
	running, peak int
}

func newBlockingKill() *blockingKill {
	return &blockingKill{release: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (b *blockingKill) method() Method {
	return Handle("forceKillApplication", func(ctx context.Context, _ *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
		b.mu.Lock()
		b.running++
		b.peak = max(b.peak, b.running)
		b.mu.Unlock()
		b.entered <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.running--
		b.mu.Unlock()
		return &yarnpb.KillApplicationResponseProto{}, nil
	})
}

func kill(ctx context.Context, c *Client) error {
	return c.Call(ctx, "forceKillApplication", &yarnpb.KillApplicationRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(1)},
	}, &yarnpb.KillApplicationResponseProto{})
}

func TestAConnectionRunsAtMostMaxConnInFlightCalls(t *testing.T) {
	b := newBlockingKill()
	ts := serveTest(t, newTestServer(t, Config{Simple: true, MaxConnInFlight: 2}, append(clientProtocolMethods(), b.method())...))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- kill(ctx, c) }()
	}
	<-b.entered
	<-b.entered
	// The connection is at its bound; another connection is not.
	other := newTestClient(t, ts.addr, ClientConfig{User: "bob"})
	if _, err := report(t, other, 1); err != nil {
		t.Fatalf("call on another connection: %v", err)
	}
	close(b.release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("kill: %v", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak != 2 {
		t.Errorf("%d calls of one connection ran at once, want 2", b.peak)
	}
}

func TestConnectionsBeyondMaxConnsAreClosedUnanswered(t *testing.T) {
	b := newBlockingKill()
	ts := serveTest(t, newTestServer(t, Config{Simple: true, MaxConns: 1}, append(clientProtocolMethods(), b.method())...))
	first := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	held := make(chan error, 1)
	go func() { held <- kill(t.Context(), first) }()
	<-b.entered // the first connection is open and busy

	r := dialRaw(t, ts.addr, preamble(9, 0))
	r.closed()

	close(b.release)
	if err := <-held; err != nil {
		t.Fatalf("call on the first connection: %v", err)
	}
	if _, err := report(t, first, 1); err != nil {
		t.Errorf("the first connection after the refusal: %v", err)
	}
}

func TestAdmitCallAnswersWithItsErrorAndKeepsTheConnection(t *testing.T) {
	const classStandby = "org.apache.hadoop.ipc.StandbyException"
	var standby sync.Map // user → true
	ts := startServer(t, Config{Simple: true, AdmitCall: func(ctx context.Context, protocol, method string) error {
		c, _ := CallerFrom(ctx)
		if _, ok := standby.Load(c.User); ok && protocol == testProtocol && method == "getApplicationReport" {
			return javaErr{class: classStandby, msg: "Operation category READ is not supported in state standby"}
		}
		return nil
	}})
	standby.Store("alice", true)
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	_, err := report(t, c, 1)
	var re *RemoteError
	if !errors.As(err, &re) || re.ClassName != classStandby || re.Fatal ||
		re.Message != "Operation category READ is not supported in state standby" {
		t.Fatalf("err = %v, want a non-fatal %s", err, classStandby)
	}
	standby.Delete("alice")
	if _, err := report(t, c, 1); err != nil {
		t.Errorf("same connection once admitted: %v", err)
	}
}

// javaErr is an error of another package that knows its Java class.
type javaErr struct{ class, msg string }

func (e javaErr) Error() string       { return e.class + ": " + e.msg }
func (e javaErr) JavaClass() string   { return e.class }
func (e javaErr) JavaMessage() string { return e.msg }

func TestAJavaErrorTravelsWithItsClassAndTheClientMapsItBack(t *testing.T) {
	methods := append(clientProtocolMethods(), Handle("forceKillApplication",
		func(context.Context, *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			return nil, errors.Join(errors.New("context"), javaErr{class: classAppNotFound, msg: "gone"})
		}))
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, methods...))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice", Errors: func(re *RemoteError) error {
		return javaErr{class: re.ClassName, msg: re.Message}
	}})
	err := kill(t.Context(), c)
	var je javaErr
	if !errors.As(err, &je) || je != (javaErr{class: classAppNotFound, msg: "gone"}) {
		t.Fatalf("err = %v, want the mapped %s", err, classAppNotFound)
	}
	if !IsClass(err, classAppNotFound) || !errors.Is(&RemoteError{ClassName: classAppNotFound}, je) {
		t.Errorf("IsClass / RemoteError.Is do not match a JavaError of the class")
	}
}

// temporaryErrListener fails every Accept with a temporary error, telling
// failed of each.
type temporaryErrListener struct {
	net.Listener
	failed chan struct{}
}

type temporaryErr struct{}

func (temporaryErr) Error() string   { return "too many open files" }
func (temporaryErr) Temporary() bool { return true }
func (temporaryErr) Timeout() bool   { return false }

func (l *temporaryErrListener) Accept() (net.Conn, error) {
	select {
	case l.failed <- struct{}{}:
	default:
	}
	return nil, temporaryErr{}
}

func TestCloseEndsTheAcceptBackoffAtOnce(t *testing.T) {
	srv := newTestServer(t, Config{Simple: true})
	srv.acceptBackoff = [2]time.Duration{time.Hour, time.Hour}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &temporaryErrListener{Listener: inner, failed: make(chan struct{}, 1)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	<-l.failed // Serve now backs off for an hour
	srv.Close()
	select {
	case err := <-served:
		if !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still backing off after Close")
	}
}

// callLog is a CallObserver that keeps what it is told.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) ObserveCall(protocol, method string, queued, processing time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	if queued < 0 || processing < 0 {
		outcome = "negative time"
	}
	l.calls = append(l.calls, protocol+"."+method+" "+outcome)
}

func TestTheObserverSeesEveryAnsweredCall(t *testing.T) {
	log := &callLog{}
	ts := startServer(t, Config{Simple: true, Observer: log, AdmitCall: func(ctx context.Context, _, _ string) error {
		if c, _ := CallerFrom(ctx); c.User == "mallory" {
			return javaErr{class: "org.apache.hadoop.ipc.StandbyException", msg: "standby"}
		}
		return nil
	}})
	if _, err := report(t, newTestClient(t, ts.addr, ClientConfig{User: "alice"}), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := report(t, newTestClient(t, ts.addr, ClientConfig{User: "mallory"}), 1); err == nil {
		t.Fatal("mallory's call was answered")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	want := []string{testProtocol + ".getApplicationReport ok", testProtocol + ".getApplicationReport error"}
	if !slices.Equal(log.calls, want) {
		t.Errorf("observed %q, want %q", log.calls, want)
	}
}

func TestAdmitCallRefusalAnswersCallsTheServerDoesNotServe(t *testing.T) {
	const classStandby = "org.apache.hadoop.ipc.StandbyException"
	refuse := func(context.Context, string, string) error {
		return javaErr{class: classStandby, msg: "ResourceManager rm2 is not Active!"}
	}
	tests := []struct {
		name      string
		admit     func(context.Context, string, string) error
		protocol  string
		method    string
		wantClass string
	}{
		{"unknown protocol refused", refuse, "org.example.Unserved", "getApplicationReport", classStandby},
		{"unknown method refused", refuse, testProtocol, "noSuchMethod", classStandby},
		{"unknown protocol admitted is unknown", func(context.Context, string, string) error { return nil }, "org.example.Unserved", "getApplicationReport", ClassNoSuchProtocol},
		{"unknown method without a hook is unknown", nil, testProtocol, "noSuchMethod", ClassNoSuchMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, Config{Simple: true, AdmitCall: tt.admit})
			c := newTestClient(t, ts.addr, ClientConfig{User: "alice", Protocol: tt.protocol})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var resp yarnpb.GetApplicationReportResponseProto
			err := c.Call(ctx, tt.method, &yarnpb.GetApplicationReportRequestProto{}, &resp)
			var re *RemoteError
			if !errors.As(err, &re) || re.ClassName != tt.wantClass || re.Fatal {
				t.Fatalf("err = %v, want a non-fatal %s", err, tt.wantClass)
			}
		})
	}
}
