// Command knit-launcher is the entrypoint of every YARN container's pod: it
// waits for the container's launch files, runs the launch command as a
// NodeManager would and exits with its status. See daemonsets/launcher.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"

	"github.com/knitdev/knit/daemonsets/launcher"
	"github.com/knitdev/knit/rks/launch"
)

func main() {
	cfg := launcher.Config{
		PodUID: os.Getenv(launch.EnvPodUID),
		// PID 1 inherits every orphan of the container and must reap it.
		Reap: os.Getpid() == 1,
	}
	flag.StringVar(&cfg.LaunchDir, "launch-dir", "/knit/launch", "folder holding <pod uid>/"+launch.FilesName)
	// A flag, not a constant: the process node only translates paths it
	// finds in the arguments.
	flag.StringVar(&cfg.TerminationLog, "termination-log", "/dev/termination-log", "file the termination message is written to")
	flag.DurationVar(&cfg.KillDelay, "kill-delay", launcher.DefaultKillDelay, "delay between SIGTERM and SIGKILL when the container is stopped (yarn.nodemanager.sleep-delay-before-sigkill.ms); 0 sends SIGKILL at once")
	flag.Parse()

	// One channel for the whole life of the process: Run ends its wait on
	// a SIGTERM from it and forwards it once the container runs, so a
	// signal is neither lost nor delivered twice between the two.
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, launcher.Signals()...)
	os.Exit(launcher.Run(context.Background(), cfg, signals))
}
