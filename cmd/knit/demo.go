package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm"
)

// runDemo is `knit demo [-listen ADDR] [-serve]`.
func runDemo(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address of the ApplicationClientProtocol port")
	serve := fs.Bool("serve", false, "keep serving after the demo calls, until interrupted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo(ctx, out, *listen, *serve)
}

// demo serves ApplicationClientProtocol with the calls the ResourceManager
// answers so far, on SIMPLE and TOKEN auth, and calls it with Knit's client.
func demo(ctx context.Context, out io.Writer, listen string, serve bool) error {
	key := make([]byte, 20)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("demo key: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Tokens: demoTokens(key), Logger: log})
	if err != nil {
		return err
	}
	if err := srv.Register(rm.ProtocolClient, rm.ResourceTypeInfo{}.Methods()...); err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	addr := l.Addr().String()
	fmt.Fprintf(out, "Hadoop RPC server (IPC v9) serving %s on %s\n", rm.ProtocolClient, addr)

	callErr := demoCalls(ctx, out, addr, key)

	if serve && callErr == nil {
		fmt.Fprintf(out, "serving until interrupted (Ctrl-C)\n")
		<-ctx.Done()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, ipc.ErrServerClosed) {
		return err
	}
	return callErr
}

func demoCalls(ctx context.Context, out io.Writer, addr string, key []byte) error {
	id := []byte("demo-user")
	token := &commonpb.TokenProto{Identifier: id, Password: hmacSHA1(key, id), Kind: proto.String("KNIT_DEMO"), Service: proto.String(addr)}
	for _, c := range []struct {
		auth string
		cfg  ipc.ClientConfig
	}{
		{"SIMPLE as " + currentUser(), ipc.ClientConfig{Protocol: rm.ProtocolClient, User: currentUser()}},
		{"TOKEN (SASL DIGEST-MD5)", ipc.ClientConfig{Protocol: rm.ProtocolClient, Token: token}},
	} {
		client, err := ipc.Dial(ctx, addr, c.cfg)
		if err != nil {
			return fmt.Errorf("dial with %s: %w", c.auth, err)
		}
		var types yarnpb.GetAllResourceTypeInfoResponseProto
		err = client.Call(ctx, "getResourceTypeInfo", &yarnpb.GetAllResourceTypeInfoRequestProto{}, &types)
		client.Close()
		if err != nil {
			return fmt.Errorf("getResourceTypeInfo with %s: %w", c.auth, err)
		}
		fmt.Fprintf(out, "%-32s getResourceTypeInfo -> %d types:", c.auth, len(types.GetResourceTypeInfo()))
		for _, t := range types.GetResourceTypeInfo() {
			fmt.Fprintf(out, " %s(%s)", t.GetName(), t.GetUnits())
		}
		fmt.Fprintln(out)
	}

	// Everything else is not built yet, and says so the way Hadoop does.
	client, err := ipc.Dial(ctx, addr, ipc.ClientConfig{Protocol: rm.ProtocolClient, User: currentUser()})
	if err != nil {
		return err
	}
	defer client.Close()
	err = client.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	var re *ipc.RemoteError
	if !errors.As(err, &re) {
		return fmt.Errorf("getNewApplication: expected a remote error, got %v", err)
	}
	fmt.Fprintf(out, "%-32s getNewApplication   -> %s (the ResourceManager is not built yet)\n", "SIMPLE", re.ClassName)
	return nil
}

// demoTokens accepts tokens signed with the demo's key, as an RM's secret
// manager accepts the tokens it issued.
func demoTokens(key []byte) ipc.SecretLookup {
	return func(_ context.Context, id []byte) (ipc.Secret, error) {
		return ipc.Secret{Password: hmacSHA1(key, id), User: string(id)}, nil
	}
}

func hmacSHA1(key, msg []byte) []byte {
	m := hmac.New(sha1.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func currentUser() string { return client.LoginUser(os.Getenv) }
