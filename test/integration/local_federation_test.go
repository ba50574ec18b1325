package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// TestKnitLocalUpWithTwoSubClustersServesThroughTheRouter runs `knit local
// up --subclusters 2` as a user does: two knit-rm sub-clusters with their
// own namespaces on the one control plane, knit-router and knit-gpg, which
// writes the default queue's weights. A
// client that reads only the hadoop-conf/ the command wrote submits to the
// Router, the application lands in one sub-cluster's RM, and `knit
// application -list` through the same folder lists it; down leaves nothing.
func TestKnitLocalUpWithTwoSubClustersServesThroughTheRouter(t *testing.T) {
	buildFederation(t)
	dir := filepath.Join(t.TempDir(), "local")
	knit := knitLocal(t, dir)
	out, err := knit("up", "--nodes", "1", "--subclusters", "2")
	if err != nil || !strings.Contains(out, "federation: knit-router client") || !strings.Contains(out, "sub-cluster sc2") {
		t.Fatalf("knit local up --subclusters 2: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"knit-router", "knit-gpg", "knit-rm-sc1", "knit-rm-sc2", "knit-local"} {
				b, _ := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
				t.Logf("%s.log:\n%s", name, tail(string(b), 40))
			}
		}
	})
	st, _, store := localFederation(t, dir)

	// The written configuration names the Router as the RM.
	confDir := localcluster.HadoopConfDir(dir)
	addr, ok, err := client.ConfAddress(confDir, client.KeyRMAddress, 8032)
	if err != nil || !ok || addr != st.Federation.Router {
		t.Fatalf("%s names the RM %q (%v, %v), want the Router %s", confDir, addr, ok, err, st.Federation.Router)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Both run, and knit-gpg weighs them for the default queue.
	waitLocalFederation(t, store)

	c, err := client.NewRMClient(addr, client.RMConfig{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	newApp, id := submitUnmanaged(ctx, t, c, "through the local Router")
	home, err := store.GetApplicationHomeSubCluster(ctx, id.String())
	if err != nil {
		t.Fatalf("home of %s: %v", id, err)
	}
	for _, sc := range st.Federation.SubClusters {
		rm, err := client.NewRMClient(sc.RM.Client, client.RMConfig{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rm.GetApplicationReport(ctx, newApp.GetApplicationId())
		rm.Close()
		if (sc.ID == home) != (err == nil) {
			t.Errorf("%s asked directly for %s (home %s): %v", sc.ID, id, home, err)
		}
	}

	list := exec.CommandContext(ctx, filepath.Join(binDir, "knit"), "application", "-list", "-appStates", "ALL")
	list.Env = append(os.Environ(), "HADOOP_CONF_DIR="+confDir, "HADOOP_USER_NAME=alice")
	if out, err := list.CombinedOutput(); err != nil || !strings.Contains(string(out), id.String()) {
		t.Errorf("knit application -list through %s: %v\n%s", confDir, err, out)
	}

	out, err = knit("status")
	for _, want := range []string{"knit-router running", "knit-gpg running", "knit-rm-sc1 running", "knit-rm-sc2 running"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("knit local status lacks %q: %v\n%s", want, err, out)
		}
	}
	if out, err := knit("down"); err != nil || !strings.Contains(out, "local cluster down") {
		t.Fatalf("knit local down: %v\n%s", err, out)
	}
	if left := processesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left after down: %v", left)
	}
}

// localFederation reads the local.json of the two-sub-cluster federation
// `knit local up` started in dir, with a client of its control plane and
// its federation store.
func localFederation(t *testing.T, dir string) (localcluster.State, kubernetes.Interface, *fedstore.Kube) {
	t.Helper()
	var st localcluster.State
	data, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil || st.Federation == nil || len(st.Federation.SubClusters) != 2 {
		t.Fatalf("local.json: %v\n%s", err, data)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	store, err := fedstore.NewKube(fedstore.KubeConfig{Client: kube, Namespace: localcluster.FederationNamespace})
	if err != nil {
		t.Fatal(err)
	}
	return st, kube, store
}

// waitLocalFederation waits until both sub-clusters of a local federation
// run and knit-gpg has written the default queue's policy, and returns it.
func waitLocalFederation(t *testing.T, store *fedstore.Kube) fedstore.PolicyConfiguration {
	t.Helper()
	var p fedstore.PolicyConfiguration
	eventually.WithinEvery(t, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		active, err := store.GetSubClusters(ctx, true)
		if err != nil || len(active) != 2 {
			return fmt.Errorf("active sub-clusters %v, %v", active, err)
		}
		if p, err = store.GetPolicyConfiguration(ctx, "default"); err != nil || p.Type != federation.WeightedLocalityPolicyManager {
			return fmt.Errorf("policy of default: %+v, %v", p, err)
		}
		return nil
	})
	return p
}
