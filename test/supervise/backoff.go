package supervise

import "time"

// The kubelet's container restart back-off (pkg/kubelet: initial 10 s,
// maximum 5 min, forgotten after twice the maximum without a failure).
const (
	InitialBackoff = 10 * time.Second
	MaxBackoff     = 5 * time.Minute
	ResetAfter     = 10 * time.Minute
)

// Backoff is the delay before each restart of one process. The zero value
// is the kubelet's policy; it is not safe for concurrent use.
type Backoff struct {
	// Initial, Max and Reset replace InitialBackoff, MaxBackoff and
	// ResetAfter when set (tests use short ones).
	Initial, Max, Reset time.Duration

	// inARow counts the restarts since the last reset.
	inARow int
}

// Next is the delay before restarting a process whose last run lasted
// ranFor. A run of Reset or more forgets earlier restarts. The first
// restart since then is immediate, as the kubelet restarts a container
// at once the first time; the next waits Initial, and each one after
// twice the one before, at most Max.
func (b *Backoff) Next(ranFor time.Duration) time.Duration {
	initial, maxDelay, reset := b.Initial, b.Max, b.Reset
	if initial <= 0 {
		initial = InitialBackoff
	}
	if maxDelay <= 0 {
		maxDelay = MaxBackoff
	}
	if reset <= 0 {
		reset = ResetAfter
	}
	if ranFor >= reset {
		b.inARow = 0
	}
	n := b.inARow
	b.inARow++
	if n == 0 {
		return 0
	}
	d := initial
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}
