package store

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/knitdev/knit/test/controlplane"
	waitfor "github.com/knitdev/knit/test/eventually"
)

// testCluster is the one control plane the integration tests share; each
// test works in a namespace of its own. Nil under -short.
var testCluster *controlplane.ControlPlane

func TestMain(m *testing.M) { controlplane.TestMain(m, "store", &testCluster) }

// needCluster skips a test that needs the control plane under -short.
func needCluster(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if testCluster == nil {
		t.Skip("needs a control plane; not started under -short")
	}
	return testCluster
}

// testEnv is one test's namespace on the shared control plane.
type testEnv struct {
	cp    *controlplane.ControlPlane
	ns    string
	admin kubernetes.Interface
}

// newEnv makes a namespace for the test and installs the CRD.
func newEnv(t *testing.T) *testEnv {
	t.Helper()
	cp := needCluster(t)
	admin, err := cp.Client()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "store-test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{cp: cp, ns: ns.Name, admin: admin}
	if err := e.store(t, storeOptions{}).Install(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e
}

type storeOptions struct {
	// rest is the client configuration; nil means the admin's, direct.
	rest *rest.Config
	// failures counts backoffs (failed attempts); nil means not counted.
	failures *atomic.Int64
	now      func() time.Time
	fence    func() error
	// timestamps are a federation member's claims; nil for none.
	timestamps TimestampClaims
}

// store returns a Store in the test's namespace with a fast backoff, as a
// new RM process would make it: new clients, nothing shared.
func (e *testEnv) store(t *testing.T, o storeOptions) *Store {
	t.Helper()
	cfg := o.rest
	if cfg == nil {
		cfg = e.cp.RESTConfig()
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	failures := o.failures
	if failures == nil {
		failures = new(atomic.Int64)
	}
	s, err := New(Config{
		Dynamic:    dyn,
		Core:       core,
		Namespace:  e.ns,
		Logger:     slog.New(slog.NewTextHandler(t.Output(), nil)),
		NewBackOff: fastBackOff(failures),
		Now:        o.now,
		Fence:      o.fence,
		Timestamps: o.timestamps,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, timeout, what, cond)
}
