package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// testAM is an application master written against Knit's RPC client, as
// AMRMClient behaves: absolute asks, response ids, re-registration.
type testAM struct {
	t          *testing.T
	client     *ipc.Client
	responseID int32
}

func (am *testAM) call(method string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return am.client.Call(ctx, method, req, resp)
}

func (am *testAM) register() *yarnpb.RegisterApplicationMasterResponseProto {
	am.t.Helper()
	var resp yarnpb.RegisterApplicationMasterResponseProto
	req := &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("test-am/127.0.0.1"), RpcPort: proto.Int32(-1), TrackingUrl: proto.String("")}
	if err := am.call("registerApplicationMaster", req, &resp); err != nil {
		am.t.Fatalf("register: %v", err)
	}
	am.responseID = 0
	return &resp
}

// allocate sends one heartbeat and moves the response id on.
func (am *testAM) allocate(req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	if req == nil {
		req = &yarnpb.AllocateRequestProto{}
	}
	req.ResponseId = proto.Int32(am.responseID)
	if req.BlacklistRequest == nil {
		req.BlacklistRequest = &yarnpb.ResourceBlacklistRequestProto{}
	}
	var resp yarnpb.AllocateResponseProto
	if err := am.call("allocate", req, &resp); err != nil {
		return nil, err
	}
	am.responseID = resp.GetResponseId()
	return &resp, nil
}

// collect heartbeats until cond is true of everything received so far.
func (am *testAM) collect(what string, cond func(allocated []*yarnpb.ContainerProto, completed []*yarnpb.ContainerStatusProto) bool) ([]*yarnpb.ContainerProto, []*yarnpb.ContainerStatusProto, []*yarnpb.NMTokenProto) {
	am.t.Helper()
	var allocated []*yarnpb.ContainerProto
	var completed []*yarnpb.ContainerStatusProto
	var tokens []*yarnpb.NMTokenProto
	eventually.WithinEvery(am.t, 90*time.Second, 200*time.Millisecond, func(context.Context) error {
		if cond(allocated, completed) {
			return nil
		}
		resp, err := am.allocate(nil)
		if err != nil {
			am.t.Fatalf("%s: allocate: %v", what, err)
		}
		allocated = append(allocated, resp.GetAllocatedContainers()...)
		completed = append(completed, resp.GetCompletedContainerStatuses()...)
		tokens = append(tokens, resp.GetNmTokens()...)
		return fmt.Errorf("%s: %d allocated, %d completed", what, len(allocated), len(completed))
	})
	return allocated, completed, tokens
}

func ask(priority int32, name string, n int32, memoryMB int64, vcores int32, relax bool) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority:             &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ResourceName:         proto.String(name),
		Capability:           &yarnpb.ResourceProto{Memory: proto.Int64(memoryMB), VirtualCores: proto.Int32(vcores)},
		NumContainers:        proto.Int32(n),
		RelaxLocality:        proto.Bool(relax),
		ExecutionTypeRequest: &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum(), EnforceExecutionType: proto.Bool(false)},
		AllocationRequestId:  proto.Int64(0),
	}
}

// restartRM stops the knit-rm of the local cluster in dir and starts it
// again with the same command line, leaving the nodes and their pods alone,
// as a Deployment restarts a crashed RM.
func restartRM(t *testing.T, dir, waitFor string) {
	t.Helper()
	var args []string
	var pid int
	for _, line := range processesMentioning(dir) {
		p, _, _ := strings.Cut(line, ":")
		raw, err := os.ReadFile("/proc/" + p + "/cmdline")
		if err != nil {
			continue
		}
		fields := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(fields[0]) == "knit-rm" {
			args = fields
			pid, _ = strconv.Atoi(p)
		}
	}
	if pid == 0 {
		t.Fatal("no knit-rm process found")
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = proc.Signal(syscall.SIGTERM)
	eventually.True(t, 30*time.Second, "knit-rm to stop", func() bool { return syscall.Kill(pid, 0) != nil })
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "knit-rm.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// A restarted RM is a standby until it has its Lease back and has
	// recovered: only then does it say ACTIVE and serve as the RM.
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
		resp, err := http.Get("http://" + settings.WebappAddress + "/ws/v1/cluster/info")
		if err != nil {
			return fmt.Errorf("restarted knit-rm does not answer: %w", err)
		}
		var info struct {
			ClusterInfo struct {
				HAState string `json:"haState"`
			} `json:"clusterInfo"`
		}
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if err != nil || info.ClusterInfo.HAState != "ACTIVE" {
			return fmt.Errorf("restarted knit-rm's haState %q (%v)", info.ClusterInfo.HAState, err)
		}
		conn, err := net.DialTimeout("tcp", waitFor, time.Second)
		if err != nil {
			return fmt.Errorf("restarted knit-rm does not listen: %w", err)
		}
		return conn.Close()
	})
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func remoteClass(err error) yarnerr.Class {
	if e, ok := yarnerr.Find(err); ok {
		return e.Class
	}
	return yarnerr.Class(fmt.Sprint(err))
}

