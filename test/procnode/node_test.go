package procnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/test/eventually"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// These tests run a Node against the fake clientset: narrow checks of the
// objects it writes and of pod handling end to end on real processes. The
// fake has no scheduler, no graceful deletion and no admission, so pods are
// created already bound and deletion is simulated by setting
// deletionTimestamp; the real control plane is in integration_test.go.

const testAddress = "127.0.1.1"

type testNode struct {
	*Node
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// stop ends Run and waits for it; the pod processes keep running.
func (tn *testNode) stop(t *testing.T) {
	t.Helper()
	tn.once.Do(func() {
		tn.cancel()
		select {
		case err := <-tn.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
}

func newTestNode(t *testing.T, client kubernetes.Interface, dir string, mutate ...func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		Name: "node-1", Address: testAddress, Dir: dir, Client: client,
		APIServerHost: "127.0.0.1", APIServerPort: "6443",
		RestartBackoffBase: 100 * time.Millisecond, RestartBackoffMax: time.Second,
		StopAllGracePeriod: 2 * time.Second,
		Logger:             testLogger(t),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runNode starts a node; clean-up stops it and every process it started.
func runNode(t *testing.T, client kubernetes.Interface, dir string, mutate ...func(*Config)) *testNode {
	t.Helper()
	n := newTestNode(t, client, dir, mutate...)
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{Node: n, cancel: cancel, done: make(chan error, 1)}
	go func() { tn.done <- n.Run(ctx) }()
	t.Cleanup(func() {
		tn.stop(t)
		if err := n.StopAll(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tn
}

func fakeClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	// The fake does not implement TokenRequest.
	c.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status.Token = "token-for-" + tr.Spec.BoundObjectRef.Name
		return true, tr, nil
	})
	// The fake stores the whole object a status update sends; the API
	// server takes only its status. A node posting status from a copy
	// older than a deletion would otherwise undo the deletion.
	c.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		upd := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
		cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), upd.Name)
		if err != nil {
			return true, nil, err
		}
		p := cur.(*corev1.Pod).DeepCopy()
		p.Status = *upd.Status.DeepCopy()
		if err := c.Tracker().Update(a.GetResource(), p, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, p, nil
	})
	return c
}

func getNode(t *testing.T, c kubernetes.Interface) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasNotReadyTaint(n *corev1.Node) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == corev1.TaintNodeNotReady {
			return true
		}
	}
	return false
}

// waitNodeReady waits until the node is registered and its taint is gone.
func waitNodeReady(t *testing.T, c kubernetes.Interface) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	waitFor(t, 20*time.Second, "node registered without the not-ready taint", func() bool {
		n, err := c.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		node = n
		_, err = c.CoordinationV1().Leases(nodeLeaseNamespace).Get(context.Background(), "node-1", metav1.GetOptions{})
		return err == nil && !hasNotReadyTaint(n)
	})
	return node
}

