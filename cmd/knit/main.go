// Command knit is Knit's command-line tool: yarn's application, attempt,
// container, node, queue and rmadmin commands, and `knit local` for the
// embedded single-machine cluster.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/knitdev/knit/test/procnode"
)

const usage = `usage:
  knit application|applicationattempt|container|node|queue ...  as yarn (knit application -help)
  knit rmadmin -refreshQueues|-refreshAdminAcls|...    as yarn rmadmin (knit rmadmin -help)
  knit logs -applicationId ID [-containerId ID] [-log_files F,...] [-size N]   as yarn logs
  knit shell [-t] [-T] CONTAINER_ID [-- COMMAND ...]   a terminal, or one command, in a running container
  knit local up [--nodes N] [--dir DIR] [--subclusters N]   start the local cluster in the background
  knit local status [--dir DIR]           show it
  knit local down [--dir DIR]             stop it
  knit local run [--nodes N] [--dir DIR]  run it in the foreground`

func main() {
	// Pods on process nodes run under a shim that is this same binary.
	procnode.RunShimIfRequested()
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "knit:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	switch args[0] {
	case "application", "app", "applicationattempt", "container", "node", "queue", "rmadmin":
		if code := runYarn(args, out, os.Stderr); code != 0 {
			os.Exit(code)
		}
		return nil
	case "logs":
		if code := runLogs(args[1:], out, os.Stderr); code != 0 {
			os.Exit(code)
		}
		return nil
	case "shell":
		if code := runShell(args[1:]); code != 0 {
			os.Exit(code)
		}
		return nil
	case "local":
		return runLocal(args[1:], out)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}
