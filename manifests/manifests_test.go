package manifests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/store"
)

// kustomizations are the folders a cluster owner applies.
func kustomizations() []string {
	return []string{"base", "overlays/example", "overlays/federation", "overlays/federation-pools"}
}

// knitBinaries are the binaries a rendered container may run: each is its
// container's name and the entrypoint of its image.
func knitBinaries() []string { return []string{"knit-rm", "knit-node", "knit-router", "knit-gpg"} }

// helperContainers run no Knit binary, so have no flags to check.
func helperContainers() []string { return []string{"hadoop-conf"} }

// rendered is one kustomization's output, each object decoded into its
// client-go (or apiextensions) type.
type rendered struct {
	dir  string
	objs []runtime.Object
}

// render runs kustomize on dir in process, as `kubectl apply -k dir` does
// (kubectl 1.34 embeds the kustomize/api release go.mod pins), and decodes
// every object strictly: an unknown or duplicated field, or a kind neither
// client-go nor apiextensions knows, fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	r := &rendered{dir: dir}
	var errs []string
	for _, res := range res.Resources() {
		y, err := res.AsYAML()
		if err == nil {
			var obj runtime.Object
			if obj, _, err = dec.Decode(y, nil, nil); err == nil {
				r.objs = append(r.objs, obj)
				continue
			}
		}
		errs = append(errs, fmt.Sprintf("%s %s: %v", res.GetKind(), res.GetName(), err))
	}
	if len(errs) > 0 {
		t.Fatalf("%s:\n%s", dir, strings.Join(errs, "\n"))
	}
	if len(r.objs) == 0 {
		t.Fatalf("%s renders nothing", dir)
	}
	return r
}

// each renders every kustomization and runs fn on it as a subtest.
func each(t *testing.T, fn func(t *testing.T, r *rendered)) {
	for _, dir := range kustomizations() {
		t.Run(dir, func(t *testing.T) { fn(t, render(t, dir)) })
	}
}

// eachRM runs fn as a subtest on every RM of every kustomization, with
// its nodes.
func eachRM(t *testing.T, fn func(t *testing.T, r *rendered, k knit)) {
	each(t, func(t *testing.T, r *rendered) {
		for _, k := range loadAll(t, r) {
			t.Run(k.ns, func(t *testing.T) { fn(t, r, k) })
		}
	})
}

