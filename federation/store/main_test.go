package store

import (
	"testing"

	"github.com/knitdev/knit/test/controlplane"
)

// testCluster is the control plane the Kube tests share, each in a
// namespace of its own; nil under -short.
var testCluster *controlplane.ControlPlane

func TestMain(m *testing.M) { controlplane.TestMain(m, "federation store", &testCluster) }
