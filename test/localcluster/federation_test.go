package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTheMachineListPutsEachNodeInItsPoolsSubCluster(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "subclusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Nodes: []Node{{Name: NodeName(0), Address: NodeAddress(0)}, {Name: NodeName(1), Address: NodeAddress(1)}, {Name: NodeName(2), Address: NodeAddress(2)}}}
	path, err := c.writeMachineList(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"127.0.1.1, sc1, /default-rack", "node-1, sc1, /default-rack",
		"127.0.1.2, sc2, /default-rack", "node-2, sc2, /default-rack",
		"127.0.1.3, sc1, /default-rack", "node-3, sc1, /default-rack",
	}
	if !slices.Equal(got, want) {
		t.Errorf("machine list:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