func TestRegistersNode(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	var created *corev1.Node
	c.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		created = a.(k8stesting.CreateAction).GetObject().(*corev1.Node).DeepCopy()
		return false, nil, nil
	})
	runNode(t, c, t.TempDir(), func(cfg *Config) {
		cfg.Labels = map[string]string{"topology.kubernetes.io/zone": "z1"}
		cfg.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		cfg.KubeletPort = 10250
	})
	node := waitNodeReady(t, c)

	// Born tainted: the create carried the not-ready taint.
	if created == nil || !hasNotReadyTaint(created) {
		t.Errorf("node was not created with the not-ready taint: %+v", created)
	}

	for k, v := range map[string]string{
		"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "z1",
	} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Labels["kubernetes.io/arch"] == "" {
		t.Error("no arch label")
	}
	want := map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
	for name, q := range want {
		if got := node.Status.Capacity[name]; got.String() != q {
			t.Errorf("capacity %s = %s, want %s", name, got.String(), q)
		}
		if got := node.Status.Allocatable[name]; got.String() != q {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), q)
		}
	}
	conds := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, cd := range node.Status.Conditions {
		conds[cd.Type] = cd.Status
		if cd.LastHeartbeatTime.IsZero() || cd.LastTransitionTime.IsZero() {
			t.Errorf("condition %s lacks times", cd.Type)
		}
	}
	if conds[corev1.NodeReady] != corev1.ConditionTrue || conds[corev1.NodeMemoryPressure] != corev1.ConditionFalse ||
		conds[corev1.NodeDiskPressure] != corev1.ConditionFalse || conds[corev1.NodePIDPressure] != corev1.ConditionFalse {
		t.Errorf("conditions = %v", conds)
	}
	addrs := node.Status.Addresses
	if len(addrs) != 2 || addrs[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: testAddress}) ||
		addrs[1] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}) {
		t.Errorf("addresses = %v", addrs)
	}
	info := node.Status.NodeInfo
	if info.KubeletVersion != "v1.34.4-knit" || info.OperatingSystem != "linux" || info.Architecture == "" {
		t.Errorf("nodeInfo = %+v", info)
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("daemonEndpoints = %+v", node.Status.DaemonEndpoints)
	}

	lease, err := c.CoordinationV1().Leases(nodeLeaseNamespace).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "node-1" || *lease.Spec.LeaseDurationSeconds != 40 ||
		lease.Spec.RenewTime == nil {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease owners = %+v, node uid %s", lease.OwnerReferences, node.UID)
	}
}

func TestRegisterUpdatesExistingNode(t *testing.T) {
	t.Parallel()
	existing := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "old-uid", Labels: map[string]string{"keep": "me"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown},
			{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
		}},
	}
	c := fakeClient(existing)
	runNode(t, c, t.TempDir())
	node := waitNodeReady(t, c)
	if node.Labels["keep"] != "me" || node.Labels["kubernetes.io/hostname"] != "node-1" {
		t.Errorf("labels = %v", node.Labels)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	types := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, cd := range node.Status.Conditions {
		types[cd.Type] = cd.Status
	}
	if types[corev1.NodeReady] != corev1.ConditionTrue || types[corev1.NodeNetworkUnavailable] != corev1.ConditionFalse {
		t.Errorf("conditions = %v", types)
	}
}

// boundPod is a pod already scheduled to node-1.
func boundPod(name string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	for i := range containers {
		if containers[i].Image == "" {
			containers[i].Image = "busybox"
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: policy, Containers: containers,
			TerminationGracePeriodSeconds: ptr.To(int64(5))},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
}

func sh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Command: []string{"sh", "-c", script}}
}

func createPod(t *testing.T, c kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPod polls the pod until cond holds and returns it.
func waitPod(t *testing.T, c kubernetes.Interface, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	eventually.WithinEvery(t, time.Minute, 20*time.Millisecond, func(ctx context.Context) error {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if last = p; !cond(p) {
			return fmt.Errorf("pod %s: %s; last status: %+v", name, what, statusSummary(p))
		}
		return nil
	})
	return last
}

func statusSummary(p *corev1.Pod) string {
	if p == nil {
		return "<none>"
	}
	var b strings.Builder
	b.WriteString(string(p.Status.Phase))
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		b.WriteString(" " + s.Name + ":")
		switch {
		case s.State.Running != nil:
			b.WriteString("running")
		case s.State.Terminated != nil:
			b.WriteString("terminated(" + s.State.Terminated.Reason + "," + s.State.Terminated.Message + ")")
		case s.State.Waiting != nil:
			b.WriteString("waiting(" + s.State.Waiting.Reason + "," + s.State.Waiting.Message + ")")
		}
	}
	return b.String()
}

