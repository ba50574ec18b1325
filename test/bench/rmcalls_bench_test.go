package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/ha"
	"github.com/knitdev/knit/rm/metrics"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/tokens"
)

// Sizes of BenchmarkRMCallsVersusNoOp.
const (
	rcPods     = 2_000 // Knit's running task pods in the node view, two a node
	rcRunning  = 256   // running applications, each with its AM registered
	rcAccepted = 128   // applications waiting for their AM
	rcKilled   = 256   // applications killed
	rcOwners   = 16    // the users who submitted them
	rcTasks    = 2     // task containers of each running application
	rcRound    = 500 * time.Millisecond
	rcWarm     = 200 * time.Millisecond
)

// rcOrder is the order of one case's rounds, by side (0 no-op, 1 same
// answer, 2 RM): ABCCBA twice, short rounds, so that the colleagues of a
// shared machine weigh on every side alike.
var rcOrder = []int{0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0}

// rcConnLevels are the connections measured, each its own user (or, for
// allocate, its own AM), one call outstanding on each.
var rcConnLevels = []int{8, 64, 256}

// rcOnlyEnv, if set, limits BenchmarkRMCallsVersusNoOp to the cases it
// lists, comma-separated, each a method ("allocate") or a method and a
// number of connections ("getClusterNodes/256"): to profile one case.
const rcOnlyEnv = "KNIT_BENCH_RMCALLS"

// rcLoadEnv, set in this test binary's environment, makes it the load
// generator of BenchmarkRMCallsVersusNoOp instead of running tests (see
// TestMain).
const rcLoadEnv = "KNIT_BENCH_RPC_LOAD"

// rcCall is one measured call: its method, the protocol it belongs to,
// its messages, and a check of the RM's first answer.
type rcCall struct {
	method  string
	am      bool // ApplicationMasterProtocol over TOKEN; else ApplicationClientProtocol over SIMPLE
	newReq  func() proto.Message
	newResp func() proto.Message
	check   func(proto.Message) error
	// do makes the call with req on c; nil means one call of method.
	do func(ctx context.Context, c *ipc.Client, req proto.Message) (proto.Message, error)
}

var rcCalls = []rcCall{
	{
		method:  "getClusterMetrics",
		newReq:  func() proto.Message { return new(yarnpb.GetClusterMetricsRequestProto) },
		newResp: func() proto.Message { return new(yarnpb.GetClusterMetricsResponseProto) },
		check: func(m proto.Message) error {
			if n := m.(*yarnpb.GetClusterMetricsResponseProto).GetClusterMetrics().GetNumActiveNms(); n != viewNodes {
				return fmt.Errorf("%d active nodes, want %d", n, viewNodes)
			}
			return nil
		},
	},
	{
		method:  "getApplicationReport",
		newReq:  func() proto.Message { return new(yarnpb.GetApplicationReportRequestProto) },
		newResp: func() proto.Message { return new(yarnpb.GetApplicationReportResponseProto) },
		check: func(m proto.Message) error {
			r := m.(*yarnpb.GetApplicationReportResponseProto).GetApplicationReport()
			if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_RUNNING || r.GetAppResource_Usage().GetNumUsedContainers() != rcTasks {
				return fmt.Errorf("report %v, want a running application with %d containers", r, rcTasks)
			}
			return nil
		},
	},
	{
		method:  "getClusterNodes",
		newReq:  func() proto.Message { return new(yarnpb.GetClusterNodesRequestProto) },
		newResp: func() proto.Message { return new(yarnpb.GetClusterNodesResponseProto) },
		check: func(m proto.Message) error {
			if n := len(m.(*yarnpb.GetClusterNodesResponseProto).GetNodeReports()); n != viewNodes {
				return fmt.Errorf("%d node reports, want %d", n, viewNodes)
			}
			return nil
		},
	},
	{
		method:  "allocate",
		am:      true,
		newReq:  func() proto.Message { return new(yarnpb.AllocateRequestProto) },
		newResp: func() proto.Message { return new(yarnpb.AllocateResponseProto) },
		check: func(m proto.Message) error {
			r := m.(*yarnpb.AllocateResponseProto)
			if r.GetNumClusterNodes() != viewNodes || r.GetLimit().GetMemory() <= 0 {
				return fmt.Errorf("%d cluster nodes and headroom %v, want %d nodes and some room", r.GetNumClusterNodes(), r.GetLimit(), viewNodes)
			}
			return nil
		},
	},
}

