package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/knitdev/knit/cli"
	"github.com/knitdev/knit/cli/logs"
	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// runLogs is `knit logs` (yarn logs), with the RM and configuration found
// as runYarn finds them.
func runLogs(args []string, out, errOut io.Writer) int {
	confDir := clientConfDir()
	addr, err := cli.ResolveRMAddress(confDir)
	if err != nil {
		fmt.Fprintln(errOut, "knit:", err)
		return 1
	}
	conf := hadoopconf.New(hadoopconf.Options{})
	for _, name := range []string{"core-site.xml", "yarn-site.xml"} {
		if err := conf.AddFile(filepath.Join(confDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(errOut, "knit:", err)
			return 1
		}
	}
	user := client.LoginUser(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := ipc.Dial(ctx, addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: user, Errors: yarnerr.FromRemote})
	if err != nil {
		fmt.Fprintf(errOut, "knit: connecting to ResourceManager at %s: %v\n", addr, err)
		return 1
	}
	defer c.Close()
	return logs.Run(ctx, args, out, errOut, logs.Config{
		RM:   yarnrpc.NewApplicationClientProtocolClient(c),
		User: user,
		Conf: func(key string) (string, bool) {
			v, ok, err := conf.Lookup(key)
			return v, ok && err == nil
		},
	})
}
