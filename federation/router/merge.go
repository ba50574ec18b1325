package router

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// The names RouterYarnClientUtils gives reports of unmanaged AMs that the
// AMRMProxy runs in secondary sub-clusters (UnmanagedApplicationManager.APP_NAME)
// and to their merged sums.
const (
	uamAppName    = "UnmanagedAM"
	partialReport = "Partial Report "
)

// fanOut calls every active sub-cluster at once and returns the answers
// in the order of the sub-clusters' ids. A sub-cluster that fails is left
// out, as FederationClientInterceptor.invokeConcurrent leaves it, unless
// strict (getClusterNodes, which YARN fails on any sub-cluster's failure)
// or every one failed.
func fanOut[Resp proto.Message](ctx context.Context, r *Router, what string, strict bool, call func(context.Context, *yarnrpc.ApplicationClientProtocolClient) (Resp, error)) ([]Resp, error) {
	active, err := r.store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, wrapped(err, "Unable to get the active SubClusters from the FederationStateStore.")
	}
	answers := make([]struct {
		resp Resp
		err  error
	}, len(active))
	var wg sync.WaitGroup
	for i, sc := range active {
		wg.Go(func() {
			answers[i].err = r.call(ctx, sc, func(rm *ipc.Client) (err error) {
				answers[i].resp, err = call(ctx, acp(rm))
				return err
			})
		})
	}
	wg.Wait()
	var out []Resp
	var first error
	for i, a := range answers {
		if a.err == nil {
			out = append(out, a.resp)
			continue
		}
		if strict {
			return nil, wrapped(a.err, "Unable to %s due to exception.", what)
		}
		r.log.WarnContext(ctx, "a sub-cluster failed a call the Router fans out", "call", what, "subCluster", active[i].ID, "err", a.err)
		if first == nil {
			first = a.err
		}
	}
	if len(out) == 0 && first != nil {
		if same := sameAnswer(answers[0].err, answers); same != nil {
			return nil, same
		}
		return nil, wrapped(first, "Unable to %s due to exception.", what)
	}
	return out, nil
}

// sameAnswer is the exception every sub-cluster answered, when they all
// answered one of the same class (resource profiles off everywhere: a
// YARNFeatureNotEnabledException, which a client such as DistributedShell
// expects and handles): the federation answers as each of its RMs does.
// Nil when the answers differ or one is no RM's answer.
func sameAnswer[Resp any](first error, answers []struct {
	resp Resp
	err  error
}) error {
	want, ok := yarnerr.Find(first)
	if !ok {
		return nil
	}
	for _, a := range answers {
		got, ok := yarnerr.Find(a.err)
		if !ok || got.Class != want.Class {
			return nil
		}
	}
	return want
}

