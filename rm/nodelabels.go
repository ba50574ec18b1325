package rm

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/queues"
)

// labelPartition is one cluster node label and the nodes in its partition.
type labelPartition struct {
	name  string
	nodes []*yarnpb.NodeIdProto // by host, then port
}

// nodeLabelPartitions are the cluster's node labels as YARN's node label
// manager would hold them for Knit's partitions: every label a node of the
// RM carries (its launch.NodeLabelPartition label, NodeInfo.Partition) or
// a queue may use (accessible-node-labels), by name, each with the nodes
// that carry it. The client protocol's node-label queries and the REST API
// answer from it.
func (rm *ResourceManager) nodeLabelPartitions(ctx context.Context) ([]labelPartition, error) {
	nodes, err := rm.nodes(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*labelPartition{}
	add := func(name string) *labelPartition {
		l := byName[name]
		if l == nil {
			l = &labelPartition{name: name}
			byName[name] = l
		}
		return l
	}
	for _, q := range rm.queueTree().Queues() {
		for _, name := range q.AccessibleNodeLabels {
			if name != "" && name != queues.AnyNodeLabel {
				add(name)
			}
		}
	}
	for _, n := range nodes {
		if n.Partition != "" {
			l := add(n.Partition)
			l.nodes = append(l.nodes, &yarnpb.NodeIdProto{Host: proto.String(n.Host), Port: proto.Int32(n.NMPort)})
		}
	}
	out := make([]labelPartition, 0, len(byName))
	for _, l := range byName {
		slices.SortFunc(l.nodes, func(a, b *yarnpb.NodeIdProto) int {
			return cmp.Or(strings.Compare(a.GetHost(), b.GetHost()), cmp.Compare(a.GetPort(), b.GetPort()))
		})
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b labelPartition) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// labelAsk settles the node label expression an ask (normalised, the
// caller's copy) is placed by, as the CapacityScheduler does: its own;
// else, for an ask of any host, the application's
// (ApplicationMasterService), else the queue's default
// (SchedulerUtils.normalizeNodeLabelExpressionInRequest). It refuses an
// expression naming a partition the queue may not use, with YARN's
// InvalidLabelResourceRequestException: admission would never admit its
// pods.
func labelAsk(r *yarnpb.ResourceRequestProto, appLabel string, q *queues.Queue) error {
	if r.NodeLabelExpression == nil && r.GetResourceName() == "*" {
		switch {
		case appLabel != "":
			r.NodeLabelExpression = proto.String(appLabel)
		case q != nil && q.DefaultNodeLabelExpression != "":
			r.NodeLabelExpression = proto.String(q.DefaultNodeLabelExpression)
		}
	}
	return checkLabelAccess(r.GetNodeLabelExpression(), q)
}

// checkLabelAccess is SchedulerUtils.checkQueueLabelExpression with its
// caller's message: every label of the expression must be one the queue
// may use (Queue.CanAccess).
func checkLabelAccess(expr string, q *queues.Queue) error {
	if q == nil {
		return nil
	}
	for _, l := range strings.Split(expr, "&&") {
		l = strings.TrimSpace(l)
		if q.CanAccess(l) {
			continue
		}
		return yarnerr.InvalidLabelResourceRequest.Errorf("Invalid resource request, queue=%s doesn't have permission to access all labels in resource request. labelExpression of resource request=%s. Queue labels=%s",
			q.Name, expr, strings.Join(q.AccessibleNodeLabels, ","))
	}
	return nil
}
