package bench

// Benchmarks of the MapReduce shuffle service (daemonsets/shuffle).
//
// BenchmarkShuffleVersusNetHTTP: 100 concurrent fetchers (keep-alive
// connections, a Hadoop-shaped request of 4 maps for one reduce, 1 MiB a
// fetch) against the shuffle service and against a Go net/http server that
// sends the same bytes (ShuffleHeaders and partitions) from the same files
// with the same sendfile path (io.Copy of an io.LimitedReader over the
// *os.File into the ResponseWriter), index records cached, in alternating
// rounds of the same run. Reports both throughputs and p99 fetch latencies
// and shuffle/net-http ratios.
//
// BenchmarkShuffleMemory10GB: the service serves 10 GiB of map output (640
// fetches of 16 MiB by 100 fetchers, over and over the same 256 MiB of
// files) while the heap in use and the resident set are sampled; it reports
// their peaks and how much the heap peak grew between the first GiB and the
// rest, which stays flat when memory does not follow bytes served, and the
// peak over the first GiB's peak (the same run's baseline; 1 is flat).

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/examples/mrjob/mapred"
	"github.com/knitdev/knit/protocols/yarnid"
)

const (
	shuffleBenchApp  = "application_1700000000000_0042"
	shuffleBenchJob  = "job_1700000000000_0042"
	shuffleBenchUser = "bench"
	shuffleFetchers  = 100
)

var shuffleBenchSecret = []byte("bench-shuffle-secret")

// shuffleLayout is a set of map outputs on disk.
type shuffleLayout struct {
	dir      string
	maps     int
	reduces  int
	partSize int
}

func shuffleAttempt(m int) string { return fmt.Sprintf("attempt_1700000000000_0042_m_%06d_0", m) }

