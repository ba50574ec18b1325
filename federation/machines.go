package federation

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/knitdev/knit/hadoopconf"
)

// maxMachineListBytes bounds the machine list read.
const maxMachineListBytes = 64 << 20

// MachineList maps nodes and racks to sub-clusters, as YARN's
// DefaultSubClusterResolverImpl reads yarn.federation.machine-list: the
// Router's LocalityRouterPolicy and the AMRMProxy's locality policy both
// place by it. A nil MachineList knows no node and no rack.
type MachineList struct {
	nodes map[string]string
	racks map[string][]string
}

// ReadMachineList reads a machine list: "node, sub-cluster, rack" a line,
// names compared without case; other lines are skipped, as YARN skips
// them.
func ReadMachineList(r io.Reader) (*MachineList, error) {
	m := &MachineList{nodes: map[string]string{}, racks: map[string][]string{}}
	sc := bufio.NewScanner(io.LimitReader(r, maxMachineListBytes))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 3 {
			continue
		}
		node, id, rack := strings.ToUpper(strings.TrimSpace(f[0])), strings.TrimSpace(f[1]), strings.ToUpper(strings.TrimSpace(f[2]))
		m.nodes[node] = id
		if !slices.Contains(m.racks[rack], id) {
			m.racks[rack] = append(m.racks[rack], id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("machine list: %w", err)
	}
	return m, nil
}

// LoadMachineList reads the machine list at path
// (Settings.MachineList); nil when path is empty.
func LoadMachineList(path string) (*MachineList, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hadoopconf.KeyFederationMachineList, err)
	}
	defer f.Close()
	m, err := ReadMachineList(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hadoopconf.KeyFederationMachineList, err)
	}
	return m, nil
}

// Node is the sub-cluster that holds the node (SubClusterResolver's
// getSubClusterForNode).
func (m *MachineList) Node(name string) (string, bool) {
	if m == nil {
		return "", false
	}
	id, ok := m.nodes[strings.ToUpper(name)]
	return id, ok
}

// Rack is the sub-clusters that hold nodes of the rack
// (getSubClustersForRack); none when the list does not name it.
func (m *MachineList) Rack(name string) []string {
	if m == nil {
		return nil
	}
	return m.racks[strings.ToUpper(name)]
}
