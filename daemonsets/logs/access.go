package logs

import (
	"os/user"
	"slices"
	"strings"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

// ACL is a Hadoop AccessControlList: "u1,u2 g1,g2", "*" for everyone, " "
// (or empty) for nobody.
type ACL struct {
	all           bool
	users, groups []string
}

// ParseACL reads an AccessControlList string.
func ParseACL(s string) ACL {
	if strings.TrimSpace(s) == "*" {
		return ACL{all: true}
	}
	u, g, _ := strings.Cut(s, " ")
	return ACL{users: names(u), groups: names(g)}
}

func names(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Allows reports whether user (in groups) is on the list.
func (a ACL) Allows(user string, groups []string) bool {
	if a.all || slices.Contains(a.users, user) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(a.groups, g) {
			return true
		}
	}
	return false
}

// Access decides who reads an application's logs, as YARN's
// ApplicationACLsManager does for VIEW_APP.
type Access struct {
	// Enabled is yarn.acl.enable; when false everyone reads every log.
	Enabled bool
	// Admin is yarn.admin.acl.
	Admin ACL
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
	for _, acl := range acls {
		if acl.Type == "VIEW_APP" {
			return ParseACL(acl.Value).Allows(who, groups)
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
