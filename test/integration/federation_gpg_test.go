package integration

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/test/eventually"
)

// federationBinaries builds knit-router and knit-gpg beside the binaries
// of knitBinaries, once for the package.
var federationBinaries = sync.OnceValue(func() error {
	if err := knitBinaries(); err != nil {
		return err
	}
	out, err := exec.Command("go", "build", "-o", binDir+"/", "github.com/knitdev/knit/cmd/knit-router", "github.com/knitdev/knit/cmd/knit-gpg").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
})

func buildFederation(t *testing.T) {
	t.Helper()
	if err := federationBinaries(); err != nil {
		t.Fatal(err)
	}
}

// federationStore is a federation store in a new namespace of the shared
// cluster.
func federationStore(t *testing.T, prefix string) (string, *fedstore.Kube) {
	t.Helper()
	ns := newNamespace(t, prefix)
	st, err := fedstore.NewKube(fedstore.KubeConfig{Client: cluster.Client, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return ns, st
}

// TestTheGlobalPolicyGeneratorsWeightsSteerTheRouter runs knit-gpg with
// LoadBasedGlobalPolicy over two sub-clusters, one of them loaded with
// pending applications: the GPG writes the default queue's
// WeightedLocalityPolicyManager policy weighing the loaded one down to
// nothing, and the Router homes the queue's next submissions on the other.
func TestTheGlobalPolicyGeneratorsWeightsSteerTheRouter(t *testing.T) {
	buildFederation(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	fedNS, st := federationStore(t, "federation-gpg-")
	rms := map[string]*subCluster{}
	for _, id := range []string{"sc1", "sc2"} {
		rms[id] = startSubCluster(t, id, fedNS)
	}
	eventually.WithinEvery(t, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		active, err := st.GetSubClusters(ctx, true)
		if err != nil || len(active) != 2 {
			return fmt.Errorf("active sub-clusters %v, %v", active, err)
		}
		return nil
	})
	// Four applications wait in sc1, over the GPG's maximum pending below;
	// the GPG edits only the most loaded sub-cluster, so the three
	// submissions the Router sends to sc2 leave its weight as it is.
	for range 4 {
		submitUnmanaged(ctx, t, rms["sc1"].rm, "load")
	}

	routerAddr := freeAddr(t)
	routerConf := writeSite(t, []hadoopconf.Property{
		{Name: hadoopconf.KeyRouterClientRMAddress, Value: routerAddr},
		{Name: hadoopconf.KeyRouterRMAdminAddress, Value: freeAddr(t)},
		{Name: hadoopconf.KeyRouterWebappAddress, Value: freeAddr(t)},
		{Name: hadoopconf.KeyFederationCacheTTL, Value: "0"},
	})
	startProcess(t, "knit-router", "knit-router", routerConf, "--kubeconfig", cluster.ControlPlane.Kubeconfig, "--namespace", fedNS)
	gpgConf := writeSite(t, []hadoopconf.Property{
		{Name: hadoopconf.KeyGPGPolicyClass, Value: federation.LoadBasedGlobalPolicy},
		{Name: hadoopconf.KeyGPGPolicyInterval, Value: "500"},
		{Name: hadoopconf.KeyGPGLoadBasedMinPending, Value: "0"},
		{Name: hadoopconf.KeyGPGLoadBasedMaxPending, Value: "2"},
		{Name: hadoopconf.KeyGPGLoadBasedMaxEdit, Value: "1"},
	})
	startProcess(t, "knit-gpg", "knit-gpg", gpgConf, "--kubeconfig", cluster.ControlPlane.Kubeconfig, "--namespace", fedNS)

	eventually.WithinEvery(t, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		p, err := st.GetPolicyConfiguration(ctx, "default")
		if err != nil {
			return err
		}
		info, err := router.ParseWeightedPolicyInfo(p.Params)
		if err != nil {
			return err
		}
		w := info.RouterWeights
		if p.Type != federation.WeightedLocalityPolicyManager || len(w) != 2 || w["sc1"] != 0 || w["sc2"] != 1 || info.AMRMWeights["sc2"] != 1 {
			return fmt.Errorf("policy of default: %s %s", p.Type, p.Params)
		}
		return nil
	})

	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		conn, err := net.DialTimeout("tcp", routerAddr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	c, err := client.NewRMClient(routerAddr, client.RMConfig{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		_, id := submitUnmanaged(ctx, t, c, "steered")
		if home, err := st.GetApplicationHomeSubCluster(ctx, id.String()); err != nil || home != "sc2" {
			t.Errorf("home of %s = %q, %v; want sc2, the GPG's only weighted sub-cluster", id, home, err)
		}
	}
}
