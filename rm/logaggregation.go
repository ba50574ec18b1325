package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// logAggregationNodes is what the RM reads of the nodes' log aggregation:
// the node a NodeId host is, and the statuses knit-node publishes on it
// (rgs/nodes.Lister; a NodeLister without it leaves reports at NOT_START
// and then TIME_OUT).
type logAggregationNodes interface {
	NodeName(host string) (string, bool)
	LogAggregation(nodeName string) map[string]string
}

// setLogAggregationStatus fills the report's LogAggregationStatus, where
// Report set one (a caller with access, an attempt), as RMAppImpl does for
// its nodes: DISABLED without yarn.log-aggregation-enable; NOT_START while
// the application runs; once it has ended, SUCCEEDED when every node it
// ran on has stored its logs, FAILED when one failed to, RUNNING until
// then and TIME_OUT after yarn.log-aggregation-status.time-out.ms. The
// caller holds e.mu.
func (rm *ResourceManager) setLogAggregationStatus(ctx context.Context, e *entry, r *yarnpb.ApplicationReportProto) {
	if r.LogAggregationStatus == nil || !rm.cfg.Settings.LogAggregationEnable {
		return
	}
	status := rm.logAggregationStatus(ctx, e)
	r.LogAggregationStatus = status.Enum()
}

func (rm *ResourceManager) logAggregationStatus(ctx context.Context, e *entry) yarnpb.LogAggregationStatusProto {
	if !e.app.State().Final() {
		return yarnpb.LogAggregationStatusProto_LOG_NOT_START
	}
	timedOut := rm.now().Sub(e.app.FinishTime()) > rm.cfg.Settings.LogAggregationStatusTimeout
	ln, ok := rm.cfg.Nodes.(logAggregationNodes)
	if !ok {
		if timedOut {
			return yarnpb.LogAggregationStatusProto_LOG_TIME_OUT
		}
		return yarnpb.LogAggregationStatusProto_LOG_NOT_START
	}
	// The application's status on each node it ran on; after an RM
	// restart, when its containers are no longer known, on every node that
	// reports it. Each host is resolved, and each node's statuses decoded,
	// once per report.
	app := e.app.ID().String()
	statuses := map[string]string{} // node name → status ("" if none yet)
	hosts := map[string]bool{}
	for _, c := range e.app.Containers() {
		host := c.Node().GetHost()
		if hosts[host] {
			continue
		}
		hosts[host] = true
		if n, ok := ln.NodeName(host); ok {
			if _, seen := statuses[n]; !seen {
				statuses[n] = ln.LogAggregation(n)[app]
			}
		}
	}
	if len(statuses) == 0 && rm.cfg.Nodes != nil {
		if all, err := rm.cfg.Nodes.Nodes(ctx); err == nil {
			for _, n := range all {
				if st, ok := ln.LogAggregation(n.Name)[app]; ok {
					statuses[n.Name] = st
				}
			}
		}
	}
	succeeded, failed := 0, false
	for _, st := range statuses {
		switch st {
		case "SUCCEEDED":
			succeeded++
		case "FAILED":
			failed = true
		}
	}
	switch {
	case len(statuses) > 0 && succeeded == len(statuses):
		return yarnpb.LogAggregationStatusProto_LOG_SUCCEEDED
	case failed:
		return yarnpb.LogAggregationStatusProto_LOG_FAILED
	case timedOut:
		return yarnpb.LogAggregationStatusProto_LOG_TIME_OUT
	}
	return yarnpb.LogAggregationStatusProto_LOG_RUNNING
}
