package main

import (
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/daemonsets/logs/retention"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm"
)

// runLogRetention deletes aggregated logs past
// yarn.log-aggregation.retain-seconds, when that is set, as YARN's
// AggregatedLogDeletionService does. It takes the RM so that it starts
// after recovery: before it, every application is unknown, and unknown
// means ended.
func runLogRetention(run lifecycle.Runner, c *hadoopconf.Configuration, r *rm.ResourceManager) error {
	s, err := retention.SettingsFromHadoop(c)
	if err != nil || !s.Enabled {
		return err
	}
	stores, err := retention.Stores(s, c)
	if err != nil {
		// As knit-node, which then writes nothing there either: a remote
		// log dir Knit cannot reach does not keep the RM from starting.
		run.Logger.Error("aggregated logs will not be deleted", "err", err)
		return nil
	}
	svc, err := retention.New(retention.Config{Settings: s, Stores: stores, Apps: r, Logger: run.Logger.With("component", "log-retention")})
	if err != nil {
		return err
	}
	run.Background("aggregated log deletion", svc.Run)
	return nil
}
