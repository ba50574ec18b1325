package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Config describes one supervised program.
type Config struct {
	// Name names the process in logs and in its Status.
	Name string
	// Command builds the command of each run, not yet started: a run may not
	// reuse an exec.Cmd. Supervise sets its SysProcAttr.Setpgid so that Stop
	// can end the run's children too; the rest (output, environment,
	// Pdeathsig) is Command's.
	Command func() (*exec.Cmd, error)
	// Supervised restarts the process from its first run on, as if
	// Supervise were called at once.
	Supervised bool
	// Backoff is the restart policy; the zero value is the kubelet's.
	Backoff Backoff
	// Logger receives each start, end and restart; nil discards them.
	Logger *slog.Logger
	// OnChange, when set, is called (from the supervising goroutine, never
	// with a lock held) after each start and each end of a run.
	OnChange func()
	// After waits d; nil means time.After. Tests inject a fake clock.
	After func(d time.Duration) <-chan time.Time
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Status is what a Process reports of itself.
type Status struct {
	Name string `json:"name"`
	// PID is the running process's id; zero while it is down.
	PID int `json:"pid"`
	// Running says whether a run is in progress.
	Running bool `json:"running"`
	// Restarts counts the runs after the first.
	Restarts int `json:"restarts"`
	// Started is when the current (or last) run started.
	Started time.Time `json:"started"`
	// LastExit is how the last run ended ("" when none has).
	LastExit string `json:"lastExit,omitempty"`
	// LastExitAt is when it did.
	LastExitAt time.Time `json:"lastExitAt,omitzero"`
	// NextRestart is when the process starts again while it waits out its
	// back-off; zero otherwise.
	NextRestart time.Time `json:"nextRestart,omitzero"`
}

// Process is one program started, waited for and, once Supervise is
// called, restarted whenever it ends, until Stop. Its methods are safe for
// concurrent use.
type Process struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	cmd        *exec.Cmd
	runDone    chan struct{} // closed when the current run ends
	exitErr    error
	supervised bool
	stopping   bool
	status     Status

	stop    chan struct{} // closed by Stop
	stopped chan struct{} // closed when the supervising goroutine returns
}

// Start starts the program's first run and the goroutine that waits for it.
// Until Supervise, an end is final (Done is closed and stays so), which is
// what a start-up wait wants; Stop ends the goroutine in every case.
func Start(cfg Config) (*Process, error) {
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Process{
		cfg:        cfg,
		log:        log.With("process", cfg.Name),
		status:     Status{Name: cfg.Name},
		supervised: cfg.Supervised,
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	cmd, err := p.startRun()
	if err != nil {
		return nil, err
	}
	go p.watch(cmd)
	return p, nil
}

// Supervise makes every later end of the program a restart.
func (p *Process) Supervise() {
	p.mu.Lock()
	p.supervised = true
	p.mu.Unlock()
}

// Done is closed when the current run ends. Before Supervise, that is the
// end of the process.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runDone
}

// Err is how the last run ended, once Done is closed.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// PID is the current run's process id, zero while the process is down.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status.PID
}

// Status reports the process.
func (p *Process) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// errStopping is startRun's answer once Stop has begun.
var errStopping = errors.New("supervise: stopping")

// startRun starts one run and records it, under the lock so that Stop
// either comes first (and no run starts) or sees the run to end.
func (p *Process) startRun() (*exec.Cmd, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return nil, errStopping
	}
	cmd, err := p.cfg.Command()
	if err != nil {
		return nil, fmt.Errorf("supervise: %s: %w", p.cfg.Name, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	p.status.Started = p.cfg.Now()
	p.status.NextRestart = time.Time{}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("supervise: start %s: %w", p.cfg.Name, err)
	}
	p.cmd = cmd
	p.runDone = make(chan struct{})
	p.exitErr = nil
	p.status.PID = cmd.Process.Pid
	p.status.Running = true
	p.log.Info("process started", "pid", cmd.Process.Pid)
	return cmd, nil
}

// watch waits for each run and starts the next one after its back-off, until
// Stop, or the first end before Supervise. A restart that fails to start
// counts as a run that ended at once.
func (p *Process) watch(cmd *exec.Cmd) {
	defer close(p.stopped)
	var startErr error
	for {
		err := startErr
		if cmd != nil {
			if err = cmd.Wait(); err == nil {
				err = errors.New("exited with status 0")
			}
		}
		now := p.cfg.Now()
		p.mu.Lock()
		ranFor := now.Sub(p.status.Started)
		p.exitErr = err
		p.status.PID = 0
		p.status.Running = false
		p.status.LastExit = err.Error()
		p.status.LastExitAt = now
		if cmd != nil {
			close(p.runDone)
		}
		again := p.supervised && !p.stopping
		var delay time.Duration
		if again {
			delay = p.cfg.Backoff.Next(ranFor)
			p.status.NextRestart = now.Add(delay)
		}
		restarts := p.status.Restarts
		p.mu.Unlock()
		p.changed()
		if !again {
			p.log.Info("process ended", "err", err, "ran", ranFor.Round(time.Millisecond))
			return
		}
		p.log.Warn("process ended; restarting", "err", err, "ran", ranFor.Round(time.Millisecond), "restarts", restarts, "backoff", delay)
		select {
		case <-p.stop:
			return
		case <-p.cfg.After(delay):
		}
		p.mu.Lock()
		p.status.Restarts++
		restarts = p.status.Restarts
		p.mu.Unlock()
		cmd, startErr = p.startRun()
		if errors.Is(startErr, errStopping) {
			return
		}
		if startErr != nil {
			p.log.Error("process restart failed", "err", startErr, "restarts", restarts)
			cmd = nil
			continue
		}
		p.log.Warn("process restarted", "pid", cmd.Process.Pid, "restarts", restarts)
		p.changed()
	}
}

func (p *Process) changed() {
	if p.cfg.OnChange != nil {
		p.cfg.OnChange()
	}
}

// Stop ends supervision and the current run: SIGTERM, then after grace
// SIGKILL to the run's process group. It returns once the supervising
// goroutine has; a second Stop does nothing.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		<-p.stopped
		return nil
	}
	p.stopping = true
	close(p.stop)
	cmd, running, done := p.cmd, p.status.Running, p.runDone
	p.mu.Unlock()
	if !running {
		<-p.stopped
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("supervise: kill %s: %w", p.cfg.Name, err)
		}
		<-done
	}
	<-p.stopped
	return nil
}
