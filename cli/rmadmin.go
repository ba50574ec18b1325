package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// adminRefresh is one argument-less `yarn rmadmin` command: the RPC it
// makes.
type adminRefresh struct {
	call      func(context.Context, *yarnrpc.ResourceManagerAdministrationProtocolClient) error
	usageLine string
}

// adminRefreshes are RMAdminCLI's commands that take no argument, by flag.
func adminRefreshes() map[string]adminRefresh {
	return map[string]adminRefresh{
		"-refreshQueues": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshQueues(ctx, &yarnpb.RefreshQueuesRequestProto{})
			return err
		}, "Reload the queues' acls, states and scheduler specific properties."},
		"-refreshNodes": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshNodes(ctx, &yarnpb.RefreshNodesRequestProto{})
			return err
		}, "Refresh the hosts information at the ResourceManager."},
		"-refreshNodesResources": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshNodesResources(ctx, &yarnpb.RefreshNodesResourcesRequestProto{})
			return err
		}, "Refresh resources of NodeManagers at the ResourceManager."},
		"-refreshSuperUserGroupsConfiguration": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshSuperUserGroupsConfiguration(ctx, &yarnpb.RefreshSuperUserGroupsConfigurationRequestProto{})
			return err
		}, "Refresh superuser proxy groups mappings"},
		"-refreshUserToGroupsMappings": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshUserToGroupsMappings(ctx, &yarnpb.RefreshUserToGroupsMappingsRequestProto{})
			return err
		}, "Refresh user-to-groups mappings"},
		"-refreshAdminAcls": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshAdminAcls(ctx, &yarnpb.RefreshAdminAclsRequestProto{})
			return err
		}, "Refresh acls for administration of ResourceManager"},
		"-refreshServiceAcl": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshServiceAcls(ctx, &yarnpb.RefreshServiceAclsRequestProto{})
			return err
		}, "Reload the service-level authorization policy file."},
		"-refreshClusterMaxPriority": {func(ctx context.Context, c *yarnrpc.ResourceManagerAdministrationProtocolClient) error {
			_, err := c.RefreshClusterMaxPriority(ctx, &yarnpb.RefreshClusterMaxPriorityRequestProto{})
			return err
		}, "Refresh cluster max priority"},
	}
}

// rmadmin is `yarn rmadmin` for the commands above and -getGroups. Like
// RMAdminCLI it prints nothing on success, and on failure prints
// "<command>: <message>" to stderr and exits -1; it never lets an
// exception escape.
func (r *runner) rmadmin(args []string) int {
	if len(args) == 0 {
		r.rmadminUsage("")
		return exitFailure
	}
	cmd := args[0]
	refreshes := adminRefreshes()
	if cmd == "-getGroups" {
		return r.reportAdmin(cmd, r.getGroups(args[1:]))
	}
	if cmd == "-help" {
		r.rmadminUsage("")
		return exitOK
	}
	// Without RM HA, as for RMAdminCLI, the HA commands are unknown.
	if _, ok := haCommands[cmd]; ok {
		if ids, _, err := r.haTargets(); err == nil && ids != nil {
			return r.haAdmin(cmd, args[1:])
		}
	}
	ref, ok := refreshes[cmd]
	if !ok {
		fmt.Fprintf(r.errOut, "%s: Unknown command\n", strings.TrimPrefix(cmd, "-"))
		r.rmadminUsage("")
		return exitFailure
	}
	if len(args) != 1 {
		r.rmadminUsage(cmd)
		return exitFailure
	}
	err := ref.call(r.ctx, r.rmAdmin())
	if err == nil && cmd == "-refreshQueues" {
		err = r.reportQueues()
	}
	return r.reportAdmin(cmd, err)
}

// reportAdmin is RMAdminCLI.run's catch: the first line of the error's
// message after the command's name.
func (r *runner) reportAdmin(cmd string, err error) int {
	if err == nil {
		return exitOK
	}
	msg := err.Error()
	if ce := (*callError)(nil); errors.As(err, &ce) {
		msg = ce.err.Error()
	}
	if e, ok := yarnerr.Find(err); ok {
		msg = e.Message
	}
	first, _, _ := strings.Cut(msg, "\n")
	fmt.Fprintf(r.errOut, "%s: %s\n", strings.TrimPrefix(cmd, "-"), first)
	return exitFailure
}

// getGroups is GetGroupsBase.run: "user : group group…" for each user
// named, or for the caller when none is.
func (r *runner) getGroups(users []string) error {
	if len(users) == 0 {
		users = []string{r.cfg.User}
	}
	for _, u := range users {
		resp, err := r.rmAdmin().GetGroupsForUser(r.ctx, &yarnpb.GetGroupsForUserRequestProto{User: proto.String(u)})
		if err != nil {
			return err
		}
		var b strings.Builder
		b.WriteString(u + " :")
		for _, g := range resp.GetGroups() {
			b.WriteString(" " + g)
		}
		fmt.Fprintln(r.out, b.String())
	}
	return nil
}

// rmadminUsage prints the usage of one command, or of all that Knit's
// rmadmin has (a shorter list than RMAdminCLI's).
func (r *runner) rmadminUsage(cmd string) {
	refreshes := adminRefreshes()
	if usage, ok := haCommands[cmd]; ok {
		fmt.Fprintf(r.errOut, "Usage: rmadmin [%s %s]\n", cmd, usage)
		return
	}
	if cmd != "" {
		fmt.Fprintf(r.errOut, "Usage: yarn rmadmin [%s]\n", cmd)
		return
	}
	var b strings.Builder
	b.WriteString("Usage: yarn rmadmin\n")
	for _, flag := range []string{"-refreshQueues", "-refreshNodes", "-refreshNodesResources", "-refreshSuperUserGroupsConfiguration",
		"-refreshUserToGroupsMappings", "-refreshAdminAcls", "-refreshServiceAcl", "-refreshClusterMaxPriority"} {
		fmt.Fprintf(&b, "   %s: %s\n", flag, refreshes[flag].usageLine)
	}
	b.WriteString("   -getGroups [username]: Get the groups which given user belongs to.\n")
	b.WriteString("   -transitionToActive [--forcemanual] <serviceId>: Transitions the service into Active state (refused: the Lease elects the active RM).\n")
	b.WriteString("   -transitionToStandby [--forcemanual] <serviceId>: Transitions the service into Standby state.\n")
	b.WriteString("   -getServiceState <serviceId>: Returns the state of the service.\n")
	b.WriteString("   -getAllServiceState: Returns the state of all the services.\n")
	b.WriteString("   -help: Display this help.\n")
	fmt.Fprint(r.errOut, b.String())
}
