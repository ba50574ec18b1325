package cli

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// adminRefresh is one argument-less `yarn rmadmin` command: the RPC it
// makes, with fresh request and response messages.
type adminRefresh struct {
	method    string
	messages  func() (req, resp proto.Message)
	usageLine string
}

// adminRefreshes are RMAdminCLI's commands that take no argument, by flag.
func adminRefreshes() map[string]adminRefresh {
	return map[string]adminRefresh{
		"-refreshQueues": {"refreshQueues", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{}
		}, "Reload the queues' acls, states and scheduler specific properties."},
		"-refreshNodes": {"refreshNodes", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshNodesRequestProto{}, &yarnpb.RefreshNodesResponseProto{}
		}, "Refresh the hosts information at the ResourceManager."},
		"-refreshNodesResources": {"refreshNodesResources", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshNodesResourcesRequestProto{}, &yarnpb.RefreshNodesResourcesResponseProto{}
		}, "Refresh resources of NodeManagers at the ResourceManager."},
		"-refreshSuperUserGroupsConfiguration": {"refreshSuperUserGroupsConfiguration", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshSuperUserGroupsConfigurationRequestProto{}, &yarnpb.RefreshSuperUserGroupsConfigurationResponseProto{}
		}, "Refresh superuser proxy groups mappings"},
		"-refreshUserToGroupsMappings": {"refreshUserToGroupsMappings", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshUserToGroupsMappingsRequestProto{}, &yarnpb.RefreshUserToGroupsMappingsResponseProto{}
		}, "Refresh user-to-groups mappings"},
		"-refreshAdminAcls": {"refreshAdminAcls", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshAdminAclsRequestProto{}, &yarnpb.RefreshAdminAclsResponseProto{}
		}, "Refresh acls for administration of ResourceManager"},
		"-refreshServiceAcl": {"refreshServiceAcls", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshServiceAclsRequestProto{}, &yarnpb.RefreshServiceAclsResponseProto{}
		}, "Reload the service-level authorization policy file."},
		"-refreshClusterMaxPriority": {"refreshClusterMaxPriority", func() (proto.Message, proto.Message) {
			return &yarnpb.RefreshClusterMaxPriorityRequestProto{}, &yarnpb.RefreshClusterMaxPriorityResponseProto{}
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
		return r.reportAdmin(cmd, "getGroupsForUser", r.getGroups(args[1:]))
	}
	if cmd == "-help" {
		r.rmadminUsage("")
		return exitOK
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
	req, resp := ref.messages()
	return r.reportAdmin(cmd, ref.method, r.adminCall(ref.method, req, resp))
}

// reportAdmin is RMAdminCLI.run's catch: the first line of the error's
// message after the command's name.
func (r *runner) reportAdmin(cmd, method string, err error) int {
	if err == nil {
		return exitOK
	}
	msg := strings.TrimPrefix(err.Error(), method+": ")
	var re *ipc.RemoteError
	if errors.As(err, &re) {
		msg = re.Message
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
		resp := &yarnpb.GetGroupsForUserResponseProto{}
		if err := r.adminCall("getGroupsForUser", &yarnpb.GetGroupsForUserRequestProto{User: proto.String(u)}, resp); err != nil {
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
	b.WriteString("   -help: Display this help.\n")
	fmt.Fprint(r.errOut, b.String())
}
