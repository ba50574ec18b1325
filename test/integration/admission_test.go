package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// TestQueuesShareTheClusterAsTheCapacitySchedulerWould runs one process
// node (16 GiB, 8 vcores: eight 2 GiB, 1-vcore containers) under two
// leaves, root.a (25%, maximum 100%, user-limit-factor 4) and root.b (75%,
// maximum 75%), and an unmanaged AM in each asking for 20 containers, more
// than the cluster holds. YARN's rules give root.a its 2 and root.b its 6;
// the rest wait behind Knit's scheduling gate. When root.b's application
// ends, root.a grows into the room, up to all 8.
func TestQueuesShareTheClusterAsTheCapacitySchedulerWould(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeTwoLeaves(t, confDir)
	upWithConf(t, dir, confDir)
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(restCfg)

	amA := startUnmanagedAM(t, settings.Address, settings.SchedulerAddress, "alice", "a")
	amB := startUnmanagedAM(t, settings.Address, settings.SchedulerAddress, "bob", "b")
	// root.b asks first: whatever passes run before root.a's pods exist,
	// root.b stops at its maximum (6) and root.a gets the rest (2). Asked
	// the other way, root.a could take the idle cluster before root.b's
	// pods appear, and without preemption keep it, as on YARN.
	askFor20 := func(am *testAM) {
		t.Helper()
		if _, err := am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, "*", 20, 2048, 1, true)}}); err != nil {
			t.Fatal(err)
		}
	}
	askFor20(amB)
	// admitted counts each queue's pods without Knit's gate, and gated
	// those still behind it.
	counts := func(ctx context.Context) (admitted, gated map[string]int, err error) {
		pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelApplication})
		if err != nil {
			return nil, nil, err
		}
		admitted, gated = map[string]int{}, map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			q := p.Labels[launch.LabelQueue]
			if hasKnitGate(&p) {
				gated[q]++
			} else {
				admitted[q]++
			}
		}
		return admitted, gated, nil
	}
	converged := func(wantA, wantB int) {
		t.Helper()
		eventually.WithinEvery(t, 3*time.Minute, 500*time.Millisecond, func(context.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			admitted, gated, err := counts(ctx)
			if err != nil {
				return err
			}
			if admitted["root.a"] != wantA || admitted["root.b"] != wantB {
				return fmt.Errorf("admitted %v, gated %v; want root.a %d and root.b %d", admitted, gated, wantA, wantB)
			}
			return nil
		})
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admitted, gated, err := counts(ctx)
		if err != nil {
			return err
		}
		if admitted["root.b"]+gated["root.b"] != 20 {
			return fmt.Errorf("root.b's pods: %d admitted, %d gated; want 20", admitted["root.b"], gated["root.b"])
		}
		return nil
	})
	askFor20(amA)
	converged(2, 6)
	// The admitted pods bind and come to their AMs as containers.
	amA.collect("root.a's containers", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) == 2 })
	amB.collect("root.b's containers", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) == 6 })

	// root.b's application ends: its pods go and root.a takes the cluster.
	if err := amB.call("finishApplicationMaster", &yarnpb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}, &yarnpb.FinishApplicationMasterResponseProto{}); err != nil {
		t.Fatal(err)
	}
	converged(8, 0)
}

// hasKnitGate reports whether the pod still waits for Knit's admission.
func hasKnitGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == launch.SchedulingGate {
			return true
		}
	}
	return false
}

