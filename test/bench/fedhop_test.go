package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
)

// fedHopEnv, when set, makes this test binary the process of
// BenchmarkFederationVersusDirectRM's hops of their own (fedHopProcess).
const fedHopEnv = "KNIT_BENCH_FED_HOPS"

// fedHopCmd is an order to the hops' process: start its hops in front of
// the RM at RMClient and RMAM, with the applications of Homes homed in its
// sub-cluster; am starts App's AM (its AMRMToken Token, marshalled) in the
// AMRMProxy of Pipeline; cpu asks for the process's CPU time.
type fedHopCmd struct {
	Op             string
	RMClient, RMAM string
	Homes          []string
	Pipeline, App  string
	User           string
	Token          []byte
}

// fedHopReply answers a fedHopCmd: start with the hops' addresses, am with
// the AM's local AMRMToken (marshalled), cpu with the CPU time.
type fedHopReply struct {
	Err                     string
	Router, Proxy, FedProxy string
	RelayClient, RelayAM    string
	Token                   []byte
	CPU                     time.Duration
}

// runFedHopsIfRequested serves as the hops' process and exits when
// fedHopEnv is set.
func runFedHopsIfRequested() { runChildIfRequested(fedHopEnv, "federation hops", serveFedHops) }

// serveFedHops carries out the orders read from in, a reply line to out
// for each, until in ends.
func serveFedHops(in io.Reader, out io.Writer) error {
	ctx := context.Background()
	var hops *fedHops
	defer func() {
		if hops != nil {
			hops.close()
		}
	}()
	return serveOrders(in, out, func(cmd fedHopCmd) fedHopReply {
		var reply fedHopReply
		var err error
		switch {
		case cmd.Op == "start" && hops == nil:
			if hops, err = startFedHops(ctx, cmd.RMClient, cmd.RMAM, cmd.Homes); err == nil {
				reply.Router, reply.Proxy, reply.FedProxy = hops.router, hops.proxies[fedPipelineDefault].addr, hops.proxies[fedPipelineFederated].addr
				reply.RelayClient, reply.RelayAM = hops.relayClient, hops.relayAM
			}
		case cmd.Op == "am" && hops != nil:
			var real commonpb.TokenProto
			if err = proto.Unmarshal(cmd.Token, &real); err != nil {
				break
			}
			var local token.Token
			if local, err = hops.startAM(ctx, cmd.Pipeline, cmd.App, cmd.User, token.FromProto(&real)); err == nil {
				reply.Token, err = proto.Marshal(local.Proto())
			}
		case cmd.Op == "cpu":
			reply.CPU = processCPU()
		default:
			err = fmt.Errorf("order %q out of turn", cmd.Op)
		}
		if err != nil {
			reply.Err = err.Error()
		}
		return reply
	})
}

// fedHopProcess is the hops' process, seen from the benchmark.
type fedHopProcess struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	addrs fedHopReply
}

// startFedHopProcess starts the hops' process and its hops with start.
func startFedHopProcess(start fedHopCmd) (*fedHopProcess, error) {
	cmd, in, out, err := startSelf(fedHopEnv, "1")
	if err != nil {
		return nil, err
	}
	p := &fedHopProcess{cmd: cmd, in: in, out: out}
	if p.addrs, err = p.do(start); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

func (p *fedHopProcess) do(cmd fedHopCmd) (fedHopReply, error) {
	raw, err := json.Marshal(cmd)
	if err != nil {
		return fedHopReply{}, err
	}
	if _, err := p.in.Write(append(raw, '\n')); err != nil {
		return fedHopReply{}, err
	}
	if !p.out.Scan() {
		return fedHopReply{}, fmt.Errorf("federation hops: no answer to %s: %v", cmd.Op, p.out.Err())
	}
	var reply fedHopReply
	if err := json.Unmarshal(p.out.Bytes(), &reply); err != nil {
		return fedHopReply{}, err
	}
	if reply.Err != "" {
		return fedHopReply{}, fmt.Errorf("federation hops: %s: %s", cmd.Op, reply.Err)
	}
	return reply, nil
}

// startAM is fedHops.startAM in the hops' process.
func (p *fedHopProcess) startAM(pipeline, app, user string, rmToken token.Token) (token.Token, error) {
	raw, err := proto.Marshal(rmToken.Proto())
	if err != nil {
		return token.Token{}, err
	}
	reply, err := p.do(fedHopCmd{Op: "am", Pipeline: pipeline, App: app, User: user, Token: raw})
	if err != nil {
		return token.Token{}, err
	}
	var local commonpb.TokenProto
	if err := proto.Unmarshal(reply.Token, &local); err != nil {
		return token.Token{}, err
	}
	return token.FromProto(&local), nil
}

// cpu is the hops' process's CPU time.
func (p *fedHopProcess) cpu() (time.Duration, error) {
	reply, err := p.do(fedHopCmd{Op: "cpu"})
	return reply.CPU, err
}

func (p *fedHopProcess) stop() error {
	_ = p.in.Close()
	return p.cmd.Wait()
}
