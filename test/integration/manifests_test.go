package integration

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/renameio/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/test/localcluster"
)

// The identities manifests/base gives knit-rm and knit-node, and the
// namespace its queues' pods run in.
const (
	rmServiceAccount   = "system:serviceaccount:knit:knit-rm"
	nodeServiceAccount = "system:serviceaccount:knit:knit-node"
	baseQueueNamespace = "knit-apps"
)

// TestManifestsRBACIsEnoughForADistributedShellJob applies manifests/base's
// namespaces, CRD, service accounts and RBAC to a local cluster of its own
// (the shared one has its own knit-rm), starts knit-rm with the base's RM
// configuration and knit-node, each through a kubeconfig that impersonates
// its service account, and runs a distshell job to FINISHED/SUCCEEDED. A
// rule the code needs and the manifests lack shows as "forbidden" in their
// logs, which fails the test; the API server's own RBAC evaluation then
// answers for the calls the job does not make.
func TestManifestsRBACIsEnoughForADistributedShellJob(t *testing.T) {
	if err := knitBinaries(); err != nil {
		t.Fatal(err)
	}
	base := renderBase(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{
		Dir:    filepath.Join(t.TempDir(), "local"),
		Nodes:  1,
		Logger: clusterLogger().With("cluster", "rbac"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	dir := c.ControlPlane.Dir
	logs := func() map[string]string {
		out := map[string]string{}
		paths, _ := filepath.Glob(filepath.Join(dir, "logs", "knit-*.log"))
		for _, p := range paths {
			b, _ := os.ReadFile(p)
			out[filepath.Base(p)] = string(b)
		}
		return out
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, log := range logs() {
				t.Logf("%s:\n%s", name, tail(log, 60))
			}
		}
	})

	// What `kubectl apply -k manifests/base` creates, but the workloads
	// and their ConfigMaps: here the harness runs knit-rm and knit-node.
	var rbac bytes.Buffer
	for _, r := range base.Resources() {
		switch r.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "FlowSchema":
			y, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			rbac.WriteString("---\n")
			rbac.Write(y)
		}
	}
	apply := c.ControlPlane.Kubectl(ctx, "apply", "-f", "-")
	apply.Stdin = &rbac
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	// The API server refuses pods in a namespace until its default
	// service account exists.
	waitFor(t, time.Minute, "the default service account of "+baseQueueNamespace, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(baseQueueNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	// knit-rm reads the base's configuration: its queues, which send pods
	// to knit-apps, and its yarn-site.xml on top of the harness's
	// addresses.
	site, queues := baseRMConf(t, base)
	if err := os.MkdirAll(localcluster.RMConfDir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := renameio.WriteFile(filepath.Join(localcluster.RMConfDir(dir), "capacity-scheduler.xml"), []byte(queues), 0o644); err != nil {
		t.Fatal(err)
	}

	ids := localcluster.Identities{
		RMKubeconfig:   impersonating(t, c.ControlPlane.Kubeconfig, rmServiceAccount),
		NodeKubeconfig: impersonating(t, c.ControlPlane.Kubeconfig, nodeServiceAccount),
	}
	// The kubeconfigs are who they say, and no more.
	for user, kubeconfig := range map[string]string{rmServiceAccount: ids.RMKubeconfig, nodeServiceAccount: ids.NodeKubeconfig} {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		as := kubernetes.NewForConfigOrDie(cfg)
		review, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := review.Status.UserInfo.Username; got != user {
			t.Fatalf("%s authenticates as %s, want %s", kubeconfig, got, user)
		}
		if _, err := as.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("%s lists kube-system's secrets: %v, want forbidden", user, err)
		}
	}

	if _, err := c.StartRMAs(ctx, ids, []string{filepath.Join(binDir, "knit-rm")}, site...); err != nil {
		t.Fatal(err)
	}
	checkLeaseFlowSchema(ctx, t, c.Client, ids.RMKubeconfig)

	distshell := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"),
		"-shell_command", "echo", "-shell_args", "hello-from-rbac",
		"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
	distshell.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "USER=dsuser")
	out, err := distshell.CombinedOutput()
	if err != nil {
		t.Fatalf("distshell: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "FINISHED") || !strings.Contains(string(out), "SUCCEEDED") {
		t.Errorf("distshell output lacks FINISHED/SUCCEEDED:\n%s", out)
	}
	m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("distshell submitted nothing:\n%s", out)
	}
	// The node's copy, or once uploaded the aggregated file's.
	stdouts := map[string]string{}
	paths, _ := filepath.Glob(filepath.Join(localcluster.NodeLogDir(dir, c.Nodes[0].Name), string(m[1]), "*", "stdout"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			stdouts[filepath.Base(filepath.Dir(p))] = string(b)
		}
	}
	app, err := yarnid.ParseApplicationID(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, byContainer := range aggregatedLogs(dir, app, "stdout") {
		maps.Copy(stdouts, byContainer)
	}
	hellos := 0
	for _, log := range stdouts {
		if log == "hello-from-rbac\n" {
			hellos++
		}
	}
	if hellos != 2 {
		t.Errorf("%d of the containers' stdout logs %v say hello, want 2", hellos, stdouts)
	}

	for name, log := range logs() {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s: %s", name, line)
			}
		}
	}

	// Calls the job did not make, and calls no Knit process may make.
	for _, tt := range []struct {
		user      string
		verb      string
		resource  string
		sub, ns   string
		name      string
		group     string
		wantAllow bool
	}{
		{user: rmServiceAccount, verb: "patch", resource: "pods", sub: "resize", ns: baseQueueNamespace, wantAllow: true},
		{user: rmServiceAccount, verb: "update", resource: "secrets", ns: baseQueueNamespace, wantAllow: true},
		{user: rmServiceAccount, verb: "get", resource: "customresourcedefinitions", group: "apiextensions.k8s.io", name: "yarnapplications.knit.io", wantAllow: true},
		{user: rmServiceAccount, verb: "delete", resource: "yarnapplications", group: "knit.io", ns: "knit", wantAllow: true},
		{user: rmServiceAccount, verb: "create", resource: "pods", sub: "exec", ns: baseQueueNamespace, wantAllow: true},
		{user: rmServiceAccount, verb: "create", resource: "events", group: "events.k8s.io", ns: baseQueueNamespace, wantAllow: true},
		// Volcano's PodGroups of a delegated queue's applications
		// (rgs/podgroup.go): made and deleted in a queue's namespace,
		// listed across the cluster at start, nowhere else written.
		{user: rmServiceAccount, verb: "create", resource: "podgroups", group: "scheduling.volcano.sh", ns: baseQueueNamespace, wantAllow: true},
		{user: rmServiceAccount, verb: "delete", resource: "podgroups", group: "scheduling.volcano.sh", ns: baseQueueNamespace, wantAllow: true},
		{user: rmServiceAccount, verb: "list", resource: "podgroups", group: "scheduling.volcano.sh", wantAllow: true},
		{user: rmServiceAccount, verb: "create", resource: "podgroups", group: "scheduling.volcano.sh", ns: "default"},
		{user: rmServiceAccount, verb: "create", resource: "pods", sub: "exec", ns: "default"},
		{user: rmServiceAccount, verb: "create", resource: "pods", sub: "exec", ns: "knit"},
		{user: nodeServiceAccount, verb: "create", resource: "pods", sub: "exec", ns: baseQueueNamespace},
		{user: rmServiceAccount, verb: "get", resource: "secrets", ns: "default"},
		{user: rmServiceAccount, verb: "create", resource: "pods", ns: "default"},
		{user: rmServiceAccount, verb: "create", resource: "customresourcedefinitions", group: "apiextensions.k8s.io"},
		{user: nodeServiceAccount, verb: "get", resource: "secrets", ns: "knit", name: "knit-rm-keys"},
		{user: nodeServiceAccount, verb: "create", resource: "pods", ns: baseQueueNamespace},
		{user: nodeServiceAccount, verb: "patch", resource: "pods", ns: baseQueueNamespace},
	} {
		saNS := strings.Split(tt.user, ":")[2]
		review, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   tt.user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: tt.ns, Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.sub, Name: tt.name,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tt.wantAllow {
			t.Errorf("%s %s %s/%s %s in %q: allowed %v, want %v", tt.user, tt.verb, tt.resource, tt.sub, tt.name, tt.ns, review.Status.Allowed, tt.wantAllow)
		}
	}
}

