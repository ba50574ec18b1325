// Command knit-gpg is the global policy generator of a Knit YARN
// Federation (YARN's GlobalPolicyGenerator): every
// yarn.federation.gpg.policy.generator.interval it weighs the active
// sub-clusters by their pending applications and writes each queue's
// policy to the federation store, and, when
// yarn.federation.gpg.subcluster.cleaner.interval-ms is set, marks silent
// sub-clusters LOST. This file wires the pieces with fx; what they do
// lives in federation/.
package main

import (
	"net/http"
	"time"

	"go.uber.org/fx"

	"github.com/knitdev/knit/cmd/internal/fedcmd"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/gpg"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
)

// flags are knit-gpg's command line.
type flags = fedcmd.Flags

func main() { fedcmd.Main("knit-gpg", "yarn.federation.gpg.*", options) }

// options is the whole app: main runs it, and a test checks its graph
// with fx.ValidateApp.
func options(f flags) fx.Option {
	return fx.Options(
		fx.Supply(f),
		fx.Provide(loadSettings, newStore),
		fx.Invoke(runGenerator, runCleaner),
	)
}

// loadSettings reads core-site.xml and yarn-site.xml from the conf dir.
func loadSettings(f flags) (federation.GPGSettings, error) {
	c, err := f.Conf()
	if err != nil {
		return federation.GPGSettings{}, err
	}
	return federation.LoadGPGSettings(c)
}

func newStore(f flags) (*fedstore.Kube, error) { return f.Store() }

// runGenerator runs the policy generator, unless the global policy is
// NoOpGlobalPolicy (YARN's default), which generates nothing.
func runGenerator(run lifecycle.Runner, s *fedstore.Kube, settings federation.GPGSettings) error {
	if settings.PolicyClass == federation.NoOpGlobalPolicy {
		run.Logger.Info("policy generator off: the global policy is NoOpGlobalPolicy", "key", hadoopconf.KeyGPGPolicyClass)
		return nil
	}
	g, err := gpg.New(gpg.Config{
		Store: s,
		// A sub-cluster RM that hangs costs a run its queues, not the run.
		Queues: gpg.RESTQueues{Client: &http.Client{Timeout: 30 * time.Second}},
		Policy: gpg.LoadBased{MinPending: settings.MinPending, MaxPending: settings.MaxPending, MinWeight: settings.MinWeight,
			MaxEdit: settings.MaxEdit, Scaling: settings.Scaling},
		Blacklist: settings.Blacklist,
		Interval:  settings.Interval,
		Logger:    run.Logger.With("component", "policy-generator"),
	})
	if err != nil {
		return err
	}
	run.Background("policy generator", g.Run)
	return nil
}

// runCleaner marks silent sub-clusters LOST with the Router's cleaner,
// on the GPG's settings (YARN's GPG SubClusterCleaner).
func runCleaner(run lifecycle.Runner, s *fedstore.Kube, settings federation.GPGSettings) error {
	if settings.SubClusterCleanerInterval <= 0 {
		return nil
	}
	return fedcmd.RunCleaner(run, s, settings.SubClusterExpiration, settings.SubClusterCleanerInterval)
}
