package sparkshuffle

// Stats are the service's figures at one moment, for the node's /metrics.
type Stats struct {
	// Connections are the executors' connections open now.
	Connections int64
	// Executors are the executors registered now; Applications, those the
	// node told the service of and has not stopped.
	Executors, Applications int
	// BlocksSent and BytesSent count the block bodies (chunks and streams)
	// sent whole since the service started, and their bytes.
	BlocksSent, BytesSent int64
	// ChunksInFlight are the block bodies being sent now.
	ChunksInFlight int64
	// AuthFailures count the connections refused at authentication (SASL or
	// the auth engine) since the service started.
	AuthFailures int64
}

// Stats reads the service's figures; safe while it serves.
func (s *Service) Stats() Stats {
	s.mu.RLock()
	execs, apps := len(s.execs), len(s.apps)
	s.mu.RUnlock()
	return Stats{
		Connections: s.conns.Load(), Executors: execs, Applications: apps,
		BlocksSent: s.blocksSent.Load(), BytesSent: s.bytesSent.Load(),
		ChunksInFlight: s.chunksInFlight.Load(), AuthFailures: s.authFailures.Load(),
	}
}
