package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
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
	"github.com/knitdev/knit/federation/membership"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/tcpproxy"
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

// fedScene is a real ResourceManager (startRCScene's) and the federation's
// hops in front of it twice: in this process, and in a process of their
// own as they are deployed (knit-router its own Deployment, the AMRMProxy
// in the AM's node's knit-node).
type fedScene struct {
	rc *rcScene
	// local are the hops in this process, beside the RM; remote those in
	// their own process.
	local  fedHopSide
	remote fedHopSide
	child  *fedHopProcess
	stops  []func()
}

// fedHopSide is one set of hops as the benchmark dials them: the Router's
// client address, and each AMRMProxy's scheduler address with the local
// tokens of the AMs registered through it, one per connection of the
// largest level.
type fedHopSide struct {
	router string
	// proxy has the default pipeline, fedProxy the FederationInterceptor
	// in front of it.
	proxy, fedProxy     string
	proxied, fedProxied []*commonpb.TokenProto
	// relayClient and relayAM are plain TCP relays (package tcpproxy) to
	// the RM's client and scheduler ports, the floor of a hop that
	// forwards every call; relayed are the RM's own tokens of the AMs
	// registered through relayAM.
	relayClient, relayAM string
	relayed              []*commonpb.TokenProto
}

func (f *fedScene) close() {
	for _, s := range slices.Backward(f.stops) {
		s()
	}
	f.rc.close()
}

// Pipelines of the benchmark's AMRMProxies.
const (
	fedPipelineDefault   = "default"
	fedPipelineFederated = "federated"
)

// fedHops are a Router whose one sub-cluster is the RM (its store holding
// the homes of the applications it was given, read through a warm cache
// as in steady state), two AMRMProxies in front of the RM's scheduler,
// one with the default pipeline, one with the FederationInterceptor in
// front of it, the store telling it the RM is the home, and a plain TCP
// relay (package tcpproxy) to each of the RM's two ports.
type fedHops struct {
	store                *store.Memory
	router               string
	proxies              map[string]*fedProxy
	relayClient, relayAM string
	stops                []func()
}

type fedProxy struct {
	svc  *amrmproxy.Service
	addr string
}

func startFedHops(ctx context.Context, rmClient, rmAM string, homes []string) (_ *fedHops, err error) {
	h := &fedHops{store: store.NewMemory(nil), proxies: map[string]*fedProxy{}}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	if err := h.store.RegisterSubCluster(ctx, store.SubClusterInfo{ID: "sc1", ClientRMServiceAddress: rmClient, AMRMServiceAddress: rmAM,
		RMAdminServiceAddress: rmClient, RMWebServiceAddress: rmClient, State: store.StateNew, LastStartTime: time.UnixMilli(clusterTimestamp)}); err != nil {
		return nil, err
	}
	if err := h.store.SubClusterHeartbeat(ctx, "sc1", store.StateRunning, "{}"); err != nil {
		return nil, err
	}
	for _, app := range homes {
		if _, err := h.store.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: "sc1"}); err != nil {
			return nil, err
		}
	}
	// The Router names applications itself, as knit-router does.
	ids, err := membership.NewTimestamps(h.store, "router-bench")
	if err != nil {
		return nil, err
	}
	r, err := router.New(router.Config{Store: store.NewCache(h.store, time.Hour, nil), SubmitRetry: 1, IDs: ids,
		ConnectBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }, Logger: quiet})
	if err != nil {
		return nil, err
	}
	h.stops = append(h.stops, func() { r.Close() })
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := r.Register(srv); err != nil {
		return nil, err
	}
	var stop func()
	if h.router, stop, err = serveIPCListener(srv); err != nil {
		return nil, err
	}
	h.stops = append(h.stops, stop)
	relay := func(to string) (string, error) {
		r, err := tcpproxy.Start(to)
		if err != nil {
			return "", err
		}
		h.stops = append(h.stops, r.Close)
		return r.Addr(), nil
	}
	if h.relayClient, err = relay(rmClient); err != nil {
		return nil, err
	}
	if h.relayAM, err = relay(rmAM); err != nil {
		return nil, err
	}
	pipelines := map[string]struct {
		names  []string
		stages map[string]amrmproxy.Stage
	}{
		fedPipelineDefault: {[]string{amrmproxy.DefaultInterceptorName},
			map[string]amrmproxy.Stage{amrmproxy.DefaultInterceptorName: amrmproxy.DefaultStage(rmAM, nil)}},
		fedPipelineFederated: {[]string{amrmproxy.FederationInterceptorName, amrmproxy.DefaultInterceptorName},
			map[string]amrmproxy.Stage{
				amrmproxy.DefaultInterceptorName: amrmproxy.DefaultStage(rmAM, nil),
				amrmproxy.FederationInterceptorName: amrmproxy.FederationStage(amrmproxy.FederationSettings{
					Store: store.NewCache(h.store, time.Hour, nil), DefaultPolicy: federation.UniformBroadcastPolicyManager,
				}),
			}},
	}
	for name, p := range pipelines {
		secrets, err := amrmproxy.NewSecrets(amrmproxy.SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Logger: quiet})
		if err != nil {
			return nil, err
		}
		svc, err := amrmproxy.New(amrmproxy.Config{Secrets: secrets, Pipeline: p.names, Stages: p.stages, Logger: quiet})
		if err != nil {
			return nil, err
		}
		h.stops = append(h.stops, func() { svc.Close() })
		psrv, err := ipc.NewServer(ipc.Config{Tokens: secrets.SecretLookup(), IdleTimeout: benchIdle, Logger: quiet})
		if err != nil {
			return nil, err
		}
		if err := svc.Register(psrv); err != nil {
			return nil, err
		}
		addr, stop, err := serveIPCListener(psrv)
		if err != nil {
			return nil, err
		}
		h.stops = append(h.stops, stop)
		h.proxies[name] = &fedProxy{svc: svc, addr: addr}
	}
	return h, nil
}

