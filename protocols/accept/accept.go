// Package accept is the one rule every Knit server's accept loop follows
// for an error, as net/http's does: a temporary error (out of file
// descriptors or memory, a connection aborted or reset before it was
// accepted, a timeout) is waited out, 5 ms doubling to 1 s, and the loop
// goes on; any other error ends it. Each server waits in its own way (on its
// context or its shutdown), so this package only says whether and how long.
package accept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// Default bounds of the pause after a temporary error.
const (
	DefaultMin = 5 * time.Millisecond
	DefaultMax = time.Second
)

// Backoff is one accept loop's pause state. The zero value uses the default
// bounds.
type Backoff struct {
	// Min and Max bound the pause; zero means DefaultMin and DefaultMax.
	Min, Max time.Duration
	delay    time.Duration
}

// Next reports whether err is worth retrying, and the pause before the next
// Accept: twice the last one, within Min and Max.
func (b *Backoff) Next(err error) (time.Duration, bool) {
	if !Temporary(err) {
		return 0, false
	}
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	b.delay = min(max(2*b.delay, lo), hi)
	return b.delay, true
}

// Reset starts the pauses over, after a connection was accepted.
func (b *Backoff) Reset() { b.delay = 0 }

// Temporary reports whether an accept error is worth retrying.
func Temporary(err error) bool {
	var te interface{ Temporary() bool }
	if errors.As(err, &te) && te.Temporary() {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	// Wrapped syscall errors lose their Temporary method on some paths.
	msg := err.Error()
	for _, m := range []string{"too many open files", "cannot allocate memory", "no buffer space", "connection abort", "connection reset"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// Serve accepts on ln until ctx ends, answering each connection with handle
// on a goroutine of its own, and owns what it started: when ctx ends, or the
// listener fails for good, it closes ln and every open connection, waits
// for every handler and returns — nil for ctx's end, the accept error
// otherwise. A handler need not close its connection.
func Serve(ctx context.Context, ln net.Listener, log *slog.Logger, handle func(context.Context, net.Conn)) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
		conns = nil // refuses the connections still being accepted
	}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		closeAll()
	})
	defer func() {
		stop()
		ln.Close()
		closeAll()
		wg.Wait()
	}()
	var backoff Backoff
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			delay, ok := backoff.Next(err)
			if !ok {
				return fmt.Errorf("accept: %w", err)
			}
			log.WarnContext(ctx, "accept", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		backoff.Reset()
		mu.Lock()
		if conns == nil {
			mu.Unlock()
			c.Close()
			return nil
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
			handle(ctx, c)
		}()
	}
}
