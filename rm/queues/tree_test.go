package queues

import (
	"errors"
	"slices"
	"testing"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// groupsOf is the fixture's group lookup.
func groupsOf(user string) []string {
	return map[string][]string{
		"carol": {"prod-users"},
		"dana":  {"dev"},
	}[user]
}

func TestLookupByPathOrUniqueShortName(t *testing.T) {
	tree := fixtureTree(t, Options{})
	tests := []struct {
		name       string
		want       string
		err        error
		candidates []string
	}{
		{name: "root", want: "root"},
		{name: "root.prod.etl", want: "root.prod.etl"},
		{name: "etl", want: "root.prod.etl"},
		{name: "prod", want: "root.prod"},
		{name: "alpha", want: "root.dev.alpha"},
		{name: "root.dev.reports", want: "root.dev.reports"},
		// Two leaves are called reports: only their paths find them.
		{name: "reports", err: ErrAmbiguousQueue, candidates: []string{"root.prod.reports", "root.dev.reports"}},
		{name: "nope", err: ErrUnknownQueue},
		{name: "root.etl", err: ErrUnknownQueue},
		{name: "prod.etl", err: ErrUnknownQueue},
		{name: "", err: ErrUnknownQueue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := tree.Lookup(tt.name)
			if tt.err == nil {
				if err != nil || q.Path != tt.want {
					t.Fatalf("Lookup(%q) = %v, %v; want %s", tt.name, q, err, tt.want)
				}
				return
			}
			var le *LookupError
			if !errors.Is(err, tt.err) || !errors.As(err, &le) {
				t.Fatalf("Lookup(%q) = %v, want %v", tt.name, err, tt.err)
			}
			if !slices.Equal(le.Candidates, tt.candidates) {
				t.Errorf("candidates %q, want %q", le.Candidates, tt.candidates)
			}
		})
	}
	_, err := tree.Lookup("reports")
	if want := `queue name "reports" is ambiguous: it names root.prod.reports and root.dev.reports; use the full path`; err.Error() != want {
		t.Errorf("ambiguous error reads %q", err)
	}
	if _, err := tree.Lookup("nope"); err.Error() != `no queue named "nope"` {
		t.Errorf("unknown error reads %q", err)
	}
}

// A user allowed on a queue or on any ancestor is allowed; root's " " and
// the leaves' unset ACLs allow nobody by themselves.
func TestQueueACLsInheritFromAncestors(t *testing.T) {
	tree := fixtureTree(t, Options{Groups: groupsOf})
	tests := []struct {
		name   string
		queue  string
		acl    QueueACL
		user   string
		groups []string
		want   bool
	}{
		{"a user on dev's list submits to its leaves", "alpha", SubmitApplications, "alice", nil, true},
		{"a dev member submits to dev's leaves", "root.dev.reports", SubmitApplications, "erin", []string{"dev"}, true},
		{"groups are looked up when not given", "root.dev.reports", SubmitApplications, "dana", nil, true},
		{"given groups replace the lookup", "root.dev.reports", SubmitApplications, "dana", []string{}, false},
		{"prod's group reaches prod's leaves", "etl", SubmitApplications, "carol", nil, true},
		{"submitting does not mean administering", "etl", AdministerQueue, "carol", nil, false},
		{"prod's admin administers its leaves", "root.prod.reports", AdministerQueue, "ops", nil, true},
		{"an admin ACL does not grant submit by itself", "etl", SubmitApplications, "ops", nil, false},
		{"root's admin administers everything", "alpha", AdministerQueue, "yarn", nil, true},
		{"root's ' ' stops no one below from allowing", "default", SubmitApplications, "mallory", nil, true},
		{"a sibling's ACL does not leak", "etl", SubmitApplications, "alice", nil, false},
		{"root itself allows nobody to submit", "root", SubmitApplications, "alice", nil, false},
		{"an ambiguous name allows nothing", "reports", SubmitApplications, "yarn", nil, false},
		{"an unknown name allows nothing", "nope", AdministerQueue, "yarn", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tree.HasAccess(tt.queue, tt.acl, tt.user, tt.groups); got != tt.want {
				t.Errorf("HasAccess(%s, %v, %s, %q) = %v, want %v", tt.queue, tt.acl, tt.user, tt.groups, got, tt.want)
			}
		})
	}
}

