package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"github.com/knitdev/knit/rm/conf"
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
	confDir := t.TempDir()
	writeTwoLeaves(t, confDir)
	settings, kube := upOneNode(t, confDir)

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
	converged := func(wantA, wantB int) {
		t.Helper()
		eventually.WithinEvery(t, 3*time.Minute, 500*time.Millisecond, func(context.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			admitted, gated, err := countPods(ctx, kube, launch.LabelQueue)
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
		admitted, gated, err := countPods(ctx, kube, launch.LabelQueue)
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

// countPods counts Knit's live pods by the value of their label by: those
// admitted (without Knit's scheduling gate) and those still gated.
func countPods(ctx context.Context, kube kubernetes.Interface, by string) (admitted, gated map[string]int, err error) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelApplication})
	if err != nil {
		return nil, nil, err
	}
	admitted, gated = map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if hasKnitGate(&p) {
			gated[p.Labels[by]]++
		} else {
			admitted[p.Labels[by]]++
		}
	}
	return admitted, gated, nil
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
	am, _ := startUnmanagedApp(t, clientAddr, schedulerAddr, user, queue, nil)
	return am
}

// startUnmanagedApp is startUnmanagedAM at an application priority (nil:
// the queue's default); it returns the application's id too.
func startUnmanagedApp(t *testing.T, clientAddr, schedulerAddr, user, queue string, priority *yarnpb.PriorityProto) (*testAM, *yarnpb.ApplicationIdProto) {
	t.Helper()
	call := clientCalls(t, clientAddr, user)
	id := submitApp(t, call, &yarnpb.ApplicationSubmissionContextProto{
		ApplicationName: proto.String("admission-" + queue), Queue: proto.String(queue), Priority: priority,
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	})
	var tok *yarnpb.GetApplicationReportResponseProto
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
		var r yarnpb.GetApplicationReportResponseProto
		call("getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: id}, &r)
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
	return am, id
}

// clientCalls connects to the RM's ApplicationClientProtocol as user for
// the test's length; a call that fails fails the test.
func clientCalls(t *testing.T, clientAddr, user string) func(method string, req, resp proto.Message) {
	t.Helper()
	yarn, err := ipc.NewClient(clientAddr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: user})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { yarn.Close() })
	return func(method string, req, resp proto.Message) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := yarn.Call(ctx, method, req, resp); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
}

