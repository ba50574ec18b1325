package rm

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/recordings"
)

// TestNodeReportsAndRESTNodesCarryTheNodesUtilization: a node whose
// knit-node published its utilization shows it in getClusterNodes'
// NodeReport (node_utilization, containers_utilization) and in REST's
// resourceUtilization, with the keys, order and figures of a real RM's
// answer for the same measurement; a node that published none shows
// zeros, as an RMNode before its first heartbeat.
func TestNodeReportsAndRESTNodesCarryTheNodesUtilization(t *testing.T) {
	b, err := os.ReadFile(recordings.Path(t, "hadoop-rest", "cluster_nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := resourceUtilizationOf(t, b, "localhost:8141")
	var want struct {
		NodePhysicalMemoryMB, NodeVirtualMemoryMB                                 int32
		NodeCPUUsage                                                              float64
		AggregatedContainersPhysicalMemoryMB, AggregatedContainersVirtualMemoryMB int32
		ContainersCPUUsage                                                        float64
	}
	if err := json.Unmarshal(recorded, &want); err != nil {
		t.Fatal(err)
	}
	measured := launch.NodeUtilization{
		Node: launch.ResourceUtilization{PmemMB: want.NodePhysicalMemoryMB, VmemMB: want.NodeVirtualMemoryMB, CPU: float32(want.NodeCPUUsage)},
		Containers: launch.ResourceUtilization{PmemMB: want.AggregatedContainersPhysicalMemoryMB,
			VmemMB: want.AggregatedContainersVirtualMemoryMB, CPU: float32(want.ContainersCPUUsage)},
	}
	e := newEnv(t, envOptions{nodes: fixedNodes{
		{Name: "n1", Host: "node1", NMPort: 8041, HTTPAddress: "node1:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 8192, CapabilityVcores: 8, UsedMB: 2048, UsedVcores: 2, Containers: 2, Utilization: measured},
		{Name: "n2", Host: "node2", NMPort: 8041, HTTPAddress: "node2:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 8192, CapabilityVcores: 8},
	}})

	resp, err := e.rm.GetClusterNodes(context.Background(), &yarnpb.GetClusterNodesRequestProto{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetNodeReports() {
		n, c := r.GetNodeUtilization(), r.GetContainersUtilization()
		switch r.GetNodeId().GetHost() {
		case "node1":
			if n.GetPmem() != 3626 || n.GetVmem() != 3626 || n.GetCpu() != float32(want.NodeCPUUsage) ||
				c.GetPmem() != 121 || c.GetVmem() != 2636 || c.GetCpu() != float32(want.ContainersCPUUsage) {
				t.Errorf("node1 report: node %v, containers %v", n, c)
			}
		case "node2":
			if n != nil || c != nil {
				t.Errorf("node2 measured nothing, yet reports node %v, containers %v", n, c)
			}
		}
	}

	srv := restServer(t, e)
	code, got := doREST(t, http.MethodGet, srv.URL+"/ws/v1/cluster/nodes", "")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, got)
	}
	ours := resourceUtilizationOf(t, got, "node1:8041")
	if k, w := objectKeys(t, ours), objectKeys(t, recorded); !slices.Equal(k, w) {
		t.Errorf("resourceUtilization keys %v, a real RM's %v", k, w)
	}
	var o, r map[string]float64
	if err := json.Unmarshal(ours, &o); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(recorded, &r); err != nil {
		t.Fatal(err)
	}
	for k, rv := range r {
		// The CPU figures are Java floats widened to double: the same
		// float32 on both sides.
		if float32(o[k]) != float32(rv) || math.IsNaN(o[k]) {
			t.Errorf("%s = %v, a real RM's %v", k, o[k], rv)
		}
	}
	zero := resourceUtilizationOf(t, got, "node2:8041")
	if !bytes.Equal(zero, []byte(`{"nodePhysicalMemoryMB":0,"nodeVirtualMemoryMB":0,"nodeCPUUsage":0.0,"aggregatedContainersPhysicalMemoryMB":0,"aggregatedContainersVirtualMemoryMB":0,"containersCPUUsage":0.0}`)) {
		t.Errorf("node2 resourceUtilization %s", zero)
	}
}

// resourceUtilizationOf is the resourceUtilization object of node id in a
// /ws/v1/cluster/nodes answer.
func resourceUtilizationOf(t *testing.T, b []byte, id string) json.RawMessage {
	t.Helper()
	var doc struct {
		Nodes struct {
			Node []struct {
				ID                  string          `json:"id"`
				ResourceUtilization json.RawMessage `json:"resourceUtilization"`
			} `json:"node"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range doc.Nodes.Node {
		if n.ID == id {
			return n.ResourceUtilization
		}
	}
	t.Fatalf("no node %s in %s", id, b)
	return nil
}

// TestMemAndCPUUtilizationAreSharesOfTheMachineAsNodeInfoComputesThem:
// the node's physical memory in use and its processors busy in percent of
// the machine's, in Java float arithmetic, bit for bit what a real RM
// answered for the recorded node (3626 MiB of 24103, 0.1332889 processors
// of 2); 0 where the machine's figure is unknown or nothing was measured.
func TestMemAndCPUUtilizationAreSharesOfTheMachineAsNodeInfoComputesThem(t *testing.T) {
	recorded := launch.ResourceUtilization{PmemMB: 3626, VmemMB: 3626, CPU: 0.1332889}
	tests := []struct {
		name     string
		u        launch.NodeUtilization
		mem, cpu float32
	}{
		{"the recorded node", launch.NodeUtilization{Node: recorded, Physical: launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}}, 15.043771, 6.6644454},
		{"a node that measured nothing", launch.NodeUtilization{}, 0, 0},
		{"an older knit-node's figures, without the machine", launch.NodeUtilization{Node: recorded}, 0, 0},
		{"the machine's memory unknown", launch.NodeUtilization{Node: recorded, Physical: launch.PhysicalResource{Vcores: 2}}, 0, 6.6644454},
		{"the machine's processors unknown", launch.NodeUtilization{Node: recorded, Physical: launch.PhysicalResource{MemoryMB: 24103}}, 15.043771, 0},
		{"an idle node", launch.NodeUtilization{Physical: launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}}, 0, 0},
		{"all memory in use and every processor busy",
			launch.NodeUtilization{Node: launch.ResourceUtilization{PmemMB: 24103, CPU: 2}, Physical: launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}}, 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if mem, cpu := physicalUtilization(tt.u); mem != tt.mem || cpu != tt.cpu {
				t.Errorf("memUtilization %v, cpuUtilization %v; want %v and %v", mem, cpu, tt.mem, tt.cpu)
			}
		})
	}
}

// TestRESTNodesShowMemAndCPUUtilizationAsARealRMDoes: /ws/v1/cluster/nodes
// and /ws/v1/cluster/nodes/{id} show a node's memUtilization and
// cpuUtilization as the recorded RM wrote them for the same measurement
// and machine, 0.0 for a node whose machine is unknown or that measured
// nothing, and the states filter is getClusterNodes'.
func TestRESTNodesShowMemAndCPUUtilizationAsARealRMDoes(t *testing.T) {
	b, err := os.ReadFile(recordings.Path(t, "hadoop-rest", "cluster_nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantMem, wantCPU := nodeFieldOf(t, b, "localhost:8141", "memUtilization"), nodeFieldOf(t, b, "localhost:8141", "cpuUtilization")
	var r struct {
		NodePhysicalMemoryMB int32
		NodeCPUUsage         float64
	}
	if err := json.Unmarshal(resourceUtilizationOf(t, b, "localhost:8141"), &r); err != nil {
		t.Fatal(err)
	}
	// The machine the recording was made on: 24103 MiB of physical memory
	// (SysInfoLinux's), 2 processors.
	machine := launch.PhysicalResource{MemoryMB: 24103, Vcores: 2}
	measured := launch.NodeUtilization{
		Node:     launch.ResourceUtilization{PmemMB: r.NodePhysicalMemoryMB, VmemMB: r.NodePhysicalMemoryMB, CPU: float32(r.NodeCPUUsage)},
		Physical: machine,
	}
	older := measured
	older.Physical = launch.PhysicalResource{}
	node := func(host string, state yarnpb.NodeStateProto, u launch.NodeUtilization) NodeInfo {
		return NodeInfo{Name: host, Host: host, NMPort: 8041, HTTPAddress: host + ":8042", Rack: "/default-rack", State: state,
			CapabilityMB: 8192, CapabilityVcores: 8, Utilization: u}
	}
	e := newEnv(t, envOptions{nodes: fixedNodes{
		node("measured", yarnpb.NodeStateProto_NS_RUNNING, measured),
		node("older", yarnpb.NodeStateProto_NS_RUNNING, older),
		node("silent", yarnpb.NodeStateProto_NS_RUNNING, launch.NodeUtilization{}),
		node("unhealthy", yarnpb.NodeStateProto_NS_UNHEALTHY, measured),
	}})
	srv := restServer(t, e)

	tests := []struct {
		name, path string
		// want is each node's memUtilization and cpuUtilization as
		// written; a node not in want must not be in the answer.
		want map[string][2]string
	}{
		{"all nodes", "/ws/v1/cluster/nodes", map[string][2]string{
			"measured:8041":  {string(wantMem), string(wantCPU)},
			"older:8041":     {"0.0", "0.0"},
			"silent:8041":    {"0.0", "0.0"},
			"unhealthy:8041": {string(wantMem), string(wantCPU)},
		}},
		{"running nodes", "/ws/v1/cluster/nodes?states=RUNNING", map[string][2]string{
			"measured:8041": {string(wantMem), string(wantCPU)},
			"older:8041":    {"0.0", "0.0"},
			"silent:8041":   {"0.0", "0.0"},
		}},
		{"unhealthy nodes", "/ws/v1/cluster/nodes?states=UNHEALTHY", map[string][2]string{
			"unhealthy:8041": {string(wantMem), string(wantCPU)},
		}},
		{"one node by id", "/ws/v1/cluster/nodes/measured:8041", map[string][2]string{
			"measured:8041": {string(wantMem), string(wantCPU)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got := doREST(t, http.MethodGet, srv.URL+tt.path, "")
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, got)
			}
			nodes := nodesOf(t, got)
			if len(nodes) != len(tt.want) {
				t.Errorf("%d nodes in %s, want %d", len(nodes), got, len(tt.want))
			}
			for id, w := range tt.want {
				n, ok := nodes[id]
				if !ok {
					t.Errorf("no node %s in %s", id, got)
					continue
				}
				if mem, cpu := string(n["memUtilization"]), string(n["cpuUtilization"]); mem != w[0] || cpu != w[1] {
					t.Errorf("node %s: memUtilization %s, cpuUtilization %s; want %s and %s", id, mem, cpu, w[0], w[1])
				}
			}
		})
	}
}

// nodesOf is the nodes of a /ws/v1/cluster/nodes answer, or the node of a
// /ws/v1/cluster/nodes/{id} one, by id, each its keys' raw values.
func nodesOf(t *testing.T, b []byte) map[string]map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		Nodes *struct {
			Node []map[string]json.RawMessage `json:"node"`
		} `json:"nodes"`
		Node map[string]json.RawMessage `json:"node"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	list := []map[string]json.RawMessage{doc.Node}
	if doc.Nodes != nil {
		list = doc.Nodes.Node
	}
	out := map[string]map[string]json.RawMessage{}
	for _, n := range list {
		var id string
		if err := json.Unmarshal(n["id"], &id); err != nil {
			t.Fatalf("node without an id in %s", b)
		}
		out[id] = n
	}
	return out
}

// nodeFieldOf is the raw value of key in node id's object of a
// /ws/v1/cluster/nodes answer.
func nodeFieldOf(t *testing.T, b []byte, id, key string) json.RawMessage {
	t.Helper()
	n, ok := nodesOf(t, b)[id]
	if !ok || n[key] == nil {
		t.Fatalf("no %s of node %s in %s", key, id, b)
	}
	return n[key]
}
