package main

import (
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
