package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/knitdev/knit/test/supervise"
)

// componentsPath is where a cluster keeps its processes' status, rewritten
// on every start and end of one, for `knit local status`.
func componentsPath(dir string) string { return filepath.Join(dir, "components.json") }

// Components reports every process the cluster supervises: the control
// plane's, knit-rm's, each knit-node's, and knit-router's and knit-gpg's, with their restarts.
func (c *Cluster) Components() []supervise.Status {
	out := c.ControlPlane.Components()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.rms {
		out = append(out, p.sp.Status())
	}
	for _, p := range c.nodeServices {
		out = append(out, p.sp.Status())
	}
	for _, p := range c.federation {
		out = append(out, p.sp.Status())
	}
	return out
}

// Component is the status of the named process ("kube-apiserver",
// "knit-rm", "knit-node-node-1", …); false when the cluster runs none.
func (c *Cluster) Component(name string) (supervise.Status, bool) {
	for _, st := range c.Components() {
		if st.Name == name {
			return st, true
		}
	}
	return supervise.Status{}, false
}

// componentsChanged rewrites componentsPath; a failure is logged, since the
// file only informs `knit local status`.
func (c *Cluster) componentsChanged() {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	data, err := json.MarshalIndent(c.Components(), "", "  ")
	if err == nil {
		err = renameio.WriteFile(componentsPath(c.ControlPlane.Dir), data, 0o644)
	}
	if err != nil {
		c.log.Warn("components status not written", "err", err)
	}
}

// readComponents reads what componentsPath holds; none when it is missing.
func readComponents(dir string) ([]supervise.Status, error) {
	data, err := os.ReadFile(componentsPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("localcluster: components: %w", err)
	}
	var out []supervise.Status
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("localcluster: components %s: %w", componentsPath(dir), err)
	}
	return out, nil
}
