package rgs

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/scheduling"
)

func req(priority int32, name string, n int32, relax bool) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority:      &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ResourceName:  proto.String(name),
		Capability:    &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
		NumContainers: proto.Int32(n),
		RelaxLocality: proto.Bool(relax),
	}
}

// counts is desired() as name -> pods, for one priority's group.
func counts(b *book) map[string]int {
	out := map[string]int{}
	for _, w := range b.desired() {
		out[w.key.name] += w.count
	}
	return out
}

func TestDesiredSpreadsAGroupsTotalOverHostsRacksAndAnywhere(t *testing.T) {
	tests := []struct {
		name string
		asks []*yarnpb.ResourceRequestProto
		want map[string]int
	}{
		{"anywhere only", []*yarnpb.ResourceRequestProto{req(1, "*", 3, true)}, map[string]int{"*": 3}},
		{"host asks come first and count in the total",
			[]*yarnpb.ResourceRequestProto{req(1, "h1", 1, true), req(1, "h2", 1, true), req(1, "*", 3, true)},
			map[string]int{"h1": 1, "h2": 1, "*": 1}},
		{"a rack ask covering its hosts adds no pods beyond the total",
			[]*yarnpb.ResourceRequestProto{req(1, "h1", 1, true), req(1, "/r1", 1, true), req(1, "*", 1, true)},
			map[string]int{"h1": 1}},
		{"without the ANY ask nothing is asked", []*yarnpb.ResourceRequestProto{req(1, "h1", 2, true)}, map[string]int{}},
		{"a zero total asks for nothing", []*yarnpb.ResourceRequestProto{req(1, "h1", 1, true), req(1, "*", 0, true)}, map[string]int{}},
		{"priorities are separate groups",
			[]*yarnpb.ResourceRequestProto{req(1, "*", 1, true), req(2, "*", 2, true)},
			map[string]int{"*": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBook(scheduling.AttemptSpec{})
			b.update(tt.asks)
			got := counts(b)
			if len(got) != len(tt.want) {
				t.Fatalf("desired %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("desired %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestStrictLocalityComesFromTheAnyAsk(t *testing.T) {
	b := newBook(scheduling.AttemptSpec{})
	b.update([]*yarnpb.ResourceRequestProto{req(1, "h1", 1, true), req(1, "*", 1, false)})
	if n := len(b.desired()); n != 1 {
		t.Fatalf("%d keys desired, want the one host pod", n)
	}
	for _, w := range b.desired() {
		if w.key.name != "h1" || !w.strict {
			t.Errorf("want %+v to be a strict h1 pod", w)
		}
	}
}

func TestAsksAreAbsoluteAndAllocationsLowerThem(t *testing.T) {
	b := newBook(scheduling.AttemptSpec{})
	b.update([]*yarnpb.ResourceRequestProto{req(1, "h1", 2, true), req(1, "*", 3, true)})
	b.update([]*yarnpb.ResourceRequestProto{req(1, "*", 4, true)}) // a new total replaces the old
	total := keyOf(req(1, "*", 0, true))
	if got := b.table[total].GetNumContainers(); got != 4 {
		t.Fatalf("outstanding %d, want 4", got)
	}
	host := askKey{group: total.group, name: "h1"}
	b.allocated(host.hash())
	if got, h := b.table[total].GetNumContainers(), b.table[host].GetNumContainers(); got != 3 || h != 1 {
		t.Errorf("after a host allocation: outstanding %d, host ask %d; want 3 and 1", got, h)
	}
	if got := counts(b); got["h1"] != 1 || got["*"] != 2 {
		t.Errorf("desired after allocation %v", got)
	}
}

func TestKeysDifferByCapabilityExecutionTypeAndAllocationRequestID(t *testing.T) {
	base := req(1, "*", 1, true)
	other := []*yarnpb.ResourceRequestProto{
		func() *yarnpb.ResourceRequestProto {
			r := proto.CloneOf(base)
			r.Capability.Memory = proto.Int64(2048)
			return r
		}(),
		func() *yarnpb.ResourceRequestProto {
			r := proto.CloneOf(base)
			r.AllocationRequestId = proto.Int64(7)
			return r
		}(),
		func() *yarnpb.ResourceRequestProto {
			r := proto.CloneOf(base)
			r.ExecutionTypeRequest = &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_OPPORTUNISTIC.Enum()}
			return r
		}(),
	}
	for _, o := range other {
		if keyOf(o).hash() == keyOf(base).hash() {
			t.Errorf("%v and %v share a key", o, base)
		}
	}
	// Java sends the capability both as fields and in the map: one key.
	withMap := proto.CloneOf(base)
	withMap.Capability.ResourceValueMap = []*yarnpb.ResourceInformationProto{{Key: proto.String("memory-mb"), Value: proto.Int64(1024)}, {Key: proto.String("vcores"), Value: proto.Int64(1)}}
	if keyOf(withMap) != keyOf(base) {
		t.Error("the resource map changed the key")
	}
}
