package amrmproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/protocols/yarnpb"
)

const machineList = `n1, sc-1, r1
N2 ,sc-2, r2
n3, sc-2, R1
a line that is no machine
`

func weightsJSON(alpha string, w map[string]string) []byte {
	var entries []string
	for _, id := range slices.Sorted(maps.Keys(w)) {
		entries = append(entries, fmt.Sprintf(`{"key":{"id":%q},"value":%q}`, id, w[id]))
	}
	return []byte(fmt.Sprintf(`{"routerPolicyWeights":{"entry":[]},"amrmPolicyWeights":{"entry":[%s]},"headroomAlpha":%q}`, strings.Join(entries, ","), alpha))
}

func named(name string, n int32, allocID int64) *yarnpb.ResourceRequestProto {
	a := askAt(1, n)
	a.ResourceName = proto.String(name)
	a.AllocationRequestId = proto.Int64(allocID)
	return a
}

// summary is "name:count" of each ask, by sub-cluster, for comparing.
func summary(split map[string][]*yarnpb.ResourceRequestProto) map[string]string {
	out := map[string]string{}
	for id, asks := range split {
		var s []string
		for _, a := range asks {
			s = append(s, fmt.Sprintf("%s:%d", a.GetResourceName(), a.GetNumContainers()))
		}
		out[id] = strings.Join(s, " ")
	}
	return out
}

func TestLocalityPolicySplit(t *testing.T) {
	even := map[string]string{"sc-1": "1", "sc-2": "1"}
	tests := []struct {
		name     string
		alpha    string
		weights  map[string]string
		headroom map[string]int64
		active   []string
		asks     []*yarnpb.ResourceRequestProto
		want     map[string]string
	}{
		{"a host ask and its ANY go to the node's sub-cluster", "0.0", even, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("n2", 2, 0), named("*", 2, 0)}, map[string]string{"sc-2": "n2:2 *:2"}},
		{"a rack striped across sub-clusters goes to each", "0.0", even, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("r1", 1, 0)}, map[string]string{"sc-1": "r1:1", "sc-2": "r1:1"}},
		{"an unknown host goes home", "0.0", even, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("elsewhere", 1, 0), named("*", 1, 0)}, map[string]string{"sc-1": "elsewhere:1 *:1"}},
		{"an ANY tied to hosts in two sub-clusters splits in their proportion", "0.0", even, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("n1", 1, 7), named("n3", 3, 7), named("*", 4, 7)}, map[string]string{"sc-1": "n1:1 *:1", "sc-2": "n3:3 *:3"}},
		{"a free ANY splits by the weights, rounded up", "0.0", map[string]string{"sc-1": "1", "sc-2": "3"}, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("*", 5, 0)}, map[string]string{"sc-1": "*:2", "sc-2": "*:4"}},
		{"with headroomAlpha 1 a free ANY splits by the headroom", "1.0", even, map[string]int64{"sc-1": 1000, "sc-2": 3000}, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("*", 4, 0)}, map[string]string{"sc-1": "*:1", "sc-2": "*:3"}},
		{"a sub-cluster of weight zero gets nothing, even its nodes' asks", "0.0", map[string]string{"sc-1": "1", "sc-2": "0"}, nil, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("n2", 1, 0), named("*", 2, 1)}, map[string]string{"sc-1": "n2:1 *:2"}},
		{"an inactive sub-cluster gets nothing", "0.0", even, nil, []string{"sc-1"},
			[]*yarnpb.ResourceRequestProto{named("*", 2, 0)}, map[string]string{"sc-1": "*:2"}},
		{"a cancelled ANY goes to every sub-cluster heard from", "0.0", even, map[string]int64{"sc-1": 0, "sc-2": 0}, []string{"sc-1", "sc-2"},
			[]*yarnpb.ResourceRequestProto{named("*", 0, 0)}, map[string]string{"sc-1": "*:0", "sc-2": "*:0"}},
	}
	res, err := federation.ReadMachineList(strings.NewReader(machineList))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newLocalityPolicy(weightsJSON(tt.alpha, tt.weights), res)
			if err != nil {
				t.Fatal(err)
			}
			for id, h := range tt.headroom {
				p.observe(id, &yarnpb.AllocateResponseProto{Limit: &yarnpb.ResourceProto{Memory: proto.Int64(h)}})
			}
			got := summary(p.split(tt.asks, "sc-1", tt.active))
			if !maps.Equal(got, tt.want) {
				t.Fatalf("split %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewLocalityPolicyRefusesWeightsThatForwardNothing(t *testing.T) {
	tests := []struct {
		name   string
		params []byte
	}{
		{"all weights zero", weightsJSON("0.0", map[string]string{"sc-1": "0"})},
		{"no weights", nil},
		{"a headroomAlpha over 1", weightsJSON("1.5", map[string]string{"sc-1": "1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newLocalityPolicy(tt.params, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