// startUnmanagedAM submits an unmanaged application of user to queue and
// registers its AM with the AMRMToken from the report.
func startUnmanagedAM(t *testing.T, clientAddr, schedulerAddr, user, queue string) *testAM {
	t.Helper()
	yarn, err := ipc.NewClient(clientAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: user})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { yarn.Close() })
	call := func(method string, req, resp proto.Message) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := yarn.Call(ctx, method, req, resp); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	var newApp yarnpb.GetNewApplicationResponseProto
	call("getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp)
	call("submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: newApp.ApplicationId, ApplicationName: proto.String("admission-" + queue), Queue: proto.String(queue),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}, &yarnpb.SubmitApplicationResponseProto{})
	var tok *yarnpb.GetApplicationReportResponseProto
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
		var r yarnpb.GetApplicationReportResponseProto
		call("getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: newApp.ApplicationId}, &r)
		if r.GetApplicationReport().GetAmRmToken() == nil {
			return errors.New("no AMRMToken in the report yet")
		}
		tok = &r
		return nil
	})
	cl, err := ipc.NewClient(schedulerAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: tok.GetApplicationReport().GetAmRmToken()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	am := &testAM{t: t, client: cl}
	am.register()
	return am
}

// TestPreemptionTakesContainersBackForAQueueBelowItsGuarantee: with the
// scheduler monitor on (a round every half second, two seconds for the AM
// to give back, a quarter of the cluster a round: YARN's default 10% of
// the 16 GiB node is less than one 2 GiB container, and the policy takes
// none larger than the round's budget), root.a holds all 8 containers
// when root.b's application asks for 6. root.a's AM hears of the containers taken back in a
// PreemptionMessage's contract, they complete PREEMPTED (-102), and root.b
// gets its guarantee.
func TestPreemptionTakesContainersBackForAQueueBelowItsGuarantee(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeTwoLeaves(t, confDir)
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.resourcemanager.scheduler.monitor.enable", Value: "true"},
		hadoopconf.Property{Name: "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval", Value: "500"},
		hadoopconf.Property{Name: "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill", Value: "2000"},
		hadoopconf.Property{Name: "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round", Value: "0.25"})
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	amA := startUnmanagedAM(t, settings.Address, settings.SchedulerAddress, "alice", "a")
	if _, err := amA.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, "*", 8, 2048, 1, true)}}); err != nil {
		t.Fatal(err)
	}
	held, _, _ := amA.collect("root.a's 8 containers", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) == 8 })

	amB := startUnmanagedAM(t, settings.Address, settings.SchedulerAddress, "bob", "b")
	if _, err := amB.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, "*", 6, 2048, 1, true)}}); err != nil {
		t.Fatal(err)
	}
	// root.a's AM: the contract names containers it holds, then they
	// complete PREEMPTED.
	heldIDs := map[string]bool{}
	for _, c := range held {
		heldIDs[c.GetId().String()] = true
	}
	var offered int
	var preempted []*yarnpb.ContainerStatusProto
	eventually.WithinEvery(t, 3*time.Minute, 200*time.Millisecond, func(context.Context) error {
		resp, err := amA.allocate(nil)
		if err != nil {
			return err
		}
		for _, c := range resp.GetPreempt().GetContract().GetContainer() {
			if !heldIDs[c.GetId().String()] {
				t.Errorf("the contract offers %v, not one of root.a's", c.GetId())
			}
			offered++
		}
		if s := resp.GetPreempt().GetStrictContract(); s != nil {
			t.Errorf("a strict contract for the queues' preemption: %v", s)
		}
		for _, s := range resp.GetCompletedContainerStatuses() {
			if s.GetExitStatus() == -102 {
				preempted = append(preempted, s)
			}
		}
		if offered == 0 || len(preempted) < 6 {
			return fmt.Errorf("%d containers offered, %d completed PREEMPTED", offered, len(preempted))
		}
		return nil
	})
	if d := preempted[0].GetDiagnostics(); d != "Container preempted by scheduler" {
		t.Errorf("diagnostics %q", d)
	}
	amB.collect("root.b's guarantee", func(a []*yarnpb.ContainerProto, _ []*yarnpb.ContainerStatusProto) bool { return len(a) == 6 })
}

// writeTwoLeaves writes the capacity-scheduler.xml of these tests: root.a
// (25%, maximum 100%, user-limit-factor 4) and root.b (75%, maximum 75%).
func writeTwoLeaves(t *testing.T, confDir string) {
	t.Helper()
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.queues", Value: "a,b"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.a.capacity", Value: "25"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.a.maximum-capacity", Value: "100"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.a.user-limit-factor", Value: "4"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.b.capacity", Value: "75"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.b.maximum-capacity", Value: "75"})
}

// upWithConf starts a one-node knit local in dir with the Hadoop
// configuration in confDir, and shows knit-rm's log if the test fails.
func upWithConf(t *testing.T, dir, confDir string) {
	t.Helper()
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "logs", "knit-rm.log")); err == nil {
				t.Logf("knit-rm.log:\n%s", tail(string(b), 60))
			}
		}
	})
}
