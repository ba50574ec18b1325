// Package integration holds the tests that need a real control plane and
// process nodes: the local cluster itself, and (as they come) Knit's
// services running on it.
package integration

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/procnode"
)

// cluster is the one local cluster every test in this package shares;
// each test works in a namespace of its own.
var cluster *localcluster.Cluster

// binDir holds knit and knit-rm once knitBinaries has built them.
var binDir string

// knitBinaries builds knit, knit-rm and knit-launcher side by side, as `make local` does
// (so that `knit local up` starts knit-rm), once for the package.
var knitBinaries = sync.OnceValue(func() error {
	out, err := exec.Command("go", "build", "-o", binDir+"/", "github.com/knitdev/knit/cmd/knit", "github.com/knitdev/knit/cmd/knit-rm", "github.com/knitdev/knit/cmd/knit-launcher", "github.com/knitdev/knit/cmd/knit-node", "github.com/knitdev/knit/examples/distshell").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
})

const clusterNodes = 3

func TestMain(m *testing.M) {
	procnode.RunShimIfRequested()
	flag.Parse()
	os.Exit(runTests(m))
}

// clusterLogger is the local clusters' logger: warnings, and everything
// under -v.
func clusterLogger() *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{
		Nodes:  clusterNodes,
		Logger: clusterLogger(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: local cluster:", err)
		return 1
	}
	cluster = c
	if binDir, err = os.MkdirTemp("", "knit-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	code := m.Run()
	if err := c.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "integration: stopping the local cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
