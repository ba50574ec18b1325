package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
)

// httpGet fetches url and returns its status and body.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestWebUIAndNodeMetricsOfARunningApplication: on the local cluster, the
// RM's page of a running application names its AM container, the pod and
// the node's log link; the node's /metrics measures that container (a
// process tree on a process node) with its application, queue and user,
// and the node's report shows its containers' utilization; once killed,
// the page says KILLED.
func TestWebUIAndNodeMetricsOfARunningApplication(t *testing.T) {
	dumpOnFailure(t)
	rm := knitRM(t)
	rmc, app := submitShellAM(t, "sleep 600", 1, nil)
	appID, err := yarnid.ApplicationIDFromProto(app)
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if killed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rmc.KillApplication(ctx, app, "the web UI test is over")
	})
	var am *yarnpb.ContainerReportProto
	eventually.WithinEvery(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		r, err := rmc.GetApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if s := r.GetYarnApplicationState(); s != yarnpb.YarnApplicationStateProto_ACCEPTED && s != yarnpb.YarnApplicationStateProto_RUNNING {
			t.Fatalf("application %s: %s", s, r.GetDiagnostics())
		}
		attempts, err := rmc.GetApplicationAttempts(ctx, app)
		if err != nil || len(attempts) == 0 {
			return fmt.Errorf("attempts: %v", err)
		}
		cs, err := rmc.GetContainers(ctx, attempts[0].GetApplicationAttemptId())
		if err != nil || len(cs) == 0 {
			return fmt.Errorf("containers: %v", err)
		}
		am = cs[0]
		return nil
	})
	cid, err := yarnid.ContainerIDFromProto(am.GetContainerId())
	if err != nil {
		t.Fatal(err)
	}
	page := "http://" + rm.addrs.Web + "/cluster/app/" + appID.String() + "?user.name=dsuser"
	eventually.WithinEvery(t, time.Minute, time.Second, func(ctx context.Context) error {
		code, body, err := httpGet(ctx, page)
		if err != nil {
			return err
		}
		for _, want := range []string{cid.String(), "app-", am.GetLogUrl(), "shell-am"} {
			if code != http.StatusOK || !strings.Contains(body, want) {
				return fmt.Errorf("%s: %d, no %q in\n%s", page, code, want, body)
			}
		}
		return nil
	})

	// The node measures the AM's process tree.
	metrics := strings.TrimSuffix(am.GetNodeHttpAddress(), "/") + "/metrics"
	want := fmt.Sprintf(`knit_container_memory_rss_bytes{application=%q,container=%q,queue="root.default",user="dsuser"}`, appID.String(), cid.String())
	eventually.WithinEvery(t, time.Minute, time.Second, func(ctx context.Context) error {
		code, body, err := httpGet(ctx, metrics)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, want+" "); ok && v != "0" {
				return nil
			}
		}
		return fmt.Errorf("%s: %d, no %s in\n%s", metrics, code, want, body)
	})

	// The node publishes what its containers use, as a NodeManager's
	// heartbeat carries it: the AM's node report, over RPC and REST,
	// shows the containers' memory.
	yarn, err := ipc.NewClient(rm.addrs.Client, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "dsuser"})
	if err != nil {
		t.Fatal(err)
	}
	defer yarn.Close()
	amNode := fmt.Sprintf("%s:%d", am.GetNodeId().GetHost(), am.GetNodeId().GetPort())
	eventually.WithinEvery(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		var nodes yarnpb.GetClusterNodesResponseProto
		if err := yarn.Call(ctx, "getClusterNodes", &yarnpb.GetClusterNodesRequestProto{}, &nodes); err != nil {
			return err
		}
		for _, r := range nodes.GetNodeReports() {
			if fmt.Sprintf("%s:%d", r.GetNodeId().GetHost(), r.GetNodeId().GetPort()) != amNode {
				continue
			}
			if c := r.GetContainersUtilization(); c.GetPmem() <= 0 || c.GetVmem() <= 0 || r.GetNodeUtilization().GetPmem() <= 0 {
				return fmt.Errorf("node %s: containers utilization %v, node utilization %v", amNode, c, r.GetNodeUtilization())
			}
			return nil
		}
		return fmt.Errorf("no report of node %s in %v", amNode, nodes.GetNodeReports())
	})
	eventually.WithinEvery(t, time.Minute, time.Second, func(ctx context.Context) error {
		code, body, err := httpGet(ctx, "http://"+rm.addrs.Web+"/ws/v1/cluster/nodes/"+amNode)
		if err != nil {
			return err
		}
		var doc struct {
			Node struct {
				ResourceUtilization struct {
					AggregatedContainersPhysicalMemoryMB int32 `json:"aggregatedContainersPhysicalMemoryMB"`
				} `json:"resourceUtilization"`
			} `json:"node"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Node.ResourceUtilization.AggregatedContainersPhysicalMemoryMB <= 0 {
			return fmt.Errorf("REST node %s: %d %v\n%s", amNode, code, err, body)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := rmc.KillApplication(ctx, app, "killed from the web UI test"); err != nil {
		t.Fatal(err)
	}
	killed = true
	if r := waitFinal(t, rmc, app); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
		t.Fatalf("after the kill: %s", r.GetYarnApplicationState())
	}
	code, body, err := httpGet(ctx, page)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `id="app-state" class="state killed">KILLED<`) {
		t.Errorf("%s after the kill: %d %v\n%s", page, code, errors.Join(err), body)
	}
}
