package webshell

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	wire "github.com/knitdev/knit/protocols/webshell"
)

// PodExec runs commands through the API server's pods/exec, as kubectl
// exec does: the WebSocket protocol, falling back to SPDY where the API
// server (or a proxy before it) cannot upgrade to WebSocket.
type PodExec struct {
	config *rest.Config
	client rest.Interface
}

var _ Executor = (*PodExec)(nil)

// NewPodExec uses config, which must allow pods/exec create.
func NewPodExec(config *rest.Config) (*PodExec, error) {
	cs, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("webshell: kubernetes client: %w", err)
	}
	return &PodExec{config: config, client: cs.CoreV1().RESTClient()}, nil
}

// Exec runs r's command; an exit code other than zero comes back as
// client-go's exec.CodeExitError, which has ExitStatus.
func (p *PodExec) Exec(ctx context.Context, r ExecRequest) error {
	req := p.client.Post().Resource("pods").Namespace(r.Namespace).Name(r.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: r.Container, Command: r.Command,
			Stdin: r.Stdin != nil, Stdout: r.Stdout != nil, Stderr: r.Stderr != nil && !r.TTY, TTY: r.TTY,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.config, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("webshell: websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.config, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("webshell: spdy executor: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("webshell: executor: %w", err)
	}
	opts := remotecommand.StreamOptions{Stdin: r.Stdin, Stdout: r.Stdout, Tty: r.TTY}
	if r.TTY {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: r.Sizes}
	} else {
		opts.Stderr = r.Stderr
	}
	return ex.StreamWithContext(ctx, opts)
}

// sizeQueue hands remotecommand the terminal's sizes until the session
// ends.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan wire.Size
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case <-q.ctx.Done():
		return nil
	case s, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Cols, Height: s.Rows}
	}
}
