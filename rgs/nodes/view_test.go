package nodes

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// recount is the node listing as it was before the indexes: every pod
// walked on every call. The view must give the same numbers.
func recount(l *Lister, nodes []*corev1.Node, pods []*corev1.Pod) []Info {
	usage := map[string]*Info{}
	for _, p := range pods {
		if _, ok := p.Labels[launch.LabelApplication]; !ok {
			continue
		}
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := usage[p.Spec.NodeName]
		if u == nil {
			u = &Info{}
			usage[p.Spec.NodeName] = u
		}
		for _, c := range p.Spec.Containers {
			u.UsedMB += c.Resources.Requests.Memory().Value() >> 20
			u.UsedVcores += int32(c.Resources.Requests.Cpu().Value())
		}
		u.Containers++
	}
	out := make([]Info, 0, len(nodes))
	for _, n := range nodes {
		info := l.report(n)
		if u := usage[n.Name]; u != nil {
			info.UsedMB, info.UsedVcores, info.Containers = u.UsedMB, u.UsedVcores, u.Containers
		}
		out = append(out, info)
	}
	return out
}

// world is what the API server holds, as the informers would deliver it to
// the view: every change goes through the same event the informer sends.
type world struct {
	rnd   *rand.Rand
	v     *view
	nodes map[string]*corev1.Node
	pods  map[string]*corev1.Pod
	seq   int
}

var nodeNames = []string{"a", "b", "c", "d", "e"}

func (w *world) randomPod() *corev1.Pod {
	w.seq++
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: fmt.Sprintf("p%d", w.seq), Labels: map[string]string{},
	}}
	if w.rnd.IntN(10) != 0 {
		p.Labels[launch.LabelApplication] = "application_1_0001"
	}
	w.mutatePod(p)
	return p
}

// mutatePod changes what a pod's use depends on: its node, phase and the
// requests of its containers (a resize).
func (w *world) mutatePod(p *corev1.Pod) {
	switch w.rnd.IntN(4) {
	case 0:
		p.Spec.NodeName = ""
	default:
		// "f" is a node the view has not heard of yet, or never will.
		p.Spec.NodeName = append(slices.Clone(nodeNames), "f")[w.rnd.IntN(len(nodeNames)+1)]
	}
	p.Status.Phase = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[w.rnd.IntN(5)]
	p.Spec.Containers = nil
	for i := range 1 + w.rnd.IntN(3) {
		req := corev1.ResourceList{
			corev1.ResourceMemory: *resource.NewQuantity(int64(w.rnd.IntN(8192))<<20+int64(w.rnd.IntN(3)), resource.BinarySI),
			corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(w.rnd.IntN(4000)), resource.DecimalSI),
		}
		if w.rnd.IntN(8) == 0 {
			req = nil
		}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Resources: corev1.ResourceRequirements{Requests: req}})
	}
}

func (w *world) randomNode(name string) *corev1.Node {
	ready := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[w.rnd.IntN(4)]
	n := node(name, ready, w.rnd.IntN(5) == 0, []string{"", "zone-1"}[w.rnd.IntN(2)])
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", w.rnd.IntN(8))},
		{Type: corev1.NodeHostName, Address: name + ".example"},
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(1+w.rnd.IntN(64)), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(1+w.rnd.IntN(256))<<30, resource.BinarySI),
	}
	if w.rnd.IntN(6) == 0 {
		n.Status.Conditions = nil // NEW
	}
	if partition := []string{"", "", "gpu", "ssd"}[w.rnd.IntN(4)]; partition != "" {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[launch.NodeLabelPartition] = partition
	}
	return n
}

