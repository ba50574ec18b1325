package localcluster

// RMPID is the process id of the knit-rm the cluster started, for
// benchmarks that read its memory; false when none runs.
func (c *Cluster) RMPID() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rms) == 0 {
		return 0, false
	}
	pid := c.rms[0].sp.PID()
	return pid, pid != 0
}

// RMPIDs are the process ids of the knit-rm replicas by RM id (rm1, rm2,
// …; "rm1" alone without HA), 0 for one not running, for tests that kill
// one.
func (c *Cluster) RMPIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for i, p := range c.rms {
		out[rmID(i)] = p.sp.PID()
	}
	return out
}
