// Command knit-launcher is the entrypoint of every YARN container's pod: it
// waits for the container's launch command and runs it. See
// daemonsets/launcher.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/knitdev/knit/daemonsets/launcher"
)

func main() {
	var cfg launcher.Config
	flag.StringVar(&cfg.Dir, "launch-dir", "/knit/launch", "folder the launch files appear in")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code, err := launcher.Run(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			os.Exit(143) // ended by SIGTERM before its command came: 128+15
		}
		fmt.Fprintln(os.Stderr, "knit-launcher:", err)
		os.Exit(1)
	}
	os.Exit(code)
}
