package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// TestKnitRMAnswersClientsAndKeepsApplicationsAcrossARestart runs knit-rm as `knit local up` starts it and
// talks to it as a Hadoop client does: through hadoop-conf/yarn-site.xml,
// over Hadoop RPC and REST. Then the whole cluster restarts on its kept
// folder, and the RM answers for the application as before, from the state
// it keeps in the Kubernetes API.
func TestKnitRMAnswersClientsAndKeepsApplicationsAcrossARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	run := knitLocal(t, dir)
	knit := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("knit local %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := knit("up", "--nodes", "1"); !strings.Contains(out, "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir)) {
		t.Fatalf("up does not name the Hadoop configuration:\n%s", out)
	}

	// A client finds the RM the way Hadoop's does: yarn-site.xml.
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method string, req, resp proto.Message) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		client, err := ipc.Dial(ctx, settings.Address, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice"})
		if err != nil {
			t.Fatalf("dial %s: %v", settings.Address, err)
		}
		defer client.Close()
		return client.Call(ctx, method, req, resp)
	}

	var newApp yarnpb.GetNewApplicationResponseProto
	if err := call("getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp); err != nil {
		t.Fatal(err)
	}
	sub := &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.ApplicationId,
		ApplicationName: proto.String("it"),
		Queue:           proto.String("default"),
		// Unmanaged: its AM runs outside the cluster, so `knit local down`
		// kills no AM container and the restart changes nothing YARN
		// would show (a killed AM container would start attempt 2).
		UnmanagedAm:     proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 1"}},
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}
	if err := call("submitApplication", sub, &yarnpb.SubmitApplicationResponseProto{}); err != nil {
		t.Fatal(err)
	}
	report := func() *yarnpb.ApplicationReportProto {
		t.Helper()
		var r yarnpb.GetApplicationReportResponseProto
		if err := call("getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: newApp.ApplicationId}, &r); err != nil {
			t.Fatal(err)
		}
		return r.GetApplicationReport()
	}
	before := report()
	// A YARN 3.4 RM reports the queue's full path, whatever name was submitted.
	if before.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED || before.GetUser() != "alice" || before.GetQueue() != "root.default" {
		t.Fatalf("report after submit: state %v user %q queue %q", before.GetYarnApplicationState(), before.GetUser(), before.GetQueue())
	}
	// So does `knit application -list`, configured by HADOOP_CONF_DIR alone.
	list := exec.Command(filepath.Join(binDir, "knit"), "application", "-list")
	list.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "HADOOP_USER_NAME=alice")
	out, err := list.CombinedOutput()
	appID, idErr := yarnid.ApplicationIDFromProto(newApp.ApplicationId)
	if idErr != nil {
		t.Fatal(idErr)
	}
	if err != nil || !strings.Contains(string(out), "Total number of applications") || !strings.Contains(string(out), appID.String()) {
		t.Errorf("knit application -list: %v\n%s", err, out)
	}

	// The REST API shows the same application.
	var st localcluster.State
	data, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + st.RM.Web + "/ws/v1/cluster/apps?user.name=alice")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"ACCEPTED"`) || !strings.Contains(string(body), `"name":"it"`) {
		t.Errorf("GET apps: %s\n%s", resp.Status, body)
	}

	// The cluster and its RM restart on the kept folder.
	knit("down")
	knit("up", "--nodes", "1")
	after := report()
	// The diagnostics of an ACCEPTED app carry the time its attempt was
	// added, which a restart sets again, as YARN's does.
	before.Diagnostics, after.Diagnostics = nil, nil
	if !proto.Equal(before, after) {
		t.Errorf("report changed across the restart:\nbefore %v\nafter  %v", before, after)
	}

	// REST updates are the RPC's: a new priority over REST is the one
	// the RPC report then gives; the statistics count the application.
	rest := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+st.RM.Web+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, got := rest(http.MethodPut, "/ws/v1/cluster/apps/"+appID.String()+"/priority?user.name=alice", `{"priority":1}`)
	if want := fmt.Sprintf(`{"priority":%d}`, report().GetPriority().GetPriority()); status != http.StatusOK || got != want {
		t.Errorf("PUT priority: %d %s, want %s", status, got, want)
	}
	status, got = rest(http.MethodGet, "/ws/v1/cluster/appstatistics?states=accepted", "")
	if want := `{"appStatInfo":{"statItem":[{"state":"ACCEPTED","type":"*","count":1}]}}`; status != http.StatusOK || got != want {
		t.Errorf("GET appstatistics: %d %s, want %s", status, got, want)
	}

	var kill yarnpb.KillApplicationResponseProto
	if err := call("forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: newApp.ApplicationId}, &kill); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
		if r := report(); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
			return fmt.Errorf("application not KILLED: %v", r)
		}
		return nil
	})
}
