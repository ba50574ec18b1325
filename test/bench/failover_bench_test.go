package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/ha"
	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/supervise"
)

// failovers is how many times BenchmarkRMFailover kills the active RM.
const failovers = 20

// BenchmarkRMFailover runs two knit-rm replicas on a local cluster with the
// default Lease settings (ha.DefaultLeaseDuration, DefaultRenewDeadline,
// DefaultRetryPeriod), kills the active one with SIGKILL failovers times,
// and measures each time from the kill to the first call an RM answers
// (getClusterMetrics, a plain client polling both every 10 ms): the
// standby, or the killed one restarted at once as a Deployment's pod is,
// whichever takes the Lease first once the dead leader's has run out.
// Before each kill the RM killed the round before is back as a standby. It
// reports p50 and p99 in milliseconds, and p99 over the lease duration,
// the floor a killed leader's Lease imposes (goal: p99 ≤ 5 s).
func BenchmarkRMFailover(b *testing.B) {
	bin := buildKnit(b)
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{
		Dir: filepath.Join(b.TempDir(), "local"), Nodes: 1, RMs: 2,
		RMCommand: []string{filepath.Join(bin, "knit-rm")},
		// Killed twenty times, each RM must come back at once.
		RMRestarts: supervise.Backoff{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond, Reset: time.Second},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	var times []time.Duration
	for range b.N {
		times = times[:0]
		for range failovers {
			active, _ := waitActiveAndStandby(b, c)
			pid := c.RMPIDs()[fmt.Sprintf("rm%d", active+1)]
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				b.Fatal(err)
			}
			killed := time.Now()
			waitAnswer(b, c.RMs[0].Client, c.RMs[1].Client)
			times = append(times, time.Since(killed))
		}
	}
	p50, p99 := quantile(times, 0.5), quantile(times, 0.99)
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(p99.Seconds()/ha.DefaultLeaseDuration.Seconds(), "p99/lease")
	b.ReportMetric(0, "ns/op")
	b.Logf("failover over %d kills: p50 %s, p99 %s; lease duration %s, renew deadline %s, retry period %s",
		len(times), p50, p99, ha.DefaultLeaseDuration, ha.DefaultRenewDeadline, ha.DefaultRetryPeriod)
}

// waitActiveAndStandby waits until one RM answers ACTIVE and the other
// STANDBY on their admin ports, and returns their indexes.
func waitActiveAndStandby(b *testing.B, c *localcluster.Cluster) (active, standby int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		s0, s1 := haState(c.RMs[0].Admin), haState(c.RMs[1].Admin)
		switch {
		case s0 == commonpb.HAServiceStateProto_ACTIVE && s1 == commonpb.HAServiceStateProto_STANDBY:
			return 0, 1
		case s1 == commonpb.HAServiceStateProto_ACTIVE && s0 == commonpb.HAServiceStateProto_STANDBY:
			return 1, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatal("no active and standby RM within 2 minutes")
	return 0, 0
}

// haState is an RM's HA state, INITIALIZING when it does not answer.
func haState(admin string) commonpb.HAServiceStateProto {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := ipc.NewClient(admin, ipc.ClientConfig{Protocol: commonrpc.HAServiceProtocolName, User: "bench", Errors: yarnerr.FromRemote,
		Logger: quiet, NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
	if err != nil {
		return commonpb.HAServiceStateProto_INITIALIZING
	}
	defer c.Close()
	st, err := commonrpc.NewHAServiceProtocolClient(c).GetServiceStatus(ctx, &commonpb.GetServiceStatusRequestProto{})
	if err != nil {
		return commonpb.HAServiceStateProto_INITIALIZING
	}
	return st.GetState()
}

// waitAnswer polls the client protocol of addrs until one answers a call.
func waitAnswer(b *testing.B, addrs ...string) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		for _, a := range addrs {
			if clusterMetrics(a) == nil {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%v answered no call within 2 minutes", addrs)
}

func clusterMetrics(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "bench", Errors: yarnerr.FromRemote,
		Logger: quiet, NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = yarnrpc.NewApplicationClientProtocolClient(c).GetClusterMetrics(ctx, &yarnpb.GetClusterMetricsRequestProto{})
	return err
}
