package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/test/eventually"
)

// startEcho serves a loopback port that writes back what it reads, until
// the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg on c and reads as many bytes back.
func roundTrip(c net.Conn, msg string) (string, error) {
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	b := make([]byte, len(msg))
	_, err := io.ReadFull(c, b)
	return string(b), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg)
	if err != nil || got != msg {
		t.Fatalf("echo of %q through the proxy: %q, %v", msg, got, err)
	}
}

// mustEnd checks that c was closed by the proxy before any byte came back.
func mustEnd(t *testing.T, c net.Conn) {
	t.Helper()
	// An end is EOF, or a reset when the proxy closed with bytes unread.
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("read on a cut connection: %d bytes, %v; want its end", n, err)
	}
}

func TestAProxyRelaysBothWaysAndCloseEndsItsConnections(t *testing.T) {
	p := start(t)
	c := dial(t, p.Addr())
	big := make([]byte, 3*copyBuffer)
	for i := range big {
		big[i] = byte(i)
	}
	mustEcho(t, c, "hello")
	mustEcho(t, c, string(big))
	p.Close()
	mustEnd(t, c)
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("a closed proxy accepted a connection")
	}
}

func TestDownRefusesAndCutsAndUpServesOnTheSameAddress(t *testing.T) {
	p := start(t)
	addr := p.Addr()
	before := dial(t, addr)
	mustEcho(t, before, "before")
	p.Down()
	mustEnd(t, before)
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("a proxy that is down accepted a connection")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("address after Up %s, want %s", p.Addr(), addr)
	}
	mustEcho(t, dial(t, addr), "after")
}

func TestACutDropsConnectionsAndHoldsNewOnesUnansweredUntilHealed(t *testing.T) {
	p := start(t)
	before := dial(t, p.Addr())
	mustEcho(t, before, "before")
	p.SetCut(true)
	mustEnd(t, before)
	held := dial(t, p.Addr())
	if _, err := io.WriteString(held, "during"); err != nil {
		t.Fatal(err)
	}
	// The dial returns once the kernel has the connection, before the
	// proxy accepts it.
	eventually.True(t, 10*time.Second, "the proxy holds the connection", func() bool { return p.Held() == 1 })
	p.SetCut(false)
	// Had the proxy forwarded it, "during" would come back; healing
	// closes it unanswered instead.
	mustEnd(t, held)
	mustEcho(t, dial(t, p.Addr()), "after")
}

func TestUpAfterCloseIsAnError(t *testing.T) {
	p := start(t)
	p.Close()
	if err := p.Up(); err == nil {
		t.Fatal("Up after Close succeeded")
	}
}