// all returns the rendered objects of type T.
func all[T runtime.Object](r *rendered) []T {
	var out []T
	for _, o := range r.objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// find returns the object of type T named ns/name, if rendered.
func find[T runtime.Object](r *rendered, ns, name string) (T, bool) {
	for _, v := range all[T](r) {
		m, err := meta.Accessor(v)
		if err == nil && m.GetNamespace() == ns && m.GetName() == name {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// one is find that fails the test when the object is missing.
func one[T runtime.Object](t *testing.T, r *rendered, ns, name string) T {
	t.Helper()
	v, ok := find[T](r, ns, name)
	if !ok {
		var zero T
		t.Fatalf("%s renders no %T %s/%s", r.dir, zero, ns, name)
	}
	return v
}

// clusterScoped are the kinds rendered here that live outside namespaces.
func clusterScoped(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.Namespace, *apiextensionsv1.CustomResourceDefinition, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding,
		*flowcontrolv1.FlowSchema:
		return true
	}
	return false
}

func TestEveryNamespacedObjectIsInARenderedNamespace(t *testing.T) {
	each(t, func(t *testing.T, r *rendered) {
		namespaces := map[string]bool{}
		for _, ns := range all[*corev1.Namespace](r) {
			namespaces[ns.Name] = true
		}
		for _, o := range r.objs {
			m, err := meta.Accessor(o)
			if err != nil {
				t.Fatal(err)
			}
			switch ns := m.GetNamespace(); {
			case clusterScoped(o) && ns != "":
				t.Errorf("%T %s is cluster-scoped but has namespace %q", o, m.GetName(), ns)
			case clusterScoped(o):
			case !namespaces[ns]:
				// kubectl would put it in the current context's namespace.
				t.Errorf("%T %s is in namespace %q, which is not rendered", o, m.GetName(), ns)
			}
		}
	})
}

func TestTheCRDIsTheOneKnitRMInstalls(t *testing.T) {
	var want apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(store.CRD().Object, &want); err != nil {
		t.Fatal(err)
	}
	each(t, func(t *testing.T, r *rendered) {
		got := one[*apiextensionsv1.CustomResourceDefinition](t, r, "", store.CRDName)
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("crd.yaml differs from rm/store.CRD() (-store +manifest):\n%s", cmp.Diff(want.Spec, got.Spec))
		}
	})
}

// definedFlags reads the flag names cmd/<binary> defines, from its source:
// every call flag.XxxVar(&v, "name", …) or flag.Xxx("name", …), or the same
// on a function's *flag.FlagSet parameter, in its non-test files and those
// of the cmd/internal packages they import (flags binaries share). Reading the syntax tree needs no build and no exported
// symbol from a main package, and a flag defined some other way (a name
// that is not a literal, a FlagSet) fails the test rather than hiding.
func definedFlags(t *testing.T, binary string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "cmd", binary, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	flags := map[string]bool{}
	read := map[string]bool{}
	for len(files) > 0 {
		path := files[0]
		files = files[1:]
		if strings.HasSuffix(path, "_test.go") || read[path] {
			continue
		}
		read[path] = true
		f := parseGo(t, fset, path)
		for _, imp := range f.Imports {
			if rest, ok := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), "github.com/knitdev/knit/cmd/internal/"); ok {
				shared, err := filepath.Glob(filepath.Join("..", "cmd", "internal", rest, "*.go"))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, shared...)
			}
		}
		// A function may define flags on a *flag.FlagSet parameter it is
		// given (flag.CommandLine, from main).
		flagSets := map[ast.Node]map[string]bool{}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			names := map[string]bool{"flag": true}
			for _, p := range fn.Type.Params.List {
				if star, ok := p.Type.(*ast.StarExpr); ok {
					if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "FlagSet" {
						if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "flag" {
							for _, n := range p.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
			flagSets[fn.Body] = names
		}
		selectorCalls(f, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || !(pkg.Name == "flag" || definesOn(flagSets, call, pkg.Name)) {
				return
			}
			i := flagNameArg(sel.Sel.Name)
			if i < 0 || i >= len(call.Args) {
				return
			}
			lit, ok := call.Args[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: flag.%s names its flag with an expression this test cannot read", fset.Position(call.Pos()), sel.Sel.Name)
				return
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			flags[name] = true
		})
	}
	if len(flags) == 0 {
		t.Fatalf("found no flag.Xxx definitions in cmd/%s", binary)
	}
	return flags
}

// parseGo parses the Go file at path.
func parseGo(t *testing.T, fset *token.FileSet, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// selectorCalls calls fn on every call of the form x.Name(…) in f.
func selectorCalls(f *ast.File, fn func(call *ast.CallExpr, sel *ast.SelectorExpr)) {
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				fn(call, sel)
			}
		}
		return true
	})
}

// definesOn says whether name is a *flag.FlagSet parameter of the
// function whose body holds call.
func definesOn(flagSets map[ast.Node]map[string]bool, call *ast.CallExpr, name string) bool {
	for body, names := range flagSets {
		if names[name] && body.Pos() <= call.Pos() && call.End() <= body.End() {
			return true
		}
	}
	return false
}

// flagNameArg is the index of the name among the arguments of the flag
// package's function fn, or -1 when fn defines no flag.
func flagNameArg(fn string) int {
	switch fn {
	case "Bool", "Duration", "Float64", "Int", "Int64", "String", "Uint", "Uint64", "Func", "BoolFunc":
		return 0
	case "Var", "TextVar", "BoolVar", "DurationVar", "Float64Var", "IntVar", "Int64Var", "StringVar", "UintVar", "Uint64Var":
		return 1
	}
	return -1
}

// commandLine is a container's flags, each with its last value, as Go's
// flag package keeps it; an overlay overrides a base flag by appending it.
type commandLine map[string]string

