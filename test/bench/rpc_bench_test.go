package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// connLevels are the numbers of concurrent connections measured, each with
// one goroutine calling back to back.
var connLevels = []int{1, 10, 100, 1000}

// Rounds of BenchmarkRPCVersusGRPC: each engine runs for roundTime per round,
// after one warm-up run of warmTime.
const (
	roundTime = time.Second
	warmTime  = 300 * time.Millisecond
)

// startFixture starts e for w with conns connections, first making room for
// both ends of every connection in the file descriptor limit.
func startFixture(b *testing.B, e engine, w workload, conns int) *fixture {
	b.Helper()
	if err := ensureFDs(uint64(4*conns + 256)); err != nil {
		b.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	memBefore, gBefore := memInUse(), runtime.NumGoroutine()
	fx, err := e.start(ctx, w, conns)
	if err != nil {
		b.Fatalf("start %s with %d connections: %v", e.name, conns, err)
	}
	fx.memPerConn = float64(int64(memInUse())-int64(memBefore)) / float64(conns)
	fx.goroutinesPerConn = float64(runtime.NumGoroutine()-gBefore) / float64(conns)
	return fx
}

// memInUse is the live heap and goroutine stack memory after a collection.
func memInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func closeFixture(b *testing.B, fx *fixture) {
	if fx == nil {
		return
	}
	if err := fx.close(); err != nil {
		b.Errorf("close: %v", err)
	}
}

// BenchmarkRPC measures each engine alone: b.N calls of getNewApplication
// spread over the connections. It reports calls/s and the p50 and p99
// latency of a call as its client sees it; ns/op is wall time per call
// (1/throughput) and allocs/op counts client and server together, as do
// KiB/conn (heap and stacks an idle connection holds once set up, measured
// on the first run) and goroutines/conn.
func BenchmarkRPC(b *testing.B) {
	benchmarkEngines(b, getNewApplication)
}

// BenchmarkRPCReport is BenchmarkRPC with a realistic getApplicationReport
// answer (about 600 bytes) instead of the small call.
func BenchmarkRPCReport(b *testing.B) {
	benchmarkEngines(b, getApplicationReport)
}

func benchmarkEngines(b *testing.B, w workload) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			for _, conns := range connLevels {
				// The sub-benchmark runs several times as b.N grows; the
				// connections are made once, on its first run.
				var fx *fixture
				b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
					if fx == nil {
						fx = startFixture(b, e, w, conns)
					}
					b.ReportAllocs()
					runtime.GC()
					res, err := drive(fx, int64(b.N), 0, b)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(res.callsPerSec(), "calls/s")
					b.ReportMetric(micros(res.quantile(0.50)), "p50-µs")
					b.ReportMetric(micros(res.quantile(0.99)), "p99-µs")
					b.ReportMetric(fx.memPerConn/1024, "KiB/conn")
					b.ReportMetric(fx.goroutinesPerConn, "goroutines/conn")
				})
				closeFixture(b, fx)
			}
		})
	}
}

// BenchmarkRPCVersusGRPC runs both engines with the same connections in the
// same run: both are started, then each round runs one engine for roundTime
// and the other for as long, alternating which goes first. It reports each
// engine's calls/s, p50 and p99 over all rounds and ratio-vs-grpc, our
// throughput over grpc-go's (the target is >= 0.8 at 1,000
// connections), then prints the table to stdout. An iteration is one round, so ns/op
// means nothing here.
func BenchmarkRPCVersusGRPC(b *testing.B) {
	w := getNewApplication
	var rows []versusRow
	for _, conns := range connLevels {
		var ours, grpcs *fixture
		var row versusRow
		ok := b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			if ours == nil {
				ours = startFixture(b, engines[0], w, conns)
				grpcs = startFixture(b, engines[1], w, conns)
			}
			fxs := [2]*fixture{ours, grpcs}
			var res [2]load
			for _, fx := range fxs {
				runtime.GC()
				if _, err := drive(fx, 0, warmTime, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				for k := range 2 {
					e := (i + k) % 2 // round i starts with engine i%2
					runtime.GC()
					r, err := drive(fxs[e], 0, roundTime, nil)
					if err != nil {
						b.Fatalf("%s: %v", engines[e].name, err)
					}
					res[e] = res[e].add(r)
				}
			}
			row = versusRow{conns: conns, ours: res[0], grpc: res[1]}
			b.ReportMetric(res[0].callsPerSec(), "ours-calls/s")
			b.ReportMetric(res[1].callsPerSec(), "grpc-calls/s")
			b.ReportMetric(row.ratio(), "ratio-vs-grpc")
			b.ReportMetric(micros(res[0].quantile(0.50)), "ours-p50-µs")
			b.ReportMetric(micros(res[0].quantile(0.99)), "ours-p99-µs")
			b.ReportMetric(micros(res[1].quantile(0.50)), "grpc-p50-µs")
			b.ReportMetric(micros(res[1].quantile(0.99)), "grpc-p99-µs")
		})
		closeFixture(b, grpcs)
		closeFixture(b, ours)
		if ok && row.conns != 0 {
			rows = append(rows, row)
		}
	}
	// A parent benchmark's b.Log is shown only under -v; the table goes to
	// stdout so that `make bench` always shows it.
	fmt.Print(versusTable(w, rows))
}

type versusRow struct {
	conns      int
	ours, grpc load
}

func (r versusRow) ratio() float64 {
	if g := r.grpc.callsPerSec(); g > 0 {
		return r.ours.callsPerSec() / g
	}
	return 0
}

func versusTable(w workload, rows []versusRow) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s over loopback, GOMAXPROCS=%d, hadoop-ipc vs grpc-go in alternating %v rounds\n",
		w.name, runtime.GOMAXPROCS(0), roundTime)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conns\tours calls/s\tp50 µs\tp99 µs\tgrpc calls/s\tp50 µs\tp99 µs\tours/grpc\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.1f\t%.1f\t%.2f\t\n", r.conns,
			r.ours.callsPerSec(), micros(r.ours.quantile(0.50)), micros(r.ours.quantile(0.99)),
			r.grpc.callsPerSec(), micros(r.grpc.quantile(0.50)), micros(r.grpc.quantile(0.99)),
			r.ratio())
	}
	_ = tw.Flush()
	return sb.String()
}
