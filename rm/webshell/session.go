package webshell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"

	wire "github.com/knitdev/knit/protocols/webshell"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// Event reasons on the pod.
const (
	ReasonOpened = "ShellOpened"
	ReasonClosed = "ShellClosed"
)

// session is one open shell.
type session struct {
	user   string
	id     yarnid.ContainerID
	pod    *corev1.Pod
	start  wire.Start
	remote string

	opened time.Time
	// in counts stdin bytes from the user, out the bytes sent back.
	in, out atomic.Int64
	// last is the time of the last byte either way (UnixNano).
	last atomic.Int64
}

// Why a session ended before its command did.
var (
	errClientGone = errors.New("the client closed the connection")
	errIdle       = errors.New("the session was idle too long")
	errShutdown   = errors.New("the ResourceManager is shutting down")
)

// closeTimeout bounds the Exit frame and the close handshake.
const closeTimeout = 5 * time.Second

// run carries the session until its command ends or something ends it,
// then sends the Exit frame and closes the WebSocket. Every goroutine it
// starts has ended when it returns.
func (s *Server) run(reqCtx context.Context, conn *websocket.Conn, ss *session) {
	now := s.cfg.Clock.Now()
	ss.opened = now
	ss.last.Store(now.UnixNano())
	// connCtx lives as long as the connection may: the WebSocket closes
	// when it ends. ctx ends the command.
	connCtx, connCancel := context.WithCancel(context.WithoutCancel(reqCtx))
	defer connCancel()
	ctx, cancel := context.WithCancelCause(connCtx)
	defer cancel(nil)
	stopOnClose := context.AfterFunc(s.ctx, func() { cancel(errShutdown) })
	defer stopOnClose()

	s.audit(ss, true, 0, "")
	w := &frames{conn: conn, ctx: connCtx, ss: ss, now: s.cfg.Clock.Now}
	stdinR, stdinW := io.Pipe()
	sizes := make(chan wire.Size, 1)
	if ss.start.TTY {
		sizes <- ss.start.Size
	}
	req := ExecRequest{
		Namespace: ss.pod.Namespace, Pod: ss.pod.Name, Container: launch.ContainerName,
		Command: ExecCommand(s.cfg.LaunchDir, ss.start.Command),
		TTY:     ss.start.TTY, Sizes: sizes, Stdin: stdinR, Stdout: w.stream(wire.Stdout),
	}
	if !ss.start.TTY {
		req.Stderr = w.stream(wire.Stderr)
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := s.readClient(connCtx, conn, ss, stdinW, sizes)
		// A client that went away ends the command; one that sent
		// garbage is told why.
		cancel(err)
	}()
	go func() {
		defer wg.Done()
		s.watch(ctx, ss, cancel)
	}()
	err := s.cfg.Exec.Exec(ctx, req)
	// The command is done: input has nowhere to go any more.
	stdinR.CloseWithError(io.ErrClosedPipe)
	code, reason := exitOf(err, context.Cause(ctx))
	cancel(errors.New("the command ended"))

	if !errors.Is(context.Cause(ctx), errClientGone) {
		wctx, wcancel := context.WithTimeout(connCtx, closeTimeout)
		_ = w.write(wctx, wire.Frame{Type: wire.Exit, Code: code, Reason: truncate(reason, wire.MaxReason)})
		wcancel()
	}
	// Close waits for the client's close frame, which the reader reads.
	_ = conn.Close(websocket.StatusNormalClosure, "")
	connCancel()
	wg.Wait()
	close(sizes)
	s.audit(ss, false, code, reason)
}