// parseArgs reads a Knit binary's arguments. Manifests write every flag as
// --name=value, so that a value is never mistaken for a flag or the
// reverse; a flag without a value is a boolean set to true.
func parseArgs(args []string) (commandLine, error) {
	cl := commandLine{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("argument %q is not --name=value", a)
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			value = "true"
		}
		cl[name] = value
	}
	return cl, nil
}

// workload is a Deployment's or DaemonSet's pod template.
type workload struct {
	kind, ns, name string
	spec           corev1.PodSpec
}

func workloads(r *rendered) []workload {
	var out []workload
	for _, d := range all[*appsv1.Deployment](r) {
		out = append(out, workload{"Deployment", d.Namespace, d.Name, d.Spec.Template.Spec})
	}
	for _, d := range all[*appsv1.DaemonSet](r) {
		out = append(out, workload{"DaemonSet", d.Namespace, d.Name, d.Spec.Template.Spec})
	}
	return out
}

func TestEveryFlagIsOneTheBinaryDefines(t *testing.T) {
	envRef := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	defined := map[string]map[string]bool{}
	for _, bin := range knitBinaries() {
		defined[bin] = definedFlags(t, bin)
	}
	each(t, func(t *testing.T, r *rendered) {
		checked := map[string]bool{}
		for _, w := range workloads(r) {
			for _, c := range slices.Concat(w.spec.InitContainers, w.spec.Containers) {
				if slices.Contains(helperContainers(), c.Name) {
					continue
				}
				flags, ok := defined[c.Name]
				if !ok {
					t.Errorf("%s %s: container %s runs no Knit binary this test knows", w.kind, w.name, c.Name)
					continue
				}
				if len(c.Command) > 0 {
					t.Errorf("%s %s: container %s sets command %q; the image's entrypoint is the binary", w.kind, w.name, c.Name, c.Command)
				}
				cl, err := parseArgs(c.Args)
				if err != nil {
					t.Errorf("%s %s: container %s: %v", w.kind, w.name, c.Name, err)
					continue
				}
				for name := range cl {
					if !flags[name] {
						t.Errorf("%s %s: container %s: --%s is not a flag of cmd/%s", w.kind, w.name, c.Name, name, c.Name)
					}
				}
				// Kubernetes leaves $(VAR) as it is when VAR is not in the
				// container's env.
				for _, a := range c.Args {
					for _, m := range envRef.FindAllStringSubmatch(a, -1) {
						if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
							t.Errorf("%s %s: container %s: %q refers to $(%s), which its env lacks", w.kind, w.name, c.Name, a, m[1])
						}
					}
				}
				checked[c.Name] = true
			}
		}
		if !checked["knit-rm"] || !checked["knit-node"] {
			t.Errorf("checked the Knit containers %v, want knit-rm and knit-node among them", slices.Sorted(maps.Keys(checked)))
		}
	})
}

// container returns the named container among a pod's containers or init
// containers.
func container(t *testing.T, containers []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func args(t *testing.T, c corev1.Container) commandLine {
	t.Helper()
	cl, err := parseArgs(c.Args)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// mountedConfigMap returns the ConfigMap a container mounts at path.
func mountedConfigMap(t *testing.T, r *rendered, ns string, spec corev1.PodSpec, c corev1.Container, path string) *corev1.ConfigMap {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return one[*corev1.ConfigMap](t, r, ns, v.ConfigMap.Name)
			}
		}
	}
	t.Fatalf("container %s mounts no ConfigMap at %s", c.Name, path)
	return nil
}

// nodeConf is the ConfigMap of the Hadoop configuration k's knit-nodes
// read and give their containers.
func nodeConf(t *testing.T, r *rendered, k knit) *corev1.ConfigMap {
	t.Helper()
	spec := k.node.Spec.Template.Spec
	return mountedConfigMap(t, r, k.ns, spec, container(t, spec.InitContainers, "hadoop-conf"), "/etc/knit/node-conf")
}

