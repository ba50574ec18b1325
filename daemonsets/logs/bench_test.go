package logs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

// TestAggregationThroughput compares aggregating an application's logs
// (TFile format, straight into the store, node copy removed) with a plain
// copy of the same amount of log files to the same store, in the same run,
// each phase twice in alternating order. It runs when KNIT_LOGS_BENCH_MB
// sets the total size (1024 for the goal of ≥ 0.8× a plain copy), spread
// over 100 containers:
//
//	KNIT_LOGS_BENCH_MB=1024 go test -run TestAggregationThroughput -v ./daemonsets/logs/
func TestAggregationThroughput(t *testing.T) {
	totalMB, _ := strconv.Atoi(os.Getenv("KNIT_LOGS_BENCH_MB"))
	if totalMB <= 0 {
		t.Skip("set KNIT_LOGS_BENCH_MB to measure")
	}
	const containers = 100
	per := int64(totalMB) << 20 / containers
	dirs := Dirs{t.TempDir()}
	remote := t.TempDir()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	layOut := func(app string) []string {
		var paths []string
		for i := 1; i <= containers; i++ {
			dir := filepath.Join(dirs[0], app, fmt.Sprintf("container_1_%s_01_%06d", app[len(app)-4:], i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "syslog")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			for n := int64(0); n < per; n += int64(len(chunk)) {
				if _, err := f.Write(chunk[:min(int64(len(chunk)), per-n)]); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			paths = append(paths, p)
		}
		if err := dirs.SetRecord(app, AppRecord{Owner: "u"}); err != nil {
			t.Fatal(err)
		}
		return paths
	}
	a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "n:1", Format: aggregated.FormatTFile,
		Layout: aggregated.Layout{Root: filepath.Join(remote, "agg"), Suffix: "logs-tfile"}, Store: LocalStore{}})
	if err != nil {
		t.Fatal(err)
	}
	copyAll := func(round int, paths []string) time.Duration {
		syscall.Sync()
		start := time.Now()
		for i, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := f.Stat()
			if err := (LocalStore{}).Put(context.Background(), filepath.Join(remote, "copy", strconv.Itoa(round), strconv.Itoa(i)), f, st.Size()); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		return time.Since(start)
	}
	aggregate := func(app string) time.Duration {
		syscall.Sync()
		start := time.Now()
		if err := a.Aggregate(context.Background(), app); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	var copyTime, aggTime time.Duration
	var heap uint64
	for round, app := range []string{"application_1_0001", "application_1_0002"} {
		paths := layOut("application_1_9999")
		layOut(app)
		var ms runtime.MemStats
		if round == 0 {
			copyTime += copyAll(round, paths)
			aggTime += aggregate(app)
		} else {
			aggTime += aggregate(app)
			copyTime += copyAll(round, paths)
		}
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		if err := dirs.RemoveApplication("application_1_9999"); err != nil {
			t.Fatal(err)
		}
	}
	mb := 2 * float64(int64(containers)*per) / (1 << 20)
	t.Logf("%d containers, %.0f MB per round, 2 rounds: copy %v (%.0f MB/s), aggregate %v (%.0f MB/s), ratio %.2f; heap in use at most %d MB",
		containers, mb/2, copyTime, mb/copyTime.Seconds(), aggTime, mb/aggTime.Seconds(), copyTime.Seconds()/aggTime.Seconds(), heap>>20)
}