// exitOf turns the executor's answer into an Exit frame: the command's
// exit code, or ExitClosed and why the session ended first.
func exitOf(err, cause error) (int32, string) {
	var coded interface{ ExitStatus() int }
	switch {
	case cause != nil:
		var r *Refusal
		if errors.As(cause, &r) {
			return wire.ExitClosed, r.Reason
		}
		return wire.ExitClosed, cause.Error()
	case err == nil:
		return 0, ""
	case errors.As(err, &coded):
		return int32(coded.ExitStatus()), ""
	default:
		return wire.ExitClosed, "exec: " + err.Error()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// readClient reads the client's frames until the connection ends. It
// returns errClientGone, or the protocol error it closed the connection
// for.
func (s *Server) readClient(ctx context.Context, conn *websocket.Conn, ss *session, stdin *io.PipeWriter, sizes chan wire.Size) error {
	defer stdin.Close()
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			return errClientGone
		}
		if typ != websocket.MessageBinary {
			return s.protocolError(conn, errors.New("a text message; frames are binary"))
		}
		f, err := wire.Decode(msg)
		if err == nil && !f.Type.FromClient() {
			err = fmt.Errorf("%w: a client does not send %s", wire.ErrFrame, f.Type)
		}
		if err != nil {
			return s.protocolError(conn, err)
		}
		ss.last.Store(s.cfg.Clock.Now().UnixNano())
		switch f.Type {
		case wire.Stdin:
			if _, err := stdin.Write(f.Data); err != nil {
				// The command has ended; the session is closing.
				continue
			}
			ss.in.Add(int64(len(f.Data)))
		case wire.CloseStdin:
			stdin.Close()
		case wire.Resize:
			if !ss.start.TTY {
				continue
			}
			// Only the latest size matters: replace one not taken yet.
			select {
			case <-sizes:
			default:
			}
			sizes <- f.Size
		}
	}
}

func (s *Server) protocolError(conn *websocket.Conn, err error) error {
	conn.Close(websocket.StatusProtocolError, truncate(err.Error(), 120))
	return fmt.Errorf("the client broke the protocol: %w", err)
}

// watch ends the session when it has been idle too long, when the
// container ends or when the user's access goes.
func (s *Server) watch(ctx context.Context, ss *session, end context.CancelCauseFunc) {
	t := s.cfg.Clock.NewTicker(s.cfg.Settings.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			if now.Sub(time.Unix(0, ss.last.Load())) >= s.cfg.Settings.IdleTimeout {
				end(errIdle)
				return
			}
			if _, r := s.authorize(ctx, ss.user, ss.id); r != nil && ctx.Err() == nil {
				end(r)
				return
			}
		}
	}
}

// frames writes frames to the WebSocket, one at a time.
type frames struct {
	mu   sync.Mutex
	conn *websocket.Conn
	ctx  context.Context
	ss   *session
	now  func() time.Time
	buf  []byte
}

func (w *frames) write(ctx context.Context, f wire.Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := f.Append(w.buf[:0])
	if err != nil {
		return err
	}
	w.buf = b
	return w.conn.Write(ctx, websocket.MessageBinary, b)
}

// stream is an io.Writer of frames of type t, split at wire.MaxData.
func (w *frames) stream(t wire.Type) io.Writer { return streamWriter{w, t} }

type streamWriter struct {
	w *frames
	t wire.Type
}

func (s streamWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), wire.MaxData)]
		if err := s.w.write(s.w.ctx, wire.Frame{Type: s.t, Data: chunk}); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
		s.w.ss.out.Add(int64(len(chunk)))
		s.w.ss.last.Store(s.w.now().UnixNano())
	}
	return n, nil
}

// audit logs a session's start or end and records it on the pod.
func (s *Server) audit(ss *session, opened bool, code int32, reason string) {
	attrs := []any{"user", ss.user, "container", ss.id.String(), "namespace", ss.pod.Namespace, "pod", ss.pod.Name,
		"remote", ss.remote, "command", ss.start.Command, "tty", ss.start.TTY, "start", ss.opened}
	what := "an interactive shell"
	if len(ss.start.Command) > 0 {
		what = "a command"
	}
	if opened {
		s.log.Info("web shell opened", attrs...)
		s.cfg.Events.Eventf(ss.pod, nil, corev1.EventTypeNormal, ReasonOpened, "Exec",
			"User %s opened %s into container %s", ss.user, what, ss.id)
		return
	}
	end := s.cfg.Clock.Now()
	if reason == "" {
		reason = fmt.Sprintf("exit code %d", code)
	}
	s.log.Info("web shell closed", append(attrs, "end", end, "bytes_in", ss.in.Load(), "bytes_out", ss.out.Load(),
		"exit_code", code, "reason", reason)...)
	s.cfg.Events.Eventf(ss.pod, nil, corev1.EventTypeNormal, ReasonClosed, "Exec",
		"User %s closed %s into container %s after %s (%s): %d bytes in, %d bytes out",
		ss.user, what, ss.id, end.Sub(ss.opened).Round(time.Second), truncate(reason, 300), ss.in.Load(), ss.out.Load())
}
