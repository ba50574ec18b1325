// Package acl is Hadoop's AccessControlList, as yarn.admin.acl, queue ACLs
// and application ACLs (VIEW_APP, MODIFY_APP) write it: the RM and the
// node's log server decide with the same rules.
package acl

import (
	"slices"
	"strings"
)

// ACL is a Hadoop AccessControlList: "user1,user2 group1,group2" allows the
// users and the members of the groups, "*" allows everyone, and " " (or the
// zero ACL) allows nobody. Users and groups are split at the first space;
// items are trimmed and empty ones dropped.
type ACL struct {
	all    bool
	users  []string
	groups []string
}

// Parse reads s as AccessControlList(String) does. It never fails: any
// string is some list of users and groups.
func Parse(s string) ACL {
	usersPart, groupsPart, hasGroups := strings.Cut(s, " ")
	// A part that is "*" once trimmed makes the list a wildcard, wherever
	// it stands (Hadoop's isWildCardACLValue).
	if strings.TrimSpace(usersPart) == "*" || (hasGroups && strings.TrimSpace(groupsPart) == "*") {
		return ACL{all: true}
	}
	return ACL{users: splitNames(usersPart), groups: splitNames(groupsPart)}
}

// AllowAll returns the wildcard ACL "*".
func AllowAll() ACL { return ACL{all: true} }

// splitNames is Hadoop's getTrimmedStringCollection: comma-separated,
// trimmed, empty items dropped, each name once.
func splitNames(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// Allows reports whether the user, or one of the groups, is on the list.
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

// AllowsAll reports whether the ACL is the wildcard.
func (a ACL) AllowsAll() bool { return a.all }

// Users returns the users on the list, in the order written; the caller owns
// the slice.
func (a ACL) Users() []string { return slices.Clone(a.users) }

// Groups returns the groups on the list, in the order written; the caller
// owns the slice.
func (a ACL) Groups() []string { return slices.Clone(a.groups) }

// String is Hadoop's getAclString: "*", or users and groups joined by commas
// with a space between them (" " for nobody).
func (a ACL) String() string {
	if a.all {
		return "*"
	}
	return strings.Join(a.users, ",") + " " + strings.Join(a.groups, ",")
}
