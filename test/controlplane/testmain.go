package controlplane

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs a package's tests against one control plane they share,
// each in a namespace of its own: *shared holds it while they run (nil
// under -short, where none starts). After the control plane stops, a
// goroutine of the package's that outlived the tests fails the run. name
// starts its messages. It exits the process.
func TestMain(m *testing.M, name string, shared **ControlPlane) {
	flag.Parse()
	code := runShared(m, name, shared)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: goroutines outlived the tests: %v\n", name, err)
			code = 1
		}
	}
	os.Exit(code)
}

func runShared(m *testing.M, name string, shared **ControlPlane) int {
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := Start(ctx, Config{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: control plane: %v\n", name, err)
		return 1
	}
	*shared = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stopping the control plane: %v\n", name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
