package manifests

import (
	"maps"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/knitdev/knit/daemonsets/amrmproxy"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/queues"
)

// poolsOverlay runs two sub-clusters on two node pools of one cluster.
const poolsOverlay = "overlays/federation-pools"

// epochStep is how far apart the sub-clusters' yarn.resourcemanager.epoch
// must be, as YARN's Federation guide advises and knit local sets them.
const epochStep = 1000

// subCluster is one RM of the pools overlay with what sets it apart.
type subCluster struct {
	knit
	id     string
	pool   labels.Set
	queues []string
}

func loadSubClusters(t *testing.T, r *rendered) []subCluster {
	t.Helper()
	var scs []subCluster
	for _, k := range loadAll(t, r) {
		fs, err := federation.LoadSettings(k.rmConf)
		if err != nil {
			t.Fatalf("knit-rm of %s: %v", k.ns, err)
		}
		// As knit-rm reads its --node-selector (newPool).
		pool, err := labels.ConvertSelectorToLabelsMap(k.rmArgs["node-selector"])
		if err != nil {
			t.Fatalf("knit-rm of %s: --node-selector: %v", k.ns, err)
		}
		tree, err := queues.Build(k.rmConf, queues.Options{DefaultNamespace: k.rmArgs["namespace"]})
		if err != nil {
			t.Fatalf("knit-rm of %s's queues: %v", k.ns, err)
		}
		sc := subCluster{knit: k, id: fs.SubClusterID, pool: pool}
		for _, q := range tree.Queues() {
			if !slices.Contains(sc.queues, q.Kube.Namespace) {
				sc.queues = append(sc.queues, q.Kube.Namespace)
			}
		}
		scs = append(scs, sc)
	}
	if len(scs) != 2 {
		t.Fatalf("%s renders %d knit-rm Deployments, want two sub-clusters", r.dir, len(scs))
	}
	return scs
}

func TestThePoolsOverlayKeepsEachSubClusterToItsPool(t *testing.T) {
	r := render(t, poolsOverlay)
	scs := loadSubClusters(t, r)
	for _, sc := range scs {
		// The label knit local puts its pools' nodes in, by sub-cluster id.
		if want := (labels.Set{launch.LabelSubCluster: sc.id}); !maps.Equal(sc.pool, want) {
			t.Errorf("knit-rm of %s (%s): --node-selector=%s, want %s", sc.ns, sc.id, sc.rmArgs["node-selector"], want)
		}
		if got := labels.Set(sc.node.Spec.Template.Spec.NodeSelector); !maps.Equal(got, sc.pool) {
			t.Errorf("knit-node of %s runs on nodes %s, its RM's pool is %s", sc.ns, got, sc.pool)
		}
	}
	a, b := scs[0], scs[1]
	// A node in both pools would run both DaemonSets on the same host ports.
	if !labels.Conflicts(a.pool, b.pool) {
		t.Errorf("a node labelled %s is in both pools %s and %s", labels.Merge(a.pool, b.pool), a.pool, b.pool)
	}
	if a.ns == b.ns || a.rmArgs["namespace"] == b.rmArgs["namespace"] {
		t.Errorf("both RMs are in %s (--namespace %s and %s): they would share one state and one Lease", a.ns, a.rmArgs["namespace"], b.rmArgs["namespace"])
	}
	for _, x := range []struct{ one, other subCluster }{{a, b}, {b, a}} {
		for _, ns := range x.one.queues {
			if slices.Contains(x.other.queues, ns) || ns == x.other.rmArgs["namespace"] || ns == x.one.rmArgs["namespace"] {
				t.Errorf("sub-cluster %s's containers run in %s, not a namespace of their own", x.one.id, ns)
			}
		}
	}
	lo, hi := a.rmSettings, b.rmSettings
	if lo.EpochSeed > hi.EpochSeed {
		lo, hi = hi, lo
	}
	if gap := hi.EpochSeed - lo.EpochSeed; gap < epochStep || (lo.EpochRange > 0 && lo.EpochRange > gap) {
		t.Errorf("yarn.resourcemanager.epoch %d and %d (range %d): the sub-clusters' container ids would meet", lo.EpochSeed, hi.EpochSeed, lo.EpochRange)
	}
}

func TestThePoolsOverlayGivesEachSubClusterItsRights(t *testing.T) {
	r := render(t, poolsOverlay)
	scs := loadSubClusters(t, r)
	for _, sc := range scs {
		rmSA, nodeSA := sc.rm.Spec.Template.Spec.ServiceAccountName, sc.node.Spec.Template.Spec.ServiceAccountName
		for _, b := range []struct{ sa, role string }{{rmSA, "knit-rm"}, {nodeSA, "knit-node"}} {
			if !clusterBound(r, b.role, sc.ns, b.sa) {
				t.Errorf("%s/%s has no ClusterRoleBinding to ClusterRole %s", sc.ns, b.sa, b.role)
			}
		}
		// Neither pool's nodes may read an RM's token master keys.
		for _, other := range scs {
			if bound(r, other.rmArgs["namespace"], "knit-node-queue", sc.ns, nodeSA) {
				t.Errorf("knit-node of %s may read the Secrets of %s, knit-rm-keys among them", sc.ns, other.rmArgs["namespace"])
			}
		}
	}
}

// clusterBound says whether a ClusterRoleBinding grants ClusterRole role
// to the service account saNS/sa.
func clusterBound(r *rendered, role, saNS, sa string) bool {
	return slices.ContainsFunc(all[*rbacv1.ClusterRoleBinding](r), func(b *rbacv1.ClusterRoleBinding) bool {
		return b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == role && bindsServiceAccount(b.Subjects, saNS, sa)
	})
}

func TestEveryPoolsNodesRunTheFederationInterceptor(t *testing.T) {
	r := render(t, poolsOverlay)
	for _, sc := range loadSubClusters(t, r) {
		c := loadConf(t, nodeConf(t, r, sc.knit))
		s, err := amrmproxy.SettingsFromHadoop(c)
		if err != nil {
			t.Fatalf("the configuration of %s's nodes: %v", sc.id, err)
		}
		if !s.Enabled || len(s.Pipeline) == 0 || s.Pipeline[0] != amrmproxy.FederationInterceptorName {
			t.Errorf("%s's nodes: AMRMProxy enabled %v, interceptors %v; want the FederationInterceptor first", sc.id, s.Enabled, s.Pipeline)
		}
		// knit-node builds the FederationInterceptor only in a federation.
		if fs, err := federation.LoadSettings(c); err != nil || !fs.Enabled {
			t.Errorf("%s's nodes: yarn.federation.enabled is not true (%v)", sc.id, err)
		}
		if got, want := containerPort(t, sc.nodec, "amrmproxy"), port(t, s.Address); got != want {
			t.Errorf("knit-node of %s: amrmproxy port %d, its configuration's %s", sc.ns, got, s.Address)
		}
		// Its store is the RM's, which it reads: an application's home,
		// the active sub-clusters, a queue's policy.
		storeNS := sc.nodeArgs["federation-namespace"]
		if storeNS != sc.rmArgs["federation-namespace"] {
			t.Errorf("knit-node of %s reads the store in %q, its RM's is in %q", sc.ns, storeNS, sc.rmArgs["federation-namespace"])
		}
		have := granted(r, storeNS, "configmaps", sc.ns, sc.node.Spec.Template.Spec.ServiceAccountName)
		for _, v := range []string{"get", "list"} {
			if !slices.Contains(have, v) {
				t.Errorf("knit-node of %s may not %s the store's ConfigMaps in %s", sc.ns, v, storeNS)
			}
		}
	}
}