// loadConf reads a ConfigMap's Hadoop files in order, as knit-rm's
// readConf reads its --conf-dir, with the same queue defaults.
func loadConf(t *testing.T, cm *corev1.ConfigMap) *hadoopconf.Configuration {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	for _, name := range []string{"core-site.xml", "yarn-site.xml", "capacity-scheduler.xml"} {
		if data, ok := cm.Data[name]; ok {
			if err := c.AddResource(strings.NewReader(data), name); err != nil {
				t.Fatalf("ConfigMap %s: %v", cm.Name, err)
			}
		}
	}
	c.SetDefault("yarn.scheduler.capacity.root.queues", "default")
	c.SetDefault("yarn.scheduler.capacity.root.default.capacity", "100")
	return c
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// The knit-rm and knit-node objects of one rendering, and the namespace
// they are in.
type knit struct {
	ns         string
	rm         *appsv1.Deployment
	rmc        corev1.Container
	rmArgs     commandLine
	node       *appsv1.DaemonSet
	nodec      corev1.Container
	nodeArgs   commandLine
	rmService  *corev1.Service
	rmSettings conf.RMSettings
	rmConf     *hadoopconf.Configuration
}

// load is loadAll of a rendering with one RM.
func load(t *testing.T, r *rendered) knit {
	t.Helper()
	ks := loadAll(t, r)
	if len(ks) != 1 {
		t.Fatalf("want one Deployment knit-rm, have %d", len(ks))
	}
	return ks[0]
}

// loadAll returns every RM of a rendering with its nodes: one, or one per
// sub-cluster when sub-clusters share the cluster, each in its namespace.
func loadAll(t *testing.T, r *rendered) []knit {
	t.Helper()
	var ks []knit
	for _, d := range all[*appsv1.Deployment](r) {
		switch d.Name {
		case "knit-rm":
			ks = append(ks, loadRM(t, r, d))
		case "knit-router", "knit-gpg":
		default:
			t.Errorf("%s renders a Deployment %s/%s this test does not know", r.dir, d.Namespace, d.Name)
		}
	}
	if len(ks) == 0 {
		t.Fatalf("%s renders no Deployment knit-rm", r.dir)
	}
	return ks
}

// loadRM reads the RM of Deployment rm and the knit-node DaemonSet and
// Service of its namespace.
func loadRM(t *testing.T, r *rendered, rm *appsv1.Deployment) knit {
	t.Helper()
	k := knit{rm: rm, ns: rm.Namespace}
	k.rmc = container(t, k.rm.Spec.Template.Spec.Containers, "knit-rm")
	k.rmArgs = args(t, k.rmc)
	k.node = one[*appsv1.DaemonSet](t, r, k.ns, "knit-node")
	k.nodec = container(t, k.node.Spec.Template.Spec.Containers, "knit-node")
	k.nodeArgs = args(t, k.nodec)
	k.rmService = one[*corev1.Service](t, r, k.ns, "knit-rm")
	cm := mountedConfigMap(t, r, k.ns, k.rm.Spec.Template.Spec, k.rmc, k.rmArgs["conf-dir"])
	for name := range cm.Data {
		if !slices.Contains([]string{"core-site.xml", "yarn-site.xml", "capacity-scheduler.xml"}, name) {
			t.Errorf("ConfigMap %s holds %s, which knit-rm does not read", cm.Name, name)
		}
	}
	k.rmConf = loadConf(t, cm)
	s, err := conf.LoadRMSettings(k.rmConf)
	if err != nil {
		t.Fatalf("knit-rm's configuration: %v", err)
	}
	k.rmSettings = s
	return k
}

// servicePort returns the Service port named name, checking that it
// targets the container port of the same name.
func servicePort(t *testing.T, svc *corev1.Service, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name != name {
			continue
		}
		if p.TargetPort.String() != name {
			t.Errorf("Service %s port %s targets %s, want the container port named %s", svc.Name, name, p.TargetPort.String(), name)
		}
		containerPort(t, c, name)
		return p.Port
	}
	t.Fatalf("Service %s has no port %s", svc.Name, name)
	return 0
}

