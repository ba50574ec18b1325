package procnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execDrainDelay bounds how long an exec session keeps copying output once
// its command has ended: a process the command left in the background may
// hold the output open, and the session must still end.
const execDrainDelay = 2 * time.Second

// session runs an exec or attach for one request against one running run
// of a container. It is the kubelet streaming library's Executor and
// Attacher.
type session struct {
	rt  *procRuntime
	run *attempt
	log *slog.Logger
	// readers are the goroutines copying the client's stdin: a read from
	// the stream blocks until the connection closes, which happens after
	// ExecInContainer returns, so the handler waits for them (wait) once
	// the library has closed the connection.
	readers sync.WaitGroup
}

func (s *session) wait() { s.readers.Wait() }

// ExecInContainer runs cmd as a process in the context of the container's
// run: its working directory, its environment, its mount paths translated
// as its own command's were, as the node's user (the container's user on a
// process node). It ends when the command ends (its exit code reported as
// the kubelet's status), when the client goes (ctx), or when the container
// ends, which kills it as the end of a container kills what was exec'd in
// it.
func (s *session) ExecInContainer(ctx context.Context, _ string, _ types.UID, _ string, cmd []string,
	in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	spec := s.run.Spec
	argv := newPathTranslator(spec.Mounts).translateAll(cmd)
	path, err := lookPath(argv[0], spec.Env, spec.Dir)
	if err != nil {
		return err
	}
	c := exec.Command(path)
	c.Args, c.Env, c.Dir = argv, spec.Env, spec.Dir
	s.log.Info("exec in container", "command", argv, "tty", tty)
	if tty {
		return s.execTTY(ctx, c, in, out, resize)
	}
	return s.execPlain(ctx, c, in, out, errOut)
}

// execPlain runs c with the client's streams as its stdin, stdout and
// stderr, in a process group of its own so it can be ended as a whole.
func (s *session) execPlain(ctx context.Context, c *exec.Cmd, in io.Reader, out, errOut io.Writer) error {
	if out != nil {
		c.Stdout = out
	}
	if errOut != nil {
		c.Stderr = errOut
	}
	var stdin io.WriteCloser
	if in != nil {
		var err error
		if stdin, err = c.StdinPipe(); err != nil {
			return fmt.Errorf("exec: %w", err)
		}
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.WaitDelay = execDrainDelay
	if err := c.Start(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if stdin != nil {
		s.readers.Go(func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close() // EOF from the client is EOF for the command
		})
	}
	stop := s.endWith(ctx, c.Process.Pid)
	err := c.Wait()
	stop()
	return exitError(c, err)
}

// execTTY runs c on a new pseudo-terminal, as the leader of its session
// with the terminal as its controlling one; the client's resize events set
// the terminal's size. Output is stdout only, as on a kubelet.
func (s *session) execTTY(ctx context.Context, c *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	blocking, err := pty.StartWithAttrs(c, nil, &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL})
	if err != nil {
		return fmt.Errorf("exec: start on a terminal: %w", err)
	}
	// A pollable copy of the terminal's master side, so that closing it
	// ends a read blocked on it (a blocking descriptor would wait for
	// every holder of the terminal to let go).
	ptmx, err := pollable(blocking)
	if err != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
		return fmt.Errorf("exec: %w", err)
	}
	stop := s.endWith(ctx, c.Process.Pid)
	var (
		copiers, resizer sync.WaitGroup
		output           = make(chan struct{})
		done             = make(chan struct{})
	)
	copiers.Go(func() {
		defer close(output)
		if out == nil {
			out = nopWriteCloser{io.Discard}
		}
		_, _ = io.Copy(out, ptmx) // ends with EIO once no process holds the terminal
	})
	resizer.Go(func() {
		for {
			select {
			case <-done:
				return
			case size, ok := <-resize:
				if !ok {
					return
				}
				if err := pty.Setsize(ptmx, &pty.Winsize{Rows: size.Height, Cols: size.Width}); err != nil {
					s.log.Debug("terminal resize failed", "err", err)
				}
			}
		}
	})
	if in != nil {
		s.readers.Go(func() { _, _ = io.Copy(ptmx, in) })
	}
	err = c.Wait()
	stop()
	// The session's leader is gone; what it left on the terminal goes too,
	// as a terminal's hangup would end it.
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	drain := time.NewTimer(execDrainDelay)
	select {
	case <-output:
	case <-drain.C:
	}
	drain.Stop()
	// The resizer lets go of the terminal before it is closed.
	close(done)
	resizer.Wait()
	_ = ptmx.Close()
	copiers.Wait()
	return exitError(c, err)
}

// endWith kills process group pgid with SIGKILL when ctx ends or the
// container's run ends. The returned function stops the watch and waits
// for it.
func (s *session) endWith(ctx context.Context, pgid int) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(exitPollInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
			case <-t.C:
				if running, err := s.rt.settle(s.run); err != nil || running {
					continue
				}
				s.log.Info("container ended, ending its exec session")
			}
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
	})
	return func() {
		close(stop)
		wg.Wait()
	}
}

// exitError turns the end of an exec'd command into what the streaming
// library reports: nil for exit 0, a utilexec.ExitError carrying the exit
// code (128+signal for a signal, as container runtimes report it)
// otherwise, which reaches the client as the NonZeroExitCode status.
func exitError(c *exec.Cmd, err error) error {
	st := c.ProcessState
	if st == nil {
		return fmt.Errorf("exec: %w", err)
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return fmt.Errorf("exec: %w", err)
	}
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		err = fmt.Errorf("exit status %d", code)
	}
	return utilexec.CodeExitError{Err: err, Code: code}
}

// pollable returns a non-blocking duplicate of f, registered with Go's
// poller, and closes f.
func pollable(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("dup terminal: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("terminal: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// AttachContainer streams what the container's run writes from now on,
// stdout to stdout and stderr to stderr, until the run ends or the client
// goes. A process node starts every container with its stdin on
// /dev/null, so the client's stdin reaches nothing, as a container runtime
// ignores stdin for a container created without it.
func (s *session) AttachContainer(ctx context.Context, _ string, _ types.UID, _ string,
	_ io.Reader, out, errOut io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	f, err := os.Open(s.run.Paths.Log)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	defer f.Close()
	// From the end of the last complete record: what came before is the
	// log's, not the attach's.
	if err := seekTail(f, 0); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	running := func() bool {
		running, err := s.rt.settle(s.run)
		return err == nil && running
	}
	return followRecords(ctx, f, running, func(rec criRecord) error {
		w := io.Writer(out)
		if rec.Stream == streamStderr {
			w = errOut
		}
		if w == nil {
			return nil
		}
		b := rec.Content
		if !rec.Partial {
			b = append(b[:len(b):len(b)], '\n')
		}
		_, err := w.Write(b)
		return err
	})
}
