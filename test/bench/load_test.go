package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// load is the outcome of one run of drive.
type load struct {
	calls   int64
	elapsed time.Duration
	lat     []time.Duration // every call's latency, sorted
}

// add merges another run of the same engine into l.
func (l load) add(o load) load {
	lat := slices.Concat(l.lat, o.lat)
	slices.Sort(lat)
	return load{calls: l.calls + o.calls, elapsed: l.elapsed + o.elapsed, lat: lat}
}

func (l load) callsPerSec() float64 {
	if l.elapsed <= 0 {
		return 0
	}
	return float64(l.calls) / l.elapsed.Seconds()
}

// quantile is the q-th quantile of the call latencies (nearest rank).
func (l load) quantile(q float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(l.lat)) + 0.5)
	return l.lat[min(max(i-1, 0), len(l.lat)-1)]
}

// benchTimer is the part of *testing.B that drive uses.
type benchTimer interface {
	ResetTimer()
	StopTimer()
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// drive runs one goroutine per connection of fx, each making calls back to
// back, until total calls have been made (total > 0) or for d (total == 0).
// If timer is not nil, its timer is reset once every goroutine exists, just
// before they are let go, and stopped once the last call has returned. The
// first error ends the run.
func drive(fx *fixture, total int64, d time.Duration, timer benchTimer) (load, error) {
	var (
		next    atomic.Int64
		stop    atomic.Bool
		errOnce sync.Once
		runErr  error
		wg      sync.WaitGroup
		gate    = make(chan struct{})
		lats    = make([][]time.Duration, len(fx.calls))
	)
	perConn := 1024
	if total > 0 {
		perConn = int(total/int64(len(fx.calls))) + 1
	}
	ctx := context.Background()
	for i, call := range fx.calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, perConn)
			<-gate
			for !stop.Load() && (total == 0 || next.Add(1) <= total) {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					errOnce.Do(func() { runErr = fmt.Errorf("connection %d: %w", i, err) })
					stop.Store(true)
					break
				}
				lat = append(lat, time.Since(t0))
			}
			lats[i] = lat
		}()
	}
	if timer != nil {
		timer.ResetTimer()
	}
	t0 := time.Now()
	if total == 0 {
		t := time.AfterFunc(d, func() { stop.Store(true) })
		defer t.Stop()
	}
	close(gate)
	wg.Wait()
	elapsed := time.Since(t0)
	if timer != nil {
		timer.StopTimer()
	}

	all := slices.Concat(lats...)
	slices.Sort(all)
	return load{calls: int64(len(all)), elapsed: elapsed, lat: all}, runErr
}
