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
