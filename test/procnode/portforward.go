package procnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// portForwarder connects port-forward streams to a pod's ports. Every pod
// of a process node shares the host network, and its IP is the node's
// address, so a port is dialled there first and on the loopback address
// 127.0.0.1 next: a kubelet dials localhost in the pod's network namespace,
// where a program bound to either would be found.
type portForwarder struct {
	addr string
	log  *slog.Logger
}

// PortForward copies between stream and a new connection to port until
// both directions end or ctx does.
func (p *portForwarder) PortForward(ctx context.Context, _ string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	conn, err := p.dial(ctx, port)
	if err != nil {
		return err
	}
	defer conn.Close()
	var copies, watch sync.WaitGroup
	copies.Go(func() {
		_, _ = io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the client's end of input is the server's
		}
	})
	copies.Go(func() {
		if _, err := io.Copy(stream, conn); err != nil {
			p.log.Debug("port forward copy ended", "port", port, "err", err)
		}
		_ = stream.Close() // ends the other direction's read too
	})
	stop := make(chan struct{})
	watch.Go(func() {
		select {
		case <-ctx.Done():
			_ = conn.Close()
			_ = stream.Close()
		case <-stop:
		}
	})
	copies.Wait()
	close(stop)
	watch.Wait()
	return nil
}

func (p *portForwarder) dial(ctx context.Context, port int32) (net.Conn, error) {
	var d net.Dialer
	var errs []error
	for _, host := range []string{p.addr, "127.0.0.1"} {
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
	}
	return nil, fmt.Errorf("failed to connect to port %d: %w", port, errors.Join(errs...))
}
