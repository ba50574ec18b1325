package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rm/metrics"
)

// MetricsSnapshot is the RM's state as the Hadoop metrics need it: nodes,
// the queue tree, and the applications it holds with their live resources,
// added up per queue and user. Pending pods are RGS's to add.
func (rm *ResourceManager) MetricsSnapshot(ctx context.Context) (metrics.Snapshot, error) {
	var s metrics.Snapshot
	nodes, err := rm.nodes(ctx)
	if err != nil {
		return s, err
	}
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, metrics.Node{
			State: n.State, CapabilityMB: n.CapabilityMB, UsedMB: n.UsedMB,
			CapabilityVCores: int64(n.CapabilityVcores), UsedVCores: int64(n.UsedVcores),
		})
	}
	for _, q := range rm.queueTree().Queues() {
		s.Queues = append(s.Queues, metrics.Queue{
			Path: q.Path, Capacity: float64(q.Capacity), MaximumCapacity: float64(q.MaximumCapacity),
			AbsoluteCapacity: float64(q.AbsoluteCapacity), AbsoluteMaxCapacity: float64(q.AbsoluteMaximumCapacity),
			MaxAMResourcePercent: float64(q.MaxAMResourcePercent),
		})
	}
	// The applications added up per queue and user, from the queue usage
	// index: a scrape costs the same at any number of applications.
	s.Sums = rm.usage.metricSums()
	return s, nil
}

// ApplicationOwner is the queue and user of an application the RM holds.
func (rm *ResourceManager) ApplicationOwner(_ context.Context, id yarnid.ApplicationID) (queue, user string, ok bool) {
	e := rm.lookup(id)
	if e == nil {
		return "", "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.app.Queue(), e.app.User(), true
}
