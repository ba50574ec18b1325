package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/queues"
)

// Sizes of BenchmarkClusterMetricsFlatInPods and BenchmarkPodCacheBytesPerPod.
const (
	viewNodes = 1_000
	viewPods  = 100_000
	viewConns = 64
	viewRound = 3 * time.Second
)

// viewNode is a node as kwok shows one: ready, 32 cores and 256 GiB.
func viewNode(i int) *corev1.Node {
	name := fmt.Sprintf("kwok-node-%d", i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "kwok", "topology.kubernetes.io/zone": "zone-" + fmt.Sprint(i%4)}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}, {Type: corev1.NodeHostName, Address: name}},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status"}},
		},
	}
}

// viewPod is one of Knit's task pods as the API server returns it once its
// container has started and runs on node: what rgs.BuildPod makes for a
// Spark executor's ask, the container label, the launch context RKS wrote,
// the managed fields the API server keeps for each writer, and the status
// the kubelet reports.
func viewPod(b testing.TB, i int, node string) *corev1.Pod {
	app := fmt.Sprintf("application_%d_%04d", clusterTimestamp, 1+i/1000)
	p, err := rgs.BuildPod(rgs.PodRequest{
		Name: fmt.Sprintf("%s-1-task-%d", strings.ReplaceAll(app, "_", "-"), i), App: app, Attempt: 1,
		Role: launch.RoleTask, Queue: "root.default", User: "bench",
		Ask: &yarnpb.ResourceRequestProto{
			Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}, ResourceName: proto.String("*"),
			Capability: yarnpb.NewResource(4096, 2), NumContainers: proto.Int32(1000), RelaxLocality: proto.Bool(true),
			AllocationRequestId: proto.Int64(0),
		},
		Resources: rgs.Resources{MillicoresPerVcore: 1000},
		Mapping:   rgs.Mapping{Namespace: "spark", HostNetwork: true},
		Launcher:  rgs.Launcher{Image: "ghcr.io/knitdev/knit-launcher:1.0", InitCommand: []string{"cp", "/knit-launcher", "/knit/bin/knit-launcher"}, Command: []string{"/knit/bin/knit-launcher"}},
		AskHash:   "9f86d081884c7d65",
	})
	if err != nil {
		b.Fatal(err)
	}
	now := metav1.NewTime(time.Unix(clusterTimestamp/1000, 0).UTC())
	p.UID = types.UID(fmt.Sprintf("6b1f0c1e-%04x-4c6e-9a55-%012x", i&0xffff, i))
	p.ResourceVersion, p.Generation, p.CreationTimestamp = fmt.Sprint(1000+i), 1, now
	p.Labels[launch.LabelContainer] = fmt.Sprintf("container_%d_%04d_01_%06d", clusterTimestamp, 1+i/1000, 2+i%1000)
	p.Annotations[launch.AnnotationContext] = viewLaunchContext(b, p.Labels[launch.LabelContainer], node)
	p.ManagedFields = viewManagedFields(p)
	p.Spec.NodeName = node
	p.Spec.Tolerations = append(p.Spec.Tolerations,
		corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr64(300)},
		corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr64(300)})
	ip := "10.0.0.1"
	main := launch.ContainerName
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: ip, HostIPs: []corev1.HostIP{{IP: ip}}, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &now, QOSClass: corev1.PodQOSGuaranteed, ObservedGeneration: 1,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + strings.Repeat("ab", 32), ContainerID: "containerd://" + strings.Repeat("cd", 32),
			Ready: true, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: "containerd://" + strings.Repeat("cd", 32)}},
		})
	}
	for _, c := range p.Spec.Containers {
		st := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + strings.Repeat("ef", 32), ContainerID: "containerd://" + strings.Repeat("01", 32),
			Ready: true, Started: ptrBool(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			AllocatedResources: c.Resources.Requests, Resources: c.Resources.DeepCopy(),
		}
		if c.Name == main {
			st.VolumeMounts = []corev1.VolumeMountStatus{{Name: "knit", MountPath: "/knit"}}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
	}
	return p
}

func ptr64(v int64) *int64 { return &v }
func ptrBool(v bool) *bool { return &v }

