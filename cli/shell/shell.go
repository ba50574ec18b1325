// Package shell is `knit shell <container id> [-- command ...]`: a
// terminal into a running container, or one command with its exit code,
// through the ResourceManager's web shell (rm/webshell), so the RM's
// authorization and audit apply from any machine that reaches its web
// port. It speaks protocols/webshell on the RM's WebSocket, naming the
// caller with user.name as the RM's web pages take it.
//
// Imports: the standard library, coder/websocket, golang.org/x/term,
// client, hadoopconf, protocols/webshell.
package shell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/websocket"
	"golang.org/x/term"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	wire "github.com/knitdev/knit/protocols/webshell"
)

// DefaultRMWebPort is yarn-default.xml's port of
// yarn.resourcemanager.webapp.address.
const DefaultRMWebPort = 8088

// ResolveRMWebAddress is the RM's web address from the client's
// configuration folder, as ResolveRMAddress finds the client port.
func ResolveRMWebAddress(confDir string) (string, error) {
	addr, _, err := client.ConfAddress(confDir, hadoopconf.KeyRMWebappAddress, DefaultRMWebPort)
	return addr, err
}

// Config is what Run needs besides its arguments.
type Config struct {
	// RMWeb is the RM's web address, host:port.
	RMWeb string
	// User is the caller, sent as user.name.
	User string
	// Stdin, Stdout and Stderr are the command's. When Stdin and Stdout
	// are both terminals (*os.File), the session has a terminal: Stdin is
	// put in raw mode for it and its size follows SIGWINCH.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exit codes of knit shell's own failures; otherwise it exits with the
// command's code, or wire.ExitClosed when the RM ended the session.
const (
	exitUsage   = 2
	exitRefused = 1
)

const usage = "usage: knit shell [-t] [-T] <container id> [-- command ...]"

// Run runs the command and returns knit shell's exit code.
//
// With a terminal, reading Stdin goes on in a goroutine Run cannot stop
// (a read of a terminal ends only with input or with the process); it
// ends at the next key, or when cmd/knit exits right after Run.
func Run(ctx context.Context, args []string, cfg Config) int {
	fs := flag.NewFlagSet("shell", flag.ContinueOnError)
	fs.SetOutput(cfg.Stderr)
	forceTTY := fs.Bool("t", false, "ask for a terminal for a command too (needs a terminal here)")
	noTTY := fs.Bool("T", false, "no terminal, even for the interactive shell")
	fs.Usage = func() { fmt.Fprintln(cfg.Stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 || (len(rest) > 1 && rest[1] != "--") {
		fs.Usage()
		return exitUsage
	}
	container := rest[0]
	var command []string
	if len(rest) > 1 {
		command = rest[2:]
	}

	in, inIsFile := cfg.Stdin.(*os.File)
	out, outIsFile := cfg.Stdout.(*os.File)
	isTerm := inIsFile && outIsFile && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
	start := wire.Start{Command: command, TTY: isTerm && !*noTTY && (len(command) == 0 || *forceTTY)}
	if *forceTTY && !isTerm {
		fmt.Fprintln(cfg.Stderr, "knit shell: -t needs a terminal on stdin and stdout")
		return exitUsage
	}
	if start.TTY {
		w, h, err := term.GetSize(int(out.Fd()))
		if err != nil || w <= 0 || h <= 0 {
			w, h = 80, 24
		}
		start.Size = wire.Size{Cols: uint16(min(w, wire.MaxDimension)), Rows: uint16(min(h, wire.MaxDimension))}
	}

	q := url.Values{"user.name": {cfg.User}}
	start.Encode(q)
	u := url.URL{Scheme: "ws", Host: cfg.RMWeb, Path: wire.SocketPath(container), RawQuery: q.Encode()}
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{Subprotocols: []string{wire.Subprotocol}})
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "knit shell: %s\n", refusal(resp, err))
		return exitRefused
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wire.MaxFrame)
	if conn.Subprotocol() != wire.Subprotocol {
		fmt.Fprintf(cfg.Stderr, "knit shell: the ResourceManager at %s does not speak %s\n", cfg.RMWeb, wire.Subprotocol)
		return exitRefused
	}

	if start.TTY {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			fmt.Fprintf(cfg.Stderr, "knit shell: raw mode: %v\n", err)
			return exitRefused
		}
		defer term.Restore(int(in.Fd()), old)
	}
	s := &session{conn: conn}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if start.TTY {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.followSize(ctx, int(out.Fd()))
		}()
	}
	go s.copyInput(ctx, cfg.Stdin)
	return s.copyOutput(ctx, cfg.Stdout, cfg.Stderr, start.TTY)
}

// refusal is the RM's reason for a refused handshake.
func refusal(resp *http.Response, err error) string {
	if resp == nil {
		return err.Error()
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if msg := strings.TrimSpace(string(b)); msg != "" {
		return msg
	}
	return fmt.Sprintf("the ResourceManager answered %s", resp.Status)
}

type session struct {
	conn *websocket.Conn
	mu   sync.Mutex
}

func (s *session) send(ctx context.Context, f wire.Frame) error {
	b, err := f.Append(nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn.Write(ctx, websocket.MessageBinary, b)
}

// copyInput sends stdin, then CloseStdin at its end.
func (s *session) copyInput(ctx context.Context, r io.Reader) {
	buf := make([]byte, wire.MaxData)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if s.send(ctx, wire.Frame{Type: wire.Stdin, Data: buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			_ = s.send(ctx, wire.Frame{Type: wire.CloseStdin})
			return
		}
	}
}

// followSize sends the terminal's size each time it changes.
func (s *session) followSize(ctx context.Context, fd int) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			w, h, err := term.GetSize(fd)
			if err != nil || w <= 0 || h <= 0 {
				continue
			}
			_ = s.send(ctx, wire.Frame{Type: wire.Resize, Size: wire.Size{Cols: uint16(min(w, wire.MaxDimension)), Rows: uint16(min(h, wire.MaxDimension))}})
		}
	}
}

// copyOutput writes the command's output until its Exit frame, and returns
// its code.
func (s *session) copyOutput(ctx context.Context, stdout, stderr io.Writer, tty bool) int {
	for {
		typ, msg, err := s.conn.Read(ctx)
		if err != nil {
			say(stderr, tty, "the connection ended: %v", err)
			return wire.ExitClosed
		}
		if typ != websocket.MessageBinary {
			say(stderr, tty, "the ResourceManager sent a text message")
			return wire.ExitClosed
		}
		f, err := wire.Decode(msg)
		if err == nil && f.Type.FromClient() {
			err = errors.New("a client frame from the server")
		}
		if err != nil {
			say(stderr, tty, "%v", err)
			return wire.ExitClosed
		}
		switch f.Type {
		case wire.Stdout:
			if _, err := stdout.Write(f.Data); err != nil {
				return wire.ExitClosed
			}
		case wire.Stderr:
			_, _ = stderr.Write(f.Data)
		case wire.Exit:
			if f.Reason != "" {
				say(stderr, tty, "%s", f.Reason)
			}
			s.conn.Close(websocket.StatusNormalClosure, "")
			return int(f.Code)
		}
	}
}

// say writes a message of knit shell's own on a line of its own, also on
// a terminal in raw mode.
func say(w io.Writer, tty bool, format string, args ...any) {
	if tty {
		fmt.Fprintf(w, "\r\nknit shell: "+format+"\r\n", args...)
		return
	}
	fmt.Fprintf(w, "knit shell: "+format+"\n", args...)
}