// startAM homes app in the RM's sub-cluster and starts its first attempt's
// AM in the pipeline's AMRMProxy, as a node's knit-node does for an AM
// container; it returns the AM's local AMRMToken.
func (h *fedHops) startAM(ctx context.Context, pipeline, app, user string, rmToken token.Token) (token.Token, error) {
	id, err := yarnid.ParseApplicationID(app)
	if err != nil {
		return token.Token{}, err
	}
	if _, err := h.store.AddApplicationHomeSubCluster(ctx, store.ApplicationHome{Application: app, Home: "sc1"}); err != nil {
		return token.Token{}, err
	}
	p := h.proxies[pipeline]
	if p == nil {
		return token.Token{}, fmt.Errorf("no pipeline %q", pipeline)
	}
	return p.svc.StartApplicationMaster(ctx, yarnid.AttemptID{App: id, ID: 1}, user, rmToken)
}

func (h *fedHops) close() {
	for _, s := range slices.Backward(h.stops) {
		s()
	}
}

// serveIPCListener serves srv on a loopback port.
func serveIPCListener(srv *ipc.Server) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	return l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	}, nil
}

func startFedScene(b *testing.B) *fedScene {
	b.Helper()
	ctx := context.Background()
	f := &fedScene{rc: startRCScene(b)}
	var homes []string
	for _, app := range f.rc.apps {
		id, err := yarnid.ApplicationIDFromProto(app)
		if err != nil {
			b.Fatal(err)
		}
		homes = append(homes, id.String())
	}
	local, err := startFedHops(ctx, f.rc.target.client, f.rc.target.am, homes)
	if err != nil {
		b.Fatal(err)
	}
	f.stops = append(f.stops, local.close)
	child, err := startFedHopProcess(fedHopCmd{Op: "start", RMClient: f.rc.target.client, RMAM: f.rc.target.am, Homes: homes})
	if err != nil {
		b.Fatal(err)
	}
	f.child = child
	f.stops = append(f.stops, func() {
		if err := child.stop(); err != nil {
			b.Errorf("federation hops' process: %v", err)
		}
	})

	owner, err := ipc.Dial(ctx, f.rc.target.client, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "owner0", MaxIdleTime: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer owner.Close()
	f.local = fedHopSide{router: local.router, proxy: local.proxies[fedPipelineDefault].addr, fedProxy: local.proxies[fedPipelineFederated].addr,
		relayClient: local.relayClient, relayAM: local.relayAM}
	f.remote = fedHopSide{router: child.addrs.Router, proxy: child.addrs.Proxy, fedProxy: child.addrs.FedProxy,
		relayClient: child.addrs.RelayClient, relayAM: child.addrs.RelayAM}
	for _, side := range []struct {
		name string
		hops *fedHopSide
		// start starts an AM in a pipeline of the side's.
		start func(pipeline, app string, rmToken token.Token) (token.Token, error)
	}{
		{"local", &f.local, func(pipeline, app string, rmToken token.Token) (token.Token, error) {
			return local.startAM(ctx, pipeline, app, "owner0", rmToken)
		}},
		{"remote", &f.remote, func(pipeline, app string, rmToken token.Token) (token.Token, error) {
			return child.startAM(pipeline, app, "owner0", rmToken)
		}},
	} {
		side.hops.proxied = f.registerAMs(b, owner, side.name+" proxied", side.hops.proxy, func(app string, rmToken token.Token) (token.Token, error) {
			return side.start(fedPipelineDefault, app, rmToken)
		})
		side.hops.fedProxied = f.registerAMs(b, owner, side.name+" federated", side.hops.fedProxy, func(app string, rmToken token.Token) (token.Token, error) {
			return side.start(fedPipelineFederated, app, rmToken)
		})
		// Through a relay an AM talks to the RM itself, with the RM's
		// token.
		side.hops.relayed = f.registerAMs(b, owner, side.name+" relayed", side.hops.relayAM, func(_ string, rmToken token.Token) (token.Token, error) {
			return rmToken, nil
		})
	}
	return f
}

// registerAMs submits applications of their own, as many as the largest
// level needs, starts their AMs with start (in an AMRMProxy, whose local
// token it returns, or nowhere, returning the RM's) and registers them
// through addr, with task containers as the running applications have; it
// returns the tokens the AMs call addr with.
func (f *fedScene) registerAMs(b *testing.B, owner *ipc.Client, name, addr string, start func(app string, rmToken token.Token) (token.Token, error)) []*commonpb.TokenProto {
	b.Helper()
	ctx := context.Background()
	var tokens []*commonpb.TokenProto
	for i := range fedConnLevels[len(fedConnLevels)-1] {
		real, app := submitUnmanagedAM(b, owner, fmt.Sprintf("%s app %d", name, i), "default")
		id, err := yarnid.ApplicationIDFromProto(app)
		if err != nil {
			b.Fatal(err)
		}
		local, err := start(id.String(), token.FromProto(real))
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
		giveTasks(b, f.rc.rm, yarnid.AttemptID{App: id, ID: 1}, rcTasks, fmt.Sprintf("kwok-node-%d", i%viewNodes))
		tokens = append(tokens, local.Proto())
	}
	return tokens
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
	// child is whether the hop runs in a process of its own.
	child bool
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
// process of its own; the RM shares this one with one set of the hops,
// and the same hops run again in a process of their own, as deployed
// (rows ", own process"). Each hop's calls are also made through a
// plain TCP relay in the hop's process (rows "via TCP relay"): the floor on this
// machine of a hop that forwards each call (the Router answers
// getNewApplication itself, so for submissions it is none). At 1 connection (a lone caller's latency) and 16 (throughput),
// one call outstanding on each, rounds of fedRound in fedOrder after a
// warm-up of fedWarm each. It prints calls/s, p50 and p99 of each side,
// the CPU per call of the RM's process and of the hops' own (the RM's
// alone directly; the RM's and the hop's through the hop, so the
// difference is the hop's) and
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
	var cases []fedCase
	for _, side := range []struct {
		hops   fedHopSide
		suffix string
		child  bool
	}{{f.local, "", false}, {f.remote, ", own process", true}} {
		metric := func(m string) string {
			if side.child {
				return m + "-own-process"
			}
			return m
		}
		h := side.hops
		cases = append(cases,
			fedCase{name: "submit via Router" + side.suffix, method: "submit", metric: metric("submit"), direct: f.rc.target.client, hop: h.router, child: side.child},
			fedCase{name: "getApplicationReport via Router" + side.suffix, method: "getApplicationReport", metric: metric("getApplicationReport"), direct: f.rc.target.client, hop: h.router, child: side.child},
			fedCase{name: "allocate via AMRMProxy" + side.suffix, method: "allocate", metric: metric("allocate"), direct: f.rc.target.am, hop: h.proxy, am: true, hopTokens: h.proxied, child: side.child},
			fedCase{name: "allocate via AMRMProxy federated" + side.suffix, method: "allocate", metric: metric("allocate-federated"), direct: f.rc.target.am, hop: h.fedProxy, am: true, hopTokens: h.fedProxied, child: side.child},
			fedCase{name: "submit via TCP relay" + side.suffix, method: "submit", metric: metric("submit-tcp-relay"), direct: f.rc.target.client, hop: h.relayClient, child: side.child},
			fedCase{name: "getApplicationReport via TCP relay" + side.suffix, method: "getApplicationReport", metric: metric("getApplicationReport-tcp-relay"), direct: f.rc.target.client, hop: h.relayClient, child: side.child},
			fedCase{name: "allocate via TCP relay" + side.suffix, method: "allocate", metric: metric("allocate-tcp-relay"), direct: f.rc.target.am, hop: h.relayAM, am: true, hopTokens: h.relayed, child: side.child},
		)
	}
	// cpu is the CPU time of the processes a case's hop side runs in:
	// this one's (the RM's, and the hops' when they are here) and the
	// hops' process's when they are there.
	cpu := func(c fedCase) time.Duration {
		d := processCPU()
		if c.child {
			child, err := f.child.cpu()
			if err != nil {
				b.Fatal(err)
			}
			d += child
		}
		return d
	}
	maxConns := fedConnLevels[len(fedConnLevels)-1]
	type row struct {
		c     fedCase
		conns int
		sides [2]load
		cpu   [2]time.Duration // the RM's, and the RM's and the hop's
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
					before := cpu(c)
					rep := gen.do(b, rcCmd{Op: "run", Set: sets[side], Conns: conns, For: fedRound, Lat: true})
					r.cpu[side] += cpu(c) - before
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