func rcCallOf(method string) (rcCall, bool) {
	all := slices.Concat(rcCalls, fedCalls)
	i := slices.IndexFunc(all, func(c rcCall) bool { return c.method == method })
	if i < 0 {
		return rcCall{}, false
	}
	return all[i], true
}

// rcServe serves what register adds with the engine's settings as knit-rm
// gives them to its client port (SIMPLE) or, with lookup, its scheduler
// port (TOKEN): the active replica's admission check and RPC metrics of a
// registry of its own.
func rcServe(b *testing.B, lookup ipc.SecretLookup, register func(*ipc.Server) error) (string, func()) {
	b.Helper()
	rpcMetrics, err := metrics.NewRPC(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	adm := ha.Admission{ID: "rm1", Active: func() bool { return true }}
	cfg := ipc.Config{Simple: lookup == nil, AdmitCall: adm.AdmitCall, Observer: rpcMetrics, IdleTimeout: benchIdle, Logger: quiet}
	if lookup != nil {
		cfg.Tokens = adm.Tokens(lookup)
	}
	srv, err := ipc.NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := register(srv); err != nil {
		b.Fatal(err)
	}
	return serveIPC(b, srv)
}

// rcTarget is one side of the comparison: a client port and a scheduler
// port.
type rcTarget struct {
	client, am string // addresses
	stops      []func()
}

func (t *rcTarget) stop() {
	for _, s := range t.stops {
		s()
	}
}

func startRCTarget(b *testing.B, lookup ipc.SecretLookup, client func(*ipc.Server) error, am func(*ipc.Server) error) *rcTarget {
	t := &rcTarget{}
	var stop func()
	t.client, stop = rcServe(b, nil, client)
	t.stops = append(t.stops, stop)
	t.am, stop = rcServe(b, lookup, am)
	t.stops = append(t.stops, stop)
	return t
}

// rcScene is the ResourceManager measured, its state, and what the load
// generator sends it.
type rcScene struct {
	rm     *rm.ResourceManager
	nodes  *nodeLister
	target *rcTarget
	tm     *tokens.Manager
	apps   []*yarnpb.ApplicationIdProto // the running applications
	tokens []*commonpb.TokenProto       // their AMs' AMRMTokens
	// answers holds one answer of the RM's to each call, for the
	// same-answer handler.
	answers map[string]proto.Message
}

// startRCScene builds a ResourceManager as knit-rm does (tokens, the node
// view over viewNodes nodes with rcPods pods, one queue), serves it, and
// fills it: rcRunning running unmanaged applications with their AMs
// registered over RPC with their AMRMTokens and rcTasks task containers
// each, rcAccepted waiting for their AM and rcKilled killed, of rcOwners
// users.
func startRCScene(b *testing.B) *rcScene {
	b.Helper()
	ctx := context.Background()
	s := &rcScene{nodes: startViewLister(b, rcPods), answers: map[string]proto.Message{}}
	var err error
	if s.tm, err = activeTokens(ctx); err != nil {
		b.Fatal(err)
	}
	c := hadoopconf.New(hadoopconf.Options{})
	c.Set("yarn.scheduler.capacity.root.queues", "default")
	c.Set("yarn.scheduler.capacity.root.default.capacity", "100")
	s.rm = newRM(b, c, queues.Options{AdminACL: acl.Parse("*")},
		rm.Config{Tokens: s.tm, Nodes: s.nodes.l, Scheduler: noopScheduler{}})
	s.target = startRCTarget(b, s.tm.AMRM().SecretLookup(), s.rm.Register, s.rm.RegisterAM)

	owners := make([]*ipc.Client, rcOwners)
	for i := range owners {
		if owners[i], err = ipc.Dial(ctx, s.target.client, ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: fmt.Sprintf("owner%d", i), MaxIdleTime: benchIdle, Logger: quiet,
		}); err != nil {
			b.Fatal(err)
		}
	}
	defer closeClients(owners)
	// The running applications, and one more AM whose heartbeat is the
	// same-answer handler's answer to allocate.
	for i := range rcRunning + 1 {
		am, token, app := startUnmanagedAM(b, owners[i%rcOwners], s.target.am, fmt.Sprintf("bench app %d", i), "default")
		if i == rcRunning {
			var resp *yarnpb.AllocateResponseProto
			for id := range int32(2) {
				resp = new(yarnpb.AllocateResponseProto)
				if err := am.Call(ctx, "allocate", rcHeartbeat(id), resp); err != nil {
					b.Fatal(err)
				}
			}
			s.answers["allocate"] = resp
		} else {
			id, err := yarnid.ApplicationIDFromProto(app)
			if err != nil {
				b.Fatal(err)
			}
			giveTasks(b, s.rm, yarnid.AttemptID{App: id, ID: 1}, rcTasks, fmt.Sprintf("kwok-node-%d", i%viewNodes))
			s.apps, s.tokens = append(s.apps, app), append(s.tokens, token)
		}
		_ = am.Close()
	}
	for i := range rcAccepted + rcKilled {
		owner := fmt.Sprintf("owner%d", i%rcOwners)
		id := submitUnmanaged(b, s.rm, owner, "default")
		if i >= rcAccepted {
			if _, err := s.rm.ForceKillApplication(asUser(ctx, owner), &yarnpb.KillApplicationRequestProto{ApplicationId: id.Proto()}); err != nil {
				b.Fatal(err)
			}
		}
	}

	// The RM's answers to the load's requests, as a reader that does not
	// own the application sees them.
	reader := asUser(ctx, "user0")
	var answer proto.Message
	if answer, err = s.rm.GetClusterMetrics(reader, s.request(b, "getClusterMetrics", 0).(*yarnpb.GetClusterMetricsRequestProto)); err != nil {
		b.Fatal(err)
	}
	s.answers["getClusterMetrics"] = answer
	if answer, err = s.rm.GetApplicationReport(reader, s.request(b, "getApplicationReport", 0).(*yarnpb.GetApplicationReportRequestProto)); err != nil {
		b.Fatal(err)
	}
	s.answers["getApplicationReport"] = answer
	if answer, err = s.rm.GetClusterNodes(reader, s.request(b, "getClusterNodes", 0).(*yarnpb.GetClusterNodesRequestProto)); err != nil {
		b.Fatal(err)
	}
	s.answers["getClusterNodes"] = answer
	for _, call := range rcCalls {
		// The RM's node reports travel as unknown fields, already encoded:
		// each answer is checked as a client reads it.
		raw, err := proto.Marshal(s.answers[call.method])
		if err != nil {
			b.Fatal(err)
		}
		read := call.newResp()
		if err := proto.Unmarshal(raw, read); err != nil {
			b.Fatal(err)
		}
		if err := call.check(read); err != nil {
			b.Fatalf("%s: %v", call.method, err)
		}
	}
	return s
}

