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
