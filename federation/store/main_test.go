package store

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/knitdev/knit/test/controlplane"
)

// testCluster is the control plane the Kube tests share, each in a
// namespace of its own; nil under -short.
var testCluster *controlplane.ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	code := runTests(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "federation store: goroutines outlived the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runTests(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "federation store: control plane:", err)
		return 1
	}
	testCluster = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "federation store: stopping the control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