// GetApplications lists the applications of every active sub-cluster.
func (r *Router) GetApplications(ctx context.Context, req *yarnpb.GetApplicationsRequestProto) (*yarnpb.GetApplicationsResponseProto, error) {
	resps, err := fanOut(ctx, r, "get applications", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetApplicationsResponseProto, error) {
		return c.GetApplications(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return mergeApplications(resps), nil
}

// mergeApplications merges the reports by application, as
// RouterYarnClientUtils.mergeApplications does with partial results off:
// an unmanaged AM's report (a secondary sub-cluster's share of an
// application) adds its resource usage to the managed report of the same
// application; unmanaged reports without one are kept only if they are
// no AMRMProxy's (named UnmanagedAM or Partial Report).
func mergeApplications(resps []*yarnpb.GetApplicationsResponseProto) *yarnpb.GetApplicationsResponseProto {
	var order []string
	ams := map[string]*yarnpb.ApplicationReportProto{}
	uams := map[string]*yarnpb.ApplicationReportProto{}
	for _, resp := range resps {
		for _, rep := range resp.GetApplications() {
			key := appKey(rep.GetApplicationId())
			if _, seen := ams[key]; !seen {
				if _, seen := uams[key]; !seen {
					order = append(order, key)
				}
			}
			switch {
			case !rep.GetUnmanagedApplication():
				ams[key] = rep
				if uam, ok := uams[key]; ok {
					addUsage(rep, uam)
					delete(uams, key)
				}
			case ams[key] != nil:
				addUsage(ams[key], rep)
			case uams[key] != nil:
				sum := uams[key]
				sum.Name = proto.String(partialReport + key)
				addUsage(sum, rep)
			default:
				uams[key] = rep
			}
		}
	}
	out := &yarnpb.GetApplicationsResponseProto{}
	for _, key := range order {
		if am, ok := ams[key]; ok {
			out.Applications = append(out.Applications, am)
		} else if uam, ok := uams[key]; ok && uam.Name != nil && !strings.HasPrefix(uam.GetName(), uamAppName) && !strings.HasPrefix(uam.GetName(), partialReport) {
			out.Applications = append(out.Applications, uam)
		}
	}
	return out
}

func appKey(id *yarnpb.ApplicationIdProto) string {
	a, err := yarnid.ApplicationIDFromProto(id)
	if err != nil {
		return ""
	}
	return a.String()
}

// addUsage adds uam's resource usage to am's (mergeAMWithUAM).
func addUsage(am, uam *yarnpb.ApplicationReportProto) {
	u := uam.GetAppResource_Usage()
	if u == nil {
		return
	}
	a := am.GetAppResource_Usage()
	if a == nil {
		am.AppResource_Usage = u
		return
	}
	a.NumUsedContainers = proto.Int32(a.GetNumUsedContainers() + u.GetNumUsedContainers())
	a.NumReservedContainers = proto.Int32(a.GetNumReservedContainers() + u.GetNumReservedContainers())
	a.UsedResources = addResources(a.GetUsedResources(), u.GetUsedResources())
	a.ReservedResources = addResources(a.GetReservedResources(), u.GetReservedResources())
	a.NeededResources = addResources(a.GetNeededResources(), u.GetNeededResources())
	a.MemorySeconds = proto.Int64(a.GetMemorySeconds() + u.GetMemorySeconds())
	a.VcoreSeconds = proto.Int64(a.GetVcoreSeconds() + u.GetVcoreSeconds())
	a.QueueUsagePercentage = proto.Float32(a.GetQueueUsagePercentage() + u.GetQueueUsagePercentage())
	a.ClusterUsagePercentage = proto.Float32(a.GetClusterUsagePercentage() + u.GetClusterUsagePercentage())
}

// addResources is Resources.add over memory and vcores.
func addResources(a, b *yarnpb.ResourceProto) *yarnpb.ResourceProto {
	am, av := yarnpb.MemoryAndVcores(a)
	bm, bv := yarnpb.MemoryAndVcores(b)
	return yarnpb.NewResource(am+bm, av+bv)
}

// GetClusterMetrics sums every active sub-cluster's node counts.
func (r *Router) GetClusterMetrics(ctx context.Context, req *yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
	resps, err := fanOut(ctx, r, "get cluster metrics", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetClusterMetricsResponseProto, error) {
		return c.GetClusterMetrics(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return mergeClusterMetrics(resps), nil
}

func mergeClusterMetrics(resps []*yarnpb.GetClusterMetricsResponseProto) *yarnpb.GetClusterMetricsResponseProto {
	var sum [8]int32
	for _, resp := range resps {
		m := resp.GetClusterMetrics()
		for i, v := range []int32{m.GetNumNodeManagers(), m.GetNumDecommissionedNms(), m.GetNumActiveNms(), m.GetNumLostNms(),
			m.GetNumUnhealthyNms(), m.GetNumRebootedNms(), m.GetNumDecommissioningNms(), m.GetNumShutdownNms()} {
			sum[i] += v
		}
	}
	return &yarnpb.GetClusterMetricsResponseProto{ClusterMetrics: &yarnpb.YarnClusterMetricsProto{
		NumNodeManagers: proto.Int32(sum[0]), NumDecommissionedNms: proto.Int32(sum[1]), NumActiveNms: proto.Int32(sum[2]),
		NumLostNms: proto.Int32(sum[3]), NumUnhealthyNms: proto.Int32(sum[4]), NumRebootedNms: proto.Int32(sum[5]),
		NumDecommissioningNms: proto.Int32(sum[6]), NumShutdownNms: proto.Int32(sum[7]),
	}}
}

// GetClusterNodes lists every active sub-cluster's nodes; one failing
// fails the call, as in YARN's Router.
func (r *Router) GetClusterNodes(ctx context.Context, req *yarnpb.GetClusterNodesRequestProto) (*yarnpb.GetClusterNodesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get cluster nodes", true, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetClusterNodesResponseProto, error) {
		return c.GetClusterNodes(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetClusterNodesResponseProto{}
	for _, resp := range resps {
		out.NodeReports = append(out.NodeReports, resp.GetNodeReports()...)
	}
	return out, nil
}

// GetQueueInfo merges the queue of every active sub-cluster.
func (r *Router) GetQueueInfo(ctx context.Context, req *yarnpb.GetQueueInfoRequestProto) (*yarnpb.GetQueueInfoResponseProto, error) {
	resps, err := fanOut(ctx, r, "get queue ["+req.GetQueueName()+"]", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetQueueInfoResponseProto, error) {
		return c.GetQueueInfo(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return mergeQueues(resps), nil
}

// mergeQueues adds up the capacities of the sub-clusters' queues of one
// name and gathers their children and applications (mergeQueues).
func mergeQueues(resps []*yarnpb.GetQueueInfoResponseProto) *yarnpb.GetQueueInfoResponseProto {
	var q *yarnpb.QueueInfoProto
	for _, resp := range resps {
		o := resp.GetQueueInfo()
		if o == nil {
			continue
		}
		if q == nil {
			q = o
			continue
		}
		q.Capacity = proto.Float32(q.GetCapacity() + o.GetCapacity())
		q.MaximumCapacity = proto.Float32(q.GetMaximumCapacity() + o.GetMaximumCapacity())
		q.CurrentCapacity = proto.Float32(q.GetCurrentCapacity() + o.GetCurrentCapacity())
		q.ChildQueues = append(q.ChildQueues, o.GetChildQueues()...)
		q.Applications = append(q.Applications, o.GetApplications()...)
	}
	return &yarnpb.GetQueueInfoResponseProto{QueueInfo: q}
}

// GetQueueUserAcls gathers the distinct queue ACLs of every active
// sub-cluster.
func (r *Router) GetQueueUserAcls(ctx context.Context, req *yarnpb.GetQueueUserAclsInfoRequestProto) (*yarnpb.GetQueueUserAclsInfoResponseProto, error) {
	resps, err := fanOut(ctx, r, "get queue user acls", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetQueueUserAclsInfoResponseProto, error) {
		return c.GetQueueUserAcls(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetQueueUserAclsInfoResponseProto{}
	for _, resp := range resps {
		out.QueueUserAcls = appendDistinct(out.QueueUserAcls, resp.GetQueueUserAcls())
	}
	return out, nil
}

// GetResourceTypeInfo gathers the distinct resource types of every active
// sub-cluster.
func (r *Router) GetResourceTypeInfo(ctx context.Context, req *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
	resps, err := fanOut(ctx, r, "get resource type info", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
		return c.GetResourceTypeInfo(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetAllResourceTypeInfoResponseProto{}
	for _, resp := range resps {
		out.ResourceTypeInfo = appendDistinct(out.ResourceTypeInfo, resp.GetResourceTypeInfo())
	}
	return out, nil
}

// appendDistinct appends the records of more that dst holds no equal of,
// as the Java merges gather them in a HashSet.
func appendDistinct[M proto.Message](dst, more []M) []M {
next:
	for _, m := range more {
		for _, d := range dst {
			if proto.Equal(d, m) {
				continue next
			}
		}
		dst = append(dst, m)
	}
	return dst
}

// GetResourceProfiles gathers the resource profiles of every active
// sub-cluster, the first sub-cluster's profile winning a name.
func (r *Router) GetResourceProfiles(ctx context.Context, req *yarnpb.GetAllResourceProfilesRequestProto) (*yarnpb.GetAllResourceProfilesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get resource profiles", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetAllResourceProfilesResponseProto, error) {
		return c.GetResourceProfiles(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.ResourceProfilesProto{}
	seen := map[string]bool{}
	for _, resp := range resps {
		for _, e := range resp.GetResourceProfiles().GetResourceProfilesMap() {
			if !seen[e.GetName()] {
				seen[e.GetName()] = true
				out.ResourceProfilesMap = append(out.ResourceProfilesMap, e)
			}
		}
	}
	return &yarnpb.GetAllResourceProfilesResponseProto{ResourceProfiles: out}, nil
}

// GetResourceProfile answers the first active sub-cluster's profile of
// the name.
func (r *Router) GetResourceProfile(ctx context.Context, req *yarnpb.GetResourceProfileRequestProto) (*yarnpb.GetResourceProfileResponseProto, error) {
	resps, err := fanOut(ctx, r, "get resource profile", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetResourceProfileResponseProto, error) {
		return c.GetResourceProfile(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	if len(resps) == 0 {
		return nil, yarnerr.YarnException.New(NoActiveSubCluster)
	}
	return resps[0], nil
}

// GetClusterNodeLabels gathers the distinct node labels of every active
// sub-cluster.
func (r *Router) GetClusterNodeLabels(ctx context.Context, req *yarnpb.GetClusterNodeLabelsRequestProto) (*yarnpb.GetClusterNodeLabelsResponseProto, error) {
	resps, err := fanOut(ctx, r, "get cluster node labels", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetClusterNodeLabelsResponseProto, error) {
		return c.GetClusterNodeLabels(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetClusterNodeLabelsResponseProto{}
	for _, resp := range resps {
		out.NodeLabels = appendDistinct(out.NodeLabels, resp.GetNodeLabels())
		for _, l := range resp.GetDeprecatedNodeLabels() {
			if !slices.Contains(out.DeprecatedNodeLabels, l) {
				out.DeprecatedNodeLabels = append(out.DeprecatedNodeLabels, l)
			}
		}
	}
	return out, nil
}

// GetNodeToLabels gathers every active sub-cluster's nodes' labels; the
// sub-clusters' nodes are their own, so the entries are put together.
func (r *Router) GetNodeToLabels(ctx context.Context, req *yarnpb.GetNodesToLabelsRequestProto) (*yarnpb.GetNodesToLabelsResponseProto, error) {
	resps, err := fanOut(ctx, r, "get node to labels", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetNodesToLabelsResponseProto, error) {
		return c.GetNodeToLabels(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetNodesToLabelsResponseProto{}
	for _, resp := range resps {
		out.NodeToLabels = append(out.NodeToLabels, resp.GetNodeToLabels()...)
	}
	return out, nil
}

// GetLabelsToNodes gathers, per label, the nodes of every active
// sub-cluster that carry it (mergeLabelsToNodes).
func (r *Router) GetLabelsToNodes(ctx context.Context, req *yarnpb.GetLabelsToNodesRequestProto) (*yarnpb.GetLabelsToNodesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get labels to nodes", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetLabelsToNodesResponseProto, error) {
		return c.GetLabelsToNodes(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetLabelsToNodesResponseProto{}
	byLabel := map[string]*yarnpb.LabelsToNodeIdsProto{}
	for _, resp := range resps {
		for _, e := range resp.GetLabelsToNodes() {
			m, ok := byLabel[e.GetNodeLabels()]
			if !ok {
				m = &yarnpb.LabelsToNodeIdsProto{NodeLabels: e.NodeLabels}
				byLabel[e.GetNodeLabels()] = m
				out.LabelsToNodes = append(out.LabelsToNodes, m)
			}
			m.NodeId = appendDistinct(m.NodeId, e.GetNodeId())
		}
	}
	return out, nil
}

// GetClusterNodeAttributes gathers the distinct node attributes of every
// active sub-cluster.
func (r *Router) GetClusterNodeAttributes(ctx context.Context, req *yarnpb.GetClusterNodeAttributesRequestProto) (*yarnpb.GetClusterNodeAttributesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get cluster node attributes", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetClusterNodeAttributesResponseProto, error) {
		return c.GetClusterNodeAttributes(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetClusterNodeAttributesResponseProto{}
	for _, resp := range resps {
		out.NodeAttributes = appendDistinct(out.NodeAttributes, resp.GetNodeAttributes())
	}
	return out, nil
}

// GetAttributesToNodes gathers, per attribute, the nodes of every active
// sub-cluster that carry it.
func (r *Router) GetAttributesToNodes(ctx context.Context, req *yarnpb.GetAttributesToNodesRequestProto) (*yarnpb.GetAttributesToNodesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get attributes to nodes", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetAttributesToNodesResponseProto, error) {
		return c.GetAttributesToNodes(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetAttributesToNodesResponseProto{}
	var keys []*yarnpb.NodeAttributeKeyProto
	for _, resp := range resps {
		for _, e := range resp.GetAttributesToNodes() {
			i := slices.IndexFunc(keys, func(k *yarnpb.NodeAttributeKeyProto) bool { return proto.Equal(k, e.GetNodeAttribute()) })
			if i < 0 {
				keys = append(keys, e.GetNodeAttribute())
				out.AttributesToNodes = append(out.AttributesToNodes, &yarnpb.AttributeToNodesProto{NodeAttribute: e.GetNodeAttribute()})
				i = len(keys) - 1
			}
			m := out.AttributesToNodes[i]
			m.NodeValueMap = appendDistinct(m.NodeValueMap, e.GetNodeValueMap())
		}
	}
	return out, nil
}

// GetNodesToAttributes gathers every active sub-cluster's nodes'
// attributes; the sub-clusters' nodes are their own.
func (r *Router) GetNodesToAttributes(ctx context.Context, req *yarnpb.GetNodesToAttributesRequestProto) (*yarnpb.GetNodesToAttributesResponseProto, error) {
	resps, err := fanOut(ctx, r, "get nodes to attributes", false, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.GetNodesToAttributesResponseProto, error) {
		return c.GetNodesToAttributes(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.GetNodesToAttributesResponseProto{}
	for _, resp := range resps {
		out.NodesToAttributes = append(out.NodesToAttributes, resp.GetNodesToAttributes()...)
	}
	return out, nil
}
