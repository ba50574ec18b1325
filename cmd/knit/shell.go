package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/knitdev/knit/cli/shell"
	"github.com/knitdev/knit/client"
)

// runShell is `knit shell`, to the RM web address of the client's
// configuration folder as the caller runYarn would call as.
func runShell(args []string) int {
	addr, err := shell.ResolveRMWebAddress(clientConfDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "knit:", err)
		return 1
	}
	// In raw mode Ctrl-C is a byte for the container; SIGTERM or a
	// signal from elsewhere ends the session.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return shell.Run(ctx, args, shell.Config{
		RMWeb: addr, User: client.LoginUser(os.Getenv),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
	})
}