func TestRMAndNodesAgree(t *testing.T) {
	eachRM(t, func(t *testing.T, r *rendered, k knit) {
		rm, node := k.rmArgs, k.nodeArgs
		if got := k.rm.Spec.Replicas; got == nil || *got < 2 {
			t.Errorf("knit-rm has %v replicas; HA needs a standby", got)
		}
		if ru := k.rm.Spec.Strategy.RollingUpdate; k.rm.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
			ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
			t.Errorf("knit-rm's strategy is %+v; an update replaces one replica at a time", k.rm.Spec.Strategy)
		}
		pdb := one[*policyv1.PodDisruptionBudget](t, r, k.ns, "knit-rm")
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
			pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "knit-rm" {
			t.Errorf("knit-rm's PodDisruptionBudget %+v: one RM must stay through a drain", pdb.Spec)
		}
		if got := k.rmService.Spec.Selector["knit.io/rm-role"]; got != "active" {
			t.Errorf("Service knit-rm selects knit.io/rm-role=%q, want the active RM only", got)
		}
		role := one[*rbacv1.Role](t, r, k.ns, "knit-rm")
		lease := false
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") && slices.Contains(rule.Resources, "leases") &&
				slices.Contains(rule.Verbs, "update") && slices.Contains(rule.ResourceNames, "knit-rm") {
				lease = true
			}
		}
		if !lease {
			t.Error("Role knit-rm may not update the Lease knit-rm the replicas elect the active RM with")
		}
		if rm["namespace"] != k.ns {
			t.Errorf("knit-rm --namespace=%s, but it is deployed in %s", rm["namespace"], k.ns)
		}
		one[*rbacv1.Role](t, r, rm["namespace"], "knit-rm")

		// The node root: the same flag on both, and the same host folder
		// at the same path inside knit-node.
		root := rm["node-root"]
		if root == "" || node["node-root"] != root {
			t.Errorf("--node-root: knit-rm %q, knit-node %q", root, node["node-root"])
		}
		mounted := false
		for _, m := range k.nodec.VolumeMounts {
			for _, v := range k.node.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == root && m.MountPath == root {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("knit-node does not mount the host's %s at %s", root, root)
		}
		if dir := node["hadoop-conf-dir"]; !strings.HasPrefix(dir, root+"/") {
			t.Errorf("knit-node --hadoop-conf-dir=%s is not under the node root %s, the one folder pods see", dir, root)
		}

		for _, f := range []string{"nm-port", "nm-web-port"} {
			if rm[f] == "" || rm[f] != node[f] {
				t.Errorf("--%s: knit-rm %q, knit-node %q", f, rm[f], node[f])
			}
		}
		if got := containerPort(t, k.nodec, "nm"); strconv.Itoa(int(got)) != node["nm-port"] {
			t.Errorf("knit-node's nm port is %d, its --nm-port %s", got, node["nm-port"])
		}
		spec := k.node.Spec.Template.Spec
		if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("knit-node: hostNetwork %v, dnsPolicy %q; NodeIds are node addresses, and the RM's Service must resolve", spec.HostNetwork, spec.DNSPolicy)
		}
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Operator == corev1.TolerationOpExists && tol.Key == "" }) {
			t.Errorf("knit-node tolerates %v, not every taint", spec.Tolerations)
		}
		for _, env := range []struct{ name, path string }{{"NODE_NAME", "spec.nodeName"}, {"NODE_IP", "status.hostIP"}} {
			if !slices.ContainsFunc(k.nodec.Env, func(e corev1.EnvVar) bool {
				return e.Name == env.name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == env.path
			}) {
				t.Errorf("knit-node has no %s from %s", env.name, env.path)
			}
		}

		// knit-node ends the applications of its RM, whose YarnApplications
		// are in the RM's namespace, and may read them there.
		if node["applications-namespace"] != rm["namespace"] {
			t.Errorf("knit-node --applications-namespace=%s, knit-rm --namespace=%s", node["applications-namespace"], rm["namespace"])
		}
		if !boundRole(r, rm["namespace"], "knit-node-applications", k.ns, k.node.Spec.Template.Spec.ServiceAccountName) {
			t.Errorf("knit-node may not read the YarnApplications of %s (no RoleBinding to Role knit-node-applications)", rm["namespace"])
		}
		if !boundRole(r, rm["namespace"], "knit-rm", k.ns, k.rm.Spec.Template.Spec.ServiceAccountName) {
			t.Errorf("knit-rm may not keep its state in %s (no RoleBinding to Role knit-rm)", rm["namespace"])
		}

		// knit-node dials RKS through the RM's Service.
		host, p, err := net.SplitHostPort(node["rks-address"])
		if err != nil {
			t.Fatalf("knit-node --rks-address: %v", err)
		}
		if want := "knit-rm." + k.ns + ".svc"; host != want {
			t.Errorf("knit-node --rks-address host %s, want the Service %s", host, want)
		}
		rks := servicePort(t, k.rmService, k.rmc, "rks")
		if p != strconv.Itoa(int(rks)) {
			t.Errorf("knit-node dials RKS on %s, the Service serves it on %d", p, rks)
		}
		if got := port(t, rm["rks-address"]); got != containerPort(t, k.rmc, "rks") {
			t.Errorf("knit-rm --rks-address=%s, its rks container port %d", rm["rks-address"], containerPort(t, k.rmc, "rks"))
		}

		// The RM's four YARN ports, as its yarn-site.xml binds them, as
		// its container and its Service name them.
		for _, p := range []struct{ name, addr string }{
			{"client", k.rmSettings.Address},
			{"scheduler", k.rmSettings.SchedulerAddress},
			{"admin", k.rmSettings.AdminAddress},
			{"web", k.rmSettings.WebappAddress},
		} {
			want := port(t, p.addr)
			if got := containerPort(t, k.rmc, p.name); got != want {
				t.Errorf("knit-rm's %s container port %d, its yarn-site.xml binds %s", p.name, got, p.addr)
			}
			if got := servicePort(t, k.rmService, k.rmc, p.name); got != want {
				t.Errorf("Service knit-rm's %s port %d, knit-rm binds %s", p.name, got, p.addr)
			}
		}
	})
}

