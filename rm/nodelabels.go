package rm

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/queues"
)

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
