package nmrelay

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/rks/relay"
)

// flakyListener fails its first Accepts with a temporary error, as a
// listener out of file descriptors does.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
}

type temporaryErr struct{}

func (temporaryErr) Error() string   { return "accept: too many open files" }
func (temporaryErr) Temporary() bool { return true }
func (temporaryErr) Timeout() bool   { return false }

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, temporaryErr{}
	}
	return l.Listener.Accept()
}

func TestRelayCarriesBytesBothWaysAndNamesTheNode(t *testing.T) {
	t.Run("plain listener", func(t *testing.T) { testRelay(t, 0) })
	t.Run("after temporary accept errors", func(t *testing.T) { testRelay(t, 3) })
}

func testRelay(t *testing.T, acceptFailures int32) {
	upL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := relay.NewListener(upL)
	defer up.Close()
	r, err := New(Config{Node: "127.0.1.7:8041", Upstream: upL.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	downL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	flaky := &flakyListener{Listener: downL}
	flaky.failures.Store(acceptFailures)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, flaky) }()

	c, err := net.Dial("tcp", downL.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hrpc")); err != nil {
		t.Fatal(err)
	}
	requireRelayed(t, c, up)
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestNewRefusesANodeWithoutAPort(t *testing.T) {
	if _, err := New(Config{Node: "127.0.1.1", Upstream: "x:1"}); err == nil {
		t.Error("accepted")
	}
}

// freeAddress is a loopback address nothing listens on, until a test
// listens there itself.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// serveRelay runs a relay to upstream on a new loopback port until the
// test ends and returns the port's address.
func serveRelay(t *testing.T, upstream string, wait time.Duration) string {
	t.Helper()
	r, err := New(Config{Node: "127.0.1.7:8041", Upstream: upstream, UpstreamWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

func TestAnAMsConnectionWaitsForRKSAcrossAFailover(t *testing.T) {
	upstream := freeAddress(t)
	c, err := net.Dial("tcp", serveRelay(t, upstream, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The AM's call is sent while no RM holds RKS's address.
	if _, err := c.Write([]byte("hrpc")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the relay's first dials are refused
	upL, err := net.Listen("tcp", upstream)
	if err != nil {
		t.Fatal(err)
	}
	up := relay.NewListener(upL)
	defer up.Close()
	requireRelayed(t, c, up)
}

func TestAnAMsConnectionIsClosedWhenRKSStaysAway(t *testing.T) {
	c, err := net.Dial("tcp", serveRelay(t, freeAddress(t), 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A guard against a hang, far above the wait.
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read %d bytes, %v; want the connection closed once the wait is over", n, err)
	}
}

// requireRelayed checks that the AM's connection c, which has sent "hrpc",
// reaches RKS's listener up named as the relay's node, and carries an
// answer back.
func requireRelayed(t *testing.T, c net.Conn, up net.Listener) {
	t.Helper()
	s, err := up.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if node := s.(*relay.Conn).Node(); node != "127.0.1.7:8041" {
		t.Errorf("node %q", node)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hrpc" {
		t.Fatalf("upstream read %q, %v", buf, err)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("downstream read %q, %v", buf, err)
	}
}
