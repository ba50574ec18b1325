package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/rm/ha"
)

// serveHA serves HAServiceProtocol as an RM's admin port does, active or
// standby, for the admin user alice.
func serveHA(t *testing.T, active bool) string {
	t.Helper()
	svc, err := ha.NewService(ha.ServiceConfig{
		Active:    func() bool { return active },
		Authorize: func(_ context.Context, user string) bool { return user == "alice" },
		StepDown:  func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ipctest.Serve(t, ipc.Config{Simple: true}, commonrpc.HAServiceProtocolName, commonrpc.HAServiceProtocolMethods(svc)...)
}

func TestRMAdminHACommands(t *testing.T) {
	rm1, rm2 := serveHA(t, true), serveHA(t, false)
	dir := t.TempDir()
	site := fmt.Sprintf(`<configuration>
<property><name>yarn.resourcemanager.ha.enabled</name><value>true</value></property>
<property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1,rm2</value></property>
<property><name>yarn.resourcemanager.admin.address.rm1</name><value>%s</value></property>
<property><name>yarn.resourcemanager.admin.address.rm2</name><value>%s</value></property>
</configuration>`, rm1, rm2)
	if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	refusal := "Automatic failover is enabled for org.apache.hadoop.yarn.client.RMHAServiceTarget@rm1\n" +
		"Refusing to manually manage HA state, since it may cause\n" +
		"a split-brain scenario or other incorrect state.\n" +
		"If you are very sure you know what you are doing, please \n" +
		"specify the --forcemanual flag.\n"
	tests := []struct {
		name, user  string
		args        []string
		code        int
		out, errOut string
	}{
		{"state of rm1", "alice", []string{"-getServiceState", "rm1"}, 0, "active\n", ""},
		{"state of rm2", "alice", []string{"-getServiceState", "rm2"}, 0, "standby\n", ""},
		{"state of every RM", "alice", []string{"-getAllServiceState"}, 0,
			fmt.Sprintf("%-50s %-10s\n%-50s %-10s\n", rm1, "active", rm2, "standby"), ""},
		{"an unknown id", "alice", []string{"-getServiceState", "rm3"}, -1, "", "getServiceState: Invalid HA id \"rm3\": the ids are rm1,rm2\n"},
		{"a non-admin", "bob", []string{"-getServiceState", "rm1"}, -1, "", "getServiceState: User bob doesn't have permission to call 'getServiceState'\n"},
		{"a manual transition under automatic failover", "alice", []string{"-transitionToStandby", "rm1"}, -1, "", refusal},
		{"a forced transition to standby", "alice", []string{"-transitionToStandby", "--forcemanual", "rm1"}, 0, "", ""},
		{"a forced transition to active cannot take the Lease", "alice", []string{"-transitionToActive", "--forcemanual", "rm2"}, -1, "",
			"transitionToActive: This ResourceManager becomes active only by winning its Lease; a forced transition to active cannot take it from the leader\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			code := Run(ctx, append([]string{"rmadmin"}, tt.args...), &out, &errOut, Config{User: tt.user, ConfDir: dir})
			wantCode(t, tt.name, code, tt.code)
			diff(t, "stdout", out.String(), tt.out)
			diff(t, "stderr", errOut.String(), tt.errOut)
		})
	}
}