func (s *rcScene) close() {
	s.target.stop()
	s.nodes.stop()
}

// rcHeartbeat is an AM's allocate that changes nothing, as AMRMClient
// sends it: no asks, no releases, an empty blacklist update, its progress.
func rcHeartbeat(responseID int32) *yarnpb.AllocateRequestProto {
	return &yarnpb.AllocateRequestProto{
		ResponseId: proto.Int32(responseID), BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{}, Progress: proto.Float32(0.5),
	}
}

// request is connection conn's request of method: a report of the conn-th
// running application, the running nodes (as YarnClient.getNodeReports
// asks for them), an AM's heartbeat.
func (s *rcScene) request(b *testing.B, method string, conn int) proto.Message {
	switch method {
	case "getClusterMetrics":
		return &yarnpb.GetClusterMetricsRequestProto{}
	case "getApplicationReport":
		return &yarnpb.GetApplicationReportRequestProto{ApplicationId: s.apps[conn]}
	case "getClusterNodes":
		return &yarnpb.GetClusterNodesRequestProto{NodeStates: []yarnpb.NodeStateProto{yarnpb.NodeStateProto_NS_RUNNING}}
	case "allocate":
		return rcHeartbeat(0)
	}
	b.Fatalf("no request for %s", method)
	return nil
}

