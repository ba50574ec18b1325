package rm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/queues"
)

// Messages of the admin refusals: YARN's own wording where a YARN RM
// refuses the same call, Knit's (node attributes, node resources) where
// YARN would carry it out and Knit cannot.
const (
	adminDeniedFormat            = string(yarnerr.AccessControl) + ": User %s doesn't have permission to call '%s'"
	msgNodeLabelsDisabled        = "Node-label-based scheduling is disabled. Please check yarn.node-labels.enabled"
	msgServiceAuthorizationOff   = "Service Authorization (hadoop.security.authorization) not enabled."
	msgNodeAttributesUnsupported = "Knit keeps no centralized node attributes; label the Kubernetes nodes instead"
	unrecognizedNodeFormat       = "Resource update get failed on all nodes due to change resource on an unrecognized node: %s"
	nodeResourceFromKubeFormat   = "Knit takes a node's resources from its Kubernetes allocatable; change that to resize %s"
	unknownNodesForLabelsFormat  = string(yarnerr.IOException) + ": Failed to replace labels as there are unknown nodes:[%s]"
	// operationReplaceLabelsOnNode is the Java method behind rpc
	// replaceLabelsOnNodes, which the refusal names.
	operationReplaceLabelsOnNode = "replaceLabelsOnNode"
)

// AdminConfig holds what an AdminService needs besides the ResourceManager.
type AdminConfig struct {
	// LoadConf reads the RM's configuration files afresh (yarn-site.xml
	// with capacity-scheduler.xml over it, as at start): the refresh calls
	// take their new values from it. Required.
	LoadConf func(ctx context.Context) (*hadoopconf.Configuration, error)
	// DaemonUser is the user knit-rm runs as. It may always administer the
	// RM, as YARN adds the RM's own user to yarn.admin.acl; empty adds
	// nobody.
	DaemonUser string
	// Logger receives the audit lines of admin calls; nil means the RM's.
	Logger *slog.Logger
}

// AdminService serves ResourceManagerAdministrationProtocol, what `yarn
// rmadmin` calls, over a ResourceManager. Every call but refreshServiceAcls
// first checks the caller against yarn.admin.acl, as AdminService.checkAcls
// does whether or not yarn.acl.enable is on. It is safe for concurrent use.
type AdminService struct {
	rm  *ResourceManager
	cfg AdminConfig
	log *slog.Logger
}

// NewAdminService returns the admin service of rm.
func NewAdminService(rm *ResourceManager, cfg AdminConfig) (*AdminService, error) {
	if rm == nil || cfg.LoadConf == nil {
		return nil, errors.New("rm: admin service needs a ResourceManager and LoadConf")
	}
	log := cfg.Logger
	if log == nil {
		log = rm.log
	}
	return &AdminService{rm: rm, cfg: cfg, log: log}, nil
}

// Register adds ResourceManagerAdministrationProtocol to srv: the admin
// methods of Hadoop 3.4's rmadmin except the federation ones (sub-clusters,
// federation queue policies). Knit has no federation, and a client calling
// them gets RpcNoSuchMethodException, as from an RM older than 3.4.
func (a *AdminService) Register(srv *ipc.Server) error {
	return yarnrpc.ResourceManagerAdministrationProtocolFuncs{
		RefreshQueues: adminOnly(a, "refreshQueues", a.RefreshQueues),
		// Nodes are the Kubernetes nodes, listed live: there is no
		// include/exclude file to re-read and nothing to decommission.
		RefreshNodes: adminOnly(a, "refreshNodes", answerEmpty[*yarnpb.RefreshNodesRequestProto, yarnpb.RefreshNodesResponseProto]),
		// Knit has no proxy-user rules and no cached group mapping, so
		// these refreshes have nothing to reload.
		RefreshSuperUserGroupsConfiguration: adminOnly(a, "refreshSuperUserGroupsConfiguration", answerEmpty[*yarnpb.RefreshSuperUserGroupsConfigurationRequestProto, yarnpb.RefreshSuperUserGroupsConfigurationResponseProto]),
		RefreshUserToGroupsMappings:         adminOnly(a, "refreshUserToGroupsMappings", answerEmpty[*yarnpb.RefreshUserToGroupsMappingsRequestProto, yarnpb.RefreshUserToGroupsMappingsResponseProto]),
		RefreshAdminAcls:                    adminOnly(a, "refreshAdminAcls", a.RefreshAdminAcls),
		// AdminService checks hadoop.security.authorization before the
		// caller; Knit has no service-level authorization.
		RefreshServiceAcls: refuse[*yarnpb.RefreshServiceAclsRequestProto, *yarnpb.RefreshServiceAclsResponseProto](errServiceAuthorization),
		GetGroupsForUser:   a.GetGroupsForUser,
		UpdateNodeResource: adminOnly(a, "updateNodeResource", a.UpdateNodeResource),
		// A YARN RM without dynamic-resources.xml updates nothing.
		RefreshNodesResources:        adminOnly(a, "refreshNodesResources", answerEmpty[*yarnpb.RefreshNodesResourcesRequestProto, yarnpb.RefreshNodesResourcesResponseProto]),
		AddToClusterNodeLabels:       adminOnly(a, "addToClusterNodeLabels", refuse[*yarnpb.AddToClusterNodeLabelsRequestProto, *yarnpb.AddToClusterNodeLabelsResponseProto](errNodeLabelsDisabled)),
		RemoveFromClusterNodeLabels:  adminOnly(a, "removeFromClusterNodeLabels", refuse[*yarnpb.RemoveFromClusterNodeLabelsRequestProto, *yarnpb.RemoveFromClusterNodeLabelsResponseProto](errNodeLabelsDisabled)),
		ReplaceLabelsOnNodes:         a.ReplaceLabelsOnNodes,
		CheckForDecommissioningNodes: adminOnly(a, "checkForDecommissioningNodes", a.CheckForDecommissioningNodes),
		RefreshClusterMaxPriority:    adminOnly(a, "refreshClusterMaxPriority", a.RefreshClusterMaxPriority),
		MapAttributesToNodes:         adminOnly(a, "mapAttributesToNodes", refuse[*yarnpb.NodesToAttributesMappingRequestProto, *yarnpb.NodesToAttributesMappingResponseProto](errNodeAttributes)),
	}.Register(srv)
}

