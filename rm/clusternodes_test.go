package rm

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// encodedNodes is fixedNodes with each report kept encoded, as
// nodes.Lister keeps them; asked counts the answers it built.
type encodedNodes struct {
	fixedNodes
	asked *int
}

func (n encodedNodes) EncodedReports(field protowire.Number, states []yarnpb.NodeStateProto) ([][]byte, error) {
	*n.asked++
	var out [][]byte
	for _, info := range n.fixedNodes {
		if len(states) > 0 && !slices.Contains(states, info.State) {
			continue
		}
		b, err := proto.Marshal(info.Report())
		if err != nil {
			return nil, err
		}
		element := protowire.AppendTag(nil, field, protowire.BytesType)
		out = append(out, protowire.AppendBytes(element, b))
	}
	return out, nil
}

func TestGetClusterNodesSentFromKeptEncodingsIsTheAnswerOfTheReports(t *testing.T) {
	// The raw method sends the lister's bytes as the whole message: that
	// holds while nodeReports is the response's only field.
	if n := (&yarnpb.GetClusterNodesResponseProto{}).ProtoReflect().Descriptor().Fields().Len(); n != 1 {
		t.Fatalf("GetClusterNodesResponseProto has %d fields; the encoded answer holds only nodeReports", n)
	}
	fixed := fixedNodes{
		{Name: "n1", Host: "node1", NMPort: 8041, HTTPAddress: "node1:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 8192, CapabilityVcores: 8, UsedMB: 1024, UsedVcores: 1, Containers: 1},
		{Name: "n2", Host: "node2", NMPort: 8041, HTTPAddress: "node2:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_UNHEALTHY,
			CapabilityMB: 8192, CapabilityVcores: 8, HealthReport: "disk full"},
	}
	asked := 0
	e := newEnv(t, envOptions{nodes: encodedNodes{fixedNodes: fixed, asked: &asked}})
	c := e.client("alice")
	tests := []struct {
		name   string
		states []yarnpb.NodeStateProto
		hosts  []string
	}{
		{"every node when no state is asked for", nil, []string{"node1", "node2"}},
		{"the running nodes alone", []yarnpb.NodeStateProto{yarnpb.NodeStateProto_NS_RUNNING}, []string{"node1"}},
		{"no node in a state none is in", []yarnpb.NodeStateProto{yarnpb.NodeStateProto_NS_LOST}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := asked
			req := &yarnpb.GetClusterNodesRequestProto{NodeStates: tt.states}
			got := mustCall(t, c, getClusterNodesMethod, req, &yarnpb.GetClusterNodesResponseProto{})
			if asked != before+1 {
				t.Errorf("the lister built %d answers, want one: the call answered from its encodings", asked-before)
			}
			typed, err := e.rm.GetClusterNodes(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := &yarnpb.GetClusterNodesResponseProto{}
			for _, info := range fixed {
				if len(tt.states) == 0 || slices.Contains(tt.states, info.State) {
					want.NodeReports = append(want.NodeReports, info.Report())
				}
			}
			wire, err := proto.Marshal(typed)
			if err != nil {
				t.Fatal(err)
			}
			fromTyped := &yarnpb.GetClusterNodesResponseProto{}
			if err := proto.Unmarshal(wire, fromTyped); err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for _, r := range got.GetNodeReports() {
				hosts = append(hosts, r.GetNodeId().GetHost())
			}
			if !slices.Equal(hosts, tt.hosts) || !proto.Equal(got, want) || !proto.Equal(fromTyped, want) {
				t.Errorf("over RPC %v, typed %v; want %v", got, fromTyped, want)
			}
		})
	}
}
