package bench

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/daemonsets/amrmproxy"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// BenchmarkAllocateThroughAMRMProxyVersusDirect measures an AM's allocate
// round trip to an in-process scheduler directly and through the node's
// AMRMProxy (the default pipeline, Knit's AMRM client towards the RM), one
// call of each in turn so both see the same machine. It reports each
// path's p50 and p99 in µs and proxy/direct of the p50s (issue 23's goal:
// at most 1.2×, where the proxy adds one loopback hop and its own
// token check to a scheduler that answers at once).
func BenchmarkAllocateThroughAMRMProxyVersusDirect(b *testing.B) {
	quiet := slog.New(slog.DiscardHandler)
	ctx := b.Context()
	scheduler := ipctest.Serve(b, ipc.Config{Tokens: ipctest.TokenLookup, Logger: quiet}, yarnrpc.ApplicationMasterProtocolName, yarnrpc.ApplicationMasterProtocolFuncs{
		RegisterApplicationMaster: func(context.Context, *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
			return &yarnpb.RegisterApplicationMasterResponseProto{Queue: proto.String("root.default")}, nil
		},
		Allocate: func(_ context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			return &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(req.GetResponseId() + 1)}, nil
		},
	}.Methods()...)

	secrets, err := amrmproxy.NewSecrets(amrmproxy.SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := amrmproxy.New(amrmproxy.Config{Secrets: secrets, Pipeline: []string{amrmproxy.DefaultInterceptorName},
		Stages: map[string]amrmproxy.Stage{amrmproxy.DefaultInterceptorName: amrmproxy.DefaultStage(scheduler, nil)}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	srv, err := ipc.NewServer(ipc.Config{Tokens: secrets.SecretLookup(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Register(srv); err != nil {
		b.Fatal(err)
	}
	proxy := ipctest.Run(b, srv)

	attempt := yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}, ID: 1}
	real := token.Token{Identifier: []byte("real"), Password: []byte("pw-real"), Kind: client.KindAMRMToken}
	local, err := svc.StartApplicationMaster(ctx, attempt, "alice", real)
	if err != nil {
		b.Fatal(err)
	}
	am := func(addr string, tok token.Token) *yarnrpc.ApplicationMasterProtocolClient {
		c, err := ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok.Proto(), Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		am := yarnrpc.NewApplicationMasterProtocolClient(c)
		if _, err := am.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{}); err != nil {
			b.Fatal(err)
		}
		return am
	}
	direct, proxied := am(scheduler, real), am(proxy, local)
	call := func(am *yarnrpc.ApplicationMasterProtocolClient, id int32) time.Duration {
		start := time.Now()
		if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// Warm both connections up.
	call(direct, 0)
	call(proxied, 0)
	directTimes := make([]time.Duration, 0, b.N)
	proxyTimes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		directTimes = append(directTimes, call(direct, int32(i+1)))
		proxyTimes = append(proxyTimes, call(proxied, int32(i+1)))
	}
	b.StopTimer()
	slices.Sort(directTimes)
	slices.Sort(proxyTimes)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(directTimes, 0.5), "direct-p50-µs")
	b.ReportMetric(pct(directTimes, 0.99), "direct-p99-µs")
	b.ReportMetric(pct(proxyTimes, 0.5), "proxy-p50-µs")
	b.ReportMetric(pct(proxyTimes, 0.99), "proxy-p99-µs")
	b.ReportMetric(pct(proxyTimes, 0.5)/pct(directTimes, 0.5), "proxy/direct-p50")
}
