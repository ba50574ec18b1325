package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/knitdev/knit/cli"
	"github.com/knitdev/knit/client"
)

// runYarn is the yarn-style commands (`knit application -list`, `knit
// rmadmin -refreshQueues` …). The RM is found as a Hadoop client finds it:
// $HADOOP_CONF_DIR/yarn-site.xml, or else the local cluster's hadoop-conf/,
// and the user is $HADOOP_USER_NAME or the login user, as with SIMPLE
// authentication.
func runYarn(args []string, out, errOut io.Writer) int {
	confDir := clientConfDir()
	addr, err := cli.ResolveRMAddress(confDir)
	if err != nil {
		io.WriteString(errOut, "knit: "+err.Error()+"\n")
		return 1
	}
	admin, err := cli.ResolveRMAdminAddress(confDir)
	if err != nil {
		io.WriteString(errOut, "knit: "+err.Error()+"\n")
		return 1
	}
	user := client.LoginUser(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Run(ctx, args, out, errOut, cli.Config{RMAddress: addr, AdminAddress: admin, User: user, ConfDir: confDir})
}

// clientConfDir is the Hadoop configuration folder of the yarn-style
// commands: $HADOOP_CONF_DIR, else the local cluster's hadoop-conf/.
func clientConfDir() string {
	if dir := os.Getenv("HADOOP_CONF_DIR"); dir != "" {
		return dir
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".knit", "local", "hadoop-conf")
	}
	return ""
}