// submitApp submits sub under a new application id, and returns the id.
func submitApp(t *testing.T, call func(method string, req, resp proto.Message), sub *yarnpb.ApplicationSubmissionContextProto) *yarnpb.ApplicationIdProto {
	t.Helper()
	var newApp yarnpb.GetNewApplicationResponseProto
	call("getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp)
	sub.ApplicationId = newApp.ApplicationId
	call("submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sub}, &yarnpb.SubmitApplicationResponseProto{})
	return newApp.ApplicationId
}

// TestPreemptionTakesContainersBackForAQueueBelowItsGuarantee: with the
// scheduler monitor on (a round every half second, two seconds for the AM
// to give back, a quarter of the cluster a round: YARN's default 10% of
// the 16 GiB node is less than one 2 GiB container, and the policy takes
// none larger than the round's budget), root.a holds all 8 containers
// when root.b's application asks for 6. root.a's AM hears of the containers taken back in a
// PreemptionMessage's contract, they complete PREEMPTED (-102), and root.b
// gets its guarantee; getQueueInfo says root.a's containers may be taken.
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
	// With the monitor on, getQueueInfo reports root.a's preemption on
	// and, intra-queue preemption being off, its preemption within it off.
	var info yarnpb.GetQueueInfoResponseProto
	clientCalls(t, settings.Address, "alice")("getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("a")}, &info)
	if q := info.GetQueueInfo(); q.GetPreemptionDisabled() || !q.GetIntraQueuePreemptionDisabled() {
		t.Errorf("root.a's preemption disabled %v, within it %v; want false, true", q.GetPreemptionDisabled(), q.GetIntraQueuePreemptionDisabled())
	}
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

// upOneNode starts a one-node knit local with the Hadoop configuration in
// confDir, and returns its RM's settings and a client of its API server.
func upOneNode(t *testing.T, confDir string) (conf.RMSettings, kubernetes.Interface) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "local")
	upWithConf(t, dir, confDir)
	return localRM(t, dir)
}

// localRM reads the settings of the RM of the knit local in dir, and makes
// a client of its API server.
func localRM(t *testing.T, dir string) (conf.RMSettings, kubernetes.Interface) {
	t.Helper()
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return settings, kubernetes.NewForConfigOrDie(restCfg)
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

// TestWithinALeafUsersOrderingPriorityAndAMLimitAreYARNs runs one process
// node (16 GiB, 8 vcores: eight 2 GiB, 1-vcore slots) under four leaves of
// 25% each, maximum 100% and user-limit-factor 4 (a user may take the
// whole cluster): root.users (minimum-user-limit-percent 50), root.fifo,
// root.fair (ordering-policy fair) and root.am (maximum-am-resource-percent
// 25%). Unmanaged AMs ask for 20 containers each, more than the cluster
// holds. A leaf's ordering shows only among applications that wait
// together, so each scenario's applications ask while the previous
// scenario's hold the whole cluster, and get the room when those end.
// Each scenario's admitted pods then fill the cluster: the numbers seen are
// final, not a moment of a pass.
func TestWithinALeafUsersOrderingPriorityAndAMLimitAreYARNs(t *testing.T) {
	confDir := t.TempDir()
	leaves := []hadoopconf.Property{{Name: "yarn.scheduler.capacity.root.queues", Value: "users,fifo,fair,am"}}
	for _, q := range []string{"users", "fifo", "fair", "am"} {
		leaves = append(leaves,
			hadoopconf.Property{Name: "yarn.scheduler.capacity.root." + q + ".capacity", Value: "25"},
			hadoopconf.Property{Name: "yarn.scheduler.capacity.root." + q + ".maximum-capacity", Value: "100"},
			hadoopconf.Property{Name: "yarn.scheduler.capacity.root." + q + ".user-limit-factor", Value: "4"})
	}
	leaves = append(leaves,
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.users.minimum-user-limit-percent", Value: "50"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.fair.ordering-policy", Value: "fair"},
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.am.maximum-am-resource-percent", Value: "0.25"})
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"), leaves...)
	// YARN caps an application's priority at the cluster's maximum, 0 by
	// default.
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.cluster.max-application-priority", Value: "10"})
	settings, kube := upOneNode(t, confDir)

	type app struct {
		am *testAM
		id string
	}
	start := func(user, queue string, priority int32) app {
		t.Helper()
		var p *yarnpb.PriorityProto
		if priority != 0 {
			p = &yarnpb.PriorityProto{Priority: proto.Int32(priority)}
		}
		am, id := startUnmanagedApp(t, settings.Address, settings.SchedulerAddress, user, queue, p)
		return app{am, idString(t, id)}
	}
	askFor := func(n int32, apps ...app) {
		t.Helper()
		for _, a := range apps {
			if _, err := a.am.allocate(&yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, "*", n, 2048, 1, true)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// settle waits until the live pods, by the value of their label by,
	// are admitted and gated as wanted.
	settle := func(what, by string, wantAdmitted, wantGated map[string]int) {
		t.Helper()
		eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			admitted, gated, err := countPods(ctx, kube, by)
			if err != nil {
				return err
			}
			if !maps.Equal(admitted, wantAdmitted) || !maps.Equal(gated, wantGated) {
				return fmt.Errorf("%s: admitted %v, gated %v; want %v and %v", what, admitted, gated, wantAdmitted, wantGated)
			}
			return nil
		})
	}
	// retire ends applications without their waiting pods taking room
	// their admitted ones free: they ask for nothing more, and end once
	// their gated pods are gone.
	retire := func(apps ...app) {
		t.Helper()
		askFor(0, apps...)
		eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, gated, err := countPods(ctx, kube, launch.LabelApplication)
			if err != nil {
				return err
			}
			for _, a := range apps {
				if gated[a.id] > 0 {
					return fmt.Errorf("%s still has %d gated pods", a.id, gated[a.id])
				}
			}
			return nil
		})
		for _, a := range apps {
			if err := a.am.call("finishApplicationMaster", &yarnpb.FinishApplicationMasterRequestProto{
				FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED.Enum()}, &yarnpb.FinishApplicationMasterResponseProto{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	byApp := launch.LabelApplication

	holder := start("carol", "fair", 0)
	askFor(8, holder)
	settle("the holder", byApp, map[string]int{holder.id: 8}, map[string]int{})

	// Two users, minimum-user-limit-percent 50. UsersManager.computeUserLimit:
	// below the leaf's guarantee (4 GiB) the current capacity is the
	// guarantee, above it what the leaf uses plus one minimum allocation
	// (1 GiB); a user's limit is the larger of half of it and the active
	// users' use plus 1 GiB over two, rounded up to 1 GiB; canAssignToUser
	// refuses a user only once over it. alice's application, submitted
	// first, is offered each container first:
	//   leaf use 0, 2: limit 2 GiB; alice (0, then 2 GiB) is not over it: alice.
	//   use 4: limit 3 GiB; alice (4) is over: bob.    use 6: limit 4; alice.
	//   use 8: limit 5; alice (6) over: bob.            use 10: limit 6; alice.
	//   use 12: limit 7; alice (8) over: bob.           use 14: limit 8; alice.
	// alice 5 containers, bob 3.
	alice, bob := start("alice", "users", 0), start("bob", "users", 0)
	askFor(20, alice, bob)
	settle("two users waiting", byApp, map[string]int{holder.id: 8}, map[string]int{alice.id: 20, bob.id: 20})
	retire(holder)
	settle("two users sharing root.users", byApp, map[string]int{alice.id: 5, bob.id: 3}, map[string]int{alice.id: 15, bob.id: 17})

	// FIFO, one user: the application submitted first is offered every
	// container first, and takes the 8.
	first, second := start("dave", "fifo", 0), start("dave", "fifo", 0)
	askFor(20, first, second)
	settle("FIFO's applications waiting", byApp, map[string]int{alice.id: 5, bob.id: 3},
		map[string]int{alice.id: 15, bob.id: 17, first.id: 20, second.id: 20})
	retire(alice, bob)
	settle("FIFO", byApp, map[string]int{first.id: 8}, map[string]int{first.id: 12, second.id: 20})

	// Priority under FIFO: an application submitted later at priority 5
	// goes before the earlier one at 0, and takes the 8 first's end frees.
	urgent := start("dave", "fifo", 5)
	askFor(20, urgent)
	settle("the urgent application waiting", byApp, map[string]int{first.id: 8},
		map[string]int{first.id: 12, second.id: 20, urgent.id: 20})
	retire(first)
	settle("priority", byApp, map[string]int{urgent.id: 8}, map[string]int{second.id: 20, urgent.id: 12})

	// Fair ordering, one user: FairOrderingPolicy offers the application
	// using less first, the earlier on a tie: the two alternate, 4 each.
	fair1, fair2 := start("erin", "fair", 0), start("erin", "fair", 0)
	askFor(20, fair1, fair2)
	settle("fair's applications waiting", byApp, map[string]int{urgent.id: 8},
		map[string]int{second.id: 20, urgent.id: 12, fair1.id: 20, fair2.id: 20})
	retire(second, urgent)
	settle("fair ordering", byApp, map[string]int{fair1.id: 4, fair2.id: 4}, map[string]int{fair1.id: 16, fair2.id: 16})
	retire(fair1, fair2)
	settle("an empty cluster", byApp, map[string]int{}, map[string]int{})

	// The AM limit counts AM containers, which unmanaged AMs have none of:
	// four managed AMs of a slot each (2 GiB, 1 vcore) go to root.am.
	// AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition: 25% of
	// what the leaf may use now, the empty cluster (16 GiB, 8 vcores), is
	// 4 GiB and 2 vcores, two AMs; the user's AM limit (25% of the 4 GiB
	// guarantee times user-limit-factor 4) is the same. The other two AMs
	// stay gated with six slots idle.
	call := clientCalls(t, settings.Address, "frank")
	var ams []*yarnpb.ApplicationIdProto
	for range 4 {
		id := submitApp(t, call, &yarnpb.ApplicationSubmissionContextProto{
			ApplicationName: proto.String("admission-am"), Queue: proto.String("am"),
			AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 300"}},
			Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(2048), VirtualCores: proto.Int32(1)},
		})
		ams = append(ams, id)
		t.Cleanup(func() {
			call("forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		})
	}
	byQueue := launch.LabelQueue
	settle("the AM limit", byQueue, map[string]int{"root.am": 2}, map[string]int{"root.am": 2})
	// The room they wait for is the AM limit's: when an admitted AM's
	// application ends, one more AM goes, and the last still waits.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelQueue + "=root.am"})
	if err != nil {
		t.Fatal(err)
	}
	var running string
	for _, p := range pods.Items {
		if !hasKnitGate(&p) {
			running = p.Labels[launch.LabelApplication]
		}
	}
	for _, id := range ams {
		if idString(t, id) == running {
			call("forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		}
	}
	settle("the AM limit after an AM ends", byQueue, map[string]int{"root.am": 2}, map[string]int{"root.am": 1})
}
