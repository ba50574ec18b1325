package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// podGroupCRD is a minimal stand-in for Volcano's PodGroup CRD: the group,
// version, kind and plural Volcano serves, any content.
func podGroupCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: rgs.PodGroupCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: rgs.PodGroupResource.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "podgroups", Singular: "podgroup", Kind: "PodGroup", ListKind: "PodGroupList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: rgs.PodGroupResource.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// TestAVolcanoQueuesApplicationRunsInOnePodGroupDeletedAtItsEnd runs a
// distributed shell job in root.vc, delegated to Volcano's queue
// yarn-batch, on a cluster with the PodGroup CRD and no Volcano: the
// queue sets no scheduler name, so the default scheduler places the pods.
// The application's one PodGroup exists before its pods, with Volcano's
// queue, minMember 1 and Knit's labels; every pod names it and Volcano's
// queue, and none waits behind Knit's scheduling gate; the PodGroup is
// deleted when the application ends.
func TestAVolcanoQueuesApplicationRunsInOnePodGroupDeletedAtItsEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"), append(queuesOf("default", "vc"),
		hadoopconf.Property{Name: "knit.queue.root.vc.delegate", Value: "volcano"},
		hadoopconf.Property{Name: "knit.queue.root.vc.delegate-queue", Value: "yarn-batch"})...)
	upWithConf(t, dir, confDir)
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	crds := apiextensions.NewForConfigOrDie(restCfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(t.Context(), podGroupCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Within(t, time.Minute, func(ctx context.Context) error {
		crd, err := crds.Get(ctx, rgs.PodGroupCRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("the PodGroup CRD is not established")
	})
	podGroups := dyn.Resource(rgs.PodGroupResource).Namespace(metav1.NamespaceAll)

	// The job: an AM and two containers that each run 20 s, long enough
	// to see them.
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-queue", "vc", "-shell_command", "sleep", "-shell_args", "20",
			"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
		cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "USER=dsuser")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Run()
		done <- result{buf.String(), err}
	}()

	// The PodGroup, and every pod of the application seen while it runs.
	var group *unstructured.Unstructured
	var app yarnid.ApplicationID
	seen := map[string]*corev1.Pod{}
	var res result
	finished := false
	for deadline := time.Now().Add(5 * time.Minute); !finished; {
		if time.Now().After(deadline) {
			t.Fatal("distshell did not end within 5 minutes")
		}
		select {
		case res = <-done:
			finished = true
		case <-time.After(300 * time.Millisecond):
		}
		// The pods first: one seen before a later list still finds no
		// PodGroup was created before it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: launch.LabelQueue + "=root.vc"})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if group == nil {
			list, err := podGroups.List(ctx, metav1.ListOptions{LabelSelector: launch.LabelQueue + "=root.vc"})
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			switch len(list.Items) {
			case 0:
				if len(pods.Items) > 0 {
					cancel()
					t.Fatalf("pod %s exists before its application's PodGroup", pods.Items[0].Name)
				}
			case 1:
				group = &list.Items[0]
				if app, err = yarnid.ParseApplicationID(group.GetLabels()[launch.LabelApplication]); err != nil {
					cancel()
					t.Fatalf("PodGroup %s: %v", group.GetName(), err)
				}
			default:
				cancel()
				t.Fatalf("%d PodGroups of root.vc, want the application's one", len(list.Items))
			}
		}
		cancel()
		for i := range pods.Items {
			seen[pods.Items[i].Name] = &pods.Items[i]
		}
	}
	if res.err != nil || !strings.Contains(res.out, "SUCCEEDED") {
		t.Fatalf("distshell in root.vc: %v\n%s", res.err, res.out)
	}
	if m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(res.out); m == nil || m[1] != app.String() {
		t.Fatalf("distshell submitted %v; the PodGroup is of %s", m, app)
	}
	if group == nil {
		t.Fatal("no PodGroup was seen while the application ran")
	}

	if got, want := group.GetName(), rgs.PodGroupName(app); got != want {
		t.Errorf("PodGroup name %q, want %q", got, want)
	}
	spec, _, _ := unstructured.NestedMap(group.Object, "spec")
	if spec["queue"] != "yarn-batch" || spec["minMember"] != int64(1) {
		t.Errorf("PodGroup spec %v, want queue yarn-batch and minMember 1", spec)
	}
	if phase, _, _ := unstructured.NestedString(group.Object, "status", "phase"); phase != "Pending" {
		t.Errorf("PodGroup phase %q, want Pending", phase)
	}
	if l := group.GetLabels(); l[launch.LabelApplication] != app.String() || l[launch.LabelQueue] != "root.vc" || l[launch.LabelUser] != "dsuser" {
		t.Errorf("PodGroup labels %v", l)
	}
	if mf := group.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "knit-rgs" {
		t.Errorf("PodGroup managed fields %v, want RGS's create", mf)
	}
	// The AM and the two containers, at least.
	if len(seen) < 3 {
		t.Errorf("%d pods seen, want the AM's and 2 containers'", len(seen))
	}
	created := group.GetCreationTimestamp()
	for name, p := range seen {
		if p.Labels[launch.LabelApplication] != app.String() {
			t.Errorf("pod %s is of %s", name, p.Labels[launch.LabelApplication])
		}
		if got := p.Annotations[rgs.VolcanoGroupAnnotation]; got != group.GetName() {
			t.Errorf("pod %s: %s=%q, want %q", name, rgs.VolcanoGroupAnnotation, got, group.GetName())
		}
		if got := p.Annotations[rgs.VolcanoQueueAnnotation]; got != "yarn-batch" {
			t.Errorf("pod %s: %s=%q, want yarn-batch", name, rgs.VolcanoQueueAnnotation, got)
		}
		if p.Namespace != group.GetNamespace() {
			t.Errorf("pod %s in namespace %s, its PodGroup in %s", name, p.Namespace, group.GetNamespace())
		}
		if p.CreationTimestamp.Before(&created) {
			t.Errorf("pod %s created at %v, before its PodGroup at %v", name, p.CreationTimestamp, created)
		}
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s: schedulerName %q, want the default", name, p.Spec.SchedulerName)
		}
		// Volcano queues the pods: Knit's admission holds none back.
		if hasKnitGate(p) {
			t.Errorf("pod %s of a delegated queue was seen behind Knit's scheduling gate", name)
		}
	}

	// The application has ended: its PodGroup goes.
	eventually.Within(t, time.Minute, func(ctx context.Context) error {
		_, err := dyn.Resource(rgs.PodGroupResource).Namespace(group.GetNamespace()).Get(ctx, group.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("PodGroup %s/%s is still there after its application ended", group.GetNamespace(), group.GetName())
	})
}
