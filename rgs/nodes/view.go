package nodes

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
)

// Use is what Knit's live pods bound to a node ask for: the sum of their
// containers' requests, and how many they are.
type Use struct {
	MB         int64
	Vcores     int32
	Containers int32
}

func (u Use) plus(o Use) Use {
	return Use{MB: u.MB + o.MB, Vcores: u.Vcores + o.Vcores, Containers: u.Containers + o.Containers}
}

func (u Use) minus(o Use) Use {
	return Use{MB: u.MB - o.MB, Vcores: u.Vcores - o.Vcores, Containers: u.Containers - o.Containers}
}

// UseOf is what one pod adds to its node's use: a pod of Knit's that is
// bound and has not ended counts its containers' requests (memory in MiB
// and CPU in whole cores, rounded up, each container apart) and one
// container; any other pod adds nothing (ok false).
func UseOf(p *podrecord.Pod) (node string, u Use, ok bool) {
	if _, knit := p.Labels[launch.LabelApplication]; !knit {
		return "", Use{}, false
	}
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", Use{}, false
	}
	for i := range p.Spec.Containers {
		req := p.Spec.Containers[i].Resources.Requests
		u.MB += req.Memory().Value() >> 20
		u.Vcores += int32(req.Cpu().Value())
	}
	u.Containers = 1
	return p.Spec.NodeName, u, true
}

// stateSlots holds one count per YARN node state, indexed by its number.
const stateSlots = yarnpb.NodeStateProto_NS_SHUTDOWN + 1

// Census is the whole cluster in a few numbers: the nodes in each state, and
// the capability and use of the running ones (the nodes YARN's scheduler
// holds), kept current from informer events so that reading it costs the
// same at any number of nodes and pods.
type Census struct {
	states [stateSlots]int32
	// RunningCapability and RunningUse sum the RUNNING nodes only.
	RunningCapabilityMB     int64
	RunningCapabilityVcores int64
	RunningUsedMB           int64
	RunningUsedVcores       int64
	RunningContainers       int32
}

// Nodes is how many nodes are in state s.
func (c Census) Nodes(s yarnpb.NodeStateProto) int32 {
	if s < 0 || s >= stateSlots {
		return 0
	}
	return c.states[s]
}

// add counts one node with its use in (sign 1) or out (sign -1).
func (c *Census) add(info Info, u Use, sign int32) {
	if info.State >= 0 && info.State < stateSlots {
		c.states[info.State] += sign
	}
	if info.State != yarnpb.NodeStateProto_NS_RUNNING {
		return
	}
	c.RunningCapabilityMB += int64(sign) * info.CapabilityMB
	c.RunningCapabilityVcores += int64(sign) * int64(info.CapabilityVcores)
	if sign < 0 {
		u = Use{}.minus(u)
	}
	c.addRunningUse(u)
}

func (c *Census) addRunningUse(d Use) {
	c.RunningUsedMB += d.MB
	c.RunningUsedVcores += int64(d.Vcores)
	c.RunningContainers += d.Containers
}

// CensusOf counts nodes listed with their use, as a view that keeps the
// same nodes counts them: for NodeListers that hold a list, not informers.
func CensusOf(nodes []Info) Census {
	var c Census
	for _, n := range nodes {
		c.add(n, Use{MB: n.UsedMB, Vcores: n.UsedVcores, Containers: n.Containers}, 1)
	}
	return c
}