// adminOnly answers fn for callers on yarn.admin.acl only, and writes the
// audit line RMAuditLogger writes for an admin call. method is the rpc's
// name, which the refusal and the audit line give as the operation.
func adminOnly[Req, Resp proto.Message](a *AdminService, method string, fn func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		user, err := a.checkAcls(ctx, method)
		if err != nil {
			var none Resp
			return none, err
		}
		resp, err := fn(ctx, req)
		if err == nil {
			a.log.InfoContext(ctx, "admin call", "user", user, "operation", method, "result", "SUCCESS")
		}
		return resp, err
	}
}

// checkAcls is AdminService.checkAcls: the caller's short name, or the
// AccessControlException wrapped in a YarnException that a refused caller
// gets (RPCUtil.getRemoteException).
func (a *AdminService) checkAcls(ctx context.Context, method string) (string, error) {
	user, ok := a.admitted(ctx, method)
	if !ok {
		return user, yarnerr.YarnException.Errorf(adminDeniedFormat, user, method)
	}
	return user, nil
}

// admitted reports whether the caller is on yarn.admin.acl or is the RM's
// own user, and audits a refusal as YARN does.
func (a *AdminService) admitted(ctx context.Context, method string) (string, bool) {
	user := shortName(callerOf(ctx).User)
	if (a.cfg.DaemonUser != "" && user == a.cfg.DaemonUser) || a.rm.queueTree().IsAdmin(user, nil) {
		return user, true
	}
	a.log.WarnContext(ctx, "admin call refused", "user", user, "operation", method, "result", "Unauthorized user")
	return user, false
}

// ioError is an IOException as RPCUtil.getRemoteException wraps it.
func ioError(err error) error {
	return yarnerr.YarnException.Wrap(err)
}

// errNodeLabelsDisabled is what the node-label manager throws while
// yarn.node-labels.enabled is off, as it always is in Knit: node labels are
// Kubernetes node labels, matched by node selectors.
func errNodeLabelsDisabled() error {
	return yarnerr.YarnException.Wrap(yarnerr.IOException.New(msgNodeLabelsDisabled))
}

// errServiceAuthorization is refreshServiceAcls' answer while
// hadoop.security.authorization is off.
func errServiceAuthorization() error {
	return yarnerr.YarnException.Wrap(yarnerr.IOException.New(msgServiceAuthorizationOff))
}

// errNodeAttributes refuses centralized node attributes, which Knit does not
// keep.
func errNodeAttributes() error {
	return yarnerr.YarnException.Wrap(yarnerr.IOException.New(msgNodeAttributesUnsupported))
}

// RefreshQueues re-reads the queue configuration and swaps the new
// hierarchy in (ResourceManager.RefreshQueues). A refused configuration
// answers "java.io.IOException: Failed to re-init queues : <reason>" in a
// YarnException and leaves the queues as they were.
func (a *AdminService) RefreshQueues(ctx context.Context, _ *yarnpb.RefreshQueuesRequestProto) (*yarnpb.RefreshQueuesResponseProto, error) {
	c, err := a.cfg.LoadConf(ctx)
	if err != nil {
		return nil, ioError(err)
	}
	if err := a.rm.RefreshQueues(ctx, c); err != nil {
		var qe *queues.Error
		if errors.As(err, &qe) && !qe.Rejected() {
			return nil, qe.Exception()
		}
		return nil, ioError(err)
	}
	return &yarnpb.RefreshQueuesResponseProto{}, nil
}

