// Command distshell is Hadoop's DistributedShell in Go: "distshell
// -shell_command CMD [-shell_args ARGS] [-num_containers N] ..." (or
// -shell_script FILE) submits a YARN application whose master
// ("distshell am", this same binary) runs CMD in N containers.
// The logic lives in package dshell.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/knitdev/knit/examples/distshell/dshell"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dshell.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