// Root's ACLs default to everyone, so a configuration that sets no ACL
// lets everyone submit everywhere, as on a fresh YARN cluster.
func TestRootACLsDefaultToEveryone(t *testing.T) {
	tree, err := Build(csConf(cs("root.queues"), "a", cs("root.a.capacity"), "100"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, acl := range []QueueACL{SubmitApplications, AdministerQueue} {
		if !tree.HasAccess("a", acl, "anyone", nil) {
			t.Errorf("%v on a leaf of a default root refused", acl)
		}
		if got := mustLookup(t, tree, "a").ACL(acl).String(); got != " " {
			t.Errorf("a's own %v ACL = %q, want \" \"", acl, got)
		}
	}
}

func TestCheckAppAccess(t *testing.T) {
	on := fixtureTree(t, Options{ACLsEnabled: true, AdminACL: acl.Parse("yarn"), Groups: groupsOf})
	off := fixtureTree(t, Options{})
	tests := []struct {
		name string
		tree *Tree
		a    AppAccess
		want bool
	}{
		{"everyone when ACLs are off", off, AppAccess{Queue: "etl", Owner: "carol", User: "mallory"}, true},
		{"the owner", on, AppAccess{Queue: "etl", Owner: "carol", User: "carol"}, true},
		{"an admin", on, AppAccess{Queue: "etl", Owner: "carol", User: "yarn"}, true},
		{"a user on the application's ACL", on, AppAccess{Queue: "etl", Owner: "carol", User: "dave", ACL: acl.Parse("dave")}, true},
		{"a group on the application's ACL", on, AppAccess{Queue: "etl", Owner: "carol", User: "dana", ACL: acl.Parse(" dev")}, true},
		{"the queue's administrator", on, AppAccess{Queue: "root.prod.etl", Owner: "carol", User: "ops"}, true},
		{"a submitter to the same queue is not enough", on, AppAccess{Queue: "etl", Owner: "carol", User: "frank", Groups: []string{"prod-users"}}, false},
		{"a stranger", on, AppAccess{Queue: "etl", Owner: "carol", User: "mallory"}, false},
		{"an application of a removed queue stays visible", on, AppAccess{Queue: "root.gone", Owner: "carol", User: "mallory"}, true},
		{"an application of an ambiguous queue is not", on, AppAccess{Queue: "reports", Owner: "carol", User: "ops"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tree.CheckAppAccess(tt.a); got != tt.want {
				t.Errorf("CheckAppAccess(%+v) = %v, want %v", tt.a, got, tt.want)
			}
		})
	}
}

func TestAdminACLCanBeReplacedWithoutTouchingTheOldTree(t *testing.T) {
	old := fixtureTree(t, Options{ACLsEnabled: true, AdminACL: acl.Parse("yarn"), Groups: groupsOf})
	next := old.WithAdminACL(acl.Parse("alice prod-users"))
	tests := []struct {
		name string
		tree *Tree
		user string
		want bool
	}{
		{"the old admin on the old tree", old, "yarn", true},
		{"the old admin on the new tree", next, "yarn", false},
		{"a new admin by name", next, "alice", true},
		{"a member of a new admin group", next, "carol", true},
		{"a stranger", next, "mallory", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tree.IsAdmin(tt.user, nil); got != tt.want {
				t.Errorf("IsAdmin(%q) = %v, want %v", tt.user, got, tt.want)
			}
		})
	}
	if !next.CheckAppAccess(AppAccess{Queue: "etl", Owner: "carol", User: "alice"}) {
		t.Error("the new admin cannot access applications")
	}
	if next.Root() != old.Root() || len(next.Queues()) != len(old.Queues()) {
		t.Error("the new tree does not share the old hierarchy")
	}
	if got := next.UserGroups("carol"); !slices.Equal(got, []string{"prod-users"}) {
		t.Errorf("UserGroups(carol) = %q", got)
	}
	if got := next.UserGroups("mallory"); len(got) != 0 {
		t.Errorf("UserGroups(mallory) = %q, want none", got)
	}
}

func TestQueueACLNames(t *testing.T) {
	if SubmitApplications.String() != "SUBMIT_APPLICATIONS" || AdministerQueue.String() != "ADMINISTER_QUEUE" {
		t.Error("QueueACL names differ from Hadoop's")
	}
	if SubmitApplications.Proto() != yarnpb.QueueACLProto_QACL_SUBMIT_APPLICATIONS ||
		AdministerQueue.Proto() != yarnpb.QueueACLProto_QACL_ADMINISTER_QUEUE {
		t.Error("QueueACL numbers differ from QueueACLProto's")
	}
	if Running.Proto() != yarnpb.QueueStateProto_Q_RUNNING || Stopped.Proto() != yarnpb.QueueStateProto_Q_STOPPED ||
		Draining.Proto() != yarnpb.QueueStateProto_Q_DRAINING {
		t.Error("State numbers differ from QueueStateProto's")
	}
}