// RefreshAdminAcls re-reads yarn.admin.acl; the next call is checked
// against the new list.
func (a *AdminService) RefreshAdminAcls(ctx context.Context, _ *yarnpb.RefreshAdminAclsRequestProto) (*yarnpb.RefreshAdminAclsResponseProto, error) {
	c, err := a.cfg.LoadConf(ctx)
	if err != nil {
		return nil, ioError(err)
	}
	if err := a.rm.RefreshAdminACL(ctx, c); err != nil {
		return nil, ioError(err)
	}
	return &yarnpb.RefreshAdminAclsResponseProto{}, nil
}

// RefreshClusterMaxPriority re-reads yarn.cluster.max-application-priority.
func (a *AdminService) RefreshClusterMaxPriority(ctx context.Context, _ *yarnpb.RefreshClusterMaxPriorityRequestProto) (*yarnpb.RefreshClusterMaxPriorityResponseProto, error) {
	c, err := a.cfg.LoadConf(ctx)
	if err != nil {
		return nil, ioError(err)
	}
	if err := a.rm.RefreshClusterMaxPriority(ctx, c); err != nil {
		return nil, ioError(err)
	}
	return &yarnpb.RefreshClusterMaxPriorityResponseProto{}, nil
}

// GetGroupsForUser answers the user's groups as the RM sees them. Its
// interface comes from hadoop-common, so AdminService wraps a refused
// caller's YarnException in an IOException.
func (a *AdminService) GetGroupsForUser(ctx context.Context, req *yarnpb.GetGroupsForUserRequestProto) (*yarnpb.GetGroupsForUserResponseProto, error) {
	const method = "getGroupsForUser"
	if user, ok := a.admitted(ctx, method); !ok {
		return nil, yarnerr.IOException.Wrap(yarnerr.YarnException.Errorf(adminDeniedFormat, user, method))
	}
	return &yarnpb.GetGroupsForUserResponseProto{Groups: a.rm.queueTree().UserGroups(req.GetUser())}, nil
}

// UpdateNodeResource refuses, as YARN does, a request naming a node the RM
// does not know. A node Knit knows keeps the resources Kubernetes gives it
// (its allocatable), so a request that names nodes is refused too; an empty
// one succeeds, having nothing to change.
func (a *AdminService) UpdateNodeResource(ctx context.Context, req *yarnpb.UpdateNodeResourceRequestProto) (*yarnpb.UpdateNodeResourceResponseProto, error) {
	asked := req.GetNodeResourceMap()
	if len(asked) == 0 {
		return &yarnpb.UpdateNodeResourceResponseProto{}, nil
	}
	nodes, err := a.rm.nodes(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[fmt.Sprintf("%s:%d", n.Host, n.NMPort)] = true
	}
	for _, m := range asked {
		if id := yarnid.NodeString(m.GetNodeId()); !known[id] {
			return nil, yarnerr.YarnException.Errorf(unrecognizedNodeFormat, id)
		}
	}
	return nil, yarnerr.YarnException.Errorf(nodeResourceFromKubeFormat, yarnid.NodeString(asked[0].GetNodeId()))
}

// ReplaceLabelsOnNodes answers as a YARN RM with node labels disabled: the
// admin check, then (when asked to) the unknown-node check, then the node
// label manager's refusal.
func (a *AdminService) ReplaceLabelsOnNodes(ctx context.Context, req *yarnpb.ReplaceLabelsOnNodeRequestProto) (*yarnpb.ReplaceLabelsOnNodeResponseProto, error) {
	if _, err := a.checkAcls(ctx, operationReplaceLabelsOnNode); err != nil {
		return nil, err
	}
	if req.GetFailOnUnknownNodes() {
		nodes, err := a.rm.nodes(ctx)
		if err != nil {
			return nil, err
		}
		var unknown []string
		for _, nl := range req.GetNodeToLabels() {
			id := nl.GetNodeId()
			found := false
			for _, n := range nodes {
				// Port 0 names every NodeManager of the host.
				if n.Host == id.GetHost() && (id.GetPort() == 0 || n.NMPort == id.GetPort()) {
					found = true
					break
				}
			}
			if !found {
				unknown = append(unknown, yarnid.NodeString(id))
			}
		}
		if len(unknown) > 0 {
			return nil, yarnerr.YarnException.Errorf(unknownNodesForLabelsFormat, strings.Join(unknown, ", "))
		}
	}
	return nil, errNodeLabelsDisabled()
}

// CheckForDecommissioningNodes lists the nodes being decommissioned: in
// Knit, the cordoned Kubernetes nodes (see rgs/nodes.State).
func (a *AdminService) CheckForDecommissioningNodes(ctx context.Context, _ *yarnpb.CheckForDecommissioningNodesRequestProto) (*yarnpb.CheckForDecommissioningNodesResponseProto, error) {
	nodes, err := a.rm.nodes(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.CheckForDecommissioningNodesResponseProto{}
	for _, n := range nodes {
		if n.State == yarnpb.NodeStateProto_NS_DECOMMISSIONING {
			resp.DecommissioningNodes = append(resp.DecommissioningNodes, &yarnpb.NodeIdProto{Host: proto.String(n.Host), Port: proto.Int32(n.NMPort)})
		}
	}
	return resp, nil
}