func containerStatusOf(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, l := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

func readLog(t *testing.T, dir string, p *corev1.Pod, container string, restart int) string {
	t.Helper()
	data, err := os.ReadFile(LogPath(dir, PodFolderName(p.Namespace, p.Name, p.UID), container, restart))
	if err != nil {
		t.Fatal(err)
	}
	return string(criContent(data))
}

func TestPodTerminationMessageAndFailedPhase(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	runNode(t, c, dir)
	p := boundPod("boom", corev1.RestartPolicyNever, sh("main", "echo to-log; echo boom > /dev/termination-log; exit 3"))
	createPod(t, c, p)
	got := waitPod(t, c, "boom", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	st := containerStatusOf(got, "main")
	term := st.State.Terminated
	if term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.Message != "boom" ||
		!strings.HasPrefix(term.ContainerID, "knit://") || term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
		t.Errorf("terminated = %+v", term)
	}
	if st.Ready || *st.Started || st.Image != "busybox" || st.ImageID == "" || st.RestartCount != 0 {
		t.Errorf("status = %+v", st)
	}
	if got.Status.PodIP != testAddress || got.Status.HostIP != testAddress || got.Status.StartTime == nil {
		t.Errorf("pod IPs/startTime: %+v", got.Status)
	}
	if cd := condition(got.Status, corev1.PodScheduled); cd == nil || cd.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled lost: %+v", got.Status.Conditions)
	}
	if cd := condition(got.Status, corev1.PodReady); cd == nil || cd.Reason != reasonPodFailed {
		t.Errorf("Ready = %+v", cd)
	}
	if l := readLog(t, dir, got, "main", 0); l != "to-log\n" {
		t.Errorf("log = %q", l)
	}
}

func TestPodInitContainersEnvAndVolumes(t *testing.T) {
	t.Parallel()
	c := fakeClient(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"app.conf": "x=1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"}, Data: map[string]string{"ca.crt": "CA"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "default"}, Data: map[string][]byte{"pw": []byte("hunter2")}},
	)
	dir := t.TempDir()
	hostDir := filepath.Join(t.TempDir(), "host", "made")
	runNode(t, c, dir)
	p := boundPod("vols", corev1.RestartPolicyNever)
	p.Labels = map[string]string{"app": "vols"}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec",
			Items: []corev1.KeyToPath{{Key: "pw", Path: "sub/password"}}}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir,
			Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		// What the ServiceAccount admission plugin injects.
		{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o644)),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}},
	}
	p.Spec.InitContainers = []corev1.Container{
		{Name: "init1", Image: "busybox", Command: []string{"sh", "-c", "echo one > /work/order"},
			VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/work"}}},
		{Name: "init2", Image: "busybox", Command: []string{"sh", "-c", "echo two >> /work/order"},
			VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/work"}}},
	}
	p.Spec.Containers = []corev1.Container{{
		Name: "main", Image: "busybox", WorkingDir: "/work",
		Command: []string{"sh", "-c"},
		Args: []string{`cat order; cat /etc/cfg/app.conf; echo; cat /etc/sec/sub/password; echo; ` +
			`cat $SA_DIR/token $SA_DIR/ca.crt $SA_DIR/namespace; echo; cat /etc/info/labels; echo; ` +
			`echo "$POD_NAME $MY_IP $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT $HOSTNAME"; echo hi > /data/out`},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "MY_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "SA_DIR", Value: "/var/run/secrets/kubernetes.io/serviceaccount"},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "shared", MountPath: "/work"},
			{Name: "cfg", MountPath: "/etc/cfg"},
			{Name: "sec", MountPath: "/etc/sec"},
			{Name: "host", MountPath: "/data"},
			{Name: "info", MountPath: "/etc/info"},
			{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
		},
	}}
	createPod(t, c, p)
	got := waitPod(t, c, "vols", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	want := "one\ntwo\nx=1\nhunter2\ntoken-for-volsCAdefault\napp=\"vols\"\nvols 127.0.1.1 127.0.0.1:6443 vols\n"
	if l := readLog(t, dir, got, "main", 0); l != want {
		t.Errorf("log =\n%s\nwant\n%s", l, want)
	}
	if data, err := os.ReadFile(filepath.Join(hostDir, "out")); err != nil || string(data) != "hi\n" {
		t.Errorf("hostPath file: %q, %v", data, err)
	}
	for _, name := range []string{"init1", "init2"} {
		st := containerStatusOf(got, name)
		if st.State.Terminated == nil || st.State.Terminated.Reason != "Completed" || !st.Ready {
			t.Errorf("%s = %+v", name, st)
		}
	}
	if cd := condition(got.Status, corev1.PodInitialized); cd == nil || cd.Status != corev1.ConditionTrue {
		t.Errorf("Initialized = %+v", cd)
	}
}

func TestPodWaitsForMissingSecretAndHasNoCommand(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	runNode(t, c, t.TempDir())
	p := boundPod("waits", corev1.RestartPolicyAlways,
		corev1.Container{Name: "nocmd"},
		corev1.Container{Name: "needs", Command: []string{"true"}, Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "k"}}}}})
	p.Spec.Containers[1].Command = []string{"sleep", "1000"}
	createPod(t, c, p)
	waitPod(t, c, "waits", "both waiting", func(p *corev1.Pod) bool {
		a, b := containerStatusOf(p, "nocmd"), containerStatusOf(p, "needs")
		return a != nil && b != nil && a.State.Waiting != nil && a.State.Waiting.Reason == reasonCreateContainerError &&
			b.State.Waiting != nil && b.State.Waiting.Reason == reasonCreateContainerConfigError &&
			strings.Contains(b.State.Waiting.Message, "later") && p.Status.Phase == corev1.PodPending
	})
	// Once the Secret exists, the retry starts the container.
	if _, err := c.CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "default"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, "waits", "needs running", func(p *corev1.Pod) bool {
		b := containerStatusOf(p, "needs")
		return b != nil && b.State.Running != nil
	})
}