// view is the node side of the cluster as informer events leave it: each
// node's report, the use of Knit's pods per node, the nodes by address and
// the census. Every event costs O(1) (a node's addresses aside), and every
// read costs O(nodes read), never O(pods).
type view struct {
	// report turns a Node into its Info, use left out.
	report func(*corev1.Node) Info
	// strip makes records of pods that reach the view as pods.
	strip *podrecord.Stripper

	mu    sync.RWMutex
	nodes map[string]*nodeEntry
	// use holds the use of every node that has any, known or not yet: a
	// pod's event can come before its node's.
	use map[string]Use
	// byAddress finds the nodes with an address (nodes may share one, a
	// loopback address for instance).
	byAddress map[string][]string
	census    Census
	// partitions sum the running nodes of each labelled partition.
	partitions partitionSums

	// buckets are the names of the nodes in each of the answers' buckets
	// (bucketOf).
	buckets [answerBuckets][]string

	// answersMu guards answers for readers, who hold mu's read lock;
	// writers, holding mu, mark what a change touches (changedBucket).
	answersMu sync.Mutex
	// answers are whole getClusterNodes answers, per set of states: while
	// nothing moves, a thousand nodes' answer costs no walk and no copy,
	// and when one node moves, only its bucket is joined again.
	answers map[answerKey]*keptAnswer
}

// answerBuckets is how many parts a kept answer is sent in. One part per
// node made a thousand nodes' answer a thousand-piece writev, which cost
// more than the same bytes whole; one part for all made every node's
// heartbeat copy the whole answer again. A bucket of a thousand nodes'
// answer holds some sixteen of them, 3 KB.
const answerBuckets = 64

// bucketOf is the bucket of a node's report in the kept answers.
func bucketOf(name string) int {
	// Stable for a name, so the bucket needs no record.
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % answerBuckets)
}

// keptAnswer is a getClusterNodes answer of one set of states, as the
// elements of its nodes' reports joined bucket by bucket.
type keptAnswer struct {
	// joined is each bucket's elements one after the other; nil when the
	// bucket must be joined again, empty when it holds none of the nodes.
	joined [answerBuckets][]byte
	// parts are the non-empty buckets' joined elements, the answer as
	// sent; nil when a bucket changed. Handed out and never modified:
	// a change makes new ones.
	parts [][]byte
}

// changedBucket marks the bucket of a node whose report or presence
// changed for joining again in every kept answer. v.mu is held for
// writing, so no reader holds a kept answer's fields being replaced; the
// slices readers were handed stay as they were.
func (v *view) changedBucket(name string) {
	b := bucketOf(name)
	for _, a := range v.answers {
		a.joined[b] = nil
		a.parts = nil
	}
}

// answerKey names an answer: its field number and the states it keeps, a
// bit for each NodeStateProto value (none: every state).
type answerKey struct {
	field  protowire.Number
	states uint32
}

type nodeEntry struct {
	info      Info
	addresses []string
	// report is the node's NodeReport with the use it was built with,
	// made again only when that use changed: a node's change makes a new
	// entry. Lists share it (Info.SharedReport), so a getClusterNodes of
	// a thousand nodes builds none of them while nothing moves.
	report atomic.Pointer[builtReport]
}

func newView(report func(*corev1.Node) Info) *view {
	return &view{
		strip:      podrecord.NewStripper(),
		report:     report,
		nodes:      map[string]*nodeEntry{},
		use:        map[string]Use{},
		byAddress:  map[string][]string{},
		partitions: partitionSums{},
		answers:    map[answerKey]*keptAnswer{},
	}
}

// podHandler keeps the use per node from the pod informer's events. It
// trusts the informer's contract: an update's old object is the one the
// handler saw last, a delete (or its tombstone) carries the last object
// seen, and a resync is an update with old and new the same.
func (v *view) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { v.podChanged(nil, v.podOf(obj)) },
		UpdateFunc: func(old, obj any) { v.podChanged(v.podOf(old), v.podOf(obj)) },
		DeleteFunc: func(obj any) { v.podChanged(v.podOf(obj), nil) },
	}
}

// podOf is the record an event carries; the pod informer's transform
// made it (rgs.NewPodInformerFactory), or this view makes it of a pod
// put in the cache some other way.
func (v *view) podOf(obj any) *podrecord.Pod {
	p, _ := v.strip.Of(obj)
	return p
}

