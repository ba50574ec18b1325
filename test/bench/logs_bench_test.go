package bench

// BenchmarkLogAggregationVersusCopy: an application's logs, 1 GiB over 100
// containers, aggregated by knit-node's aggregator (TFile format, streamed
// into the store, the node's copy removed) against a plain copy of the
// same amount of log files to the same store (the local store's atomic
// put, one file each), in alternating order over three rounds of the same
// run. Reports both throughputs and aggregate/copy (goal ≥ 0.8), and the
// peak heap in use while aggregating 1 GiB over the peak while
// aggregating 64 MiB (1 is flat: memory does not follow log size).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

const logBenchContainers = 100

// logBench is a node's log dir and a remote store folder.
type logBench struct {
	dirs   logs.Dirs
	remote string
	agg    *logs.Aggregator
	chunk  []byte
}

func newLogBench(b *testing.B) *logBench {
	lb := &logBench{dirs: logs.Dirs{b.TempDir()}, remote: b.TempDir(), chunk: make([]byte, 1<<20)}
	for i := range lb.chunk {
		lb.chunk[i] = byte('a' + i%26)
	}
	a, err := logs.NewAggregator(logs.AggregatorConfig{Dirs: lb.dirs, NodeID: "n:1", Format: aggregated.FormatTFile,
		Layout: aggregated.Layout{Root: filepath.Join(lb.remote, "agg"), Suffix: "logs-tfile"}, Store: logs.LocalStore{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	lb.agg = a
	return lb
}

// layOut writes total bytes of logs of app over the containers and returns
// their paths.
func (lb *logBench) layOut(b *testing.B, app string, total int64) []string {
	per := total / logBenchContainers
	var paths []string
	for i := 1; i <= logBenchContainers; i++ {
		dir := filepath.Join(lb.dirs[0], app, fmt.Sprintf("container_1_%s_01_%06d", app[len(app)-4:], i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, "syslog")
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		for n := int64(0); n < per; n += int64(len(lb.chunk)) {
			if _, err := f.Write(lb.chunk[:min(int64(len(lb.chunk)), per-n)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	if err := lb.dirs.SetRecord(app, logs.AppRecord{Owner: "u"}); err != nil {
		b.Fatal(err)
	}
	return paths
}

// copyAll is the baseline: each file put into the store as it is.
func (lb *logBench) copyAll(b *testing.B, round int, paths []string) time.Duration {
	syscall.Sync()
	start := time.Now()
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		if err := (logs.LocalStore{}).Put(context.Background(), filepath.Join(lb.remote, "copy", strconv.Itoa(round), strconv.Itoa(i)), f, st.Size()); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	return time.Since(start)
}

// aggregate times the aggregation of app and samples the heap in use
// meanwhile; it returns the time and the peak.
func (lb *logBench) aggregate(b *testing.B, app string) (time.Duration, uint64) {
	syscall.Sync()
	runtime.GC()
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	start := time.Now()
	err := lb.agg.Aggregate(context.Background(), app)
	d := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return d, peak
}

func BenchmarkLogAggregationVersusCopy(b *testing.B) {
	const total = 1 << 30
	lb := newLogBench(b)
	for range b.N {
		_, smallPeak := lb.aggregate(b, appOf(lb, b, 9000, 64<<20))
		var copyTime, aggTime time.Duration
		var peak uint64
		for round := range 3 {
			paths := lb.layOut(b, "application_1_9999", total)
			app := appOf(lb, b, round+1, total)
			var d time.Duration
			var p uint64
			if round%2 == 0 {
				copyTime += lb.copyAll(b, round, paths)
				d, p = lb.aggregate(b, app)
			} else {
				d, p = lb.aggregate(b, app)
				copyTime += lb.copyAll(b, round, paths)
			}
			aggTime += d
			peak = max(peak, p)
			if err := lb.dirs.RemoveApplication("application_1_9999"); err != nil {
				b.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(lb.remote, "copy")); err != nil {
				b.Fatal(err)
			}
		}
		mib := 3 * float64(total) / (1 << 20)
		b.ReportMetric(mib/aggTime.Seconds(), "aggregate_MiB/s")
		b.ReportMetric(mib/copyTime.Seconds(), "copy_MiB/s")
		b.ReportMetric(copyTime.Seconds()/aggTime.Seconds(), "aggregate/copy")
		b.ReportMetric(float64(peak)/(1<<20), "heap_peak_MiB")
		b.ReportMetric(float64(peak)/float64(smallPeak), "heap_peak_1GiB/64MiB")
	}
}

// appOf lays out total bytes of logs of application n and returns its id.
func appOf(lb *logBench, b *testing.B, n int, total int64) string {
	app := fmt.Sprintf("application_1_%04d", n)
	lb.layOut(b, app, total)
	return app
}