// startRCNoOp serves the smallest valid answer of each call's type.
func startRCNoOp(b *testing.B, lookup ipc.SecretLookup) *rcTarget {
	client := yarnrpc.ApplicationClientProtocolFuncs{
		GetClusterMetrics: func(context.Context, *yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
			return &yarnpb.GetClusterMetricsResponseProto{ClusterMetrics: &yarnpb.YarnClusterMetricsProto{}}, nil
		},
		GetApplicationReport: func(_ context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{ApplicationId: req.GetApplicationId()}}, nil
		},
		GetClusterNodes: func(context.Context, *yarnpb.GetClusterNodesRequestProto) (*yarnpb.GetClusterNodesResponseProto, error) {
			return &yarnpb.GetClusterNodesResponseProto{}, nil
		},
	}
	am := yarnrpc.ApplicationMasterProtocolFuncs{
		Allocate: func(_ context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			return &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(req.GetResponseId() + 1)}, nil
		},
	}
	return startRCTarget(b, lookup, client.Register, am.Register)
}

// startRCSame serves the RM's own answers, encoded once: the engine's cost
// of sending answers of the RM's sizes, without the RM's work. The RM sends
// its node reports as it keeps them, already encoded, so the same bytes
// sent as they are is what it adds to: a 176 KB getClusterNodes answer
// costs the engine far more than a no-op's few bytes.
func startRCSame(b *testing.B, lookup ipc.SecretLookup, answers map[string]proto.Message) *rcTarget {
	encoded := map[string][]byte{}
	for method, m := range answers {
		raw, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		encoded[method] = raw
	}
	client := func(srv *ipc.Server) error {
		return srv.Register(yarnrpc.ApplicationClientProtocolName,
			sameAnswer[*yarnpb.GetClusterMetricsRequestProto]("getClusterMetrics", encoded),
			sameAnswer[*yarnpb.GetApplicationReportRequestProto]("getApplicationReport", encoded),
			sameAnswer[*yarnpb.GetClusterNodesRequestProto]("getClusterNodes", encoded))
	}
	am := func(srv *ipc.Server) error {
		return srv.Register(yarnrpc.ApplicationMasterProtocolName,
			sameAnswer[*yarnpb.AllocateRequestProto]("allocate", encoded))
	}
	return startRCTarget(b, lookup, client, am)
}

// sameAnswer answers method with its encoded answer.
func sameAnswer[Req proto.Message](method string, encoded map[string][]byte) ipc.Method {
	answer := encoded[method]
	return ipc.HandleRaw(method, func(context.Context, Req, []byte) ([]byte, error) { return answer, nil })
}

// rcCmd is an order to the load generator. dial opens a set of
// connections to Addr for Method, each with its user (Users, SIMPLE) or
// token (Tokens, marshalled TokenProtos) and its request (Requests,
// marshalled), and makes one call on each, checked if Check; run calls
// back to back on the set's first Conns connections for For; close closes
// the set.
type rcCmd struct {
	Op       string
	Set      int
	Addr     string
	Method   string
	Users    []string
	Tokens   [][]byte
	Requests [][]byte
	Check    bool
	Conns    int
	For      time.Duration
	// Lat asks run for every call's latency.
	Lat bool
}

// rcReply is the load generator's answer: for run, the calls made and the
// time they took; for close of a set of AMs, the response id each AM's
// next heartbeat names.
type rcReply struct {
	Err         string
	Calls       int64
	Wall        time.Duration
	ResponseIDs []int32
	// Lat is every call's latency, sorted, if the run asked for them.
	Lat []time.Duration
}

// runRPCLoadIfRequested runs the load generator and exits when rcLoadEnv
// is set.
func runRPCLoadIfRequested() { runChildIfRequested(rcLoadEnv, "rpc load", serveRPCLoad) }

