// Package nmrelay is knit-node's NodeManager port: it accepts the
// connections AMs make to a node's NM address and relays each, bytes
// unchanged, to RKS in the RM, after a header naming the node (package
// rks/relay), so RKS answers as that node's NodeManager would.
package nmrelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/knitdev/knit/protocols/accept"
	"github.com/knitdev/knit/rks/relay"
)

// Config holds a relay's settings.
type Config struct {
	// Node is the NodeId ("host:port") the RM hands out for this node.
	Node string
	// Upstream is RKS's address.
	Upstream string
	// DialTimeout bounds each dial to RKS; zero means 10s.
	DialTimeout time.Duration
	// UpstreamWait is how long an AM's connection is held while RKS
	// cannot be reached, dialing again with a growing pause: during an
	// RM failover RKS is down until the new leader takes its address,
	// and an AM's startContainers then waits instead of failing, as
	// Hadoop's NMProxy retries a NodeManager it cannot reach. Zero means
	// DefaultUpstreamWait.
	UpstreamWait time.Duration
	Logger       *slog.Logger
}

// DefaultUpstreamWait covers an RM failover (a few seconds with the
// default Lease settings) many times over, and stays well inside the
// IPC client's call timeout an AM waits with.
const DefaultUpstreamWait = 30 * time.Second

// Relay relays a node's NM port to RKS.
type Relay struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New returns a relay.
func New(cfg Config) (*Relay, error) {
	if _, _, err := net.SplitHostPort(cfg.Node); err != nil {
		return nil, fmt.Errorf("nmrelay: node %q: %w", cfg.Node, err)
	}
	if cfg.Upstream == "" {
		return nil, errors.New("nmrelay: no upstream")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.UpstreamWait == 0 {
		cfg.UpstreamWait = DefaultUpstreamWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg, log: cfg.Logger, conns: map[net.Conn]struct{}{}}, nil
}

// Serve relays every connection l accepts until ctx ends, then closes l and
// every relayed connection and waits for them.
func (r *Relay) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() {
		l.Close()
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
	})
	defer stop()
	defer r.wg.Wait()
	var backoff accept.Backoff
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if delay, ok := backoff.Next(err); ok {
				r.log.Warn("nmrelay accept", "err", err, "retry_in", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil
				}
				continue
			}
			return fmt.Errorf("nmrelay: accept: %w", err)
		}
		backoff.Reset()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.relay(ctx, c)
		}()
	}
}

func (r *Relay) track(c net.Conn, add bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		r.conns[c] = struct{}{}
	} else {
		delete(r.conns, c)
	}
}

func (r *Relay) relay(ctx context.Context, down net.Conn) {
	r.track(down, true)
	defer r.track(down, false)
	defer down.Close()
	up, err := r.dialUpstream(ctx, down)
	if err != nil {
		r.log.WarnContext(ctx, "rks unreachable", "upstream", r.cfg.Upstream, "remote", down.RemoteAddr().String(),
			"waited", r.cfg.UpstreamWait, "err", err)
		return
	}
	r.track(up, true)
	defer r.track(up, false)
	defer up.Close()
	if err := relay.WriteHeader(up, r.cfg.Node); err != nil {
		r.log.WarnContext(ctx, "relay header", "err", err)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the end of one direction on, and let the other finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	<-done
}

// dialUpstream dials RKS until it answers, for at most UpstreamWait. What
// the AM sends meanwhile waits in its connection.
func (r *Relay) dialUpstream(ctx context.Context, down net.Conn) (net.Conn, error) {
	d := net.Dialer{Timeout: r.cfg.DialTimeout}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = r.cfg.UpstreamWait
	attempts := 0
	up, err := backoff.RetryWithData(func() (net.Conn, error) {
		attempts++
		return d.DialContext(ctx, "tcp", r.cfg.Upstream)
	}, backoff.WithContext(b, ctx))
	if err == nil && attempts > 1 {
		r.log.InfoContext(ctx, "rks reached again", "upstream", r.cfg.Upstream, "remote", down.RemoteAddr().String(), "attempts", attempts)
	}
	return up, err
}