func (w *world) anyPod() (string, *corev1.Pod, bool) {
	if len(w.pods) == 0 {
		return "", nil, false
	}
	keys := make([]string, 0, len(w.pods))
	for k := range w.pods {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := keys[w.rnd.IntN(len(keys))]
	return k, w.pods[k], true
}

// step makes one random change and delivers its event.
func (w *world) step() {
	pods, nodes := w.v.podHandler(), w.v.nodeHandler()
	switch op := w.rnd.IntN(100); {
	case op < 30:
		p := w.randomPod()
		w.pods[p.Name] = p
		pods.OnAdd(p, false)
	case op < 55:
		if k, old, ok := w.anyPod(); ok {
			// Informers hand out new objects: the old one is untouched.
			p := old.DeepCopy()
			w.mutatePod(p)
			w.pods[k] = p
			pods.OnUpdate(old, p)
		}
	case op < 65:
		if _, p, ok := w.anyPod(); ok {
			pods.OnUpdate(p, p) // a resync
		}
	case op < 75:
		if k, p, ok := w.anyPod(); ok {
			delete(w.pods, k)
			pods.OnDelete(p)
		}
	case op < 80:
		if k, p, ok := w.anyPod(); ok {
			// The watch missed the delete: a relist finds the pod gone.
			delete(w.pods, k)
			pods.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/" + k, Obj: p})
		}
	case op < 92:
		name := nodeNames[w.rnd.IntN(len(nodeNames))]
		n := w.randomNode(name)
		old, known := w.nodes[name]
		w.nodes[name] = n
		if known {
			nodes.OnUpdate(old, n)
		} else {
			nodes.OnAdd(n, false)
		}
	case op < 96:
		name := nodeNames[w.rnd.IntN(len(nodeNames))]
		if n, ok := w.nodes[name]; ok {
			delete(w.nodes, name)
			if w.rnd.IntN(2) == 0 {
				nodes.OnDelete(n)
			} else {
				nodes.OnDelete(cache.DeletedFinalStateUnknown{Key: name, Obj: n})
			}
		}
	default:
		name := nodeNames[w.rnd.IntN(len(nodeNames))]
		if n, ok := w.nodes[name]; ok {
			nodes.OnUpdate(n, n)
		}
	}
}

func (w *world) check(t *testing.T, l *Lister, step int) {
	t.Helper()
	nodes := make([]*corev1.Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		nodes = append(nodes, n)
	}
	pods := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		pods = append(pods, p)
	}
	byName := func(a, b Info) int { return strings.Compare(a.Name, b.Name) }
	want := recount(l, nodes, pods)
	slices.SortFunc(want, byName)
	// Before the list below, which would build anew the reports of
	// changed nodes: the encodings must follow changes on their own.
	checkEncodedReports(t, l, want, step)
	got := l.view.list()
	slices.SortFunc(got, byName)
	for i, g := range got {
		// The report a list shares is never one of an earlier state.
		if !proto.Equal(g.SharedReport(), g.Report()) {
			t.Fatalf("after step %d node %s's shared report\n%v\nis not its report\n%v", step, g.Name, g.SharedReport(), g.Report())
		}
		got[i].shared = nil
	}
	if !slices.EqualFunc(got, want, func(a, b Info) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		t.Fatalf("after step %d the index lists\n%+v\nand a recount\n%+v", step, got, want)
	}
	if got, want := l.view.snapshotCensus(), CensusOf(want); got != want {
		t.Fatalf("after step %d the census is %+v, a recount's %+v", step, got, want)
	}
	if got, _ := l.Partitions(t.Context()); !maps.Equal(got, PartitionsOf(want)) {
		t.Fatalf("after step %d the partitions hold %+v, a recount's %+v", step, got, PartitionsOf(want))
	}
	for _, n := range want {
		if id, http, ok := l.NodeID(n.Name); !ok || id.GetHost() != n.Host || id.GetPort() != n.NMPort || http != n.HTTPAddress {
			t.Fatalf("after step %d NodeID(%s) = %v %q %v, want %s:%d %q", step, n.Name, id, http, ok, n.Host, n.NMPort, n.HTTPAddress)
		}
	}
	for _, host := range []string{"a", "f", "a.example", "f.example", "10.0.0.3"} {
		name, ok := l.NodeName(host)
		wantName, wantOK := scanNodeName(nodes, host)
		// Nodes may share an address: any of them is an answer, as the
		// scan's list order is the cache's.
		right := ok == wantOK && (!ok || name == wantName || (wantName != host && addressOf(w.nodes[name], host)))
		if !right {
			t.Fatalf("after step %d NodeName(%q) = %q %v, a scan finds %q %v", step, host, name, ok, wantName, wantOK)
		}
	}
}