// podChanged moves a pod's use from what it was (old, nil when new to the
// view) to what it is (now, nil when gone).
func (v *view) podChanged(old, now *podrecord.Pod) {
	var was, is Use
	var wasNode, isNode string
	var wasOK, isOK bool
	if old != nil {
		wasNode, was, wasOK = UseOf(old)
	}
	if now != nil {
		isNode, is, isOK = UseOf(now)
	}
	if wasOK && isOK && wasNode == isNode && was == is {
		return // a resync, or a change of something else
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if wasOK {
		v.addUse(wasNode, Use{}.minus(was))
		v.changedBucket(wasNode)
	}
	if isOK {
		v.addUse(isNode, is)
		v.changedBucket(isNode)
	}
}

// addUse adds d to a node's use. v.mu is held.
func (v *view) addUse(node string, d Use) {
	u := v.use[node].plus(d)
	if u == (Use{}) {
		delete(v.use, node)
	} else {
		v.use[node] = u
	}
	if e := v.nodes[node]; e != nil && e.info.State == yarnpb.NodeStateProto_NS_RUNNING {
		v.census.addRunningUse(d)
	}
}

// nodeHandler keeps the nodes' reports, addresses and the census from the
// node informer's events.
func (v *view) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { v.nodeChanged(nodeOf(obj), false) },
		UpdateFunc: func(_, obj any) { v.nodeChanged(nodeOf(obj), false) },
		DeleteFunc: func(obj any) { v.nodeChanged(nodeOf(obj), true) },
	}
}

func nodeOf(obj any) *corev1.Node {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, _ := obj.(*corev1.Node)
	return n
}

