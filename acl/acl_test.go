package acl

import (
	"slices"
	"testing"
)

func TestParseFollowsHadoopsAccessControlList(t *testing.T) {
	tests := []struct {
		list          string
		users, groups []string
		all           bool
		str           string
	}{
		{list: "*", all: true, str: "*"},
		{list: " * ", all: true, str: "*"},
		{list: "alice *", all: true, str: "*"},
		{list: "", str: " "},
		{list: " ", str: " "},
		{list: "alice,bob", users: []string{"alice", "bob"}, str: "alice,bob "},
		{list: " ops,dev", groups: []string{"ops", "dev"}, str: " ops,dev"},
		// The first space ends the users, even after a comma: Hadoop's
		// split(" ", 2) makes "bob dev" a group.
		{list: "alice,alice ,bob dev", users: []string{"alice"}, groups: []string{"bob dev"}, str: "alice bob dev"},
		{list: "alice, ,bob dev,dev", users: []string{"alice"}, groups: []string{"bob dev", "dev"}, str: "alice bob dev,dev"},
		{list: "alice,bob dev , ops", users: []string{"alice", "bob"}, groups: []string{"dev", "ops"}, str: "alice,bob dev,ops"},
	}
	for _, tt := range tests {
		a := Parse(tt.list)
		if a.AllowsAll() != tt.all || !slices.Equal(a.Users(), tt.users) || !slices.Equal(a.Groups(), tt.groups) {
			t.Errorf("Parse(%q) = all %v users %q groups %q; want all %v users %q groups %q",
				tt.list, a.AllowsAll(), a.Users(), a.Groups(), tt.all, tt.users, tt.groups)
		}
		if a.String() != tt.str {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.list, a.String(), tt.str)
		}
	}
	if (ACL{}).Allows("anyone", []string{"any"}) {
		t.Error("the zero ACL allows someone; it must allow nobody")
	}
	if !AllowAll().Allows("anyone", nil) {
		t.Error("AllowAll does not allow everyone")
	}
}
