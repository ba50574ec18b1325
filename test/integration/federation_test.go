package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	rmstore "github.com/knitdev/knit/rm/store"
	"github.com/knitdev/knit/test/eventually"
)

// TestAFederationOfTwoKnitRMsServesAClientThroughTheRouter runs a YARN
// Federation on the local cluster: two knit-rm sub-clusters (sc1, sc2),
// each with its own namespace in the one control plane, registered in a
// federation store of a third namespace, and knit-router in front. A Knit
// client talks to the Router alone, as to one RM: it submits to the home
// the queue's policy in the store picks, reads the report and the merged
// list, and kills; a restarted Router answers for what the old one
// submitted. Its applications are unmanaged, so neither RM creates
// pods the other one's informers would also see.
func TestAFederationOfTwoKnitRMsServesAClientThroughTheRouter(t *testing.T) {
	buildFederation(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	fedNS, st := federationStore(t, "federation-")

	rms := map[string]*subCluster{}
	for _, id := range []string{"sc1", "sc2"} {
		rms[id] = startSubCluster(t, id, fedNS)
	}
	routerAddr, adminAddr, webAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	// The Router's machine list puts a node (one no sub-cluster runs: the
	// applications' AMs are unmanaged) in each sub-cluster.
	machines := filepath.Join(t.TempDir(), "machines")
	if err := os.WriteFile(machines, []byte("node-of-sc1, sc1, rack-1\nnode-of-sc2, sc2, rack-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	routerConf := writeSite(t, []hadoopconf.Property{
		{Name: hadoopconf.KeyFederationMachineList, Value: machines},
		{Name: hadoopconf.KeyRouterClientRMAddress, Value: routerAddr},
		{Name: hadoopconf.KeyRouterRMAdminAddress, Value: adminAddr},
		{Name: hadoopconf.KeyRouterWebappAddress, Value: webAddr},
		// No cache: the policies this test sets apply to the next submission.
		{Name: hadoopconf.KeyFederationCacheTTL, Value: "0"},
		// A sub-cluster silent for 3 s is lost.
		{Name: hadoopconf.KeyRouterSubClusterHeartbeatExpiration, Value: "3s"},
		{Name: hadoopconf.KeyRouterSubClusterCleanerInterval, Value: "500ms"},
	})
	startRouter := func(name string) (stop func(*testing.T)) {
		stop, _ = startProcess(t, name, "knit-router", routerConf, "--kubeconfig", cluster.ControlPlane.Kubeconfig, "--namespace", fedNS)
		return stop
	}
	stopRouter := startRouter("knit-router")

	// Both sub-clusters register and heartbeat SC_RUNNING with their
	// cluster metrics and, as their start time, their RMs' cluster
	// timestamps: two different ones, though the RMs started together.
	eventually.WithinEvery(t, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		active, err := st.GetSubClusters(ctx, true)
		if err != nil {
			return err
		}
		if len(active) != 2 {
			return fmt.Errorf("active sub-clusters %v", active)
		}
		for _, sc := range active {
			if !bytes.Contains([]byte(sc.Capability), []byte(`"clusterMetrics"`)) || sc.ClientRMServiceAddress != rms[sc.ID].client {
				return fmt.Errorf("sub-cluster %+v", sc)
			}
			cm, err := cluster.Client.CoreV1().ConfigMaps(rms[sc.ID].ns).Get(ctx, rmstore.ClusterConfigMap, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ts := cm.Data["clusterTimestamp"]; ts != strconv.FormatInt(sc.LastStartTime.UnixMilli(), 10) {
				return fmt.Errorf("sub-cluster %s started at %d, its RM's cluster timestamp is %s", sc.ID, sc.LastStartTime.UnixMilli(), ts)
			}
		}
		if active[0].LastStartTime.Equal(active[1].LastStartTime) {
			return fmt.Errorf("both sub-clusters under cluster timestamp %d", active[0].LastStartTime.UnixMilli())
		}
		return nil
	})
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		for _, addr := range []string{routerAddr, adminAddr, webAddr} {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	})
	admin, err := ipc.Dial(ctx, adminAddr, ipc.ClientConfig{Protocol: yarnrpc.ResourceManagerAdministrationProtocolName, User: "admin", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var scs yarnpb.GetSubClustersResponseProto
	if err := admin.Call(ctx, "getFederationSubClusters", &yarnpb.GetSubClustersRequestProto{}, &scs); err != nil || len(scs.GetSubClusters()) != 2 {
		t.Fatalf("getFederationSubClusters: %v, %v", scs.GetSubClusters(), err)
	}

	c, err := client.NewRMClient(routerAddr, client.RMConfig{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each submission's home is the one sub-cluster the policy an admin
	// saved through the Router weighs.
	var apps []*yarnpb.ApplicationIdProto
	for _, home := range []string{"sc2", "sc1"} {
		weights := home + ":1.0"
		if err := admin.Call(ctx, "saveFederationQueuePolicy", &yarnpb.SaveFederationQueuePolicyRequestProto{
			Queue: proto.String(federation.DefaultPolicyQueue), PolicyManagerClassName: proto.String(federation.WeightedHomePolicyManager),
			FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String(weights), AmrmWeight: proto.String(weights), HeadRoomAlpha: proto.String("1.0")},
		}, &yarnpb.SaveFederationQueuePolicyResponseProto{}); err != nil {
			t.Fatal(err)
		}
		newApp, id := submitUnmanaged(ctx, t, c, "federated")
		if got, err := st.GetApplicationHomeSubCluster(ctx, id.String()); err != nil || got != home {
			t.Fatalf("home of %s = %q, %v; want %s", id, got, err, home)
		}
		// The home RM has it, the other does not.
		for scID, sc := range rms {
			_, err := sc.rm.GetApplicationReport(ctx, newApp.GetApplicationId())
			if (scID == home) != (err == nil) {
				t.Errorf("%s asked directly for %s (home %s): %v", scID, id, home, err)
			}
		}
		report, err := c.GetApplicationReport(ctx, newApp.GetApplicationId())
		if err != nil {
			t.Fatal(err)
		}
		if report.GetUser() != "alice" || report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
			t.Errorf("report of %s through the Router: user %q, state %v", id, report.GetUser(), report.GetYarnApplicationState())
		}
		apps = append(apps, newApp.GetApplicationId())
	}

	// Under a WeightedLocalityPolicyManager policy an AM asked on a node
	// goes to the sub-cluster of the node, whatever the weights draw.
	if err := admin.Call(ctx, "saveFederationQueuePolicy", &yarnpb.SaveFederationQueuePolicyRequestProto{
		Queue: proto.String(federation.DefaultPolicyQueue), PolicyManagerClassName: proto.String(federation.WeightedLocalityPolicyManager),
		FederationQueueWeight: &yarnpb.FederationQueueWeightProto{RouterWeight: proto.String("sc1:0.5,sc2:0.5"), AmrmWeight: proto.String("sc1:0.5,sc2:0.5"),
			HeadRoomAlpha: proto.String("1.0")},
	}, &yarnpb.SaveFederationQueuePolicyResponseProto{}); err != nil {
		t.Fatal(err)
	}
	for _, home := range []string{"sc2", "sc1", "sc2", "sc1"} {
		newApp, id := submitUnmanaged(ctx, t, c, "located", "node-of-"+home, "rack-"+home[2:], "*")
		if got, err := st.GetApplicationHomeSubCluster(ctx, id.String()); err != nil || got != home {
			t.Fatalf("home of %s, asked on node-of-%s = %q, %v; want %s", id, home, got, err, home)
		}
		apps = append(apps, newApp.GetApplicationId())
	}

	rc, err := ipc.Dial(ctx, routerAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	// A knit-rm has no reservation system: through the Router a
	// reservation is the Java Router's refusal, and its home stays in the
	// store, as YARN's Router leaves it.
	reservation := &yarnpb.ReservationIdProto{ClusterTimestamp: proto.Int64(1), Id: proto.Int64(1)}
	err = rc.Call(ctx, "submitReservation", &yarnpb.ReservationSubmissionRequestProto{ReservationId: reservation, Queue: proto.String("default"),
		ReservationDefinition: &yarnpb.ReservationDefinitionProto{Arrival: proto.Int64(1), Deadline: proto.Int64(2)}}, &yarnpb.ReservationSubmissionResponseProto{})
	if e, ok := yarnerr.Find(err); !ok || e.Class != yarnerr.YarnException || e.Message != "Reservation reservation_1_0001 failed to be submitted." {
		t.Errorf("a reservation through the Router: %v", err)
	}
	if _, err := st.GetReservationHomeSubCluster(ctx, "reservation_1_0001"); err != nil {
		t.Errorf("home of the refused reservation: %v", err)
	}

	// The list through the Router holds both sub-clusters' applications.
	var list yarnpb.GetApplicationsResponseProto
	if err := rc.Call(ctx, "getApplications", &yarnpb.GetApplicationsRequestProto{}, &list); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, a := range list.GetApplications() {
		id, _ := yarnid.ApplicationIDFromProto(a.GetApplicationId())
		listed = append(listed, id.String())
	}
	for _, app := range apps {
		id, _ := yarnid.ApplicationIDFromProto(app)
		if !slices.Contains(listed, id.String()) {
			t.Errorf("the merged list %v lacks %s", listed, id)
		}
	}
	checkRouterWeb(ctx, t, webAddr, apps)

	// An application no sub-cluster has is YARN's Router's YarnException.
	unknown := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1}
	if _, err := c.GetApplicationReport(ctx, unknown.Proto()); !errors.Is(err, yarnerr.YarnException) || errors.Is(err, yarnerr.ApplicationNotFound) {
		t.Errorf("report of an unknown application: %v", err)
	}

	for _, app := range apps {
		if err := c.KillApplication(ctx, app, "federation test"); err != nil {
			t.Fatal(err)
		}
		report, err := c.GetApplicationReport(ctx, app)
		if err != nil || report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
			t.Errorf("after the kill: %v, %v", report.GetYarnApplicationState(), err)
		}
	}

	// The Router keeps nothing of its own: a new one answers for the
	// applications the old one submitted.
	stopRouter(t)
	startRouter("knit-router-2")
	for _, app := range apps {
		var report *yarnpb.ApplicationReportProto
		eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) (err error) {
			report, err = c.GetApplicationReport(ctx, app)
			return err
		})
		if report.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
			t.Errorf("after the Router's restart: %v", report.GetYarnApplicationState())
		}
	}

	// A sub-cluster whose RM dies without a word is marked lost by the
	// Router, and new submissions go to the live one.
	rms["sc2"].kill(t)
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		got, err := st.GetSubCluster(ctx, "sc2")
		if err != nil || got.State != fedstore.StateLost {
			return fmt.Errorf("sc2 after its RM died: %v, %v; want SC_LOST", got.State, err)
		}
		return nil
	})
	if err := st.SetPolicyConfiguration(ctx, fedstore.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.UniformBroadcastPolicyManager}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, id := submitUnmanaged(ctx, t, c, "after the loss")
		if home, err := st.GetApplicationHomeSubCluster(ctx, id.String()); err != nil || home != "sc1" {
			t.Errorf("home of %s after sc2 was lost: %q, %v; want sc1", id, home, err)
		}
	}

	// A sub-cluster that stops cleanly leaves the federation.
	rms["sc1"].stop(t)
	got, err := st.GetSubCluster(ctx, "sc1")
	if err != nil || got.State != fedstore.StateUnregistered {
		t.Errorf("sc1 after its RM stopped: %v, %v; want SC_UNREGISTERED", got.State, err)
	}
}