// TestAMGetsContainersAsPodsBind runs an unmanaged AM against knit-rm on a
// two-node local cluster: it registers with the AMRMToken from its report,
// asks across priorities, localities and capabilities, receives containers
// as the scheduler binds their pods, lowers an ask, releases, blacklists,
// has bad asks refused, resyncs after an RM restart and finishes.
func TestAMGetsContainersAsPodsBind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	run := knitLocal(t, dir)
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "logs", "knit-rm.log")); err == nil {
				t.Logf("knit-rm.log:\n%s", tail(string(b), 80))
			}
		}
	})
	up := func() {
		t.Helper()
		if out, err := run("up", "--nodes", "2"); err != nil {
			t.Fatalf("knit local up: %v\n%s", err, out)
		}
	}
	up()
	settings, kube := localRM(t, dir)

	yarn, err := ipc.NewClient(settings.Address, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer yarn.Close()
	clientCall := func(method string, req, resp proto.Message) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := yarn.Call(ctx, method, req, resp); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	var newApp yarnpb.GetNewApplicationResponseProto
	clientCall("getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp)
	appID, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		t.Fatal(err)
	}
	clientCall("submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.ApplicationId,
		ApplicationName: proto.String("test-am"),
		Queue:           proto.String("default"),
		UnmanagedAm:     proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}, &yarnpb.SubmitApplicationResponseProto{})
	report := func() *yarnpb.ApplicationReportProto {
		t.Helper()
		var r yarnpb.GetApplicationReportResponseProto
		clientCall("getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: newApp.ApplicationId}, &r)
		return r.GetApplicationReport()
	}
	// An unmanaged AM's submitter reads its AMRMToken from the report.
	token := report().GetAmRmToken()
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
		if token = report().GetAmRmToken(); token == nil {
			return errors.New("no AMRMToken in the report of an unmanaged AM")
		}
		return nil
	})
	dialAM := func() *testAM {
		cl, err := ipc.NewClient(settings.SchedulerAddress, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return &testAM{t: t, client: cl}
	}
	am := dialAM()

	if _, err := am.allocate(nil); remoteClass(err) != yarnerr.ApplicationMasterNotRegistered {
		t.Fatalf("allocate before register: %v, want %s", err, yarnerr.ApplicationMasterNotRegistered)
	}
	reg := am.register()
	if mem, vc := yarnpb.MemoryAndVcores(reg.GetMaximumCapability()); mem != 8192 || vc != 4 || reg.GetQueue() != "root.default" || len(reg.GetResourceTypes()) < 2 {
		t.Fatalf("register answer: max %d MB %d vcores, queue %q, %d resource types", mem, vc, reg.GetQueue(), len(reg.GetResourceTypes()))
	}
	if err := am.call("registerApplicationMaster", &yarnpb.RegisterApplicationMasterRequestProto{}, &yarnpb.RegisterApplicationMasterResponseProto{}); remoteClass(err) != yarnerr.InvalidApplicationMasterRequest {
		t.Fatalf("second register: %v", err)
	}

	nodes, err := kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	hostOf := map[string]string{} // YARN host (InternalIP) -> node name
	var hosts []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				hostOf[a.Address] = n.Name
				hosts = append(hosts, a.Address)
			}
		}
	}
	slices.Sort(hosts)
	// The NM port is the one the local cluster picked: YARN's 8041 where
	// free, another where something (a cluster from make local) holds it.
	var clusterNodes yarnpb.GetClusterNodesResponseProto
	clientCall("getClusterNodes", &yarnpb.GetClusterNodesRequestProto{}, &clusterNodes)
	nmPort := map[string]int32{}
	for _, r := range clusterNodes.GetNodeReports() {
		nmPort[r.GetNodeId().GetHost()] = r.GetNodeId().GetPort()
	}

	// Two anywhere at priority 1; one on the second node only at priority 2
	// (10 MB, normalised up to the minimum allocation).
	if _, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{
		ask(1, "*", 2, 1024, 1, true),
		ask(2, hosts[1], 1, 10, 1, true),
		ask(2, "/default-rack", 1, 10, 1, true),
		ask(2, "*", 1, 10, 1, false),
	}}); err != nil {
		t.Fatal(err)
	}
	got, _, nmTokens := am.collect("three containers", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) >= 3 })
	if len(got) != 3 {
		t.Fatalf("%d containers, want 3", len(got))
	}
	seen := map[string]bool{}
	for _, ctr := range got {
		id, err := yarnid.ContainerIDFromProto(ctr.GetId())
		if err != nil || id.Attempt.App != appID || id.Sequence < 2 || seen[id.String()] {
			t.Errorf("container id %v (%v)", id, err)
		}
		seen[id.String()] = true
		if mem, _ := yarnpb.MemoryAndVcores(ctr.GetResource()); mem != 1024 {
			t.Errorf("%s: %d MB, want the normalised 1024", id, mem)
		}
		if ctr.GetContainerToken() == nil || ctr.GetNodeId().GetPort() == 0 || ctr.GetNodeId().GetPort() != nmPort[ctr.GetNodeId().GetHost()] || hostOf[ctr.GetNodeId().GetHost()] == "" {
			t.Errorf("%s: node %v token %v", id, ctr.GetNodeId(), ctr.GetContainerToken() != nil)
		}
		if ctr.GetPriority().GetPriority() == 2 && ctr.GetNodeId().GetHost() != hosts[1] {
			t.Errorf("%s: strict ask for %s placed on %s", id, hosts[1], ctr.GetNodeId().GetHost())
		}
		pods, err := kube.CoreV1().Pods("knit").List(t.Context(), metav1.ListOptions{LabelSelector: launch.LabelContainer + "=" + id.String()})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != hostOf[ctr.GetNodeId().GetHost()] {
			t.Errorf("%s: pod %v (%v)", id, pods, err)
		}
	}
	tokenNodes := map[string]bool{}
	for _, tok := range nmTokens {
		tokenNodes[tok.GetNodeId().GetHost()] = true
	}
	for _, ctr := range got {
		if !tokenNodes[ctr.GetNodeId().GetHost()] {
			t.Errorf("no NMToken for %s", ctr.GetNodeId().GetHost())
		}
	}

	// Asks Kubernetes cannot place stay pending pods; lowering the ask
	// deletes the pods no longer asked for.
	pending := func() int {
		pods, err := kube.CoreV1().Pods("knit").List(t.Context(), metav1.ListOptions{LabelSelector: launch.LabelApplication + "=" + appID.String() + "," + launch.LabelPriority + "=3"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	waitPending := func(want int) {
		t.Helper()
		eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
			if n := pending(); n != want {
				if _, err := am.allocate(nil); err != nil {
					t.Fatal(err)
				}
				return fmt.Errorf("%d pending pods, want %d", n, want)
			}
			return nil
		})
	}
	gpu := ask(3, "*", 5, 1024, 1, true)
	gpu.NodeLabelExpression = proto.String("gpu")
	if _, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{gpu}}); err != nil {
		t.Fatal(err)
	}
	waitPending(5)
	gpu.NumContainers = proto.Int32(1)
	if _, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{gpu}}); err != nil {
		t.Fatal(err)
	}
	waitPending(1)

	// Bad asks are refused whole and change nothing.
	for _, bad := range []*yarnpb.ResourceRequestProto{
		ask(3, "*", 1, 100000, 1, true),
		ask(3, "*", 1, -1, 1, true),
		ask(3, "*", 1, 1024, 64, true),
		func() *yarnpb.ResourceRequestProto {
			r := ask(3, "*", 1, 1024, 1, true)
			r.NodeLabelExpression = proto.String("gpu && fast")
			return r
		}(),
	} {
		before := am.responseID
		_, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{gpu, bad}})
		if cls := remoteClass(err); cls != yarnerr.InvalidResourceRequest && cls != yarnerr.InvalidLabelResourceRequest {
			t.Errorf("ask %v: %v, want an invalid resource request", bad, err)
		}
		am.responseID = before
	}
	waitPending(1)

	// A repeated request gets the same answer; one out of order is refused.
	last, err := am.allocate(nil)
	if err != nil {
		t.Fatal(err)
	}
	var again yarnpb.AllocateResponseProto
	if err := am.call("allocate", &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(last.GetResponseId() - 1), BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{}}, &again); err != nil || again.GetResponseId() != last.GetResponseId() {
		t.Errorf("repeated request: %v, response id %d, want %d", err, again.GetResponseId(), last.GetResponseId())
	}
	if err := am.call("allocate", &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(last.GetResponseId() + 5)}, &again); remoteClass(err) != yarnerr.InvalidApplicationMasterRequest {
		t.Errorf("out-of-order request: %v", err)
	}

	// A release completes the container once, as ABORTED, and removes its pod.
	released := got[0].GetId()
	releasedID, _ := yarnid.ContainerIDFromProto(released)
	rel, err := am.allocate(&yarnpb.AllocateRequestProto{Release: []*yarnpb.ContainerIdProto{released}})
	if err != nil {
		t.Fatal(err)
	}
	done := rel.GetCompletedContainerStatuses()
	if len(done) == 0 {
		_, done, _ = am.collect("released container", func(_ []*yarnpb.ContainerProto, c []*yarnpb.ContainerStatusProto) bool { return len(c) > 0 })
	}
	// Each completed container is reported once.
	if _, later, _ := am.collect("no repeat", func([]*yarnpb.ContainerProto, []*yarnpb.ContainerStatusProto) bool { return true }); len(later) != 0 {
		t.Errorf("completed statuses repeated: %v", later)
	}
	if len(done) != 1 || !proto.Equal(done[0].GetContainerId(), released) || done[0].GetExitStatus() != -100 {
		t.Errorf("completed after release: %v", done)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		pods, err := kube.CoreV1().Pods("knit").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelContainer + "=" + releasedID.String()})
		if err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("pod of released %s still there", releasedID)
		}
		return nil
	})

	// A blacklisted node gets none of the next containers.
	if _, err := am.allocate(&yarnpb.AllocateRequestProto{
		Ask:              []*yarnpb.ResourceRequestProto{ask(4, "*", 2, 1024, 1, true)},
		BlacklistRequest: &yarnpb.ResourceBlacklistRequestProto{BlacklistAdditions: []string{hosts[0]}},
	}); err != nil {
		t.Fatal(err)
	}
	more, _, _ := am.collect("containers off the blacklist", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) >= 2 })
	for _, ctr := range more {
		if ctr.GetNodeId().GetHost() == hosts[0] {
			t.Errorf("container on blacklisted %s", hosts[0])
		}
	}

	// knit-rm restarts while its pods run on; the AM is told to register
	// again and keeps its containers.
	restartRM(t, dir, settings.SchedulerAddress)
	am = dialAM()
	if _, err := am.allocate(nil); remoteClass(err) != yarnerr.ApplicationMasterNotRegistered {
		t.Fatalf("allocate after RM restart: %v, want %s", err, yarnerr.ApplicationMasterNotRegistered)
	}
	am.register()
	if _, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{gpu}}); err != nil {
		t.Fatalf("allocate after re-register: %v", err)
	}
	var containers yarnpb.GetContainersResponseProto
	clientCall("getContainers", &yarnpb.GetContainersRequestProto{ApplicationAttemptId: yarnid.AttemptID{App: appID, ID: 1}.Proto()}, &containers)
	running := 0
	for _, r := range containers.GetContainers() {
		if r.GetContainerState() != yarnpb.ContainerStateProto_C_COMPLETE {
			running++
		}
	}
	if running != 4 {
		t.Errorf("%d containers not complete after restart, want the 4 kept", running)
	}
	waitPending(1)

	// Finishing unregisters at once; the application ends and its pods go.
	var fin yarnpb.FinishApplicationMasterResponseProto
	if err := am.call("finishApplicationMaster", &yarnpb.FinishApplicationMasterRequestProto{FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum(), Diagnostics: proto.String("done")}, &fin); err != nil || !fin.GetIsUnregistered() {
		t.Fatalf("finish: %v, unregistered %v", err, fin.GetIsUnregistered())
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		r := report()
		pods, err := kube.CoreV1().Pods("knit").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelApplication + "=" + appID.String()})
		if err != nil {
			return err
		}
		if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FINISHED || len(pods.Items) != 0 {
			return fmt.Errorf("after finish: state %v, %d pods left", r.GetYarnApplicationState(), len(pods.Items))
		}
		if r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED || !strings.Contains(r.GetDiagnostics(), "done") {
			t.Errorf("final report: %v %q", r.GetFinalApplicationStatus(), r.GetDiagnostics())
		}
		return nil
	})
}
