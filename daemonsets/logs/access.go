package logs

import (
	"os/user"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

// Access decides who reads an application's logs, as YARN's
// ApplicationACLsManager does for VIEW_APP.
type Access struct {
	// Enabled is yarn.acl.enable; when false everyone reads every log.
	Enabled bool
	// Admin is yarn.admin.acl.
	Admin acl.ACL
	// Groups returns a user's groups; nil means the node's own (os/user).
	Groups func(user string) []string
}

// CanView reports whether user may read the logs of an application owned
// by owner with the given ACLs.
func (a Access) CanView(who, owner string, acls []aggregated.ACL) bool {
	if !a.Enabled || (who != "" && who == owner) {
		return true
	}
	groups := a.groups(who)
	if a.Admin.Allows(who, groups) {
		return true
	}
	for _, entry := range acls {
		if entry.Type == "VIEW_APP" {
			return acl.Parse(entry.Value).Allows(who, groups)
		}
	}
	return false
}

func (a Access) groups(who string) []string {
	if a.Groups != nil {
		return a.Groups(who)
	}
	u, err := user.Lookup(who)
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var out []string
	for _, id := range ids {
		if g, err := user.LookupGroupId(id); err == nil {
			out = append(out, g.Name)
		}
	}
	return out
}
