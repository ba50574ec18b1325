package integration

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// TestADistributedShellThroughTheAMRMProxySpansBothSubClusters runs
// DistributedShell through the Router of `knit local up --subclusters 2`,
// whose sub-clusters have a node pool each: the AM, on a node of its home
// sub-cluster, heartbeats through that node's AMRMProxy, whose
// FederationInterceptor splits its asks by the weights knit-gpg wrote for
// the queue, so that the other sub-cluster gets an unmanaged AM under the
// same application id and runs some of the containers on its own nodes.
// The AM starts every container through the NodeId it was given (each
// node's knit-node relays to its own sub-cluster's RKS), the job finishes
// SUCCEEDED, and the other sub-cluster's unmanaged application finished.
func TestADistributedShellThroughTheAMRMProxySpansBothSubClusters(t *testing.T) {
	buildFederation(t)
	dir := filepath.Join(t.TempDir(), "local")
	knit := knitLocal(t, dir)
	if out, err := knit("up", "--nodes", "2", "--subclusters", "2"); err != nil {
		t.Fatalf("knit local up --subclusters 2: %v\n%s", err, out)
	}
	dumpLogsOnFailure(t, dir)
	st, kube, store := localFederation(t, dir)
	// The sub-cluster of each node, and of each namespace.
	poolOf, scOfNamespace := map[string]string{}, map[string]string{}
	for _, sc := range st.Federation.SubClusters {
		if len(sc.Nodes) == 0 {
			t.Fatalf("sub-cluster %s has no nodes: %+v", sc.ID, st.Federation)
		}
		for _, n := range sc.Nodes {
			poolOf[n] = sc.ID
		}
		scOfNamespace[sc.Namespace] = sc.ID
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Both sub-clusters run, and knit-gpg gave the queue a policy whose
	// AMRMProxy weights send asks to both.
	info, err := router.ParseWeightedPolicyInfo(waitLocalFederation(t, store).Params)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range st.Federation.SubClusters {
		if info.AMRMWeights[sc.ID] <= 0 {
			t.Fatalf("AMRMProxy weights %v leave out %s", info.AMRMWeights, sc.ID)
		}
	}

	// Every task pod seen bound, by namespace, pod and node: the pods go
	// once their logs are safe, so they are watched while the job runs.
	bound := watchBoundTaskPods(ctx, t, kube, slices.Collect(maps.Keys(scOfNamespace)))

	// The client names only the Router: this distshell hands its client's
	// scheduler address to the AM, where a Java AM reads its container's
	// configuration, which its node's AMRMProxy wrote.
	clientConf := t.TempDir()
	writeConfFile(t, filepath.Join(clientConf, "yarn-site.xml"), hadoopconf.Property{Name: hadoopconf.KeyRMAddress, Value: st.Federation.Router})
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "3",
		"-num_containers", "4", "-container_memory", "128", "-master_memory", "128")
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+clientConf, "USER=dsuser")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("distshell submitted nothing: %v\n%s", runErr, out.String())
	}
	app, err := yarnid.ParseApplicationID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if s := out.String(); runErr != nil || !strings.Contains(s, "FINISHED") || !strings.Contains(s, "SUCCEEDED") {
		t.Fatalf("distshell: %v\n%s", runErr, s)
	}

	home, err := store.GetApplicationHomeSubCluster(ctx, app.String())
	if err != nil {
		t.Fatalf("home of %s: %v", app, err)
	}
	// Each sub-cluster ran task containers of the application, on nodes
	// of its own pool only, under ids that never meet.
	ran := map[string]int{}
	containers := map[string]string{}
	for _, p := range bound() {
		if p.app != app.String() {
			continue
		}
		sc := scOfNamespace[p.namespace]
		if poolOf[p.node] != sc {
			t.Errorf("pod %s/%s of %s ran on %s, a node of %q", p.namespace, p.name, sc, p.node, poolOf[p.node])
		}
		if other, ok := containers[p.container]; ok && other != sc {
			t.Errorf("container %s was given by both %s and %s", p.container, other, sc)
		}
		containers[p.container] = sc
		ran[sc]++
	}
	for _, sc := range st.Federation.SubClusters {
		if ran[sc.ID] == 0 {
			t.Errorf("no task container of %s ran in %s (home %s); ran %v", app, sc.ID, home, ran)
		}
	}

	// The secondary sub-cluster had the unmanaged AM, under the same id,
	// and it finished with the AM.
	for _, sc := range st.Federation.SubClusters {
		if sc.ID == home {
			continue
		}
		rm, err := client.NewRMClient(sc.RM.Client, client.RMConfig{User: "dsuser"})
		if err != nil {
			t.Fatal(err)
		}
		defer rm.Close()
		r, err := rm.GetApplicationReport(ctx, app.Proto())
		if err != nil {
			t.Fatalf("%s asked for %s (home %s): %v", sc.ID, app, home, err)
		}
		if !r.GetUnmanagedApplication() || r.GetName() != federation.UnmanagedAMName ||
			r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FINISHED || r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED {
			t.Errorf("%s's report of %s: unmanaged %v, name %q, %v/%v; want the finished unmanaged AM",
				sc.ID, app, r.GetUnmanagedApplication(), r.GetName(), r.GetYarnApplicationState(), r.GetFinalApplicationStatus())
		}
	}
}

// boundPod is a task pod seen bound to a node.
type boundPod struct {
	namespace, name, node, app, container string
}

// watchBoundTaskPods watches Knit's task pods in namespaces until the test
// ends and returns what it has seen bound so far.
func watchBoundTaskPods(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespaces []string) func() []boundPod {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]boundPod{}
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || p.Labels[launch.LabelContainer] == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen[p.Namespace+"/"+p.Name] = boundPod{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName,
			app: p.Labels[launch.LabelApplication], container: p.Labels[launch.LabelContainer]}
	}
	stop := make(chan struct{})
	var factories []informers.SharedInformerFactory
	t.Cleanup(func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	})
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = launch.LabelRole + "=" + launch.RoleTask }))
		if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    record,
			UpdateFunc: func(_, obj any) { record(obj) },
		}); err != nil {
			t.Fatal(err)
		}
		factories = append(factories, f)
		f.Start(stop)
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("pods of %s: %v not synced", ns, typ)
			}
		}
	}
	return func() []boundPod {
		mu.Lock()
		defer mu.Unlock()
		return slices.Collect(maps.Values(seen))
	}
}