// checkRouterWeb checks the Router's web address against the two
// sub-clusters: the merged REST list holds the applications of both, a
// report comes from the application's home, and the federation page lists
// both sub-clusters running.
func checkRouterWeb(ctx context.Context, t *testing.T, webAddr string, apps []*yarnpb.ApplicationIdProto) {
	t.Helper()
	get := func(path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+webAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	status, b := get("/ws/v1/cluster/apps?user.name=alice")
	var list struct {
		Apps struct {
			App []struct {
				ID   string `json:"id"`
				User string `json:"user"`
			} `json:"app"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(b, &list); status != http.StatusOK || err != nil {
		t.Fatalf("REST apps through the Router: %d %v %s", status, err, b)
	}
	var listed []string
	for _, a := range list.Apps.App {
		listed = append(listed, a.ID)
	}
	for _, app := range apps {
		id, _ := yarnid.ApplicationIDFromProto(app)
		if !slices.Contains(listed, id.String()) {
			t.Errorf("the merged REST list %v lacks %s", listed, id)
		}
		status, b := get("/ws/v1/cluster/apps/" + id.String() + "?user.name=alice")
		if status != http.StatusOK || !bytes.Contains(b, []byte(`"id":"`+id.String()+`"`)) || !bytes.Contains(b, []byte(`"user":"alice"`)) {
			t.Errorf("REST report of %s through the Router: %d %s", id, status, b)
		}
	}
	// A new priority goes to the application's home and is its answer; the
	// statistics count every sub-cluster's applications.
	first, _ := yarnid.ApplicationIDFromProto(apps[0])
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+webAddr+"/ws/v1/cluster/apps/"+first.String()+"/priority?user.name=alice",
		bytes.NewReader([]byte(`{"priority":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	put, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if status, b := get("/ws/v1/cluster/apps/" + first.String() + "/priority"); resp.StatusCode != http.StatusOK || status != http.StatusOK || string(b) != string(put) {
		t.Errorf("PUT priority through the Router: %d %s; GET: %d %s", resp.StatusCode, put, status, b)
	}
	status, b = get("/ws/v1/cluster/appstatistics")
	var stats struct {
		AppStatInfo struct {
			StatItem []struct{ Count int } `json:"statItem"`
		} `json:"appStatInfo"`
	}
	total := 0
	if err := json.Unmarshal(b, &stats); status != http.StatusOK || err != nil {
		t.Errorf("appstatistics through the Router: %d %v %s", status, err, b)
	}
	for _, it := range stats.AppStatInfo.StatItem {
		total += it.Count
	}
	if total < len(apps) {
		t.Errorf("appstatistics through the Router count %d applications, want at least %d: %s", total, len(apps), b)
	}
	status, b = get("/cluster/federation")
	for _, want := range []string{">sc1</a>", ">sc2</a>", "SC_RUNNING"} {
		if status != http.StatusOK || !bytes.Contains(b, []byte(want)) {
			t.Errorf("federation page (%d) lacks %s:\n%s", status, want, b)
		}
	}
}

// submitUnmanaged submits an application with an unmanaged AM through c
// (no pod for it in any sub-cluster) and returns its id.
func submitUnmanaged(ctx context.Context, t *testing.T, c *client.RMClient, name string, amOn ...string) (*yarnpb.GetNewApplicationResponseProto, yarnid.ApplicationID) {
	t.Helper()
	newApp, err := c.GetNewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: newApp.GetApplicationId(), ApplicationName: proto.String(name), Queue: proto.String("default"),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: yarnpb.NewResource(1024, 1),
	}
	for _, resource := range amOn {
		asc.AmContainerResourceRequest = append(asc.AmContainerResourceRequest, &yarnpb.ResourceRequestProto{ResourceName: proto.String(resource),
			NumContainers: proto.Int32(1), Capability: yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(0)},
			RelaxLocality: proto.Bool(true)})
	}
	if err := c.SubmitApplication(ctx, asc); err != nil {
		t.Fatal(err)
	}
	id, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		t.Fatal(err)
	}
	return newApp, id
}

// subCluster is one knit-rm of the federation.
type subCluster struct {
	client string
	// ns is the namespace of the RM's state.
	ns string
	rm *client.RMClient
	// stop ends the RM with SIGTERM, kill with SIGKILL.
	stop, kill func(t *testing.T)
}

func startSubCluster(t *testing.T, id, fedNS string) *subCluster {
	t.Helper()
	ns := newNamespace(t, "fed-"+id+"-")
	sc := &subCluster{client: freeAddr(t), ns: ns}
	confDir := writeSite(t, []hadoopconf.Property{
		{Name: "yarn.resourcemanager.hostname", Value: "127.0.0.1"},
		{Name: hadoopconf.KeyRMAddress, Value: sc.client},
		{Name: hadoopconf.KeyRMSchedulerAddress, Value: freeAddr(t)},
		{Name: hadoopconf.KeyRMAdminAddress, Value: freeAddr(t)},
		{Name: hadoopconf.KeyRMWebappAddress, Value: freeAddr(t)},
		{Name: hadoopconf.KeyRMClusterID, Value: id},
		{Name: hadoopconf.KeyFederationEnabled, Value: "true"},
		{Name: hadoopconf.KeyFederationHeartbeatInterval, Value: "1"},
		{Name: hadoopconf.KeyFederationHeartbeatInitialDelay, Value: "1"},
	})
	sc.stop, sc.kill = startProcess(t, "knit-rm-"+id, "knit-rm", confDir, "--kubeconfig", cluster.ControlPlane.Kubeconfig, "--namespace", ns,
		"--conf-dir", confDir, "--rks-address", freeAddr(t), "--node-root", t.TempDir(), "--federation-namespace", fedNS)
	rm, err := client.NewRMClient(sc.client, client.RMConfig{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	sc.rm = rm
	return sc
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := cluster.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// writeSite writes a yarn-site.xml of props in a new folder and returns it.
func writeSite(t *testing.T, props []hadoopconf.Property) string {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := hadoopconf.Write(&buf, props); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startProcess runs binDir/binary as name with HADOOP_CONF_DIR=confDir
// and args, its output in a log the test prints if it fails; the returned
// stop (run at the test's end too) ends it with SIGTERM, kill with SIGKILL,
// and both wait for it.
func startProcess(t *testing.T, name, binary, confDir string, args ...string) (stop, kill func(t *testing.T)) {
	t.Helper()
	bin := filepath.Join(binDir, binary)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	end := func(t *testing.T, sig syscall.Signal) {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(sig)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 30s of SIGTERM", name)
		}
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, tail(string(out), 60))
		}
	}
	t.Cleanup(func() { end(t, syscall.SIGTERM) })
	return func(t *testing.T) { end(t, syscall.SIGTERM) }, func(t *testing.T) { end(t, syscall.SIGKILL) }
}