// checkLeaseFlowSchema asks for the RM's Lease as the RM and checks that
// the API server's flow control put the request under the base's
// FlowSchema for it, at the leader-election priority level: it names both
// in every answer's X-Kubernetes-PF-* headers.
func checkLeaseFlowSchema(ctx context.Context, t *testing.T, admin kubernetes.Interface, rmKubeconfig string) {
	t.Helper()
	fs, err := admin.FlowcontrolV1().FlowSchemas().Get(ctx, "knit-rm-leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", rmKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/apis/coordination.k8s.io/v1/namespaces/knit/leases/knit-rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got != string(fs.UID) {
		t.Errorf("the RM's Lease request went to FlowSchema %q, want knit-rm-leader-election (%s); status %d", got, fs.UID, resp.StatusCode)
	}
	if got := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"); got != string(pl.UID) {
		t.Errorf("the RM's Lease request went to priority level %q, want leader-election (%s)", got, pl.UID)
	}
}

// renderBase runs kustomize on manifests/base, as `kubectl apply -k` does.
func renderBase(t *testing.T) resmap.ResMap {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "manifests", "base"))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// baseRMConf returns the properties of the base's knit-rm yarn-site.xml
// and the text of its capacity-scheduler.xml.
func baseRMConf(t *testing.T, base resmap.ResMap) (site []hadoopconf.Property, queues string) {
	t.Helper()
	for _, r := range base.Resources() {
		if r.GetKind() != "ConfigMap" || r.GetName() != "knit-rm-conf" {
			continue
		}
		data := r.GetDataMap()
		c := hadoopconf.New(hadoopconf.Options{})
		if err := c.AddResource(strings.NewReader(data["yarn-site.xml"]), "yarn-site.xml"); err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Sorted(slices.Values(c.Names())) {
			v, _ := c.Raw(name)
			site = append(site, hadoopconf.Property{Name: name, Value: v})
		}
		return site, data["capacity-scheduler.xml"]
	}
	t.Fatal("manifests/base renders no ConfigMap knit-rm-conf")
	return nil, ""
}

// impersonating writes a copy of the admin kubeconfig whose user acts as
// user, as a pod's service account token would, and returns its path. The
// API server adds a service account's groups to it.
func impersonating(t *testing.T, admin, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), strings.ReplaceAll(user, ":", "-")+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
