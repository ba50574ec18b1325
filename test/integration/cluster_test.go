package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/test/procnode"
)

// namespace makes a fresh namespace for one test and deletes it after.
func namespace(t *testing.T) string {
	t.Helper()
	name := "t-" + rand.String(8)
	if err := cluster.CreateNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitPod waits until the pod satisfies done and returns it.
func waitPod(t *testing.T, ns, name string, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 2*time.Minute, fmt.Sprintf("pod %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return done(p), nil
	})
	return pod
}

func phaseIs(phase corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == phase }
}

func shellPod(name string, restart corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "busybox:1",
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

func createPod(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := cluster.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

func TestKubectlRunInAFreshNamespace(t *testing.T) {
	ns := namespace(t)
	out, err := cluster.ControlPlane.Kubectl(context.Background(), "run", "hello", "-n", ns,
		"--image=busybox:1", "--restart=Never", "--command", "--", "sh", "-c", "echo hello from $HOSTNAME").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl run: %v\n%s", err, out)
	}
	pod := waitPod(t, ns, "hello", "succeeded", phaseIs(corev1.PodSucceeded))
	logs := containerLog(t, pod, "hello", 0)
	if got, want := strings.TrimSpace(logs), "hello from hello"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	out, err = cluster.ControlPlane.Kubectl(context.Background(), "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "node/"); got != clusterNodes {
		t.Errorf("kubectl get nodes lists %d nodes, want %d:\n%s", got, clusterNodes, out)
	}
}

// containerLog reads a container's log where its node keeps it.
func containerLog(t *testing.T, pod *corev1.Pod, container string, restart int) string {
	t.Helper()
	pattern := filepath.Join(cluster.ControlPlane.Dir, "nodes", pod.Spec.NodeName, "pods",
		pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container, strconv.Itoa(restart)+".log")
	data, err := procnode.ReadLog(pattern)
	if err != nil {
		t.Fatalf("container log: %v", err)
	}
	return string(data)
}

func TestPodRunsItsCommandAndSucceeds(t *testing.T) {
	ns := namespace(t)
	pod := shellPod("ok", corev1.RestartPolicyNever, `echo "$GREETING from $POD_NAME on $NODE_NAME"; test "$(pwd)" = /tmp`)
	pod.Spec.Containers[0].WorkingDir = "/tmp"
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "GREETING", Value: "hi"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
	}
	createPod(t, ns, pod)
	got := waitPod(t, ns, "ok", "succeeded", phaseIs(corev1.PodSucceeded))

	if len(got.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses = %+v", got.Status.ContainerStatuses)
	}
	term := got.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Fatalf("terminated = %+v, want exit 0 Completed", term)
	}
	if term.StartedAt.IsZero() || term.FinishedAt.Before(&term.StartedAt) {
		t.Errorf("start %v and finish %v out of order", term.StartedAt, term.FinishedAt)
	}
	if got.Status.HostIP == "" || got.Status.PodIP != got.Status.HostIP || got.Status.StartTime == nil {
		t.Errorf("hostIP %q podIP %q startTime %v", got.Status.HostIP, got.Status.PodIP, got.Status.StartTime)
	}
	want := "hi from ok on " + got.Spec.NodeName
	if log := strings.TrimSpace(containerLog(t, got, "main", 0)); log != want {
		t.Errorf("log = %q, want %q", log, want)
	}
}

func TestFailingCommandReportsExitCodeAndTerminationMessage(t *testing.T) {
	ns := namespace(t)
	createPod(t, ns, shellPod("fail", corev1.RestartPolicyNever, `echo "disk on fire" > /dev/termination-log; exit 3`))
	got := waitPod(t, ns, "fail", "failed", phaseIs(corev1.PodFailed))
	term := got.Status.ContainerStatuses[0].State.Terminated
	if term == nil {
		t.Fatalf("container not terminated: %+v", got.Status.ContainerStatuses[0].State)
	}
	if term.ExitCode != 3 || term.Reason != "Error" || strings.TrimSpace(term.Message) != "disk on fire" {
		t.Errorf("terminated = exit %d reason %q message %q, want 3, Error, %q", term.ExitCode, term.Reason, term.Message, "disk on fire")
	}
}

