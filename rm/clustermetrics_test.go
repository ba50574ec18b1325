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

func TestClusterMetricsOverRPCFollowTheNodesThoughTheAnswerIsKeptEncoded(t *testing.T) {
	running := NodeInfo{Name: "a", State: yarnpb.NodeStateProto_NS_RUNNING}
	lost := NodeInfo{Name: "b", State: yarnpb.NodeStateProto_NS_LOST}
	nodes := &changingNodes{}
	nodes.set(running)
	e := newEnv(t, envOptions{nodes: nodes})
	c := e.client("alice")
	steps := []struct {
		name              string
		nodes             []NodeInfo
		wantNMs, wantLost int32
		wantActive        int32
	}{
		{"one running", []NodeInfo{running}, 1, 0, 1},
		{"unchanged, from the kept answer", []NodeInfo{running}, 1, 0, 1},
		{"a lost node added", []NodeInfo{running, lost}, 1, 1, 1},
		{"the running node gone", []NodeInfo{lost}, 0, 1, 0},
	}
	for _, s := range steps {
		nodes.set(s.nodes...)
		m := mustCall(t, c, getClusterMetricsMethod, &yarnpb.GetClusterMetricsRequestProto{}, &yarnpb.GetClusterMetricsResponseProto{}).GetClusterMetrics()
		if m.GetNumNodeManagers() != s.wantNMs || m.GetNumActiveNms() != s.wantActive || m.GetNumLostNms() != s.wantLost || m.NumShutdownNms == nil {
			t.Errorf("%s: metrics = %v, want %d node managers, %d active, %d lost, every count present", s.name, m, s.wantNMs, s.wantActive, s.wantLost)
		}
	}
}

func TestClusterMetricsKeptAnswerAllocatesNothing(t *testing.T) {
	e := newEnv(t, envOptions{nodes: fixedNodes{{Name: "n", State: yarnpb.NodeStateProto_NS_RUNNING}}})
	ctx := context.Background()
	if _, err := e.rm.encodedClusterMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.rm.encodedClusterMetrics(ctx); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0 {
		t.Errorf("an unchanged census's answer allocates %.0f objects a call, want none", allocs)
	}
}
