package client

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// Addresses splits an RM address as the clients take it: one host:port, or
// with RM HA a comma-separated list, one per RM id in
// yarn.resourcemanager.ha.rm-ids order (ConfAddress writes it so).
func Addresses(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// noConnectRetries is the connect backoff of each RM of a failover client:
// one attempt, as RMProxy sets ipc.client.connect.max.retries to
// yarn.client.failover-retries (0) under HA, since the next RM is the
// retry.
func noConnectRetries() backoff.BackOff { return &backoff.StopBackOff{} }

// failoverBackOff paces rounds over all the RMs that found none active:
// from 100 ms to 2 s (RMProxy's yarn.client.failover-sleep-base-ms and
// max-ms are 100 ms and 2 s under HA), for at most 15 minutes
// (yarn.resourcemanager.connect.max-wait.ms).
func failoverBackOff() backoff.BackOff { return growingBackOff(15 * time.Minute) }

// growingBackOff waits from 100 ms, doubling to 2 s, until maxElapsed has
// gone by.
func growingBackOff(maxElapsed time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = maxElapsed
	return b
}

// failover is a caller over the RMs of an HA cluster, as Hadoop's
// ConfiguredRMFailoverProxyProvider with RMProxy's retry policy: calls go
// to the current RM; a StandbyException or a call that got no answer (the
// RM refused the connection, or died) moves on to the next RM and sends
// the call again. Every ApplicationClientProtocol and
// ApplicationMasterProtocol call Knit's clients make is safe to send again
// (YARN marks them @Idempotent or @AtMostOnce).
type failover struct {
	addrs  []string
	conns  []caller
	log    *slog.Logger
	policy func() backoff.BackOff
	// again tells the failures that move on to the next RM.
	again func(error) bool

	mu  sync.Mutex
	cur int
}

// newFailover makes a caller of each address with dial; none connects yet.
func newFailover(addrs []string, dial func(addr string) (caller, error), log *slog.Logger) (*failover, error) {
	f := &failover{addrs: addrs, log: log, policy: failoverBackOff, again: retryable}
	for _, a := range addrs {
		c, err := dial(a)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		f.conns = append(f.conns, c)
	}
	return f, nil
}

func (f *failover) current() (int, caller) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, f.conns[f.cur]
}

// next moves on from RM i, unless another call already did.
func (f *failover) next(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == i {
		f.cur = (i + 1) % len(f.conns)
	}
}

// Call sends the call to the current RM, failing over as the type says.
func (f *failover) Call(ctx context.Context, method string, req, resp proto.Message) error {
	var b backoff.BackOff
	for tried := 1; ; tried++ {
		i, c := f.current()
		err := c.Call(ctx, method, req, resp)
		if err == nil || !f.again(err) || ctx.Err() != nil {
			return err
		}
		f.next(i)
		if len(f.addrs) > 1 {
			f.log.Info("failing over to the next ResourceManager", "method", method, "from", f.addrs[i], "to", f.addrs[(i+1)%len(f.addrs)], "err", err)
		} else {
			f.log.Info("calling the ResourceManager again", "method", method, "rm", f.addrs[i], "err", err)
		}
		if tried%len(f.conns) != 0 {
			continue // the next RM at once
		}
		if b == nil {
			b = f.policy()
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return fmt.Errorf("client: no active ResourceManager among %v: %w", f.addrs, err)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// newStandbyRetry is a caller of one RM that sends a call again, after a
// pause, while the RM answers StandbyException: an RM starting, or behind
// a Service that selects the active RM, is briefly a standby. Its other
// failures are the ipc client's, as before.
func newStandbyRetry(addr string, dial func(addr string) (caller, error), log *slog.Logger) (*failover, error) {
	f, err := newFailover([]string{addr}, dial, log)
	if err != nil {
		return nil, err
	}
	f.again = isStandby
	return f, nil
}

func isStandby(err error) bool {
	e, ok := yarnerr.Find(err)
	return ok && e.Class == yarnerr.Standby
}

// Close closes every RM's connection.
func (f *failover) Close() error {
	for _, c := range f.conns {
		_ = c.Close()
	}
	return nil
}

var _ ipc.Invoker = (*failover)(nil)

// Caller is a connection to an RM protocol: one RM, or an HA list of them
// failing over (NewCaller).
type Caller interface {
	ipc.Invoker
	Close() error
}

// NewCaller returns a caller of the protocol cfg names at addr: an
// ipc.Client for one address, or a failover caller over an HA list (see
// Addresses), whose RMs are each tried once per round. It connects on the
// first call.
func NewCaller(addr string, cfg ipc.ClientConfig) (Caller, error) {
	addrs := Addresses(addr)
	if len(addrs) <= 1 {
		return ipc.NewClient(addr, cfg)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg.NewBackOff = noConnectRetries
	return newFailover(addrs, func(a string) (caller, error) { return ipc.NewClient(a, cfg) }, log)
}
