package localcluster

// RMPID is the process id of the knit-rm the cluster started, for
// benchmarks that read its memory; false when none runs.
func (c *Cluster) RMPID() (int, bool) {
	c.mu.Lock()
	p := c.rm
	c.mu.Unlock()
	if p == nil {
		return 0, false
	}
	pid := p.sp.PID()
	return pid, pid != 0
}
