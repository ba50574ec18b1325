package rgs

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/scheduling"
)

// anyName is ResourceRequest.ANY: the ask's total, wherever it lands.
const anyName = "*"

// askKey is the key YARN's AppSchedulingInfo keeps asks under, capability
// included: an AM's asks are absolute totals per key.
type askKey struct {
	group groupKey
	name  string // host, rack or "*"
}

// groupKey is an ask without its resource name: the asks of one group share
// one total (the "*" ask's) and differ only in where they prefer to run.
type groupKey struct {
	priority  int32
	memoryMB  int64
	vcores    int32
	others    string // other resource types, "name=value" sorted and joined
	execution yarnpb.ExecutionTypeProto
	allocID   int64
}

func keyOf(r *yarnpb.ResourceRequestProto) askKey {
	c := r.GetCapability()
	mem, vcores := yarnpb.MemoryAndVcores(c)
	var others []string
	for _, e := range c.GetResourceValueMap() {
		if e.GetKey() == yarnMemory || e.GetKey() == yarnVcores {
			continue
		}
		others = append(others, e.GetKey()+"="+strconv.FormatInt(e.GetValue(), 10))
	}
	slices.Sort(others)
	exec := r.GetExecutionTypeRequest().GetExecutionType()
	if exec == 0 {
		exec = yarnpb.ExecutionTypeProto_GUARANTEED
	}
	g := groupKey{
		priority:  r.GetPriority().GetPriority(),
		memoryMB:  mem,
		vcores:    vcores,
		execution: exec,
		allocID:   r.GetAllocationRequestId(),
	}
	for i, o := range others {
		if i > 0 {
			g.others += ","
		}
		g.others += o
	}
	name := r.GetResourceName()
	if name == "" {
		name = anyName
	}
	return askKey{group: g, name: name}
}

// hash names the key in a pod label, so pending pods can be counted per key
// from the pods alone after a restart.
func (k askKey) hash() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%d|%s|%d|%d|%s", k.group.priority, k.group.memoryMB, k.group.vcores,
		k.group.others, k.group.execution, k.group.allocID, k.name)
	return strconv.FormatUint(h.Sum64(), 36)
}

// book is what RGS knows of one attempt's asks in one role: the table of
// outstanding asks as the AM last stated them (less what was allocated
// since), its blacklist, and its pending pods.
type book struct {
	spec scheduling.AttemptSpec
	// table holds the latest ask per key; hashes and byHash name each key
	// in pod labels both ways, so a bound pod finds its ask at once.
	table  map[askKey]*yarnpb.ResourceRequestProto
	hashes map[askKey]string
	byHash map[string]askKey
	// known is false for a book rebuilt from pods after a restart until the
	// AM states its asks again: its pending pods are kept, not reconciled
	// to an empty table.
	known     bool
	blacklist map[string]bool
	// pending are the pods created for asks and not yet bound, by name.
	pending map[string]*pendingPod
	created uint64 // orders pending pods, newest deleted first
	// awaitingSeen: a sync left pods asked for no more that the cache did
	// not show yet; their worker queues the book again once it does.
	awaitingSeen bool
}

// pendingPod is one pod waiting for the Kubernetes scheduler.
type pendingPod struct {
	namespace, name string
	hash            string
	order           uint64
}

func newBook(spec scheduling.AttemptSpec) *book {
	return &book{
		spec:      spec,
		table:     map[askKey]*yarnpb.ResourceRequestProto{},
		hashes:    map[askKey]string{},
		byHash:    map[string]askKey{},
		blacklist: map[string]bool{},
		pending:   map[string]*pendingPod{},
	}
}

// update records asks, absolute totals per key as the AM sends them.
func (b *book) update(asks []*yarnpb.ResourceRequestProto) {
	b.known = true
	for _, r := range asks {
		k := keyOf(r)
		if _, ok := b.hashes[k]; !ok {
			h := k.hash()
			b.hashes[k], b.byHash[h] = h, k
		}
		b.table[k] = proto.CloneOf(r)
	}
}

// allocated lowers the asks a bound pod satisfied: its own key and its
// group's total, as AppSchedulingInfo.allocate decrements the node, rack
// and ANY asks of a placement.
func (b *book) allocated(hash string) {
	k, ok := b.byHash[hash]
	if !ok {
		return
	}
	decrement(b.table[k])
	if k.name != anyName {
		if total := b.table[askKey{group: k.group, name: anyName}]; total != nil {
			decrement(total)
		}
	}
}

func decrement(r *yarnpb.ResourceRequestProto) {
	if n := r.GetNumContainers(); n > 0 {
		r.NumContainers = proto.Int32(n - 1)
	}
}

// want is how many pending pods one key should have.
type want struct {
	key   askKey
	hash  string
	ask   *yarnpb.ResourceRequestProto
	count int
	// strict is set when the group's ANY ask forbids relaxing locality.
	strict bool
}

// desired spreads each group's total over its keys: host asks first, then
// rack asks, the rest anywhere, never more than the total. A pod counts
// once, whichever of its group's keys it was made for.
func (b *book) desired() map[string]want {
	groups := map[groupKey][]askKey{}
	for k := range b.table {
		groups[k.group] = append(groups[k.group], k)
	}
	out := map[string]want{}
	for g, keys := range groups {
		total := b.table[askKey{group: g, name: anyName}]
		if total == nil {
			continue // YARN allocates nothing without the ANY ask
		}
		budget := int(total.GetNumContainers())
		strict := total.RelaxLocality != nil && !total.GetRelaxLocality()
		// Hosts before racks: a more precise ask is served first.
		slices.SortFunc(keys, func(x, y askKey) int {
			if c := cmp.Compare(rackRank(x), rackRank(y)); c != 0 {
				return c
			}
			return cmp.Compare(x.name, y.name)
		})
		for _, k := range keys {
			if k.name == anyName {
				continue
			}
			n := min(int(b.table[k].GetNumContainers()), budget)
			if n <= 0 {
				continue
			}
			budget -= n
			out[b.hashes[k]] = want{key: k, hash: b.hashes[k], ask: b.table[k], count: n, strict: strict}
		}
		if budget > 0 {
			k := askKey{group: g, name: anyName}
			out[b.hashes[k]] = want{key: k, hash: b.hashes[k], ask: total, count: budget}
		}
	}
	return out
}

// isRack tells a rack name from a host name: YARN racks are paths.
func isRack(k askKey) bool { return len(k.name) > 0 && k.name[0] == '/' }

func rackRank(k askKey) int {
	if isRack(k) {
		return 1
	}
	return 0
}

// pendingByHash counts the pending pods per key hash.
func (b *book) pendingByHash() map[string][]*pendingPod {
	out := map[string][]*pendingPod{}
	for _, p := range b.pending {
		out[p.hash] = append(out[p.hash], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(x, y *pendingPod) int { return cmp.Compare(y.order, x.order) })
	}
	return out
}
