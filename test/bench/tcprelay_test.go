package bench

import (
	"errors"
	"io"
	"net"
	"sync"
)

// tcpRelay is the floor of a hop: it copies the bytes of each connection
// it accepts to one it dials to its target, and back, and does nothing
// else (no parsing, no routing, no checks). A call through it against the
// same call made directly is what a hop costs on this machine before it
// does any work of its own. Where an answer leaves its server in one or
// two writes (an RPC answer, a page of declared length), a proxy can do no
// fewer reads and writes, so a goal the relay misses no proxy meets here;
// a streamed answer is another matter, as a proxy may gather its pieces
// into fewer writes.
type tcpRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// startTCPRelay relays a loopback port of its own to target (host:port).
func startTCPRelay(target string) (*tcpRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &tcpRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// addr is the relay's host:port.
func (r *tcpRelay) addr() string { return r.ln.Addr().String() }

func (r *tcpRelay) accept() {
	defer r.wg.Done()
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		if !r.track(down, up) {
			return
		}
		r.wg.Add(2)
		go r.pipe(up, down)
		go r.pipe(down, up)
	}
}

// track keeps conns for close; false, with conns closed, once the relay
// is closing.
func (r *tcpRelay) track(conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, a read and a write at a time, until either
// ends, then closes both: the benchmark's clients and servers never
// half-close. io.Copy itself would splice one TCP connection to the other
// through a pipe, which for messages of a few KiB costs more (36 against
// 29 µs of the relay's CPU a 7 KiB page).
func (r *tcpRelay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
	_ = dst.Close()
	_ = src.Close()
}

// close stops accepting, closes every relayed connection and waits for
// the relay's goroutines.
func (r *tcpRelay) close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
