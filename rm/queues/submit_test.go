package queues

import (
	"errors"
	"testing"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// counts is an AppCounts over fixed numbers.
type counts struct {
	total  int
	queue  map[string]int // by path
	byUser map[string]int // by path + "/" + user
}

func (c counts) Total() int                   { return c.total }
func (c counts) InQueue(path string) int      { return c.queue[path] }
func (c counts) ByUser(path, user string) int { return c.byUser[path+"/"+user] }

const appID = "application_1700000000000_0001"

func TestCheckSubmitAnswersAsYARN(t *testing.T) {
	secure := fixtureTree(t, Options{ACLsEnabled: true, AdminACL: acl.Parse("yarn"), Groups: groupsOf})
	open := fixtureTree(t, Options{Groups: groupsOf})
	tests := []struct {
		name     string
		tree     *Tree
		user     string
		queue    string
		apps     counts
		wantPath string
		// wantClass is the exception submitApplication throws; empty for
		// a rejected application.
		wantClass yarnerr.Class
		wantMsg   string
		wantErr   error
	}{
		{name: "a user on the parent's list enters by path", tree: secure, user: "alice", queue: "root.dev.reports",
			wantPath: "root.dev.reports"},
		{name: "a group member enters by short name", tree: secure, user: "carol", queue: "etl",
			wantPath: "root.prod.etl"},
		{name: "the queue's administrator may submit", tree: secure, user: "ops", queue: "etl",
			wantPath: "root.prod.etl"},
		{name: "without yarn.acl.enable anyone may submit", tree: open, user: "mallory", queue: "etl",
			wantPath: "root.prod.etl"},
		{
			name: "the ACLs refuse a stranger synchronously", tree: secure, user: "mallory", queue: "etl",
			wantClass: yarnerr.YarnException,
			wantMsg:   "org.apache.hadoop.security.AccessControlException: User mallory does not have permission to submit application_1700000000000_0001 to queue etl",
			wantErr:   ErrAccessDenied,
		},
		{
			// RMAppManager checks ACLs before the scheduler counts.
			name: "the ACL check comes before the system limit", tree: secure, user: "mallory", queue: "etl",
			apps:      counts{total: 10000},
			wantClass: yarnerr.YarnException,
			wantMsg:   "org.apache.hadoop.security.AccessControlException: User mallory does not have permission to submit application_1700000000000_0001 to queue etl",
			wantErr:   ErrAccessDenied,
		},
		{
			name: "the system limit", tree: secure, user: "carol", queue: "etl", apps: counts{total: 10000},
			wantMsg: "Maximum system application limit reached,cannot accept submission of application: application_1700000000000_0001",
			wantErr: ErrQueueFull,
		},
		{
			// The ACL check skips a queue it cannot find; the scheduler
			// rejects the application afterwards.
			name: "an unknown queue", tree: secure, user: "mallory", queue: "nope",
			wantMsg: "Application application_1700000000000_0001 submitted by user mallory to unknown queue: nope",
			wantErr: ErrUnknownQueue,
		},
		{
			name: "an ambiguous short name", tree: secure, user: "alice", queue: "reports",
			wantMsg: "Application application_1700000000000_0001 submitted by user alice to ambiguous queue: reports please use full queue path instead.",
			wantErr: ErrAmbiguousQueue,
		},
		{
			name: "a parent queue", tree: secure, user: "alice", queue: "dev",
			wantMsg: "Application application_1700000000000_0001 submitted by user : alice to non-leaf queue : dev",
			wantErr: ErrNotLeaf,
		},
		{
			name: "a stopped queue", tree: secure, user: "alice", queue: "alpha",
			wantMsg: "org.apache.hadoop.security.AccessControlException: Queue root.dev.alpha is STOPPED. Cannot accept submission of application: application_1700000000000_0001",
			wantErr: ErrQueueStopped,
		},
		{
			name: "a queue at its maximum applications", tree: secure, user: "carol", queue: "root.prod.reports",
			apps:    counts{total: 20, queue: map[string]int{"root.prod.reports": 20}},
			wantMsg: "org.apache.hadoop.security.AccessControlException: Queue root.prod.reports already has 20 applications, cannot accept submission of application: application_1700000000000_0001",
			wantErr: ErrQueueFull,
		},
		{
			name: "one below the maximum is accepted", tree: secure, user: "carol", queue: "root.prod.reports",
			apps:     counts{total: 19, queue: map[string]int{"root.prod.reports": 19}},
			wantPath: "root.prod.reports",
		},
		{
			name: "a user at the per-user maximum", tree: secure, user: "carol", queue: "etl",
			apps: counts{total: 1500, queue: map[string]int{"root.prod.etl": 1500},
				byUser: map[string]int{"root.prod.etl/carol": 1500}},
			wantMsg: "org.apache.hadoop.security.AccessControlException: Queue root.prod.etl already has 1500 applications from user carol cannot accept submission of application: application_1700000000000_0001",
			wantErr: ErrQueueFull,
		},
		{
			name: "another user still fits", tree: secure, user: "ops", queue: "etl",
			apps: counts{total: 1500, queue: map[string]int{"root.prod.etl": 1500},
				byUser: map[string]int{"root.prod.etl/carol": 1500}},
			wantPath: "root.prod.etl",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := tt.tree.CheckSubmit(Submission{AppID: appID, User: tt.user, Queue: tt.queue}, tt.apps)
			if tt.wantMsg == "" {
				if err != nil || q.Path != tt.wantPath {
					t.Fatalf("CheckSubmit = %v, %v; want %s", q, err, tt.wantPath)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.wantErr) {
				t.Fatalf("CheckSubmit = %v, want an *Error wrapping %v", err, tt.wantErr)
			}
			if e.Class != tt.wantClass || e.Message != tt.wantMsg {
				t.Errorf("class %q message\n%s\nwant class %q message\n%s", e.Class, e.Message, tt.wantClass, tt.wantMsg)
			}
			if e.Rejected() != (tt.wantClass == "") {
				t.Errorf("Rejected() = %v", e.Rejected())
			}
		})
	}
}

// A synchronous refusal is the YarnException a Java client unwraps; a
// rejection has no exception.
func TestSubmitErrorsMapToExceptions(t *testing.T) {
	tree := fixtureTree(t, Options{ACLsEnabled: true, Groups: groupsOf})
	_, err := tree.CheckSubmit(Submission{AppID: appID, User: "mallory", Queue: "etl"}, counts{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatal(err)
	}
	ex := e.Exception()
	if ex == nil || ex.Class != yarnerr.YarnException || ex.Message != e.Message || !errors.Is(ex, ErrAccessDenied) ||
		!errors.Is(ex, yarnerr.YarnException) {
		t.Errorf("Exception() = %+v", ex)
	}
	_, err = tree.CheckSubmit(Submission{AppID: appID, User: "alice", Queue: "alpha"}, counts{})
	if !errors.As(err, &e) || e.Exception() != nil || e.Error() != e.Message {
		t.Errorf("a rejection: %v, Exception %v", err, e.Exception())
	}
}
