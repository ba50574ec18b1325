package manifests

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/knitdev/knit/federation"
	fedstore "github.com/knitdev/knit/federation/store"
)

// storeSources are the files whose Kubernetes calls are the federation
// store's: the ConfigMap and Lease verbs they use are what its processes
// need in the store's namespace.
func storeSources() []string {
	return []string{"../federation/store/kube.go", "../federation/store/retry.go"}
}

// calledVerbs reads the API verbs the store's source calls on ConfigMaps
// and Leases: every method Get, List, Watch, Create, Update, Patch or
// Delete called on k.configMaps() or on a .ConfigMaps(ns)/.Leases(ns)
// client, by resource.
func calledVerbs(t *testing.T) map[string][]string {
	t.Helper()
	verbs := map[string][]string{}
	fset := token.NewFileSet()
	for _, path := range storeSources() {
		selectorCalls(parseGo(t, fset, filepath.Clean(path)), func(_ *ast.CallExpr, sel *ast.SelectorExpr) {
			verb := strings.ToLower(sel.Sel.Name)
			if !slices.Contains([]string{"get", "list", "watch", "create", "update", "patch", "delete"}, verb) {
				return
			}
			inner, ok := sel.X.(*ast.CallExpr)
			if !ok {
				return
			}
			innerSel, ok := inner.Fun.(*ast.SelectorExpr)
			if !ok {
				return
			}
			resource := ""
			switch innerSel.Sel.Name {
			case "configMaps", "ConfigMaps":
				resource = "configmaps"
			case "Leases":
				resource = "leases"
			default:
				return
			}
			if !slices.Contains(verbs[resource], verb) {
				verbs[resource] = append(verbs[resource], verb)
			}
		})
	}
	if len(verbs["configmaps"]) == 0 {
		t.Fatalf("found no ConfigMap calls in %v", storeSources())
	}
	return verbs
}

// granted are the verbs the service account saNS/sa may use on resource
// in ns, through the RoleBindings there, on every object of it (rules
// narrowed by name do not count: the store's names are not known ahead).
func granted(r *rendered, ns, resource, saNS, sa string) []string {
	var out []string
	for _, b := range all[*rbacv1.RoleBinding](r) {
		if b.Namespace != ns || !bindsServiceAccount(b.Subjects, saNS, sa) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if b.RoleRef.Kind == "Role" {
			if role, ok := find[*rbacv1.Role](r, ns, b.RoleRef.Name); ok {
				rules = role.Rules
			}
		} else if role, ok := find[*rbacv1.ClusterRole](r, "", b.RoleRef.Name); ok {
			rules = role.Rules
		}
		for _, rule := range rules {
			if slices.Contains(rule.APIGroups, apiGroup(resource)) && slices.Contains(rule.Resources, resource) && len(rule.ResourceNames) == 0 {
				out = append(out, rule.Verbs...)
			}
		}
	}
	return out
}

func apiGroup(resource string) string {
	if resource == "leases" {
		return "coordination.k8s.io"
	}
	return ""
}

// federationOverlays are the kustomizations with a federation: one
// sub-cluster, and two sharing the cluster.
func federationOverlays() []string {
	return []string{"overlays/federation", "overlays/federation-pools"}
}

// fed is the federation part of a rendering, with its sub-clusters' RMs.
type fed struct {
	ks                  []knit
	router, gpg         *appsv1.Deployment
	routerArgs, gpgArgs commandLine
}

// eachFederation renders every federation overlay and runs fn on it as a
// subtest.
func eachFederation(t *testing.T, fn func(t *testing.T, r *rendered, f fed)) {
	for _, dir := range federationOverlays() {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			fn(t, r, loadFederation(t, r))
		})
	}
}

func loadFederation(t *testing.T, r *rendered) fed {
	t.Helper()
	f := fed{ks: loadAll(t, r)}
	f.router = one[*appsv1.Deployment](t, r, "knit-federation", "knit-router")
	f.gpg = one[*appsv1.Deployment](t, r, "knit-federation", "knit-gpg")
	f.routerArgs = args(t, container(t, f.router.Spec.Template.Spec.Containers, "knit-router"))
	f.gpgArgs = args(t, container(t, f.gpg.Spec.Template.Spec.Containers, "knit-gpg"))
	return f
}

func TestEveryFederationProcessMayMakeEveryStoreCall(t *testing.T) {
	verbs := calledVerbs(t)
	eachFederation(t, func(t *testing.T, r *rendered, f fed) {
		storeNS := f.routerArgs["namespace"]
		type process struct{ name, ns, sa, storeNS string }
		ps := []process{
			{"knit-router", f.router.Namespace, f.router.Spec.Template.Spec.ServiceAccountName, storeNS},
			{"knit-gpg", f.gpg.Namespace, f.gpg.Spec.Template.Spec.ServiceAccountName, f.gpgArgs["namespace"]},
		}
		for _, k := range f.ks {
			ps = append(ps, process{"knit-rm of " + k.ns, k.ns, k.rm.Spec.Template.Spec.ServiceAccountName, k.rmArgs["federation-namespace"]})
		}
		for _, p := range ps {
			if p.storeNS != storeNS {
				t.Errorf("%s's store is in %q, knit-router's in %q", p.name, p.storeNS, storeNS)
			}
			for resource, want := range verbs {
				have := granted(r, p.storeNS, resource, p.ns, p.sa)
				for _, v := range want {
					if !slices.Contains(have, v) && !slices.Contains(have, "*") {
						t.Errorf("%s (%s/%s) may not %s %s in %s, which federation/store calls", p.name, p.ns, p.sa, v, resource, p.storeNS)
					}
				}
			}
		}
	})
}