// The RM renews its Lease within seconds while it creates pods by the
// thousand: its Lease requests must not queue behind its pods in the API
// server's flow control (test/integration reads the FlowSchema the API
// server chose from its answer).
func TestEveryRMsLeaseRequestsGoToTheLeaderElectionPriorityLevel(t *testing.T) {
	eachRM(t, func(t *testing.T, r *rendered, k knit) {
		sa := k.rm.Spec.Template.Spec.ServiceAccountName
		covered := false
		for _, fs := range all[*flowcontrolv1.FlowSchema](r) {
			// The API server's service-accounts FlowSchema, at 9000, would
			// take the RM's requests before a FlowSchema of higher
			// precedence.
			if fs.Spec.PriorityLevelConfiguration.Name != "leader-election" || fs.Spec.MatchingPrecedence >= 9000 {
				continue
			}
			for _, rule := range fs.Spec.Rules {
				subject := slices.ContainsFunc(rule.Subjects, func(s flowcontrolv1.Subject) bool {
					return s.Kind == flowcontrolv1.SubjectKindServiceAccount && s.ServiceAccount != nil &&
						s.ServiceAccount.Name == sa && s.ServiceAccount.Namespace == k.ns
				})
				leases := slices.ContainsFunc(rule.ResourceRules, func(rr flowcontrolv1.ResourcePolicyRule) bool {
					return slices.Contains(rr.APIGroups, "coordination.k8s.io") && slices.Contains(rr.Resources, "leases") &&
						slices.Contains(rr.Namespaces, k.rmArgs["namespace"]) && slices.Contains(rr.Verbs, "update") && slices.Contains(rr.Verbs, "get")
				})
				covered = covered || (subject && leases)
			}
		}
		if !covered {
			t.Errorf("no FlowSchema sends ServiceAccount %s/%s's Lease requests in %s to the leader-election priority level", k.ns, sa, k.rmArgs["namespace"])
		}
	})
}

