package federation

import (
	"slices"
	"strings"
	"testing"
)

func TestMachineListPutsNodesAndRacksInSubClustersAsYARNsResolverReadsIt(t *testing.T) {
	m, err := ReadMachineList(strings.NewReader("n1, sc1, r1\n N2 ,sc2, R2\nn3,sc2,r1\na line that is no machine\nx,y\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []struct {
		name, want string
		ok         bool
	}{{"n1", "sc1", true}, {"N1", "sc1", true}, {"n2", "sc2", true}, {"n3", "sc2", true}, {"x", "", false}, {"a line that is no machine", "", false}}
	for _, tt := range nodes {
		if got, ok := m.Node(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("Node(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	racks := []struct {
		name string
		want []string
	}{{"r1", []string{"sc1", "sc2"}}, {"R2", []string{"sc2"}}, {"r9", nil}}
	for _, tt := range racks {
		if got := m.Rack(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("Rack(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	var none *MachineList
	if _, ok := none.Node("n1"); ok || none.Rack("r1") != nil {
		t.Error("a nil machine list knows a machine")
	}
}

// A machine list is a file an operator writes: whatever it holds, reading
// it fails only on a line too long to scan, the last line naming a node
// places it, and every line's sub-cluster is under its rack.
func FuzzReadMachineList(f *testing.F) {
	f.Add("n1, sc1, r1\nn2,sc2,r2\n")
	f.Add("a line that is no machine\n,,\n x , y , z \nx,w,z")
	f.Add("\xff\xfe, sc\x00, r\r\n")
	f.Fuzz(func(t *testing.T, list string) {
		m, err := ReadMachineList(strings.NewReader(list))
		if err != nil {
			if !strings.Contains(err.Error(), "too long") {
				t.Fatalf("ReadMachineList: %v", err)
			}
			return
		}
		placed := map[string]string{}
		for _, line := range strings.Split(list, "\n") {
			f := strings.Split(strings.TrimSuffix(line, "\r"), ",")
			if len(f) != 3 {
				continue
			}
			node, id, rack := strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), strings.TrimSpace(f[2])
			placed[strings.ToUpper(node)] = id
			if !slices.Contains(m.Rack(rack), id) {
				t.Fatalf("line %q: %q not under rack %q (%v)", line, id, rack, m.Rack(rack))
			}
		}
		for node, id := range placed {
			if got, ok := m.Node(node); !ok || got != id {
				t.Fatalf("node %q in %q, %v; want %q", node, got, ok, id)
			}
		}
	})
}