func TestObjectOwnedByDeletedPodIsGarbageCollected(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	createPod(t, ns, shellPod("owner", corev1.RestartPolicyAlways, "sleep 1000"))
	pod := waitPod(t, ns, "owner", "running", phaseIs(corev1.PodRunning))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "owned",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			}},
		},
		StringData: map[string]string{"token": "x"},
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "owned secret collected", func(ctx context.Context) (bool, error) {
		_, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// processesWith lists the pids whose environment holds marker.
func processesWith(t *testing.T, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if !running(pid) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func TestDeletingAPodKillsItsProcessTree(t *testing.T) {
	ns := namespace(t)
	marker := "KNIT_TEST_MARKER=" + rand.String(12)
	// Every process ignores SIGTERM (ignored signals are inherited), so only
	// the SIGKILL after the grace period ends them.
	pod := shellPod("tree", corev1.RestartPolicyAlways, `trap "" TERM; sleep 1000 & (sleep 1000 & wait) & wait`)
	name, value, _ := strings.Cut(marker, "=")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: name, Value: value}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	createPod(t, ns, pod)
	waitPod(t, ns, "tree", "running", phaseIs(corev1.PodRunning))
	waitFor(t, time.Minute, "the shell and its three sleeps", func(context.Context) (bool, error) {
		return len(processesWith(t, marker)) >= 4, nil
	})

	if err := cluster.Client.CoreV1().Pods(ns).Delete(context.Background(), "tree", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "pod gone", func(ctx context.Context) (bool, error) {
		_, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, "tree", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if left := processesWith(t, marker); len(left) > 0 {
		t.Errorf("processes left after the pod was deleted: %v", left)
	}
}

func TestImagePatchRestartsTheContainer(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	createPod(t, ns, shellPod("img", corev1.RestartPolicyAlways, `echo started; exec sleep 1000`))
	before := waitPod(t, ns, "img", "running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if n := before.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Fatalf("restart count before patch = %d", n)
	}
	patch := []byte(`{"spec":{"containers":[{"name":"main","image":"busybox:2"}]}}`)
	if _, err := cluster.Client.CoreV1().Pods(ns).Patch(ctx, "img", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	after := waitPod(t, ns, "img", "restarted with the new image", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil && cs[0].Image == "busybox:2"
	})
	if last := after.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil {
		t.Errorf("no last termination state after restart: %+v", after.Status.ContainerStatuses[0])
	}
	if log := containerLog(t, after, "main", 1); strings.TrimSpace(log) != "started" {
		t.Errorf("second run's log = %q", log)
	}
}

func TestManyPodsAcrossNodesReachTheirEndState(t *testing.T) {
	ns := namespace(t)
	const pods = 60
	for i := range pods {
		// Every third pod fails, so both end states are reached in bulk.
		script := "exit 0"
		if i%3 == 0 {
			script = "exit 7"
		}
		createPod(t, ns, shellPod(fmt.Sprintf("p%02d", i), corev1.RestartPolicyNever, script))
	}
	var list *corev1.PodList
	waitFor(t, 3*time.Minute, "all pods finished", func(ctx context.Context) (bool, error) {
		var err error
		if list, err = cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return false, nil
			}
		}
		return len(list.Items) == pods, nil
	})
	nodes := map[string]int{}
	var errs []error
	for _, p := range list.Items {
		nodes[p.Spec.NodeName]++
		i, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "p"))
		want := corev1.PodSucceeded
		if i%3 == 0 {
			want = corev1.PodFailed
		}
		if p.Status.Phase != want {
			errs = append(errs, fmt.Errorf("%s: phase %s, want %s", p.Name, p.Status.Phase, want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	if len(nodes) < 2 {
		t.Errorf("pods ran on %d node(s), want them spread: %v", len(nodes), nodes)
	}
}
