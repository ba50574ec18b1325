package bench

// BenchmarkSparkShuffleVersusFileServer: 100 concurrent clients fetch
// blocks (FetchShuffleBlocks of 16 blocks of 64 KiB, 1 MiB a fetch, each
// client on its own kept connection, as executors fetch) from Spark's
// shuffle service (daemonsets/sparkshuffle) and, in alternating rounds of
// the same run, the same bytes from the same files through a Go net/http
// server using the same sendfile path (io.Copy of an io.LimitedReader over
// the *os.File into the ResponseWriter, index offsets cached). Reports both
// throughputs and their ratio (goal ≥ 0.9).

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/protocols/yarnid"
)

const (
	sparkBenchClients  = 100
	sparkBenchMaps     = 16
	sparkBenchReduces  = 64
	sparkBenchPart     = 64 << 10
	sparkBenchFetches  = 8 // per client per round
	sparkBenchSubDirs  = 64
	sparkBenchManager  = "org.apache.spark.shuffle.sort.SortShuffleManager"
	sparkBenchUser     = "bench"
	sparkBenchExecutor = "1"
)

var sparkBenchApp = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 77}

// sparkLayout writes the map outputs and returns the node's local dirs and
// the executor's block manager dirs.
func sparkLayout(b *testing.B) (nodeDirs, execDirs []string) {
	root := b.TempDir()
	for i := range 2 {
		nd := filepath.Join(root, fmt.Sprintf("local%d", i))
		nodeDirs = append(nodeDirs, nd)
		execDirs = append(execDirs, filepath.Join(nd, "usercache", sparkBenchUser, "appcache", sparkBenchApp.String(), fmt.Sprintf("blockmgr-%d", i)))
	}
	part := make([]byte, sparkBenchPart)
	for i := range part {
		part[i] = byte(i * 7)
	}
	for m := range sparkBenchMaps {
		parts := make([][]byte, sparkBenchReduces)
		for r := range parts {
			parts[r] = part
		}
		if err := sparkshuffle.WriteMapOutput(execDirs, sparkBenchSubDirs, 0, int64(m), parts); err != nil {
			b.Fatal(err)
		}
	}
	return nodeDirs, execDirs
}

