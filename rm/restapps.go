package rm

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/rest"
)

// The REST resources that change an application or read its attempts and
// containers call the client protocol's methods as the REST caller, as
// RMWebServices calls ClientRMService in the caller's doAs: one
// implementation, one set of checks and messages for RPC and REST.

func (c *restCluster) UpdatePriority(ctx context.Context, user, id string, priority int32) (int32, error) {
	p, err := parseAppID(id)
	if err != nil {
		return 0, err
	}
	resp, err := c.rm.UpdateApplicationPriority(as(ctx, user), &yarnpb.UpdateApplicationPriorityRequestProto{
		ApplicationId: p, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
	})
	if err != nil {
		return 0, err
	}
	return resp.GetApplicationPriority().GetPriority(), nil
}

func (c *restCluster) Move(ctx context.Context, user, id, queue string) error {
	p, err := parseAppID(id)
	if err != nil {
		return err
	}
	_, err = c.rm.MoveApplicationAcrossQueues(as(ctx, user), &yarnpb.MoveApplicationAcrossQueuesRequestProto{
		ApplicationId: p, TargetQueue: proto.String(queue),
	})
	return err
}

func (c *restCluster) UpdateTimeout(ctx context.Context, user, id, timeoutType, expiry string) error {
	p, err := parseAppID(id)
	if err != nil {
		return err
	}
	v, ok := yarnpb.ApplicationTimeoutTypeProto_value["APP_TIMEOUT_"+timeoutType]
	if !ok {
		return yarnerr.IllegalArgument.Errorf("No enum constant org.apache.hadoop.yarn.api.records.ApplicationTimeoutType.%s", timeoutType)
	}
	_, err = c.rm.UpdateApplicationTimeouts(as(ctx, user), &yarnpb.UpdateApplicationTimeoutsRequestProto{
		ApplicationId: p,
		ApplicationTimeouts: []*yarnpb.ApplicationUpdateTimeoutMapProto{{
			ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto(v).Enum(), ExpireTime: proto.String(expiry),
		}},
	})
	return err
}

func (c *restCluster) Attempt(ctx context.Context, user, attemptID string) (*yarnpb.ApplicationAttemptReportProto, error) {
	aid, err := yarnid.ParseAttemptID(attemptID)
	if err != nil {
		return nil, yarnerr.IllegalArgument.Errorf("Invalid AppAttemptId: %s", attemptID)
	}
	resp, err := c.rm.GetApplicationAttemptReport(as(ctx, user), &yarnpb.GetApplicationAttemptReportRequestProto{ApplicationAttemptId: aid.Proto()})
	if err != nil {
		return nil, err
	}
	return resp.GetApplicationAttemptReport(), nil
}

func (c *restCluster) Containers(ctx context.Context, user, attemptID string) ([]*yarnpb.ContainerReportProto, error) {
	aid, err := yarnid.ParseAttemptID(attemptID)
	if err != nil {
		return nil, yarnerr.IllegalArgument.Errorf("Invalid AppAttemptId: %s", attemptID)
	}
	resp, err := c.rm.GetContainers(as(ctx, user), &yarnpb.GetContainersRequestProto{ApplicationAttemptId: aid.Proto()})
	if err != nil {
		return nil, err
	}
	return resp.GetContainers(), nil
}

func (c *restCluster) Container(ctx context.Context, user, containerID string) (*yarnpb.ContainerReportProto, error) {
	cid, err := yarnid.ParseContainerID(containerID)
	if err != nil {
		return nil, yarnerr.IllegalArgument.Errorf("Invalid ContainerId: %s", containerID)
	}
	resp, err := c.rm.GetContainerReport(as(ctx, user), &yarnpb.GetContainerReportRequestProto{ContainerId: cid.Proto()})
	if err != nil {
		return nil, err
	}
	return resp.GetContainerReport(), nil
}

// CountApps counts as RMWebServices.getAppStatistics does, over every
// application the RM holds: its state as a client sees it, its type
// trimmed and in lower case. Like YARN it looks at each application; the
// queue usage index keeps no counts by type.
func (c *restCluster) CountApps(_ context.Context, q rest.StatsQuery) (map[yarnpb.YarnApplicationStateProto]int64, error) {
	want := map[yarnpb.YarnApplicationStateProto]bool{}
	for _, s := range q.States {
		want[s] = true
	}
	out := map[yarnpb.YarnApplicationStateProto]int64{}
	for _, e := range c.rm.snapshot() {
		e.mu.Lock()
		st, typ := e.app.ClientState(), e.app.Type()
		e.mu.Unlock()
		if want[st] && (q.Type == rest.AnyType || strings.ToLower(strings.TrimSpace(typ)) == q.Type) {
			out[st]++
		}
	}
	return out, nil
}

// NodeLabels answers as the client protocol's getClusterNodeLabels and
// getLabelsToNodes do, whose answers it joins.
func (c *restCluster) NodeLabels(ctx context.Context) ([]rest.NodeLabel, error) {
	ctx = internal(ctx)
	labels, err := c.rm.GetClusterNodeLabels(ctx, &yarnpb.GetClusterNodeLabelsRequestProto{})
	if err != nil {
		return nil, err
	}
	nodes, err := c.rm.GetLabelsToNodes(ctx, &yarnpb.GetLabelsToNodesRequestProto{})
	if err != nil {
		return nil, err
	}
	out := make([]rest.NodeLabel, 0, len(labels.GetNodeLabels()))
	for _, l := range labels.GetNodeLabels() {
		nl := rest.NodeLabel{Name: l.GetName(), Exclusive: l.GetIsExclusive()}
		for _, m := range nodes.GetLabelsToNodes() {
			if m.GetNodeLabels() == nl.Name {
				for _, n := range m.GetNodeId() {
					nl.Nodes = append(nl.Nodes, yarnid.NodeString(n))
				}
			}
		}
		out = append(out, nl)
	}
	return out, nil
}
