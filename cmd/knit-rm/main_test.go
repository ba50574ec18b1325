package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"go.uber.org/fx"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm/ha"
)

// testReplica is a replica of a cluster without HA; building it does no
// I/O.
func testReplica(t *testing.T) *replica {
	t.Helper()
	el, err := ha.NewElector(ha.Config{Client: fake.NewClientset(), Namespace: "knit", Identity: "rm1"})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{id: "rm1", elector: el, conf: hadoopconf.New(hadoopconf.Options{})}
}

// The wiring is complete: every constructor's inputs are provided, with no
// cycle, without running any of them.
func TestWiringIsValid(t *testing.T) {
	r := testReplica(t)
	for name, opts := range map[string]fx.Option{
		"active":  options(flags{}, r),
		"standby": standbyOptions(flags{}, r),
	} {
		if err := fx.ValidateApp(opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Building the active RM reads and writes nothing of the cluster: a
// replica may build it and still fail to lead, and the order of what the
// active RM reads and writes is the activation's alone.
func TestBuildingTheActiveRMSendsTheAPIServerNothing(t *testing.T) {
	var requests atomic.Int64
	var first atomic.Value
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			first.Store(r.Method + " " + r.URL.Path)
		}
		http.Error(w, "not now", http.StatusServiceUnavailable)
	}))
	defer api.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {token: test}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
`, api.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	app := fx.New(options(flags{kubeconfig: kubeconfig, namespace: "knit", queueAdmission: true}, testReplica(t)))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("building the active RM sent the API server %d requests, the first %v", n, first.Load())
	}
}
