package cli

import "testing"

func TestRMAdminPrintsWhatYarnRmadminPrints(t *testing.T) {
	e := newTestRM(t)
	const usage = "Usage: yarn rmadmin\n"
	tests := []struct {
		name, user string
		args       []string
		code       int
		out        string
		// errOut is stderr, or its first line when errPrefix is set.
		errOut    string
		errPrefix bool
	}{
		// Where RMAdminCLI prints nothing, Knit says what the RM now has.
		{name: "refreshQueues reports the queues", user: "alice", args: []string{"rmadmin", "-refreshQueues"},
			out: "the ResourceManager's queues: root, root.default, root.b\n"},
		{name: "a user not on yarn.admin.acl", user: "bob", args: []string{"rmadmin", "-refreshQueues"}, code: -1,
			errOut: "refreshQueues: org.apache.hadoop.security.AccessControlException: User bob doesn't have permission to call 'refreshQueues'\n"},
		{name: "refreshAdminAcls", user: "alice", args: []string{"rmadmin", "-refreshAdminAcls"}},
		{name: "service ACLs are off", user: "alice", args: []string{"rmadmin", "-refreshServiceAcl"}, code: -1,
			errOut: "refreshServiceAcl: java.io.IOException: Service Authorization (hadoop.security.authorization) not enabled.\n"},
		{name: "groups of the caller", user: "alice", args: []string{"rmadmin", "-getGroups"}, out: "alice :\n"},
		{name: "groups of named users", user: "alice", args: []string{"rmadmin", "-getGroups", "carol", "dave"}, out: "carol :\ndave :\n"},
		{name: "a refresh takes no argument", user: "alice", args: []string{"rmadmin", "-refreshQueues", "now"}, code: -1,
			errOut: "Usage: yarn rmadmin [-refreshQueues]\n"},
		{name: "an unknown command", user: "alice", args: []string{"rmadmin", "-transitionToActive"}, code: -1,
			errOut: "transitionToActive: Unknown command\n", errPrefix: true},
		{name: "no command", user: "alice", args: []string{"rmadmin"}, code: -1, errOut: usage, errPrefix: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := e.runAs(tt.user, tt.args...)
			wantCode(t, tt.name, code, tt.code)
			diff(t, "stdout", out, tt.out)
			if tt.errPrefix && len(errOut) >= len(tt.errOut) {
				errOut = errOut[:len(tt.errOut)]
			}
			diff(t, "stderr", errOut, tt.errOut)
		})
	}
}