func TestRestartBackoffAndImageChange(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	runNode(t, c, dir)
	createPod(t, c, boundPod("crash", corev1.RestartPolicyAlways, sh("main", "echo run; exit 1")))
	marker := filepath.Join(t.TempDir(), "ran-once")
	createPod(t, c, boundPod("onfail", corev1.RestartPolicyOnFailure,
		sh("main", "if [ -e "+marker+" ]; then exit 0; fi; touch "+marker+"; exit 2")))
	createPod(t, c, boundPod("img", corev1.RestartPolicyNever, sh("main", "sleep 1000")))

	// Restarts 1 and 2 come after 0 and 100ms; the wait before restart 3
	// (200ms) is long enough to be seen.
	got := waitPod(t, c, "crash", "CrashLoopBackOff after two restarts", func(p *corev1.Pod) bool {
		st := containerStatusOf(p, "main")
		return st != nil && st.RestartCount >= 2 && st.State.Waiting != nil && st.State.Waiting.Reason == reasonCrashLoopBackOff &&
			st.LastTerminationState.Terminated != nil && st.LastTerminationState.Terminated.ExitCode == 1 &&
			strings.HasPrefix(st.State.Waiting.Message, "back-off ")
	})
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("crash-looping Always pod phase = %s, want Running", got.Status.Phase)
	}
	if l := readLog(t, dir, got, "main", 2); l != "run\n" {
		t.Errorf("log of restart 2 = %q", l)
	}
	got = waitPod(t, c, "onfail", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if st := containerStatusOf(got, "main"); st.RestartCount != 1 || st.LastTerminationState.Terminated == nil ||
		st.LastTerminationState.Terminated.ExitCode != 2 || st.State.Terminated.ExitCode != 0 {
		t.Errorf("OnFailure pod: %+v", st)
	}

	// Patch the image of a running container: killed and started again.
	waitPod(t, c, "img", "running", func(p *corev1.Pod) bool {
		st := containerStatusOf(p, "main")
		return st != nil && st.State.Running != nil
	})
	p, err := c.CoreV1().Pods("default").Get(context.Background(), "img", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Containers[0].Image = "busybox:2"
	if _, err := c.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitPod(t, c, "img", "restarted with the new image", func(p *corev1.Pod) bool {
		st := containerStatusOf(p, "main")
		return st != nil && st.State.Running != nil && st.RestartCount == 1 && st.Image == "busybox:2"
	})
	last := containerStatusOf(got, "main").LastTerminationState.Terminated
	if last == nil || last.ExitCode != 143 {
		t.Errorf("last termination = %+v, want 143 from SIGTERM", last)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s", got.Status.Phase)
	}
}

// pidsOfPod lists the live processes of every running run of the pod.
func pidsOfPod(t *testing.T, n *Node, p *corev1.Pod) []int {
	t.Helper()
	var runs []*attempt
	// A shim writes its state just after its container starts.
	waitFor(t, 10*time.Second, "every run's shim state", func() bool {
		var err error
		runs, err = n.runsIn(newPodPaths(n.cfg.Dir, p.Namespace, p.Name, p.UID).root)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range runs {
			if a.State == nil {
				return false
			}
		}
		return true
	})
	var pids []int
	for _, a := range runs {
		pids = append(pids, a.State.ShimPID)
		pids = append(pids, treeOf(listProcs(), a.State)...)
	}
	return pids
}

func allGone(pids []int) bool {
	for _, pid := range pids {
		if s, err := readProcStat(pid); err == nil && s.State != 'Z' {
			return false
		}
	}
	return true
}

func TestDeletedPodIsStoppedReportedAndRemoved(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	tn := runNode(t, c, dir)
	p := boundPod("del", corev1.RestartPolicyAlways, sh("main", "sleep 1000 & sleep 1000 & wait"))
	createPod(t, c, p)
	waitPod(t, c, "del", "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	var pids []int
	waitFor(t, 10*time.Second, "process tree", func() bool { pids = pidsOfPod(t, tn.Node, p); return len(pids) >= 4 })

	// What the API server does on a graceful delete; the fake would remove
	// the pod at once.
	var final *corev1.Pod
	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		got, err := c.Tracker().Get(a.GetResource(), "default", "del")
		if err == nil {
			final = got.(*corev1.Pod)
		}
		return false, nil, nil
	})
	cur, _ := c.CoreV1().Pods("default").Get(context.Background(), "del", metav1.GetOptions{})
	now := metav1.Now()
	cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, ptr.To(int64(5))
	if _, err := c.CoreV1().Pods("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	podRoot := newPodPaths(dir, p.Namespace, p.Name, p.UID).root
	waitFor(t, 20*time.Second, "pod deleted and its folder removed", func() bool {
		_, err := c.CoreV1().Pods("default").Get(context.Background(), "del", metav1.GetOptions{})
		_, statErr := os.Stat(podRoot)
		return err != nil && os.IsNotExist(statErr)
	})
	if !allGone(pids) {
		t.Errorf("processes of the deleted pod still run: %v", pids)
	}
	if final == nil || final.Status.Phase != corev1.PodFailed {
		t.Fatalf("final status before the delete: %+v", statusSummary(final))
	}
	term := containerStatusOf(final, "main").State.Terminated
	if term == nil || term.ExitCode != 143 {
		t.Errorf("final container state = %+v", term)
	}
	var del k8stesting.DeleteAction
	for _, a := range c.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			del = d
		}
	}
	if del == nil || del.GetDeleteOptions().GracePeriodSeconds == nil || *del.GetDeleteOptions().GracePeriodSeconds != 0 ||
		del.GetDeleteOptions().Preconditions == nil || *del.GetDeleteOptions().Preconditions.UID != p.UID {
		t.Errorf("final delete = %+v", del)
	}
}