// viewLaunchContext is the launch context of a Spark executor: its command
// line, a NodeManager-sized environment and the localized jars and
// configuration.
func viewLaunchContext(b testing.TB, container, node string) string {
	clc := &yarnpb.ContainerLaunchContextProto{
		Command: []string{"{{JAVA_HOME}}/bin/java -server -Xmx3584m -Djava.io.tmpdir={{PWD}}/tmp -Dspark.driver.port=40000 " +
			"-Dspark.yarn.app.container.log.dir=<LOG_DIR> -XX:OnOutOfMemoryError='kill %p' org.apache.spark.executor.YarnCoarseGrainedExecutorBackend " +
			"--driver-url spark://CoarseGrainedScheduler@10.0.0.7:40000 --executor-id 17 --hostname " + node + " --cores 2 --app-id application_1 " +
			"--resourceProfileId 0 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"},
	}
	for k, v := range map[string]string{
		"SPARK_YARN_STAGING_DIR": "hdfs://nn:8020/user/bench/.sparkStaging/application_1", "SPARK_USER": "bench",
		"CLASSPATH":            "{{PWD}}<CPS>{{PWD}}/__spark_conf__<CPS>{{PWD}}/__spark_libs__/*<CPS>{{HADOOP_CONF_DIR}}<CPS>{{HADOOP_COMMON_HOME}}/share/hadoop/common/*",
		"SPARK_DIST_CLASSPATH": strings.Repeat("/opt/hadoop/share/hadoop/common/lib/*:", 8), "JAVA_HOME": "/usr/lib/jvm/java-17",
		"SPARK_LOG_URL_STDOUT": "http://" + node + ":8042/node/containerlogs/" + container + "/bench/stdout?start=-4096",
		"SPARK_LOG_URL_STDERR": "http://" + node + ":8042/node/containerlogs/" + container + "/bench/stderr?start=-4096",
	} {
		clc.Environment = append(clc.Environment, &yarnpb.StringStringMapProto{Key: proto.String(k), Value: proto.String(v)})
	}
	for _, name := range []string{"__spark_conf__", "__spark_libs__", "app.jar", "log4j2.properties", "hive-site.xml"} {
		clc.LocalResources = append(clc.LocalResources, &yarnpb.StringLocalResourceMapProto{Key: proto.String(name), Value: &yarnpb.LocalResourceProto{
			Resource: &yarnpb.URLProto{Scheme: proto.String("hdfs"), Host: proto.String("nn"), Port: proto.Int32(8020), File: proto.String("/user/bench/.sparkStaging/application_1/" + name)},
			Size:     proto.Int64(123456789), Timestamp: proto.Int64(clusterTimestamp), Type: yarnpb.LocalResourceTypeProto_ARCHIVE.Enum(),
			Visibility: yarnpb.LocalResourceVisibilityProto_PRIVATE.Enum(),
		}})
	}
	raw, err := proto.Marshal(clc)
	if err != nil {
		b.Fatal(err)
	}
	v, err := launch.EncodeContext(launch.Context{ContainerID: container, User: "bench", NMHost: node, NMPort: 8041, NMHTTPPort: 8042, LaunchContext: raw, AppSubmitTime: clusterTimestamp})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// viewManagedFields is what the API server records of the pod's writers:
// knit-rm's create and label and annotation patches, and the kubelet's
// status.
func viewManagedFields(p *corev1.Pod) []metav1.ManagedFieldsEntry {
	var meta strings.Builder
	meta.WriteString(`{"f:metadata":{"f:labels":{`)
	for k := range p.Labels {
		fmt.Fprintf(&meta, `"f:%s":{},`, k)
	}
	meta.WriteString(`".":{}},"f:annotations":{`)
	for k := range p.Annotations {
		fmt.Fprintf(&meta, `"f:%s":{},`, k)
	}
	meta.WriteString(`".":{}}},"f:spec":{"f:containers":{`)
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		fmt.Fprintf(&meta, `"k:{\"name\":\"%s\"}":{".":{},"f:command":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{}},`, c.Name)
	}
	meta.WriteString(`"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:hostNetwork":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{}}}}`)
	status := `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},` +
		`"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:initContainerStatuses":{},` +
		`"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
	t := p.CreationTimestamp
	return []metav1.ManagedFieldsEntry{
		{Manager: "knit-rm", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(meta.String())}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(status)}, Subresource: "status"},
	}
}

// decodedPods are n pods as an informer holds them after decoding the API
// server's bytes: each its own allocations, nothing shared between pods.
func decodedPods(b *testing.B, n int, keep func(*corev1.Pod) any) []any {
	out := make([]any, n)
	for i := range n {
		raw, err := viewPod(b, i, fmt.Sprintf("kwok-node-%d", i%viewNodes)).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		p := &corev1.Pod{}
		if err := p.Unmarshal(raw); err != nil {
			b.Fatal(err)
		}
		out[i] = keep(p)
	}
	return out
}

// heapWith is the live heap once build's result is made and collected
// garbage is gone; build's result stays alive until then.
func heapWith(build func() any) (uint64, any) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapAlloc
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc - before, v
}

// BenchmarkPodCacheBytesPerPod measures what each of viewPods started,
// running task pods costs the RM's pod cache: the pod's record as the pod
// informer's transform keeps it (package podrecord, one Stripper for every
// pod), against the whole pod decoded from the API server's bytes and
// against the whole pod without managed fields (what the informer kept
// before it kept records), all three in the same run. It reports bytes per pod
// and the ratios stripped/whole and stripped/whole-without-managed-fields.
func BenchmarkPodCacheBytesPerPod(b *testing.B) {
	var whole, unmanaged, stripped float64
	for range b.N {
		wb, w := heapWith(func() any { return decodedPods(b, viewPods, func(p *corev1.Pod) any { return p }) })
		runtime.KeepAlive(w)
		w = nil
		ub, u := heapWith(func() any {
			return decodedPods(b, viewPods, func(p *corev1.Pod) any { p.ManagedFields = nil; return p })
		})
		runtime.KeepAlive(u)
		u = nil
		sb, s := heapWith(func() any {
			strip := podrecord.NewStripper()
			return decodedPods(b, viewPods, func(p *corev1.Pod) any { return strip.Record(p) })
		})
		runtime.KeepAlive(s)
		whole += float64(wb) / viewPods
		unmanaged += float64(ub) / viewPods
		stripped += float64(sb) / viewPods
	}
	n := float64(b.N)
	b.ReportMetric(whole/n, "whole-B/pod")
	b.ReportMetric(unmanaged/n, "no-managed-fields-B/pod")
	b.ReportMetric(stripped/n, "stripped-B/pod")
	b.ReportMetric(stripped/whole, "stripped/whole")
	b.ReportMetric(stripped/unmanaged, "stripped/no-managed-fields")
	b.ReportMetric(0, "ns/op")
}

// metricsRM is an RM whose nodes come from rgs/nodes' Lister over informers
// of a fake API server holding viewNodes nodes and pods pods, served on a
// loopback port with viewConns clients, each its own user.
type metricsRM struct {
	nodes   *nodeLister
	stop    func()
	clients []*ipc.Client
}

func startMetricsRM(b *testing.B, pods int) *metricsRM {
	b.Helper()
	nl := startViewLister(b, pods)
	c := hadoopconf.New(hadoopconf.Options{})
	c.Set("yarn.scheduler.capacity.root.queues", "default")
	c.Set("yarn.scheduler.capacity.root.default.capacity", "100")
	r := newRM(b, c, queues.Options{AdminACL: acl.Parse("*")}, rm.Config{Nodes: nl.l})
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Register(srv); err != nil {
		b.Fatal(err)
	}
	addr, stop := serveIPC(b, srv)
	m := &metricsRM{nodes: nl, stop: stop}
	for i := range viewConns {
		cl, err := ipc.Dial(context.Background(), addr, ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: fmt.Sprintf("user%d", i), MaxIdleTime: benchIdle, Logger: quiet,
		})
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		m.clients = append(m.clients, cl)
	}
	return m
}

// startViewLister starts rgs/nodes' Lister over informers of a fake API
// server holding viewNodes nodes and pods of Knit's running task pods
// (viewPod, spread round the nodes).
func startViewLister(b *testing.B, pods int) *nodeLister {
	b.Helper()
	objs := make([]kruntime.Object, 0, viewNodes+pods)
	for i := range viewNodes {
		objs = append(objs, viewNode(i))
	}
	for i := range pods {
		p := viewPod(b, i, fmt.Sprintf("kwok-node-%d", i%viewNodes))
		p.ManagedFields = nil // the fake API server's memory, not the RM's
		objs = append(objs, p)
	}
	nl := startNodeLister(b, fake.NewClientset(objs...), nil)
	census, err := nl.l.Census(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if census.Nodes(yarnpb.NodeStateProto_NS_RUNNING) != viewNodes || census.RunningContainers != int32(pods) {
		b.Fatalf("the lister counts %d running nodes and %d containers, want %d and %d",
			census.Nodes(yarnpb.NodeStateProto_NS_RUNNING), census.RunningContainers, viewNodes, pods)
	}
	return nl
}

func (m *metricsRM) close() {
	closeClients(m.clients)
	m.stop()
	m.nodes.stop()
}

// fixture is the RM's clients as drive runs them: getClusterMetrics back
// to back on each connection.
func (m *metricsRM) fixture() *fixture {
	fx := &fixture{}
	for _, c := range m.clients {
		req := &yarnpb.GetClusterMetricsRequestProto{}
		fx.calls = append(fx.calls, func(ctx context.Context) error {
			resp := &yarnpb.GetClusterMetricsResponseProto{}
			if err := c.Call(ctx, "getClusterMetrics", req, resp); err != nil {
				return err
			}
			if resp.GetClusterMetrics().GetNumActiveNms() != viewNodes {
				return fmt.Errorf("getClusterMetrics counts %d active nodes, want %d", resp.GetClusterMetrics().GetNumActiveNms(), viewNodes)
			}
			return nil
		})
	}
	return fx
}

// BenchmarkClusterMetricsFlatInPods measures getClusterMetrics, viewConns
// connections each its own user calling back to back, against two RMs in
// the same run whose node view watches viewNodes nodes: one with no pods,
// one with viewPods of Knit's running pods in its informer. Rounds of
// viewRound alternate (ABBA). It reports calls/s and the process's CPU per
// call (client and server share the process; both sides' costs are the same
// in the two RMs, so the ratio is the server's difference) for each, and
// the ratios with/without pods: flat is 1.
func BenchmarkClusterMetricsFlatInPods(b *testing.B) {
	if err := ensureFDs(4 * viewConns); err != nil {
		b.Skip(err)
	}
	empty := startMetricsRM(b, 0)
	defer empty.close()
	full := startMetricsRM(b, viewPods)
	defer full.close()
	type total struct {
		calls int64
		wall  time.Duration
		cpu   time.Duration
	}
	var sums [2]total
	rms := [2]*metricsRM{empty, full}
	for range b.N {
		for _, k := range []int{0, 1, 1, 0} {
			runtime.GC()
			cpu0 := processCPU()
			l, err := drive(rms[k].fixture(), 0, viewRound, nil)
			cpu := processCPU() - cpu0
			if err != nil {
				b.Fatal(err)
			}
			sums[k].calls += l.calls
			sums[k].wall += l.elapsed
			sums[k].cpu += cpu
		}
	}
	rate := func(t total) float64 { return float64(t.calls) / t.wall.Seconds() }
	cpuPer := func(t total) float64 { return micros(t.cpu) / float64(t.calls) }
	b.ReportMetric(rate(sums[0]), "0pods-calls/s")
	b.ReportMetric(rate(sums[1]), "100kpods-calls/s")
	b.ReportMetric(cpuPer(sums[0]), "0pods-cpu-µs/call")
	b.ReportMetric(cpuPer(sums[1]), "100kpods-cpu-µs/call")
	b.ReportMetric(rate(sums[1])/rate(sums[0]), "calls/s-100k/0")
	b.ReportMetric(cpuPer(sums[1])/cpuPer(sums[0]), "cpu/call-100k/0")
	b.ReportMetric(0, "ns/op")
}
