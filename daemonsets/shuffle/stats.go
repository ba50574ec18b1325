package shuffle

// Stats are the service's figures at one moment, for the node's /metrics.
type Stats struct {
	// Connections are the reducers' connections open now.
	Connections int64
	// OpenFiles are the map output files open now; MaxOpenFiles is their
	// peak since the service started.
	OpenFiles, MaxOpenFiles int64
	// Jobs are the jobs whose shuffle tokens the service holds.
	Jobs int
}

// Stats reads the service's figures; safe while it serves.
func (s *Service) Stats() Stats {
	s.mu.RLock()
	jobs := len(s.jobs)
	s.mu.RUnlock()
	return Stats{
		Connections: s.active.Load(), OpenFiles: s.openFiles.Load(), MaxOpenFiles: s.maxOpenFiles.Load(), Jobs: jobs,
	}
}
