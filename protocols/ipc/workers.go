package ipc

import "time"

// workerIdle is how long a call's goroutine waits for the next call of
// any connection before it ends: under load calls come microseconds
// apart, and an idle server soon has no goroutine left for its calls.
const workerIdle = 250 * time.Millisecond

// dispatch runs call on one of the server's goroutines: an idle one that
// ran an earlier call, or a new one. A goroutine started for each call
// begins with the smallest stack and grows it by copying, several times
// a call for a handler that calls on (a third of the Router's CPU per
// forwarded submission in profiles); a reused one has grown it once.
func (s *Server) dispatch(call func()) {
	select {
	case s.work <- call:
		return
	default:
	}
	s.workers.Add(1)
	go s.worker(call)
}

// worker runs call, then the calls dispatch hands it, until it has idled
// for workerIdle or the server closes. Shutdown waits for the workers.
func (s *Server) worker(call func()) {
	defer s.workers.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		call()
		idle.Reset(workerIdle)
		select {
		case call = <-s.work:
		case <-idle.C:
			return
		case <-s.done:
			return
		}
	}
}