func startSparkShuffle(b *testing.B, nodeDirs, execDirs []string) string {
	svc, err := sparkshuffle.New(sparkshuffle.Config{
		Address: "127.0.0.1:0", LocalDirs: nodeDirs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); svc.Serve(ctx) }()
	b.Cleanup(func() { cancel(); wg.Wait() })
	if err := svc.InitializeApplication(ctx, auxservice.Application{User: sparkBenchUser, ID: sparkBenchApp}); err != nil {
		b.Fatal(err)
	}
	c, err := sparkshuffle.Dial(ctx, svc.Addr().String(), sparkshuffle.ClientConfig{AppID: sparkBenchApp.String()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.RegisterExecutor(&sparkshuffle.RegisterExecutor{AppID: sparkBenchApp.String(), ExecID: sparkBenchExecutor,
		Info: sparkshuffle.ExecutorShuffleInfo{LocalDirs: execDirs, SubDirsPerLocalDir: sparkBenchSubDirs, ShuffleManager: sparkBenchManager}}); err != nil {
		b.Fatal(err)
	}
	return svc.Addr().String()
}

// startSparkFileServer serves GET /?reduce=r: the partition r of every map,
// concatenated, from the same files, index offsets read once.
func startSparkFileServer(b *testing.B, execDirs []string) string {
	type mapFile struct {
		data string
		offs []int64
	}
	var maps []mapFile
	for m := range sparkBenchMaps {
		idx, err := os.ReadFile(sparkshuffle.FilePath(execDirs, sparkBenchSubDirs, fmt.Sprintf("shuffle_0_%d_0.index", m)))
		if err != nil {
			b.Fatal(err)
		}
		mf := mapFile{data: sparkshuffle.FilePath(execDirs, sparkBenchSubDirs, fmt.Sprintf("shuffle_0_%d_0.data", m))}
		for i := 0; i+8 <= len(idx); i += 8 {
			mf.offs = append(mf.offs, int64(binary.BigEndian.Uint64(idx[i:])))
		}
		maps = append(maps, mf)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		red, err := strconv.Atoi(r.URL.Query().Get("reduce"))
		if err != nil || red < 0 || red >= sparkBenchReduces {
			http.Error(w, "bad reduce", http.StatusBadRequest)
			return
		}
		var total int64
		for _, m := range maps {
			total += m.offs[red+1] - m.offs[red]
		}
		w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
		for _, m := range maps {
			f, err := os.Open(m.data)
			if err != nil {
				panic(err)
			}
			f.Seek(m.offs[red], io.SeekStart)
			io.Copy(w, &io.LimitedReader{R: f, N: m.offs[red+1] - m.offs[red]})
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

func BenchmarkSparkShuffleVersusFileServer(b *testing.B) {
	if err := ensureFDs(4 * sparkBenchClients); err != nil {
		b.Skip(err)
	}
	nodeDirs, execDirs := sparkLayout(b)
	sparkAddr := startSparkShuffle(b, nodeDirs, execDirs)
	httpAddr := startSparkFileServer(b, execDirs)
	app := sparkBenchApp.String()
	ctx := context.Background()

	// Kept connections: executors keep theirs.
	clients := make([]*sparkshuffle.Client, sparkBenchClients)
	for i := range clients {
		c, err := sparkshuffle.Dial(ctx, sparkAddr, sparkshuffle.ClientConfig{AppID: app})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sparkBenchClients, MaxConnsPerHost: sparkBenchClients}}
	defer httpClient.CloseIdleConnections()
	mapIDs := make([]int64, sparkBenchMaps)
	for i := range mapIDs {
		mapIDs[i] = int64(i)
	}
	want := int64(sparkBenchMaps * sparkBenchPart)

	round := func(fetch func(client, n int) (int64, error)) (float64, error) {
		var bytes atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		for c := range sparkBenchClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range sparkBenchFetches {
					got, err := fetch(c, n)
					if err == nil && got != want {
						err = fmt.Errorf("fetched %d bytes, want %d", got, want)
					}
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					bytes.Add(got)
				}
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return 0, err
		}
		return float64(bytes.Load()) / time.Since(start).Seconds() / (1 << 20), nil
	}
	spark := func(c, n int) (int64, error) {
		red := int32((c*sparkBenchFetches + n) % sparkBenchReduces)
		reduces := make([][]int32, sparkBenchMaps)
		for i := range reduces {
			reduces[i] = []int32{red}
		}
		var got int64
		err := clients[c].Fetch(&sparkshuffle.FetchShuffleBlocks{AppID: app, ExecID: sparkBenchExecutor, MapIDs: mapIDs, ReduceIDs: reduces},
			func(_ int, data []byte) error { got += int64(len(data)); return nil })
		return got, err
	}
	fileServer := func(c, n int) (int64, error) {
		red := (c*sparkBenchFetches + n) % sparkBenchReduces
		resp, err := httpClient.Get(fmt.Sprintf("http://%s/?reduce=%d", httpAddr, red))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return io.Copy(io.Discard, resp.Body)
	}
	var sparkMBs, httpMBs float64
	b.ResetTimer()
	for range b.N {
		s, err := round(spark)
		if err != nil {
			b.Fatal(err)
		}
		h, err := round(fileServer)
		if err != nil {
			b.Fatal(err)
		}
		sparkMBs += s
		httpMBs += h
	}
	b.StopTimer()
	b.ReportMetric(sparkMBs/float64(b.N), "spark-MiB/s")
	b.ReportMetric(httpMBs/float64(b.N), "fileserver-MiB/s")
	b.ReportMetric(sparkMBs/httpMBs, "ratio")
}