// writeShuffleLayout writes maps map outputs of reduces partitions of
// partSize random bytes each, in the usercache layout.
func writeShuffleLayout(b *testing.B, maps, reduces, partSize int) shuffleLayout {
	b.Helper()
	l := shuffleLayout{dir: b.TempDir(), maps: maps, reduces: reduces, partSize: partSize}
	rng := rand.New(rand.NewChaCha8([32]byte{42}))
	part := make([]byte, partSize)
	for m := range maps {
		dir := filepath.Join(l.dir, "usercache", shuffleBenchUser, "appcache", shuffleBenchApp, "output", shuffleAttempt(m))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "file.out"))
		if err != nil {
			b.Fatal(err)
		}
		var index []mapred.IndexRecord
		for r := range reduces {
			for i := 0; i < len(part); i += 8 {
				binary.LittleEndian.PutUint64(part[i:], rng.Uint64())
			}
			if _, err := f.Write(part); err != nil {
				b.Fatal(err)
			}
			index = append(index, mapred.IndexRecord{StartOffset: int64(r * partSize), RawLength: int64(partSize), PartLength: int64(partSize)})
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "file.out.index"), mapred.MarshalIndex(index), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// startShuffle serves l with the shuffle service until the benchmark ends.
func startShuffle(b *testing.B, l shuffleLayout) (*shuffle.Service, string) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s, err := shuffle.New(shuffle.Config{
		Listener: ln, LocalDirs: []string{l.dir},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	app, err := yarnid.ParseApplicationID(shuffleBenchApp)
	if err != nil {
		b.Fatal(err)
	}
	data := mapred.ServiceData(shuffleBenchJob, shuffleBenchSecret)
	if err := s.InitializeApplication(context.Background(), auxservice.Application{User: shuffleBenchUser, ID: app, ServiceData: data}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("shuffle Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// startNetHTTPShuffle serves l with net/http: the same bytes, the same
// files, index records cached, bodies by io.Copy of a LimitedReader over
// the file (net/http's sendfile path).
func startNetHTTPShuffle(b *testing.B, l shuffleLayout) string {
	b.Helper()
	var indexes sync.Map // map id → []mapred.IndexRecord (file.out.index)
	base := filepath.Join(l.dir, "usercache", shuffleBenchUser, "appcache", shuffleBenchApp, "output")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reduce, err := strconv.Atoi(q.Get("reduce"))
		if err != nil {
			http.Error(w, "bad reduce", http.StatusBadRequest)
			return
		}
		type part struct {
			id            string
			start, length int64
			header        []byte
		}
		var parts []part
		var total int64
		for _, id := range strings.Split(q.Get("map"), ",") {
			ix, ok := indexes.Load(id)
			if !ok {
				raw, err := os.ReadFile(filepath.Join(base, filepath.Base(id), "file.out.index"))
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				recs, err := mapred.ParseIndex(raw)
				if err != nil || reduce < 0 || reduce >= len(recs) {
					http.Error(w, "bad index or reduce", http.StatusInternalServerError)
					return
				}
				ix, _ = indexes.LoadOrStore(id, recs)
			}
			rec := ix.([]mapred.IndexRecord)[reduce]
			p := part{id: id, start: rec.StartOffset, length: rec.PartLength}
			p.header = mapred.ShuffleHeader{MapID: id, CompressedLength: rec.PartLength, RawLength: rec.RawLength, ForReduce: int32(reduce)}.AppendTo(nil)
			total += int64(len(p.header)) + p.length
			parts = append(parts, p)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
		for _, p := range parts {
			f, err := os.Open(filepath.Join(base, filepath.Base(p.id), "file.out"))
			if err != nil {
				return
			}
			w.Write(p.header)
			if _, err := f.Seek(p.start, io.SeekStart); err == nil {
				io.Copy(w, io.LimitReader(f, p.length))
			}
			f.Close()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	b.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// shuffleClient fetches like a Fetcher with keep-alive: UrlHash, name and
// version headers, keepAlive=true.
type shuffleClient struct {
	http *http.Client
	addr string
	port int
}

func newShuffleClient(addr string) *shuffleClient {
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return &shuffleClient{
		http: &http.Client{Transport: &http.Transport{
			MaxIdleConns: shuffleFetchers, MaxIdleConnsPerHost: shuffleFetchers, MaxConnsPerHost: shuffleFetchers,
			DisableCompression: true, IdleConnTimeout: time.Minute,
		}},
		addr: addr, port: port,
	}
}

// fetch asks for reduce of maps and reads the whole body; it returns the
// bytes read.
func (c *shuffleClient) fetch(reduce int, maps []int, buf []byte) (int64, error) {
	ids := make([]string, len(maps))
	for i, m := range maps {
		ids[i] = shuffleAttempt(m)
	}
	uri := "/mapOutput?job=" + shuffleBenchJob + "&reduce=" + strconv.Itoa(reduce) + "&map=" + strings.Join(ids, ",") + "&keepAlive=true"
	req, err := http.NewRequest(http.MethodGet, "http://"+c.addr+uri, nil)
	if err != nil {
		return 0, err
	}
	req.Header[mapred.HeaderURLHash] = []string{mapred.Hash(shuffleBenchSecret, strconv.Itoa(c.port)+uri)}
	req.Header[mapred.HeaderName] = []string{mapred.ShuffleName}
	req.Header[mapred.HeaderVersion] = []string{mapred.ShuffleVersion}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK || n != resp.ContentLength {
		return n, fmt.Errorf("status %s, %d of %d bytes", resp.Status, n, resp.ContentLength)
	}
	return n, nil
}

// fetchRound runs total fetches over shuffleFetchers goroutines: fetch i
// asks for reduce i%reduces of 4 consecutive maps. It returns the bytes,
// wall time and each fetch's latency.
func fetchRound(c *shuffleClient, l shuffleLayout, total int, mapsPerFetch int) (int64, time.Duration, []time.Duration, error) {
	var next atomic.Int64
	var bytesRead atomic.Int64
	lat := make([]time.Duration, total)
	errs := make(chan error, shuffleFetchers)
	var wg sync.WaitGroup
	start := time.Now()
	for range shuffleFetchers {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				maps := make([]int, mapsPerFetch)
				for k := range maps {
					maps[k] = (i + k) % l.maps
				}
				t0 := time.Now()
				n, err := c.fetch(i%l.reduces, maps, buf)
				lat[i] = time.Since(t0)
				bytesRead.Add(n)
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	return bytesRead.Load(), wall, lat, <-errs
}

func BenchmarkShuffleVersusNetHTTP(b *testing.B) {
	if err := ensureFDs(4*shuffleFetchers + 256); err != nil {
		b.Skip(err)
	}
	l := writeShuffleLayout(b, 16, 8, 256<<10) // 32 MiB on disk
	_, shuffleAddr := startShuffle(b, l)
	httpAddr := startNetHTTPShuffle(b, l)
	sc, hc := newShuffleClient(shuffleAddr), newShuffleClient(httpAddr)
	defer sc.http.CloseIdleConnections()
	defer hc.http.CloseIdleConnections()
	const mapsPerFetch = 4
	// Warm both: page cache, index caches, connections.
	for _, c := range []*shuffleClient{sc, hc} {
		if _, _, _, err := fetchRound(c, l, 2*shuffleFetchers, mapsPerFetch); err != nil {
			b.Fatal(err)
		}
	}
	type side struct {
		bytes int64
		wall  time.Duration
		lat   []time.Duration
	}
	var ours, theirs side
	b.ResetTimer()
	// Alternating rounds of at most 200 fetches, so that both see the same
	// machine conditions.
	for done := 0; done < b.N; {
		n := min(200, b.N-done)
		for _, s := range []struct {
			c   *shuffleClient
			acc *side
		}{{sc, &ours}, {hc, &theirs}} {
			bytesRead, wall, lat, err := fetchRound(s.c, l, max(n, shuffleFetchers), mapsPerFetch)
			if err != nil {
				b.Fatal(err)
			}
			s.acc.bytes += bytesRead
			s.acc.wall += wall
			s.acc.lat = append(s.acc.lat, lat...)
		}
		done += n
	}
	b.StopTimer()
	mbps := func(s side) float64 { return float64(s.bytes) / (1 << 20) / s.wall.Seconds() }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	op, tp := quantile(ours.lat, 0.99), quantile(theirs.lat, 0.99)
	b.ReportMetric(mbps(ours), "shuffle_MiB/s")
	b.ReportMetric(mbps(theirs), "nethttp_MiB/s")
	b.ReportMetric(mbps(ours)/mbps(theirs), "throughput_ratio")
	b.ReportMetric(ms(op), "shuffle_p99_ms")
	b.ReportMetric(ms(tp), "nethttp_p99_ms")
	b.ReportMetric(ms(op)/ms(tp), "p99_ratio")
}

func BenchmarkShuffleMemory10GB(b *testing.B) {
	if err := ensureFDs(4*shuffleFetchers + 256); err != nil {
		b.Skip(err)
	}
	const total = 10 << 30
	l := writeShuffleLayout(b, 8, 8, 4<<20) // 256 MiB on disk
	_, addr := startShuffle(b, l)
	c := newShuffleClient(addr)
	defer c.http.CloseIdleConnections()
	const mapsPerFetch = 4 // 16 MiB a fetch
	fetches := total / (mapsPerFetch * l.partSize)
	for range b.N {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var served atomic.Int64
		var mu sync.Mutex
		var peakHeap, peakHeapFirstGB uint64
		var peakRSS int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				rss, _ := residentBytes(os.Getpid())
				mu.Lock()
				peakHeap = max(peakHeap, ms.HeapInuse)
				if served.Load() < 1<<30 {
					peakHeapFirstGB = max(peakHeapFirstGB, ms.HeapInuse)
				}
				peakRSS = max(peakRSS, rss)
				mu.Unlock()
			}
		}()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, shuffleFetchers)
		start := time.Now()
		for range shuffleFetchers {
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					i := int(next.Add(1) - 1)
					if i >= fetches {
						return
					}
					maps := make([]int, mapsPerFetch)
					for k := range maps {
						maps[k] = (i + k) % l.maps
					}
					n, err := c.fetch(i%l.reduces, maps, buf)
					served.Add(n)
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		wall := time.Since(start)
		close(stop)
		<-sampled
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		mib := func(v float64) float64 { return v / (1 << 20) }
		gib := float64(served.Load()) / (1 << 30)
		b.ReportMetric(gib, "GiB_served")
		b.ReportMetric(gib/wall.Seconds(), "GiB/s")
		b.ReportMetric(mib(float64(base)), "heap_before_MiB")
		b.ReportMetric(mib(float64(peakHeapFirstGB)), "peak_heap_first_GiB_MiB")
		b.ReportMetric(mib(float64(peakHeap)), "peak_heap_MiB")
		b.ReportMetric(mib(float64(peakRSS)), "peak_rss_MiB")
		b.ReportMetric(mib(float64(peakHeap)-float64(peakHeapFirstGB))/max(gib-1, 1), "heap_growth_MiB_per_GiB")
		b.ReportMetric(float64(peakHeap)/float64(max(peakHeapFirstGB, 1)), "peak_heap_ratio_vs_first_GiB")
	}
}
