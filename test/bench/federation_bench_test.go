package bench

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/daemonsets/amrmproxy"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// Rounds of BenchmarkFederationVersusDirectRM.
const (
	fedRound = 400 * time.Millisecond
	fedWarm  = 200 * time.Millisecond
)

// fedOrder is the order of one case's rounds by side (0 direct, 1 through
// the Router or the AMRMProxy): ABBA twice, so that a shared machine's
// colleagues weigh on both alike.
var fedOrder = []int{0, 1, 1, 0, 0, 1, 1, 0}

// fedConnLevels are the connections measured, one call outstanding on
// each: one for the latency of a lone caller, more for throughput.
var fedConnLevels = []int{1, 16}

// fedCalls are the load generator's calls that only the federation's
// benchmark makes.
var fedCalls = []rcCall{
	{
		// A submission as YarnClient makes it: a new application id, then
		// the application, an unmanaged AM so that the RM launches nothing.
		method:  "submit",
		newReq:  func() proto.Message { return new(yarnpb.SubmitApplicationRequestProto) },
		newResp: func() proto.Message { return new(yarnpb.SubmitApplicationResponseProto) },
		check:   func(proto.Message) error { return nil },
		do: func(ctx context.Context, c *ipc.Client, req proto.Message) (proto.Message, error) {
			var na yarnpb.GetNewApplicationResponseProto
			if err := c.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &na); err != nil {
				return nil, err
			}
			sub := proto.Clone(req).(*yarnpb.SubmitApplicationRequestProto)
			sub.ApplicationSubmissionContext.ApplicationId = na.GetApplicationId()
			resp := new(yarnpb.SubmitApplicationResponseProto)
			return resp, c.Call(ctx, "submitApplication", sub, resp)
		},
	},
}

// fedSubmission is the submission the load generator repeats.
func fedSubmission() *yarnpb.SubmitApplicationRequestProto {
	return &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationName: proto.String("bench submission"), Queue: proto.String("default"), UnmanagedAm: proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: yarnpb.NewResource(1024, 1),
	}}
}

// fedScene is a real ResourceManager (startRCScene's), a Router whose one
// sub-cluster it is, and a node's AMRMProxy in front of its scheduler.
type fedScene struct {
	rc     *rcScene
	router string // the Router's client address
	proxy  string // the AMRMProxy's scheduler address
	// proxied are the AMRMProxy's local tokens of AMs registered through
	// it, one per connection of the largest level.
	proxied []*commonpb.TokenProto
	// fedProxy and fedProxied are the same of an AMRMProxy whose pipeline
	// has the FederationInterceptor in front.
	fedProxy   string
	fedProxied []*commonpb.TokenProto
	stops      []func()
}

func (f *fedScene) close() {
	for _, s := range slices.Backward(f.stops) {
		s()
	}
	f.rc.close()
}