// checkEncodedReports checks that the encoded reports, of every node and
// of the running ones, decode to the reports of a recount.
func checkEncodedReports(t *testing.T, l *Lister, want []Info, step int) {
	t.Helper()
	field := new(yarnpb.GetClusterNodesResponseProto).ProtoReflect().Descriptor().Fields().ByName("nodeReports").Number()
	// Nodes may share a host: the whole encoding orders them.
	encoding := func(r *yarnpb.NodeReportProto) string {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	byEncoding := func(a, b *yarnpb.NodeReportProto) int { return strings.Compare(encoding(a), encoding(b)) }
	for _, states := range [][]yarnpb.NodeStateProto{nil, {yarnpb.NodeStateProto_NS_RUNNING}} {
		keep := func(s yarnpb.NodeStateProto) bool { return len(states) == 0 || slices.Contains(states, s) }
		parts, err := l.EncodedReports(field, states)
		if err != nil {
			t.Fatal(err)
		}
		// Each part is whole reports, at least one, and the parts one
		// after the other are the answer.
		for _, p := range parts {
			var some yarnpb.GetClusterNodesResponseProto
			if err := proto.Unmarshal(p, &some); err != nil || len(some.GetNodeReports()) == 0 {
				t.Fatalf("after step %d a part holds %d reports (%v), want whole reports", step, len(some.GetNodeReports()), err)
			}
		}
		var resp yarnpb.GetClusterNodesResponseProto
		if err := proto.Unmarshal(bytes.Join(parts, nil), &resp); err != nil {
			t.Fatalf("after step %d the encoded reports do not decode: %v", step, err)
		}
		got := resp.GetNodeReports()
		var wantReports []*yarnpb.NodeReportProto
		for _, n := range want {
			if keep(n.State) {
				wantReports = append(wantReports, n.Report())
			}
		}
		slices.SortFunc(got, byEncoding)
		slices.SortFunc(wantReports, byEncoding)
		if !slices.EqualFunc(got, wantReports, func(a, b *yarnpb.NodeReportProto) bool { return proto.Equal(a, b) }) {
			t.Fatalf("after step %d the encoded reports of states %v are\n%v\nand a recount's\n%v", step, states, got, wantReports)
		}
	}
}

// scanNodeName finds a node by name or address by walking them all.
func scanNodeName(nodes []*corev1.Node, host string) (string, bool) {
	for _, n := range nodes {
		if n.Name == host {
			return host, true
		}
	}
	for _, n := range nodes {
		if addressOf(n, host) {
			return n.Name, true
		}
	}
	return "", false
}

func addressOf(n *corev1.Node, host string) bool {
	if n == nil {
		return false
	}
	for _, a := range n.Status.Addresses {
		if a.Address == host {
			return true
		}
	}
	return false
}

func TestIndexMatchesARecountAfterRandomEvents(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			l := &Lister{cfg: Config{NMPort: 8041, NMWebPort: 8042, UseHostname: seed%2 == 1}}
			l.view = newView(l.report)
			w := &world{rnd: rand.New(rand.NewPCG(seed, 18)), v: l.view, nodes: map[string]*corev1.Node{}, pods: map[string]*corev1.Pod{}}
			for i := range 2000 {
				w.step()
				if i%50 == 0 {
					w.check(t, l, i)
				}
			}
			w.check(t, l, 2000)
			// Everything deleted leaves nothing behind.
			for k, p := range w.pods {
				delete(w.pods, k)
				l.view.podHandler().OnDelete(p)
			}
			w.check(t, l, -1)
			if len(l.view.use) != 0 {
				t.Errorf("with no pods left the index still holds use %v", l.view.use)
			}
		})
	}
}

func TestListsShareANodesReportUntilTheNodeOrItsUseChanges(t *testing.T) {
	l := &Lister{cfg: Config{NMPort: 8041, NMWebPort: 8042}}
	l.view = newView(l.report)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	l.view.nodeHandler().OnAdd(node, true)
	report := func() *yarnpb.NodeReportProto { return l.view.list()[0].SharedReport() }
	first := report()
	if again := report(); again != first {
		t.Error("an unchanged node's report was built again")
	}
	pod := podOnNode("a")
	l.view.podHandler().OnAdd(pod, false)
	used := report()
	if used == first || used.GetUsed().GetMemory() != 1024 {
		t.Errorf("after a pod was bound: report %p (was %p) with %v used", used, first, used.GetUsed())
	}
	changed := node.DeepCopy()
	changed.Spec.Unschedulable = true
	l.view.nodeHandler().OnUpdate(node, changed)
	if r := report(); r == used || r.GetNodeState() != yarnpb.NodeStateProto_NS_DECOMMISSIONING {
		t.Errorf("after the node was cordoned: report %p (was %p) in state %v", r, used, r.GetNodeState())
	}
}

func TestANodesChangeJoinsOnlyItsBucketOfTheKeptAnswerAgain(t *testing.T) {
	l := &Lister{cfg: Config{NMPort: 8041, NMWebPort: 8042}}
	l.view = newView(l.report)
	const nodes = 1000
	for i := range nodes {
		l.view.nodeHandler().OnAdd(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}}, true)
	}
	field := new(yarnpb.GetClusterNodesResponseProto).ProtoReflect().Descriptor().Fields().ByName("nodeReports").Number()
	answer := func() [][]byte {
		parts, err := l.EncodedReports(field, nil)
		if err != nil {
			t.Fatal(err)
		}
		return parts
	}
	before := answer()
	if len(before) > answerBuckets {
		t.Fatalf("%d nodes' answer is %d parts, want at most %d", nodes, len(before), answerBuckets)
	}
	if again := answer(); &again[0] != &before[0] {
		t.Error("an unchanged view's answer was gathered again")
	}
	pod := podOnNode("node-7")
	l.view.podHandler().OnAdd(pod, false)
	after := answer()
	if len(after) != len(before) {
		t.Fatalf("a pod bound changed the answer's parts from %d to %d", len(before), len(after))
	}
	joined := 0
	for i := range after {
		if &after[i][0] != &before[i][0] {
			joined++
		}
	}
	if joined != 1 {
		t.Errorf("one node's use changed and %d parts were joined again, want 1 (its bucket's)", joined)
	}
}

// podOnNode is a Knit pod of 1 GiB and 1 vcore bound to node.
func podOnNode(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "knit", Labels: map[string]string{launch.LabelApplication: "application_1_0001"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1")}}}}}}
}