// TestTheRouterMayKeepItsDelegationTokenStateInItsSecret checks that
// knit-router may create the Secret of the Routers' delegation token state
// and read and replace it, in the store's namespace.
func TestTheRouterMayKeepItsDelegationTokenStateInItsSecret(t *testing.T) {
	eachFederation(t, func(t *testing.T, r *rendered, f fed) {
		ns, sa := f.routerArgs["namespace"], f.router.Spec.Template.Spec.ServiceAccountName
		may := map[string]bool{}
		for _, b := range all[*rbacv1.RoleBinding](r) {
			if b.Namespace != ns || b.RoleRef.Kind != "Role" || !bindsServiceAccount(b.Subjects, f.router.Namespace, sa) {
				continue
			}
			role, ok := find[*rbacv1.Role](r, ns, b.RoleRef.Name)
			if !ok {
				continue
			}
			for _, rule := range role.Rules {
				if !slices.Contains(rule.Resources, "secrets") || !slices.Contains(rule.APIGroups, "") {
					continue
				}
				for _, v := range rule.Verbs {
					if len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, fedstore.RouterKeysSecret) {
						may[v] = true
					}
				}
			}
		}
		for _, v := range []string{"get", "create", "update"} {
			if !may[v] {
				t.Errorf("knit-router may not %s the Secret %s in %s", v, fedstore.RouterKeysSecret, ns)
			}
		}
	})
}

func TestTheFederationOverlayMakesTheRMASubClusterBehindTheRouter(t *testing.T) {
	base := load(t, render(t, "base"))
	eachFederation(t, func(t *testing.T, r *rendered, f fed) {
		ids := map[string]bool{}
		for _, k := range f.ks {
			s, err := federation.LoadSettings(k.rmConf)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Enabled || s.SubClusterID == "" || ids[s.SubClusterID] {
				t.Errorf("knit-rm of %s's yarn-site.xml: federation enabled %v, cluster-id %q (taken: %v)", k.ns, s.Enabled, s.SubClusterID, ids[s.SubClusterID])
			}
			ids[s.SubClusterID] = true
			// The RM's base settings survive the merge.
			if k.rmSettings.MaxAllocationMB != base.rmSettings.MaxAllocationMB {
				t.Errorf("the yarn-site.xml of knit-rm of %s lost the base's settings", k.ns)
			}
			if _, ok := find[*corev1.Namespace](r, "", k.rmArgs["federation-namespace"]); !ok {
				t.Errorf("the store's namespace %s is not rendered", k.rmArgs["federation-namespace"])
			}
		}
		routerAndGPG(t, r, f)
	})
}

// routerAndGPG checks that the Router serves on the ports its
// configuration binds, and that one GPG generates policies.
func routerAndGPG(t *testing.T, r *rendered, f fed) {
	t.Helper()

	rc := container(t, f.router.Spec.Template.Spec.Containers, "knit-router")
	cm := mountedConfigMap(t, r, f.router.Namespace, f.router.Spec.Template.Spec, rc, f.routerArgs["conf-dir"])
	rs, err := federation.LoadSettings(loadConf(t, cm))
	if err != nil {
		t.Fatalf("knit-router's configuration: %v", err)
	}
	svc := one[*corev1.Service](t, r, f.router.Namespace, "knit-router")
	for _, p := range []struct{ name, addr string }{{"client", rs.RouterClientRMAddress}, {"admin", rs.RouterRMAdminAddress}, {"web", rs.RouterWebappAddress}} {
		want := port(t, p.addr)
		if got := containerPort(t, rc, p.name); got != want {
			t.Errorf("knit-router's %s container port %d, its yarn-site.xml binds %s", p.name, got, p.addr)
		}
		if got := servicePort(t, svc, rc, p.name); got != want {
			t.Errorf("Service knit-router's %s port %d, knit-router binds %s", p.name, got, p.addr)
		}
	}

	gc := container(t, f.gpg.Spec.Template.Spec.Containers, "knit-gpg")
	gs, err := federation.LoadGPGSettings(loadConf(t, mountedConfigMap(t, r, f.gpg.Namespace, f.gpg.Spec.Template.Spec, gc, f.gpgArgs["conf-dir"])))
	if err != nil {
		t.Fatalf("knit-gpg's configuration: %v", err)
	}
	if gs.PolicyClass != federation.LoadBasedGlobalPolicy {
		t.Errorf("knit-gpg runs %s, which generates nothing", gs.PolicyClass)
	}
	if got := f.gpg.Spec.Replicas; got == nil || *got != 1 {
		t.Errorf("knit-gpg has %v replicas, want one generator", got)
	}
}