// A deleted pod's containers are signalled as a container runtime signals
// them: SIGTERM to the main process only, which passes it on as
// knit-launcher does, and SIGKILL to whatever is left after the grace
// period.
func TestDeletedPodSignalsOnlyTheMainProcessThenKillsAll(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	// Each script gets a folder of its own as $1, writes $1/ready once its
	// traps are set, and has its processes note each SIGTERM in $1/terms.
	tests := []struct {
		name   string
		script string
		terms  string // $1/terms once the pod has gone
	}{
		{
			// As knit-launcher: the command in a process group of its own,
			// SIGTERM forwarded to that group. The command notes it and
			// carries on, so a second SIGTERM would be noted too.
			"a command below a forwarding main process gets one SIGTERM", `
set -m
bash -c 'trap "echo child >> $1/terms" TERM; echo > $1/ready; while :; do sleep 0.05; done' child "$1" &
child=$!
set +m
trap 'kill -TERM -- -$child' TERM
while :; do wait $child; done`,
			"child\n",
		},
		{
			// The main process notes the SIGTERM and carries on, its child
			// never hears it: both go only at the end of the grace period.
			"processes that outlive SIGTERM are killed after the grace period", `
trap 'echo main >> $1/terms' TERM
sleep 1000 &
echo > $1/ready
while :; do wait; done`,
			"main\n",
		},
	}
	// The cases run one after the other: two nodes of one name stopping
	// process trees at once in one test process were seen to leave a
	// deletion hanging.
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient()
			name := fmt.Sprintf("signals-%d", i)
			// The pod as the node last posted it, seen as it is deleted;
			// the reactor is in place before the node's goroutines call
			// the client.
			var final atomic.Pointer[corev1.Pod]
			c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if got, err := c.Tracker().Get(a.GetResource(), "default", name); err == nil {
					final.Store(got.(*corev1.Pod))
				}
				return false, nil, nil
			})
			dir := t.TempDir()
			tn := runNode(t, c, dir)
			marks := t.TempDir()
			p := boundPod(name, corev1.RestartPolicyAlways, corev1.Container{Name: "main", Command: []string{"bash", "-c", tc.script, "main", marks}})
			createPod(t, c, p)
			waitFor(t, 20*time.Second, "the container's traps set", func() bool {
				_, err := os.Stat(filepath.Join(marks, "ready"))
				return err == nil
			})
			pids := pidsOfPod(t, tn.Node, p)

			// What the API server does on a graceful delete, with a grace
			// period at the kubelet's floor.
			cur, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			now := metav1.Now()
			cur.DeletionTimestamp, cur.DeletionGracePeriodSeconds = &now, ptr.To(int64(minGracePeriod/time.Second))
			if _, err := c.CoreV1().Pods("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// A loaded machine (the race detector, a busy loop in one
			// case's shell) stretches the kill after the grace period.
			waitFor(t, 90*time.Second, "the pod deleted", func() bool {
				_, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
				return err != nil
			})
			if !allGone(pids) {
				t.Errorf("processes of the deleted pod still run: %v", pids)
			}
			last := final.Load()
			if last == nil {
				t.Fatal("no final status before the delete")
			}
			if term := containerStatusOf(last, "main").State.Terminated; term == nil || term.ExitCode != 137 {
				t.Errorf("final container state = %+v, want killed (137) at the end of the grace period", term)
			}
			terms, err := os.ReadFile(filepath.Join(marks, "terms"))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if string(terms) != tc.terms {
				t.Errorf("SIGTERMs noted: %q, want %q", terms, tc.terms)
			}
		})
	}
}

