// Package launcher is knit-launcher, PID 1 of every YARN container's pod.
// The pod starts before the AM calls startContainers (a pod's spec cannot
// change after creation), so the launcher first waits for its launch
// context, then runs the launch command.
//
// What is built so far is the waiting half: the launch files (written by
// knit-node once RKS has patched the pod) are read from the launch folder
// and the command is run through bash. The NodeManager environment, signal
// forwarding and the termination message come with the RKS issue.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// CommandFile is the launch file holding the container's command, the
// NodeManager's launch_container.sh in one bash string.
const CommandFile = "command"

// Config says where the launch files appear.
type Config struct {
	// Dir is the launch folder; CommandFile appears in it when the
	// container is started.
	Dir string
	// Poll is how often Dir is checked; zero means 100 ms.
	Poll time.Duration
}

// Wait blocks until the command file exists and returns its contents, or
// until ctx ends: a pod that is never started is deleted by the RM.
func Wait(ctx context.Context, cfg Config) (string, error) {
	poll := cfg.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	path := filepath.Join(cfg.Dir, CommandFile)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("launcher: read %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// Run waits for the launch command and runs it through bash, as the
// NodeManager's launch script does, returning its exit code.
func Run(ctx context.Context, cfg Config) (int, error) {
	command, err := Wait(ctx, cfg)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("launcher: run: %w", err)
	}
	return 0, nil
}