// runChildIfRequested serves as a benchmark's child process and exits
// when env is set: serve reads its orders from standard input and writes
// its answers to standard output.
func runChildIfRequested(env, name string, serve func(in io.Reader, out io.Writer) error) {
	if os.Getenv(env) == "" {
		return
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveRPCLoad carries out the orders read from in (JSON rcCmds), writing
// an rcReply line to out for each, until in ends.
func serveRPCLoad(in io.Reader, out io.Writer) error {
	if err := ensureFDs(uint64(3*rcConnLevels[len(rcConnLevels)-1] + 256)); err != nil {
		return err
	}
	sets := map[int]*rcConns{}
	defer func() {
		for _, s := range sets {
			closeClients(s.clients)
		}
	}()
	return serveOrders(in, out, func(cmd rcCmd) rcReply {
		var reply rcReply
		var err error
		switch s := sets[cmd.Set]; cmd.Op {
		case "dial":
			s, err = dialRCConns(cmd)
			if s != nil {
				sets[cmd.Set] = s
			}
		case "run":
			if s == nil || cmd.Conns > len(s.calls) {
				err = fmt.Errorf("set %d has no %d connections", cmd.Set, cmd.Conns)
				break
			}
			var l load
			l, err = drive(&fixture{calls: s.calls[:cmd.Conns]}, 0, cmd.For, nil)
			reply.Calls, reply.Wall = l.calls, l.elapsed
			if cmd.Lat {
				reply.Lat = l.lat
			}
		case "close":
			if s != nil {
				closeClients(s.clients)
				delete(sets, cmd.Set)
				for _, h := range s.heartbeats {
					reply.ResponseIDs = append(reply.ResponseIDs, h.GetResponseId())
				}
			}
		default:
			err = fmt.Errorf("unknown order %q", cmd.Op)
		}
		if err != nil {
			reply.Err = err.Error()
		}
		return reply
	})
}

// serveOrders carries out the orders a benchmark's child process reads
// from in, JSON values, with do, writing each one's reply to out as a JSON
// line, until in ends.
func serveOrders[Cmd, Reply any](in io.Reader, out io.Writer, do func(Cmd) Reply) error {
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	for {
		var cmd Cmd
		if err := dec.Decode(&cmd); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := enc.Encode(do(cmd)); err != nil {
			return err
		}
	}
}

// rcConns is a set of connections of the load generator, each with its
// call.
type rcConns struct {
	clients []*ipc.Client
	calls   []func(context.Context) error
	// heartbeats are the AMs' next allocate requests, for a set of AMs.
	heartbeats []*yarnpb.AllocateRequestProto
}

func dialRCConns(cmd rcCmd) (_ *rcConns, err error) {
	call, ok := rcCallOf(cmd.Method)
	if !ok {
		return nil, fmt.Errorf("unknown method %q", cmd.Method)
	}
	s := &rcConns{}
	defer func() {
		if err != nil {
			closeClients(s.clients)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, raw := range cmd.Requests {
		cfg := ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, MaxIdleTime: benchIdle, Logger: quiet}
		if call.am {
			cfg.Protocol, cfg.Token = yarnrpc.ApplicationMasterProtocolName, new(commonpb.TokenProto)
			if err := proto.Unmarshal(cmd.Tokens[i], cfg.Token); err != nil {
				return nil, err
			}
		} else {
			cfg.User = cmd.Users[i]
		}
		c, err := ipc.Dial(ctx, cmd.Addr, cfg)
		if err != nil {
			return nil, fmt.Errorf("dial %d: %w", i, err)
		}
		s.clients = append(s.clients, c)
		req := call.newReq()
		if err := proto.Unmarshal(raw, req); err != nil {
			return nil, err
		}
		heartbeat, _ := req.(*yarnpb.AllocateRequestProto)
		if heartbeat != nil {
			s.heartbeats = append(s.heartbeats, heartbeat)
		}
		do := func(ctx context.Context) (proto.Message, error) {
			if call.do != nil {
				return call.do(ctx, c, req)
			}
			resp := call.newResp()
			if err := c.Call(ctx, cmd.Method, req, resp); err != nil {
				return nil, err
			}
			if heartbeat != nil {
				// The next heartbeat names the last answer, as
				// AMRMClient's do.
				heartbeat.ResponseId = proto.Int32(resp.(*yarnpb.AllocateResponseProto).GetResponseId())
			}
			return resp, nil
		}
		first, err := do(ctx)
		if err == nil && cmd.Check {
			err = call.check(first)
		}
		if err != nil {
			return nil, fmt.Errorf("first %s on connection %d: %w", cmd.Method, i, err)
		}
		s.calls = append(s.calls, func(ctx context.Context) error {
			_, err := do(ctx)
			return err
		})
	}
	return s, nil
}

// rcLoad is the load generator's process, seen from the benchmark.
type rcLoad struct {
	stop func() error
	in   io.Writer
	out  *bufio.Scanner
	sets int
}

func startRCLoad(b *testing.B) *rcLoad {
	b.Helper()
	cmd, in, out, err := startSelf(rcLoadEnv, "1")
	if err != nil {
		b.Fatal(err)
	}
	// A run's latencies, when asked for, make long lines.
	out.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return &rcLoad{in: in, out: out, stop: func() error {
		_ = in.Close()
		return cmd.Wait()
	}}
}

func (l *rcLoad) do(b *testing.B, cmd rcCmd) rcReply {
	b.Helper()
	raw, err := json.Marshal(cmd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.in.Write(append(raw, '\n')); err != nil {
		b.Fatal(err)
	}
	if !l.out.Scan() {
		b.Fatalf("load generator: no answer to %s: %v", cmd.Op, l.out.Err())
	}
	var reply rcReply
	if err := json.Unmarshal(l.out.Bytes(), &reply); err != nil {
		b.Fatal(err)
	}
	if reply.Err != "" {
		b.Fatalf("load generator: %s %s: %s", cmd.Op, cmd.Method, reply.Err)
	}
	return reply
}

// dial opens conns connections for call to target and returns their set.
func (l *rcLoad) dial(b *testing.B, s *rcScene, target *rcTarget, call rcCall, conns int) int {
	b.Helper()
	addr, tokens := target.client, []*commonpb.TokenProto(nil)
	if call.am {
		// Connection i is the AM of the i-th running application.
		addr, tokens = target.am, s.tokens
	}
	return l.dialSet(b, addr, call.method, target == s.target, func(i int) proto.Message { return s.request(b, call.method, i) }, tokens, conns)
}

// dialSet opens conns connections for method to addr, connection i
// sending request(i) as user i or, with tokens, as the AM of tokens[i],
// checking the first answers if check, and returns their set.
func (l *rcLoad) dialSet(b *testing.B, addr, method string, check bool, request func(int) proto.Message, tokens []*commonpb.TokenProto, conns int) int {
	b.Helper()
	l.sets++
	cmd := rcCmd{Op: "dial", Set: l.sets, Addr: addr, Method: method, Check: check}
	for i := range conns {
		raw, err := proto.Marshal(request(i))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Requests = append(cmd.Requests, raw)
		if tokens != nil {
			tok, err := proto.Marshal(tokens[i])
			if err != nil {
				b.Fatal(err)
			}
			cmd.Tokens = append(cmd.Tokens, tok)
		} else {
			cmd.Users = append(cmd.Users, fmt.Sprintf("user%d", i))
		}
	}
	l.do(b, cmd)
	return l.sets
}

// rcCell is what one side measured in one case: calls, wall time and this
// process's CPU time over its rounds.
type rcCell struct {
	calls     int64
	wall, cpu time.Duration
}

func (c rcCell) perSec() float64 { return float64(c.calls) / c.wall.Seconds() }

func (c rcCell) cpuPerCall() float64 { return micros(c.cpu) / float64(c.calls) }

// rcRow is one case: a call at a number of connections, the sides in the
// order noop, same answer, RM.
type rcRow struct {
	method      string
	conns       int
	answerBytes int
	sides       [3]rcCell
}

// rcSelected reports whether rcOnlyEnv lets the case run (conns 0: any
// level of method).
func rcSelected(method string, conns int) bool {
	only := os.Getenv(rcOnlyEnv)
	if only == "" {
		return true
	}
	for _, c := range strings.Split(only, ",") {
		m, n, hasN := strings.Cut(strings.TrimSpace(c), "/")
		if m != method {
			continue
		}
		if !hasN || conns == 0 || n == strconv.Itoa(conns) {
			return true
		}
	}
	return false
}

// BenchmarkRMCallsVersusNoOp measures the server's CPU per call of
// getClusterMetrics, getApplicationReport, getClusterNodes and an AM's
// allocate heartbeat that changes nothing, each served by a real
// ResourceManager over the Hadoop RPC engine as knit-rm serves them (the
// client port SIMPLE, the scheduler port TOKEN with the AMRMToken over
// DIGEST-MD5, the active replica's admission check and RPC metrics on
// both), against the same engine serving a no-op handler that answers the
// smallest valid message of the call's response type, and against a
// handler that sends the RM's own answer as bytes encoded once (the
// engine's cost of an answer of that size without the RM's work).
//
// The RM (startRCScene) sees viewNodes nodes and rcPods pods through the
// node view and holds rcRunning running applications (an unmanaged AM
// registered over RPC and rcTasks task containers each), rcAccepted
// waiting and rcKilled killed. The load is a Go client in a process of
// its own (this test binary again, rcLoadEnv), so that this process's CPU
// time (processCPU, user and system) is the servers' alone: at 8, 64 and
// 256 connections, one call outstanding on each, back to back; a user per
// connection for the client protocol (asking for the metrics, the running
// nodes, or the report of a running application someone else submitted),
// an AM per connection for allocate. The three sides share this process,
// so the no-op's collections mark the RM's heap too, as they would in
// knit-rm. For each call and level the sides run rounds of rcRound in
// rcOrder after a warm-up of rcWarm each. It reports the ratio RM/no-op of
// CPU per call of each case (the goal is ≤ 1.5), then prints the
// table: calls/s and CPU µs per call of each side, RM/no-op and
// RM/same-answer. ns/op means nothing here.
func BenchmarkRMCallsVersusNoOp(b *testing.B) {
	maxConns := rcConnLevels[len(rcConnLevels)-1]
	if err := ensureFDs(uint64(3*maxConns + 1024)); err != nil {
		b.Skip(err)
	}
	scene := startRCScene(b)
	defer scene.close()
	lookup := scene.tm.AMRM().SecretLookup()
	noop := startRCNoOp(b, lookup)
	defer noop.stop()
	same := startRCSame(b, lookup, scene.answers)
	defer same.stop()
	targets := [3]*rcTarget{noop, same, scene.target}
	load := startRCLoad(b)
	defer func() {
		if err := load.stop(); err != nil {
			b.Errorf("load generator: %v", err)
		}
	}()

	rows := map[string]*rcRow{}
	var order []string
	b.ResetTimer()
	for range b.N {
		for _, call := range rcCalls {
			if !rcSelected(call.method, 0) {
				continue
			}
			var sets [3]int
			for t, target := range targets {
				sets[t] = load.dial(b, scene, target, call, maxConns)
			}
			for _, conns := range rcConnLevels {
				if !rcSelected(call.method, conns) {
					continue
				}
				key := fmt.Sprintf("%s/%d", call.method, conns)
				row := rows[key]
				if row == nil {
					row = &rcRow{method: call.method, conns: conns, answerBytes: proto.Size(scene.answers[call.method])}
					rows[key] = row
					order = append(order, key)
				}
				for t := range targets {
					load.do(b, rcCmd{Op: "run", Set: sets[t], Conns: conns, For: rcWarm})
				}
				for _, t := range rcOrder {
					runtime.GC()
					cpu := processCPU()
					r := load.do(b, rcCmd{Op: "run", Set: sets[t], Conns: conns, For: rcRound})
					c := &row.sides[t]
					c.cpu += processCPU() - cpu
					c.calls += r.Calls
					c.wall += r.Wall
				}
			}
			for _, set := range sets {
				load.do(b, rcCmd{Op: "close", Set: set})
			}
		}
	}
	b.StopTimer()
	var sb strings.Builder
	fmt.Fprintf(&sb, "server CPU per call (this process: the servers; the Go client runs in another), GOMAXPROCS=%d, %v rounds\n",
		runtime.GOMAXPROCS(0), rcRound)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\tconns\tRM answer B\tno-op calls/s\tsame calls/s\tRM calls/s\tno-op µs/call\tsame µs/call\tRM µs/call\tRM/no-op\tRM/same\t")
	for _, key := range order {
		r := rows[key]
		n, s, m := r.sides[0], r.sides[1], r.sides[2]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t\n", r.method, r.conns, r.answerBytes,
			n.perSec(), s.perSec(), m.perSec(), n.cpuPerCall(), s.cpuPerCall(), m.cpuPerCall(),
			m.cpuPerCall()/n.cpuPerCall(), m.cpuPerCall()/s.cpuPerCall())
		b.ReportMetric(m.cpuPerCall()/n.cpuPerCall(), fmt.Sprintf("%s-%d-cpu-rm/noop", r.method, r.conns))
	}
	_ = tw.Flush()
	// b.Log keeps only a benchmark's first 10 lines of output; the table
	// goes to stdout, as BenchmarkRPCVersusGRPC's does.
	fmt.Print(sb.String())
	b.ReportMetric(0, "ns/op")
}