func TestVanishedPodIsStoppedAndRemoved(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	tn := runNode(t, c, dir)
	p := boundPod("gone", corev1.RestartPolicyAlways, sh("main", "sleep 1000"))
	createPod(t, c, p)
	waitPod(t, c, "gone", "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	pids := pidsOfPod(t, tn.Node, p)
	if err := c.CoreV1().Pods("default").Delete(context.Background(), "gone", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	podRoot := newPodPaths(dir, p.Namespace, p.Name, p.UID).root
	waitFor(t, 20*time.Second, "folder removed", func() bool { _, err := os.Stat(podRoot); return os.IsNotExist(err) })
	if !allGone(pids) {
		t.Errorf("processes still run: %v", pids)
	}
}

func TestRestartedNodeAdoptsRunningAndExitedContainers(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	flag := filepath.Join(t.TempDir(), "flag")
	tn := runNode(t, c, dir)
	createPod(t, c, boundPod("long", corev1.RestartPolicyAlways, sh("main", "sleep 1000")))
	createPod(t, c, boundPod("later", corev1.RestartPolicyNever,
		sh("main", "while [ ! -e "+flag+" ]; do sleep 0.05; done; exit 4")))
	for _, name := range []string{"long", "later"} {
		waitPod(t, c, name, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	before := containerStatusOf(waitPod(t, c, "long", "", func(*corev1.Pod) bool { return true }), "main")
	tn.stop(t)

	// While no node runs, "later" ends.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var laterPod *corev1.Pod
	laterPod, _ = c.CoreV1().Pods("default").Get(context.Background(), "later", metav1.GetOptions{})
	ap := newPodPaths(dir, "default", "later", laterPod.UID).attempt("main", 0)
	waitFor(t, 10*time.Second, "exit recorded with no node running", func() bool { _, err := os.Stat(ap.Exit); return err == nil })

	runNode(t, c, dir)
	waitPod(t, c, "later", "Failed with 4", func(p *corev1.Pod) bool {
		st := containerStatusOf(p, "main")
		return p.Status.Phase == corev1.PodFailed && st.State.Terminated != nil && st.State.Terminated.ExitCode == 4
	})
	long := waitPod(t, c, "long", "still running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	after := containerStatusOf(long, "main")
	if after.State.Running == nil || after.RestartCount != 0 || after.ContainerID != before.ContainerID {
		t.Errorf("after restart: %+v, before: %+v (want the same run adopted)", after, before)
	}
}

func TestHeartbeatsAndReRegistration(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	runNode(t, c, t.TempDir(), func(cfg *Config) {
		cfg.LeaseDuration = 2 * time.Second // renewed every 500ms
		cfg.StatusInterval = 200 * time.Millisecond
	})
	node := waitNodeReady(t, c)
	ctx := context.Background()
	lease, err := c.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := lease.Spec.RenewTime.Time
	waitFor(t, 10*time.Second, "lease renewed", func() bool {
		l, err := c.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first)
	})
	heartbeat := func(n *corev1.Node) time.Time {
		for _, cd := range n.Status.Conditions {
			if cd.Type == corev1.NodeReady {
				return cd.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	beat := heartbeat(node)
	waitFor(t, 10*time.Second, "status heartbeat", func() bool { return heartbeat(getNode(t, c)).After(beat) })

	// Deleted behind its back, the node registers again.
	if err := c.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node registered again", func() bool {
		_, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil
	})
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	for name, cfg := range map[string]Config{
		"no name":   {Address: testAddress, Dir: t.TempDir(), Client: c},
		"bad IP":    {Name: "n", Address: "localhost", Dir: t.TempDir(), Client: c},
		"no dir":    {Name: "n", Address: testAddress, Client: c},
		"no client": {Name: "n", Address: testAddress, Dir: t.TempDir()},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	n := newTestNode(t, c, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Run(ctx); err != nil {
		t.Errorf("Run on an ended context: %v", err)
	}
	if err := n.Run(ctx); err == nil {
		t.Error("a second Run was accepted")
	}
}

func TestSidecarRunsAlongAndStopsAtTheEnd(t *testing.T) {
	t.Parallel()
	c := fakeClient()
	dir := t.TempDir()
	runNode(t, c, dir)
	flag := filepath.Join(t.TempDir(), "sidecar-up")
	// The sidecar counts as started once it runs, maybe before its touch.
	p := boundPod("side", corev1.RestartPolicyNever, sh("main",
		"for i in $(seq 200); do [ -e "+flag+" ] && break; sleep 0.05; done; [ -e "+flag+" ] && echo saw-sidecar"))
	side := sh("side", "touch "+flag+"; exec sleep 1000")
	side.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	p.Spec.InitContainers = []corev1.Container{side}
	p.Spec.InitContainers[0].Image = "busybox"
	createPod(t, c, p)
	got := waitPod(t, c, "side", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if st := containerStatusOf(got, "side"); st.State.Terminated == nil || st.State.Terminated.ExitCode != 143 {
		t.Errorf("sidecar = %+v, want stopped by SIGTERM", st)
	}
	if l := readLog(t, dir, got, "main", 0); l != "saw-sidecar\n" {
		t.Errorf("main log = %q", l)
	}
}
