package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/metrics"
)

// MetricsSnapshot is the RM's state as the Hadoop metrics need it: nodes,
// the queue tree, and every application it holds with its live resources.
// Pending pods are RGS's to add.
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
	for _, e := range rm.snapshot() {
		e.mu.Lock()
		a := metrics.App{Queue: e.app.Queue(), User: e.app.User(), State: e.app.ClientState(), Unmanaged: e.app.Unmanaged()}
		// An application with no containers yet (one waiting for its AM,
		// as most of a busy queue's are) has no live use to count, and
		// LiveUsage would build a report to say so.
		if !e.app.State().Final() && len(e.app.Containers()) > 0 {
			u := e.app.LiveUsage()
			if u.GetNumUsedContainers() > 0 {
				a.UsedContainers = int64(u.GetNumUsedContainers())
				a.UsedMB, a.UsedVCores = u.GetUsedResources().GetMemory(), int64(u.GetUsedResources().GetVirtualCores())
			}
			if u.GetNumReservedContainers() > 0 {
				a.ReservedContainers = int64(u.GetNumReservedContainers())
				a.ReservedMB, a.ReservedVCores = u.GetReservedResources().GetMemory(), int64(u.GetReservedResources().GetVirtualCores())
			}
			if t := e.app.CurrentAttempt(); t != nil && a.State == yarnpb.YarnApplicationStateProto_RUNNING {
				if c := t.AMContainer(); c != nil {
					a.AMUsedMB, a.AMUsedVCores = c.GetResource().GetMemory(), int64(c.GetResource().GetVirtualCores())
				}
			}
		}
		e.mu.Unlock()
		s.Apps = append(s.Apps, a)
	}
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