func (v *view) nodeChanged(n *corev1.Node, gone bool) {
	if n == nil {
		return
	}
	var info Info
	var addresses []string
	if !gone {
		info = v.report(n)
		addresses = make([]string, 0, len(n.Status.Addresses))
		for _, a := range n.Status.Addresses {
			addresses = append(addresses, a.Address)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.changedBucket(n.Name)
	if e := v.nodes[n.Name]; e != nil {
		v.census.add(e.info, v.use[n.Name], -1)
		v.partitions.add(e.info, -1)
		for _, a := range e.addresses {
			rest := slices.DeleteFunc(v.byAddress[a], func(name string) bool { return name == n.Name })
			if len(rest) == 0 {
				delete(v.byAddress, a)
			} else {
				v.byAddress[a] = rest
			}
		}
		delete(v.nodes, n.Name)
		b := bucketOf(n.Name)
		v.buckets[b] = slices.DeleteFunc(v.buckets[b], func(name string) bool { return name == n.Name })
	}
	if gone {
		return
	}
	v.nodes[n.Name] = &nodeEntry{info: info, addresses: addresses}
	b := bucketOf(n.Name)
	v.buckets[b] = append(v.buckets[b], n.Name)
	v.census.add(info, v.use[n.Name], 1)
	v.partitions.add(info, 1)
	for _, a := range addresses {
		if !slices.Contains(v.byAddress[a], n.Name) {
			v.byAddress[a] = append(v.byAddress[a], n.Name)
		}
	}
}

// list is every known node with its use, in no order.
func (v *view) list() []Info {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Info, 0, len(v.nodes))
	for name, e := range v.nodes {
		u := v.use[name]
		info := withUse(e.info, u)
		b := e.report.Load()
		if b == nil || b.use != u {
			// Entries change under the write lock only; two lists racing
			// here build the same report, and either may be kept.
			b = &builtReport{use: u, report: info.Report()}
			e.report.Store(b)
		}
		info.shared = b.report
		out = append(out, info)
	}
	return out
}

// builtReport is a node's report and the use it shows.
type builtReport struct {
	use    Use
	report *yarnpb.NodeReportProto
	// element is report's wire encoding as one element of the repeated
	// field numbered field, made the first time a listing asks for it
	// (reportParts): encoding every node's report was most of a
	// getClusterNodes call.
	element []byte
	field   protowire.Number
}

// encodedReportParts is, for each node in one of states (every node when
// none), its report's encoding as one element of the repeated message
// field numbered field, the elements joined into a few parts to be sent
// one after the other. Each node's element is kept until the node or its
// use changes, and each part until one of its nodes changes. The parts are
// shared: callers must not modify them.
func (v *view) encodedReportParts(field protowire.Number, states []yarnpb.NodeStateProto) ([][]byte, error) {
	key := answerKey{field: field}
	for _, st := range states {
		if st < 0 || st >= 32 {
			// No bit for it: answered afresh, as no node is in it.
			v.mu.RLock()
			defer v.mu.RUnlock()
			return v.reportPartsLocked(field, &keptAnswer{}, func(s yarnpb.NodeStateProto) bool { return slices.Contains(states, s) })
		}
		key.states |= 1 << st
	}
	keep := func(s yarnpb.NodeStateProto) bool { return key.states == 0 || key.states&(1<<s) != 0 }
	v.mu.RLock()
	defer v.mu.RUnlock()
	// Held while a changed answer is joined again: readers of the same
	// answer would only join it alike.
	v.answersMu.Lock()
	defer v.answersMu.Unlock()
	a := v.answers[key]
	if a == nil {
		a = &keptAnswer{}
		v.answers[key] = a
	}
	if a.parts != nil {
		return a.parts, nil
	}
	return v.reportPartsLocked(field, a, keep)
}

// reportPartsLocked joins again the buckets of a that need it, of the
// nodes whose state keep accepts, each node's report as one element of the
// repeated message field numbered field, and gathers its parts; v.mu is
// held. One node's change costs its bucket's elements copied and a slice
// of the buckets, not the whole answer.
func (v *view) reportPartsLocked(field protowire.Number, a *keptAnswer, keep func(yarnpb.NodeStateProto) bool) ([][]byte, error) {
	parts := make([][]byte, 0, answerBuckets)
	for i, names := range v.buckets {
		if a.joined[i] == nil {
			joined := []byte{}
			for _, name := range names {
				e := v.nodes[name]
				if !keep(e.info.State) {
					continue
				}
				element, err := v.elementLocked(name, e, field)
				if err != nil {
					return nil, err
				}
				joined = append(joined, element...)
			}
			a.joined[i] = joined
		}
		if len(a.joined[i]) > 0 {
			parts = append(parts, a.joined[i])
		}
	}
	a.parts = parts
	return parts, nil
}

// elementLocked is the node's report encoded as one element of the
// repeated message field numbered field, kept with the node's entry until
// its use changes (a change of the node makes a new entry); v.mu is held.
func (v *view) elementLocked(name string, e *nodeEntry, field protowire.Number) ([]byte, error) {
	u := v.use[name]
	b := e.report.Load()
	if b != nil && b.use == u && b.element != nil && b.field == field {
		return b.element, nil
	}
	built := &builtReport{use: u, field: field}
	if b != nil && b.use == u {
		built.report = b.report
	} else {
		built.report = withUse(e.info, u).Report()
	}
	encoded, err := proto.Marshal(built.report)
	if err != nil {
		return nil, fmt.Errorf("nodes: encoding the report of %s: %w", name, err)
	}
	built.element = protowire.AppendTag(make([]byte, 0, protowire.SizeTag(field)+protowire.SizeBytes(len(encoded))), field, protowire.BytesType)
	built.element = protowire.AppendBytes(built.element, encoded)
	// As in list: entries change under the write lock only, and racing
	// listings store equal reports.
	e.report.Store(built)
	return built.element, nil
}

func withUse(info Info, u Use) Info {
	info.UsedMB, info.UsedVcores, info.Containers = u.MB, u.Vcores, u.Containers
	return info
}

// node is one known node with its use.
func (v *view) node(name string) (Info, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.nodes[name]
	if e == nil {
		return Info{}, false
	}
	return withUse(e.info, v.use[name]), true
}

// nameOf is the node a host means: its name, or one of its addresses.
func (v *view) nameOf(host string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if _, ok := v.nodes[host]; ok {
		return host, true
	}
	if names := v.byAddress[host]; len(names) > 0 {
		return names[0], true
	}
	return "", false
}

func (v *view) snapshotCensus() Census {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.census
}