func TestContainersFindTheRMThroughItsService(t *testing.T) {
	eachRM(t, func(t *testing.T, r *rendered, k knit) {
		cm := nodeConf(t, r, k)
		s, err := conf.LoadRMSettings(loadConf(t, cm))
		if err != nil {
			t.Fatalf("the containers' yarn-site.xml: %v", err)
		}
		for _, p := range []struct{ name, addr string }{
			{"client", s.Address},
			{"scheduler", s.SchedulerAddress},
			{"admin", s.AdminAddress},
			{"web", s.WebappAddress},
		} {
			host, _, err := net.SplitHostPort(p.addr)
			if err != nil {
				t.Fatal(err)
			}
			if want := "knit-rm." + k.ns + ".svc"; host != want {
				t.Errorf("containers reach the RM's %s port at %s, want the Service %s", p.name, p.addr, want)
			}
			if got, want := port(t, p.addr), servicePort(t, k.rmService, k.rmc, p.name); got != want {
				t.Errorf("containers reach the RM's %s port at %s, the Service serves it on %d", p.name, p.addr, want)
			}
		}
	})
}

// TestAMsFilterAcceptsTheProxy: the containers' yarn.web-proxy.address is a
// headless Service of the RM pods on the RM's web port, so the addresses
// AmIpFilter resolves it to are those the RM's proxy connects from.
func TestAMsFilterAcceptsTheProxy(t *testing.T) {
	eachRM(t, func(t *testing.T, r *rendered, k knit) {
		cm := nodeConf(t, r, k)
		addr, err := loadConf(t, cm).GetTrimmed("yarn.web-proxy.address", "")
		if err != nil || addr == "" {
			t.Fatalf("the containers' yarn-site.xml has no yarn.web-proxy.address (%v)", err)
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		name, ok := strings.CutSuffix(host, "."+k.ns+".svc")
		if !ok {
			t.Fatalf("yarn.web-proxy.address %s is no Service of namespace %s", addr, k.ns)
		}
		svc := one[*corev1.Service](t, r, k.ns, name)
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s has a cluster IP; AmIpFilter would refuse the RM pods' own addresses", name)
		}
		// Every RM replica, not only the active one: an AM's filter keeps
		// the addresses it resolved for a while, and a failover must not
		// leave the new active's proxy outside them.
		if !maps.Equal(svc.Spec.Selector, k.rm.Spec.Selector.MatchLabels) {
			t.Errorf("Service %s selects %v, the RM's pods are %v", name, svc.Spec.Selector, k.rm.Spec.Selector.MatchLabels)
		}
		if got, want := port(t, addr), servicePort(t, svc, k.rmc, "web"); got != want {
			t.Errorf("yarn.web-proxy.address %s, the Service serves the web port on %d", addr, want)
		}
		if got, want := port(t, addr), port(t, k.rmSettings.WebappAddress); got != want {
			t.Errorf("yarn.web-proxy.address port %d, knit-rm's web port %d", got, want)
		}
	})
}

// bound says whether a RoleBinding in ns grants ClusterRole role to the
// service account sa of namespace saNS.
func bound(r *rendered, ns, role, saNS, sa string) bool {
	return bindsTo(r, ns, "ClusterRole", role, saNS, sa)
}

// boundRole is bound for the Role role of ns.
func boundRole(r *rendered, ns, role, saNS, sa string) bool {
	return bindsTo(r, ns, "Role", role, saNS, sa)
}

func bindsTo(r *rendered, ns, kind, role, saNS, sa string) bool {
	for _, b := range all[*rbacv1.RoleBinding](r) {
		if b.Namespace == ns && b.RoleRef.Kind == kind && b.RoleRef.Name == role && bindsServiceAccount(b.Subjects, saNS, sa) {
			return true
		}
	}
	return false
}

// bindsServiceAccount says whether subjects name the service account
// saNS/sa.
func bindsServiceAccount(subjects []rbacv1.Subject, saNS, sa string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == saNS && s.Name == sa
	})
}