func startFedScene(b *testing.B) *fedScene {
	b.Helper()
	ctx := context.Background()
	f := &fedScene{rc: startRCScene(b)}

	// The Router, its store holding the RM as sub-cluster sc1 and the
	// homes of the running applications, read through a warm cache as
	// in steady state.
	s := store.NewMemory(nil)
	if err := s.RegisterSubCluster(ctx, store.SubClusterInfo{ID: "sc1", ClientRMServiceAddress: f.rc.target.client, AMRMServiceAddress: f.rc.target.am,
		RMAdminServiceAddress: f.rc.target.client, RMWebServiceAddress: f.rc.target.client, State: store.StateNew, LastStartTime: time.UnixMilli(clusterTimestamp)}); err != nil {
		b.Fatal(err)
	}
	if err := s.SubClusterHeartbeat(ctx, "sc1", store.StateRunning, "{}"); err != nil {
		b.Fatal(err)
	}
	for _, app := range f.rc.apps {
		id, err := yarnid.ApplicationIDFromProto(app)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: id.String(), Home: "sc1"}); err != nil {
			b.Fatal(err)
		}
	}
	r, err := router.New(router.Config{Store: store.NewCache(s, time.Hour, nil), SubmitRetry: 1,
		ConnectBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	f.stops = append(f.stops, func() { r.Close() })
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Register(srv); err != nil {
		b.Fatal(err)
	}
	var stop func()
	f.router, stop = serveIPC(b, srv)
	f.stops = append(f.stops, stop)

	// Two AMRMProxies, one with the default pipeline, one with the
	// FederationInterceptor in front of it, the Router's store telling it
	// the RM is the home.
	owner, err := ipc.Dial(ctx, f.rc.target.client, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "owner0", MaxIdleTime: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer owner.Close()
	f.proxy, f.proxied = f.startProxy(b, owner, s, "proxied", []string{amrmproxy.DefaultInterceptorName},
		map[string]amrmproxy.Stage{amrmproxy.DefaultInterceptorName: amrmproxy.DefaultStage(f.rc.target.am, nil)})
	f.fedProxy, f.fedProxied = f.startProxy(b, owner, s, "federated", []string{amrmproxy.FederationInterceptorName, amrmproxy.DefaultInterceptorName},
		map[string]amrmproxy.Stage{
			amrmproxy.DefaultInterceptorName: amrmproxy.DefaultStage(f.rc.target.am, nil),
			amrmproxy.FederationInterceptorName: amrmproxy.FederationStage(amrmproxy.FederationSettings{
				Store: store.NewCache(s, time.Hour, nil), DefaultPolicy: federation.UniformBroadcastPolicyManager,
			}),
		})
	return f
}

// startProxy serves an AMRMProxy of the pipeline in front of the RM, and
// registers AMs of applications of their own through it, as many as the
// largest level needs, with task containers as the running applications
// have, each homed in the RM's sub-cluster; it returns its address and
// the AMs' local tokens.
func (f *fedScene) startProxy(b *testing.B, owner *ipc.Client, s *store.Memory, name string, pipeline []string, stages map[string]amrmproxy.Stage) (string, []*commonpb.TokenProto) {
	b.Helper()
	ctx := context.Background()
	secrets, err := amrmproxy.NewSecrets(amrmproxy.SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := amrmproxy.New(amrmproxy.Config{Secrets: secrets, Pipeline: pipeline, Stages: stages, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	f.stops = append(f.stops, func() { svc.Close() })
	psrv, err := ipc.NewServer(ipc.Config{Tokens: secrets.SecretLookup(), IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Register(psrv); err != nil {
		b.Fatal(err)
	}
	addr, stop := serveIPC(b, psrv)
	f.stops = append(f.stops, stop)
	var tokens []*commonpb.TokenProto
	for i := range fedConnLevels[len(fedConnLevels)-1] {
		real, app := submitUnmanagedAM(b, owner, fmt.Sprintf("%s app %d", name, i), "default")
		id, err := yarnid.ApplicationIDFromProto(app)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: id.String(), Home: "sc1"}); err != nil {
			b.Fatal(err)
		}
		attempt := yarnid.AttemptID{App: id, ID: 1}
		local, err := svc.StartApplicationMaster(ctx, attempt, "owner0", token.FromProto(real))
		if err != nil {
			b.Fatal(err)
		}
		am, err := ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: local.Proto(), Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		err = am.Call(ctx, "registerApplicationMaster", &yarnpb.RegisterApplicationMasterRequestProto{
			Host: proto.String(name), RpcPort: proto.Int32(-1), TrackingUrl: proto.String(""),
		}, &yarnpb.RegisterApplicationMasterResponseProto{})
		_ = am.Close()
		if err != nil {
			b.Fatal(err)
		}
		giveTasks(b, f.rc.rm, attempt, rcTasks, fmt.Sprintf("kwok-node-%d", i%viewNodes))
		tokens = append(tokens, local.Proto())
	}
	return addr, tokens
}

// fedCase is one comparison: a call made directly to the RM and through
// the federation's hop.
type fedCase struct {
	name, method string
	direct, hop  string // addresses
	am           bool
	// metric names the case's metrics; the method if empty.
	metric string
	// hopTokens are the AMs' tokens at the hop.
	hopTokens []*commonpb.TokenProto
}

// dial opens conns connections of c's call to addr; an AM's connections
// authenticate with tokens.
func (f *fedScene) dial(b *testing.B, l *rcLoad, c fedCase, addr string, tokens []*commonpb.TokenProto, conns int) int {
	b.Helper()
	request := func(i int) proto.Message {
		if c.method == "submit" {
			return fedSubmission()
		}
		return f.rc.request(b, c.method, i)
	}
	if !c.am {
		tokens = nil
	}
	return l.dialSet(b, addr, c.method, true, request, tokens, conns)
}

// BenchmarkFederationVersusDirectRM measures issue 23's goals against a
// real ResourceManager (startRCScene's: knit-rm's RPC settings, the node
// view, 256 running applications), in the same run: submissions
// (getNewApplication then submitApplication, an unmanaged AM) and
// getApplicationReport of a running application, from the RM directly and
// through a Router whose sub-cluster it is (its store read through a warm
// cache); an AM's allocate heartbeat that changes nothing, to the RM
// directly and through a node's AMRMProxy with the default pipeline and
// through one with the FederationInterceptor in front of it (homed in the
// RM's sub-cluster, the broadcast policy), each AM its own application,
// the same direct AMs against both. The load is rcLoad's Go client in a
// process of its own; the RM, the Router and the AMRMProxy share this
// one. At 1 connection (a lone caller's latency) and 16 (throughput),
// one call outstanding on each, rounds of fedRound in fedOrder after a
// warm-up of fedWarm each. It prints calls/s, p50 and p99 of each side,
// this process's CPU per call (the RM's alone directly; the RM's and the
// hop's through the hop, so the difference is the hop's) and
// the ratios hop/direct (the goals: submissions ≥ 0.8× the direct
// throughput, getApplicationReport p99 ≤ 1.5×, allocate ≤ 1.2×), and
// reports the ratios at 1 connection as metrics. ns/op means nothing here.
func BenchmarkFederationVersusDirectRM(b *testing.B) {
	f := startFedScene(b)
	defer f.close()
	gen := startRCLoad(b)
	defer func() {
		if err := gen.stop(); err != nil {
			b.Errorf("load generator: %v", err)
		}
	}()
	cases := []fedCase{
		{name: "submit via Router", method: "submit", direct: f.rc.target.client, hop: f.router},
		{name: "getApplicationReport via Router", method: "getApplicationReport", direct: f.rc.target.client, hop: f.router},
		{name: "allocate via AMRMProxy", method: "allocate", direct: f.rc.target.am, hop: f.proxy, am: true, hopTokens: f.proxied},
		{name: "allocate via AMRMProxy federated", method: "allocate", metric: "allocate-federated", direct: f.rc.target.am, hop: f.fedProxy, am: true, hopTokens: f.fedProxied},
	}
	maxConns := fedConnLevels[len(fedConnLevels)-1]
	type row struct {
		c     fedCase
		conns int
		sides [2]load
		cpu   [2]time.Duration // this process's: the RM's, and the hop's
	}
	var rows []*row
	b.ResetTimer()
	// Each side's sets are dialled once: an AM's connection keeps its
	// response id from round to round, and the direct AMs serve every
	// case of their call.
	direct := map[string]int{}
	for range b.N {
		for _, c := range cases {
			key := c.method + " " + c.direct
			if _, ok := direct[key]; !ok {
				direct[key] = f.dial(b, gen, c, c.direct, f.rc.tokens, maxConns)
			}
			sets := [2]int{direct[key], f.dial(b, gen, c, c.hop, c.hopTokens, maxConns)}
			for _, conns := range fedConnLevels {
				r := &row{c: c, conns: conns}
				rows = append(rows, r)
				for _, set := range sets {
					gen.do(b, rcCmd{Op: "run", Set: set, Conns: conns, For: fedWarm})
				}
				for _, side := range fedOrder {
					runtime.GC()
					cpu := processCPU()
					rep := gen.do(b, rcCmd{Op: "run", Set: sets[side], Conns: conns, For: fedRound, Lat: true})
					r.cpu[side] += processCPU() - cpu
					r.sides[side] = r.sides[side].add(load{calls: rep.Calls, elapsed: rep.Wall, lat: rep.Lat})
				}
			}
			gen.do(b, rcCmd{Op: "close", Set: sets[1]})
		}
	}
	for _, set := range direct {
		gen.do(b, rcCmd{Op: "close", Set: set})
	}
	b.StopTimer()
	var sb strings.Builder
	fmt.Fprintf(&sb, "direct to a knit-rm against through the federation's hop, same run, GOMAXPROCS=%d, %v rounds\n", runtime.GOMAXPROCS(0), fedRound)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\tconns\tdirect calls/s\thop calls/s\tdirect p50 µs\thop p50 µs\tdirect p99 µs\thop p99 µs\tdirect CPU µs/call\thop CPU µs/call\tcalls/s hop/direct\tp50 hop/direct\tp99 hop/direct\t")
	for _, r := range rows {
		d, h := r.sides[0], r.sides[1]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t\n", r.c.name, r.conns,
			d.callsPerSec(), h.callsPerSec(), micros(d.quantile(0.5)), micros(h.quantile(0.5)), micros(d.quantile(0.99)), micros(h.quantile(0.99)),
			micros(r.cpu[0])/float64(d.calls), micros(r.cpu[1])/float64(h.calls),
			h.callsPerSec()/d.callsPerSec(), micros(h.quantile(0.5))/micros(d.quantile(0.5)), micros(h.quantile(0.99))/micros(d.quantile(0.99)))
		if r.conns == 1 {
			metric := cmp.Or(r.c.metric, r.c.method)
			b.ReportMetric(h.callsPerSec()/d.callsPerSec(), metric+"-calls/s-hop/direct")
			b.ReportMetric(micros(h.quantile(0.99))/micros(d.quantile(0.99)), metric+"-p99-hop/direct")
		}
	}
	_ = tw.Flush()
	// b.Log keeps only a benchmark's first 10 lines; the table goes to
	// stdout, as BenchmarkRMCallsVersusNoOp's does.
	fmt.Print(sb.String())
	b.ReportMetric(0, "ns/op")
}
