package rm

import (
	"context"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestClusterMetricsCountEveryNodeStateAsYARNDoes(t *testing.T) {
	var nodes fixedNodes
	add := func(s yarnpb.NodeStateProto, n int) {
		for range n {
			nodes = append(nodes, NodeInfo{Name: s.String(), State: s, CapabilityMB: 1024, CapabilityVcores: 1})
		}
	}
	add(yarnpb.NodeStateProto_NS_NEW, 1)
	add(yarnpb.NodeStateProto_NS_RUNNING, 2)
	add(yarnpb.NodeStateProto_NS_UNHEALTHY, 3)
	add(yarnpb.NodeStateProto_NS_DECOMMISSIONED, 4)
	add(yarnpb.NodeStateProto_NS_LOST, 5)
	add(yarnpb.NodeStateProto_NS_REBOOTED, 6)
	add(yarnpb.NodeStateProto_NS_DECOMMISSIONING, 7)
	add(yarnpb.NodeStateProto_NS_SHUTDOWN, 8)
	e := newEnv(t, envOptions{nodes: nodes})
	resp, err := e.rm.GetClusterMetrics(context.Background(), &yarnpb.GetClusterMetricsRequestProto{})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.GetClusterMetrics()
	tests := []struct {
		name      string
		got, want int32
	}{
		// getRMNodes: every node but the inactive ones (decommissioned,
		// lost, rebooted, shut down).
		{"node managers", m.GetNumNodeManagers(), 1 + 2 + 3 + 7},
		{"active", m.GetNumActiveNms(), 2},
		{"unhealthy", m.GetNumUnhealthyNms(), 3},
		{"decommissioned", m.GetNumDecommissionedNms(), 4},
		{"lost", m.GetNumLostNms(), 5},
		{"rebooted", m.GetNumRebootedNms(), 6},
		{"decommissioning", m.GetNumDecommissioningNms(), 7},
		{"shut down", m.GetNumShutdownNms(), 8},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestClusterMetricsAllocateOnlyTheAnswer(t *testing.T) {
	e := newEnv(t, envOptions{nodes: fixedNodes{{Name: "n", State: yarnpb.NodeStateProto_NS_RUNNING}}})
	ctx, req := context.Background(), &yarnpb.GetClusterMetricsRequestProto{}
	// The response, its metrics and one array behind the eight counts.
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.rm.GetClusterMetrics(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Errorf("getClusterMetrics allocates %.0f objects a call, want at most 3", allocs)
	}
}
