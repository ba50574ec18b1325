package localcluster

// RMPID is the process id of the knit-rm the cluster started, for
// benchmarks that read its memory; false when none runs.
func (c *Cluster) RMPID() (int, bool) {
	if c.rm == nil {
		return 0, false
	}
	return c.rm.cmd.Process.Pid, true
}
