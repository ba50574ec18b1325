package procnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/knitdev/knit/test/controlplane"
)

// TestWithControlPlane runs two process nodes against a real etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager: the
// scheduler binds the pods, the ServiceAccount admission plugin adds the
// kube-api-access volume, graceful deletion is the API server's.
func TestWithControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	client, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(cp.Server, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	parent := t
	withAPI := func(cfg *Config) { cfg.APIServerHost, cfg.APIServerPort = host, port }
	dir1, dir2 := t.TempDir(), t.TempDir()
	node1 := runNode(t, client, dir1, withAPI)
	node2 := runNode(t, client, dir2, withAPI, func(cfg *Config) { cfg.Name, cfg.Address = "node-2", "127.0.1.2" })
	for _, name := range []string{"node-1", "node-2"} {
		waitFor(t, 60*time.Second, name+" ready and untainted", func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && !hasNotReadyTaint(n) && len(n.Spec.Taints) == 0
		})
	}

	t.Run("scheduled pod, termination message, service account", func(t *testing.T) {
		p := schedulablePod("boom", "node-2", corev1.RestartPolicyNever,
			sh("main", `d=/var/run/secrets/kubernetes.io/serviceaccount; `+
				`[ -s $d/token ] && grep -q CERTIFICATE $d/ca.crt && echo "ns=$(cat $d/namespace) api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT ip=$MY_IP"; `+
				`echo boom > /dev/termination-log; exit 3`))
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MY_IP", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
		createPod(t, client, p)
		got := waitPod(t, client, "boom", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if got.Spec.NodeName != "node-2" || got.Status.PodIP != "127.0.1.2" {
			t.Errorf("node %s, podIP %s", got.Spec.NodeName, got.Status.PodIP)
		}
		hasSA := false
		for _, v := range got.Spec.Volumes {
			hasSA = hasSA || strings.HasPrefix(v.Name, "kube-api-access-")
		}
		if !hasSA {
			t.Error("no kube-api-access volume: admission did not run?")
		}
		term := containerStatusOf(got, "main").State.Terminated
		if term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.Message != "boom" {
			t.Errorf("terminated = %+v", term)
		}
		want := "ns=default api=" + host + ":" + port + " ip=127.0.1.2\n"
		if l := readLog(t, dir2, got, "main", 0); l != want {
			t.Errorf("log = %q, want %q", l, want)
		}
	})

	t.Run("status is stable once written", func(t *testing.T) {
		createPod(t, client, schedulablePod("steady", "node-1", corev1.RestartPolicyAlways, sh("main", "sleep 1000")))
		got := waitPod(t, client, "steady", "ready", func(p *corev1.Pod) bool {
			c := condition(p.Status, corev1.PodReady)
			return c != nil && c.Status == corev1.ConditionTrue
		})
		// What the node would write now must equal what the API server
		// stored, or every sync would write the status again.
		paths := newPodPaths(dir1, got.Namespace, got.Name, got.UID)
		obs, err := node1.observe("default/steady", got, paths)
		if err != nil {
			t.Fatal(err)
		}
		want := computePodStatus(statusInput{Pod: got, Obs: obs, SandboxReady: true, Address: "127.0.1.1", Now: time.Now()})
		if !apiequality.Semantic.DeepEqual(got.Status, want) {
			t.Errorf("stored status differs from the computed one:\nstored   %+v\ncomputed %+v", got.Status, want)
		}
	})

	t.Run("image patch restarts the container", func(t *testing.T) {
		waitPod(t, client, "steady", "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		patch := `{"spec":{"containers":[{"name":"main","image":"busybox:2"}]}}`
		if _, err := client.CoreV1().Pods("default").Patch(ctx, "steady", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		got := waitPod(t, client, "steady", "restarted", func(p *corev1.Pod) bool {
			st := containerStatusOf(p, "main")
			return st.RestartCount == 1 && st.State.Running != nil && st.Image == "busybox:2"
		})
		if last := containerStatusOf(got, "main").LastTerminationState.Terminated; last == nil || last.ExitCode != 143 {
			t.Errorf("last termination = %+v", last)
		}
	})

	t.Run("crash loop back-off", func(t *testing.T) {
		createPod(t, client, schedulablePod("crash", "node-1", corev1.RestartPolicyAlways, sh("main", "exit 1")))
		waitPod(t, client, "crash", "CrashLoopBackOff after two restarts", func(p *corev1.Pod) bool {
			st := containerStatusOf(p, "main")
			return st != nil && st.RestartCount >= 2 && st.State.Waiting != nil && st.State.Waiting.Reason == reasonCrashLoopBackOff
		})
	})

	t.Run("restarted node adopts its processes", func(t *testing.T) {
		before := containerStatusOf(waitPod(t, client, "steady", "running", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning
		}), "main")
		p, err := client.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		run := newPodPaths(dir1, p.Namespace, p.Name, p.UID).attempt("main", int(before.RestartCount))
		node1.stop(t)
		// Owned by the whole test: a subtest's clean-up would stop it (and
		// StopAll its pods) when the subtest ends.
		node1 = runNode(parent, client, dir1, withAPI)
		waitFor(t, 60*time.Second, "the new node to watch the running container", func() bool {
			node1.mu.Lock()
			defer node1.mu.Unlock()
			_, ok := node1.watched[run.Spec]
			return ok
		})
		got := waitPod(t, client, "steady", "still running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		after := containerStatusOf(got, "main")
		if after.ContainerID != before.ContainerID || after.RestartCount != before.RestartCount || after.State.Running == nil {
			t.Errorf("after restart %+v, before %+v", after, before)
		}
	})

	t.Run("graceful deletion", func(t *testing.T) {
		got, err := client.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := node1.runsIn(newPodPaths(dir1, got.Namespace, got.Name, got.UID).root)
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs = %v, %v", runs, err)
		}
		shim := runs[0].State
		if err := client.CoreV1().Pods("default").Delete(ctx, "steady", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		podRoot := newPodPaths(dir1, got.Namespace, got.Name, got.UID).root
		waitFor(t, 60*time.Second, "pod gone from the API and the disk", func() bool {
			_, err := client.CoreV1().Pods("default").Get(ctx, "steady", metav1.GetOptions{})
			_, statErr := os.Stat(podRoot)
			return err != nil && os.IsNotExist(statErr)
		})
		if !gone(shim.ShimPID, shim.ShimStart) {
			t.Error("shim still runs")
		}
	})

	t.Run("in-place resize", func(t *testing.T) {
		// node-2 has 8 cpu; boom, the only other pod there, has ended.
		p := schedulablePod("resize", "node-2", corev1.RestartPolicyAlways, sh("main", "sleep 1000"))
		p.Spec.Containers[0] = withResources(p.Spec.Containers[0], res("cpu", "500m", "memory", "128Mi"))
		createPod(t, client, p)
		got := waitPod(t, client, "resize", "running with its resources reported", func(p *corev1.Pod) bool {
			st := containerStatusOf(p, "main")
			return st != nil && st.State.Running != nil && st.Resources != nil
		})
		if st := containerStatusOf(got, "main"); !apiequality.Semantic.DeepEqual(*st.Resources, got.Spec.Containers[0].Resources) ||
			!apiequality.Semantic.DeepEqual(st.AllocatedResources, got.Spec.Containers[0].Resources.Requests) ||
			got.Status.QOSClass != corev1.PodQOSGuaranteed {
			t.Fatalf("at start: resources %v, allocated %v, qos %s", st.Resources, st.AllocatedResources, got.Status.QOSClass)
		}

		// resize patches the resize subresource keeping requests = limits
		// (a resize may not change the QoS class) and returns the pod's
		// new generation.
		resize := func(cpu string) int64 {
			t.Helper()
			patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":%q,"memory":"128Mi"},"limits":{"cpu":%q,"memory":"128Mi"}}}]}}`, cpu, cpu)
			out, err := client.CoreV1().Pods("default").Patch(ctx, "resize", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
			if err != nil {
				t.Fatal(err)
			}
			return out.Generation
		}
		// accepted: the node has seen generation gen and allocated cpu.
		accepted := func(gen int64, cpu string) func(*corev1.Pod) bool {
			return func(p *corev1.Pod) bool {
				st := containerStatusOf(p, "main")
				return p.Status.ObservedGeneration >= gen && condition(p.Status, corev1.PodResizePending) == nil &&
					st.AllocatedResources.Cpu().Equal(resource.MustParse(cpu)) && st.Resources != nil &&
					st.Resources.Limits.Cpu().Equal(resource.MustParse(cpu)) && st.Resources.Requests.Cpu().Equal(resource.MustParse(cpu))
			}
		}
		pending := func(gen int64, reason string) func(*corev1.Pod) bool {
			return func(p *corev1.Pod) bool {
				c := condition(p.Status, corev1.PodResizePending)
				return c != nil && c.Reason == reason && c.ObservedGeneration == gen
			}
		}
		allocatedCPU := func(p *corev1.Pod) string { return containerStatusOf(p, "main").AllocatedResources.Cpu().String() }

		gen := resize("1")
		if gen <= got.Generation {
			t.Errorf("resize left the generation at %d", gen)
		}
		waitPod(t, client, "resize", "resize to 1 cpu accepted", accepted(gen, "1"))

		gen = resize("16")
		got = waitPod(t, client, "resize", "resize to 16 cpu infeasible", pending(gen, corev1.PodReasonInfeasible))
		if c := condition(got.Status, corev1.PodResizePending); c.Message != "Node didn't have enough capacity: cpu, requested: 16000, capacity: 8000" {
			t.Errorf("infeasible message = %q", c.Message)
		}
		if cpu := allocatedCPU(got); cpu != "1" {
			t.Errorf("infeasible resize allocated cpu %s", cpu)
		}
		// A pending resize does not make every sync write the status.
		paths := newPodPaths(dir2, got.Namespace, got.Name, got.UID)
		obs, err := node2.observe("default/resize", got, paths)
		if err != nil {
			t.Fatal(err)
		}
		rz, err := node2.syncResize("default/resize", got, paths, obs)
		if err != nil {
			t.Fatal(err)
		}
		want := computePodStatus(statusInput{Pod: got, Obs: obs, SandboxReady: true, Allocated: rz.Allocated,
			ResizePending: rz.Pending, Address: "127.0.1.2", Now: time.Now()})
		if !apiequality.Semantic.DeepEqual(got.Status, want) {
			t.Errorf("stored status differs from the computed one:\nstored   %+v\ncomputed %+v", got.Status, want)
		}

		// The scheduler counts a pod with an infeasible resize at what its
		// node allocated (1 cpu), so 6 more cpu fit on node-2.
		hog := schedulablePod("hog", "node-2", corev1.RestartPolicyAlways, sh("main", "sleep 1000"))
		hog.Spec.Containers[0] = withResources(hog.Spec.Containers[0], res("cpu", "6", "memory", "64Mi"))
		createPod(t, client, hog)
		waitPod(t, client, "hog", "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

		// 4 cpu fit the node but not beside the hog: deferred until it goes.
		gen = resize("4")
		got = waitPod(t, client, "resize", "resize to 4 cpu deferred", pending(gen, corev1.PodReasonDeferred))
		if c := condition(got.Status, corev1.PodResizePending); c.Message != "Node didn't have enough resource: cpu, requested: 4000, used: 6000, capacity: 8000" {
			t.Errorf("deferred message = %q", c.Message)
		}
		if err := client.CoreV1().Pods("default").Delete(ctx, "hog", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, client, "resize", "deferred resize accepted once the hog is gone", accepted(gen, "4"))
	})

	t.Run("pods of a node share its address", func(t *testing.T) {
		createPod(t, client, schedulablePod("web", "node-1", corev1.RestartPolicyNever, sh("main", "echo $HOSTNAME")))
		got := waitPod(t, client, "web", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if got.Status.HostIP != "127.0.1.1" || len(got.Status.PodIPs) != 1 || got.Status.PodIPs[0].IP != "127.0.1.1" {
			t.Errorf("IPs: %+v", got.Status)
		}
		if l := readLog(t, dir1, got, "main", 0); l != "web\n" {
			t.Errorf("log = %q", l)
		}
		entries, _ := os.ReadDir(filepath.Join(dir1, podsFolder))
		if len(entries) == 0 {
			t.Error("no pod folders")
		}
	})
}

// schedulablePod is a pod for the scheduler to place on node (by its
// hostname label).
func schedulablePod(name, node string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	p := boundPod(name, policy, containers...)
	p.UID, p.Status = "", corev1.PodStatus{}
	p.Spec.NodeName = ""
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return p
}
