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
	"testing"
	"time"

	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/procnode"
)

// cluster is the one local cluster every test in this package shares;
// each test works in a namespace of its own.
var cluster *localcluster.Cluster

const clusterNodes = 3

func TestMain(m *testing.M) {
	procnode.RunShimIfRequested()
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		Nodes:  clusterNodes,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: local cluster:", err)
		return 1
	}
	cluster = c
	code := m.Run()
	if err := c.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "integration: stopping the local cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
