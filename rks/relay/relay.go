// Package relay is the one-line header knit-node's nmrelay writes before
// the bytes of a connection it relays from a node's NM port to RKS, so that
// RKS knows which node the AM dialled: a NodeManager only accepts NMTokens
// and ContainerTokens issued for itself, and RKS plays every NodeManager.
//
// The header is "KNIT-RELAY <host:port>\n". A Hadoop client's own first
// bytes are "hrpc", so a connection without the header is served too, as a
// connection for no particular node.
package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

const (
	magic = "KNIT-RELAY "
	// MaxHeader bounds the header line.
	MaxHeader = 512
	// headerTimeout bounds the wait for a relayed connection's first bytes.
	headerTimeout = 10 * time.Second
)

// WriteHeader writes the header naming node ("host:port", the NodeId).
func WriteHeader(w io.Writer, node string) error {
	if node == "" || strings.ContainsAny(node, " \r\n") || len(magic)+len(node)+1 > MaxHeader {
		return fmt.Errorf("relay: bad node %q", node)
	}
	_, err := io.WriteString(w, magic+node+"\n")
	return err
}

// ReadHeader reads the header, if any, from the start of r: it returns the
// node and the reader to go on with (holding any bytes read past the
// header, or the client's own first bytes when there is no header).
func ReadHeader(r io.Reader) (node string, rest io.Reader, err error) {
	br := bufio.NewReaderSize(r, MaxHeader)
	head, err := br.Peek(len(magic))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
			return "", br, nil // too short to be a header; the RPC layer judges it
		}
		return "", nil, fmt.Errorf("relay: read header: %w", err)
	}
	if !bytes.Equal(head, []byte(magic)) {
		return "", br, nil
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", nil, fmt.Errorf("relay: header without an end within %d bytes: %w", MaxHeader, err)
	}
	node = strings.TrimSpace(string(line[len(magic):]))
	if _, _, err := net.SplitHostPort(node); err != nil {
		return "", nil, fmt.Errorf("relay: header names no host:port: %q", node)
	}
	return node, br, nil
}

// Listener wraps a listener of RKS: each accepted connection has its header
// read, within a timeout and apart from the others so a slow client holds
// up no one, and is returned as a *Conn. A connection with a bad header is
// closed and never returned.
type Listener struct {
	net.Listener
	ready chan *Conn
	done  chan struct{}
	err   error // set before done is closed
}

// NewListener starts accepting on l.
func NewListener(l net.Listener) *Listener {
	rl := &Listener{Listener: l, ready: make(chan *Conn), done: make(chan struct{})}
	go rl.acceptLoop()
	return rl
}

func (l *Listener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.err = err
			close(l.done)
			return
		}
		go l.handshake(c)
	}
}

func (l *Listener) handshake(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	node, rest, err := ReadHeader(c)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case l.ready <- &Conn{Conn: c, r: rest, node: node}:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection with its header read.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// Conn is a connection RKS accepted, with the node its relay named.
type Conn struct {
	net.Conn
	r    io.Reader
	node string
}

// Read reads past the header.
func (c *Conn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Node is the NodeId ("host:port") the connection was relayed for, or ""
// for a direct connection.
func (c *Conn) Node() string { return c.node }

type nodeKey struct{}

// ConnContext is the ipc.Config.ConnContext of RKS's server: it records a
// relayed connection's node for NodeFrom.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*Conn); ok && rc.node != "" {
		return WithNode(ctx, rc.node)
	}
	return ctx
}

// WithNode returns a context of a connection relayed for node.
func WithNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, nodeKey{}, node)
}

// NodeFrom returns the node a connection's context was relayed for.
func NodeFrom(ctx context.Context) (string, bool) {
	n, ok := ctx.Value(nodeKey{}).(string)
	return n, ok
}