func TestEveryQueueNamespaceHasTheQueueRoleBindings(t *testing.T) {
	eachRM(t, func(t *testing.T, r *rendered, k knit) {
		tree, err := queues.Build(k.rmConf, queues.Options{DefaultNamespace: k.rmArgs["namespace"]})
		if err != nil {
			t.Fatalf("knit-rm's queues: %v", err)
		}
		namespaces := map[string]bool{}
		for _, q := range tree.Queues() {
			namespaces[q.Kube.Namespace] = true
		}
		for ns := range namespaces {
			if _, ok := find[*corev1.Namespace](r, "", ns); !ok {
				t.Errorf("queue namespace %s is not rendered", ns)
			}
			if !bound(r, ns, "knit-rm-queue", k.ns, k.rm.Spec.Template.Spec.ServiceAccountName) {
				t.Errorf("queue namespace %s: knit-rm may not create pods there (no knit-rm-queue RoleBinding)", ns)
			}
			if !bound(r, ns, "knit-node-queue", k.ns, k.node.Spec.Template.Spec.ServiceAccountName) {
				t.Errorf("queue namespace %s: knit-node may not read tokens there (no knit-node-queue RoleBinding)", ns)
			}
		}
		// knit-rm-keys holds the token master keys: no node may read it.
		if bound(r, k.ns, "knit-node-queue", k.ns, k.node.Spec.Template.Spec.ServiceAccountName) {
			t.Errorf("knit-node may read the Secrets of %s, knit-rm-keys among them", k.ns)
		}
	})
}

func TestRBACRefersToRenderedRolesAndServiceAccounts(t *testing.T) {
	each(t, func(t *testing.T, r *rendered) {
		loadAll(t, r)
		check := func(what string, ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
			switch ref.Kind {
			case "ClusterRole":
				one[*rbacv1.ClusterRole](t, r, "", ref.Name)
			case "Role":
				one[*rbacv1.Role](t, r, ns, ref.Name)
			default:
				t.Errorf("%s refers to a %s", what, ref.Kind)
			}
			for _, s := range subjects {
				if s.Kind != rbacv1.ServiceAccountKind {
					t.Errorf("%s binds a %s, want only Knit's service accounts", what, s.Kind)
					continue
				}
				one[*corev1.ServiceAccount](t, r, s.Namespace, s.Name)
			}
		}
		for _, b := range all[*rbacv1.RoleBinding](r) {
			check("RoleBinding "+b.Namespace+"/"+b.Name, b.Namespace, b.RoleRef, b.Subjects)
		}
		for _, b := range all[*rbacv1.ClusterRoleBinding](r) {
			check("ClusterRoleBinding "+b.Name, "", b.RoleRef, b.Subjects)
		}
		for _, w := range workloads(r) {
			if w.spec.ServiceAccountName != w.name {
				t.Errorf("%s runs as service account %q, want %s", w.name, w.spec.ServiceAccountName, w.name)
			}
			one[*corev1.ServiceAccount](t, r, w.ns, w.spec.ServiceAccountName)
		}
	})
}

func TestTheExampleOverlaySetsImagesAndRMSettings(t *testing.T) {
	base, overlay := load(t, render(t, "base")), load(t, render(t, "overlays/example"))
	for _, c := range []struct{ base, overlay corev1.Container }{{base.rmc, overlay.rmc}, {base.nodec, overlay.nodec}} {
		if c.base.Image == c.overlay.Image || !strings.HasPrefix(c.overlay.Image, "registry.example.com/") {
			t.Errorf("%s's image: base %s, overlay %s", c.base.Name, c.base.Image, c.overlay.Image)
		}
	}
	if base.rmArgs["launcher-image"] == overlay.rmArgs["launcher-image"] {
		t.Errorf("the overlay keeps the launcher image %s", base.rmArgs["launcher-image"])
	}
	if base.rmSettings.MinAllocationMB == overlay.rmSettings.MinAllocationMB || !overlay.rmSettings.ACLEnable {
		t.Errorf("the overlay's yarn-site.xml is not knit-rm's: min allocation %d MB, ACLs %v",
			overlay.rmSettings.MinAllocationMB, overlay.rmSettings.ACLEnable)
	}
}
