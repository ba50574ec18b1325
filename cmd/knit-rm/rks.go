package main

import (
	"context"
	"log/slog"
	"net"

	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rks/relay"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/tokens"
)

// rksTokens is the token manager as RKS asks it.
type rksTokens struct{ m *tokens.Manager }

func (t rksTokens) VerifyContainerToken(tok token.Token) (*yarnpb.ContainerTokenIdentifierProto, error) {
	return t.m.ContainerTokens().Verify(tok)
}

func (t rksTokens) PinAttempt(ctx context.Context, id *yarnpb.NMTokenIdentifierProto) error {
	return t.m.NMTokens().PinAttempt(ctx, id)
}

func newRKS(f flags, client kubernetes.Interface, sched *rgs.Controller, tm *tokens.Manager, reports *rm.ContainerReports, nodeList *nodes.Lister, log *slog.Logger) (*rks.Service, error) {
	return rks.New(rks.Config{
		Client:      client,
		Pods:        sched,
		Tokens:      rksTokens{tm},
		Observer:    reports,
		AuxServices: nodeList,
		NMHTTPPort:  int32(f.nmWebPort),
		Logger:      log.With("component", "rks"),
	})
}

// relayedNode is the node a relayed NM connection was made for, so that
// NMTokens of other nodes are refused as their NodeManager refuses them.
func relayedNode(ctx context.Context) *yarnpb.NodeIdProto {
	node, ok := relay.NodeFrom(ctx)
	if !ok {
		return nil
	}
	id, err := yarnid.ParseNodeID(node)
	if err != nil {
		return nil
	}
	return id
}

// serveRKS serves ContainerManagementProtocol for knit-node's relays, with
// NMTokens only.
func serveRKS(run lifecycle.Runner, svc *rks.Service, tm *tokens.Manager, f flags, m *rmMetrics, rep *replica) error {
	log := run.Logger
	a := rep.admission()
	srv, err := ipc.NewServer(ipc.Config{
		Tokens:      a.Tokens(tm.NMTokens().SecretLookup(relayedNode)),
		AdmitCall:   a.AdmitCall,
		ConnContext: relay.ConnContext,
		Observer:    m.rpc,
		Logger:      log.With("component", "rks-rpc"),
	})
	if err != nil {
		return err
	}
	if err := svc.Register(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "RKS port (ContainerManagementProtocol)", Address: f.rksAddress, Server: srv, Wrap: func(l net.Listener) net.Listener { return relay.NewListener(l) }})
	return nil
}
