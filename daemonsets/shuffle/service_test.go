package shuffle

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/test/eventually"
)

const (
	testApp  = "application_1700000000000_0007"
	testJob  = "job_1700000000000_0007"
	testUser = "alice"
)

var testSecret = []byte("0123456789abcdef")

// makeMapOutput builds a file.out of the given partitions and its
// file.out.index (raw length = part length + 1, to tell them apart).
func makeMapOutput(parts ...[]byte) (data, index []byte) {
	for _, p := range parts {
		index = binary.BigEndian.AppendUint64(index, uint64(len(data)))
		index = binary.BigEndian.AppendUint64(index, uint64(len(p)+1))
		index = binary.BigEndian.AppendUint64(index, uint64(len(p)))
		data = append(data, p...)
	}
	return data, binary.BigEndian.AppendUint64(index, uint64(crc32.ChecksumIEEE(index)))
}

func attempt(n int) string { return "attempt_1700000000000_0007_m_" + pad6(n) + "_0" }

func pad6(n int) string {
	s := strconv.Itoa(n)
	return strings.Repeat("0", 6-len(s)) + s
}

// testService serves maps attempt(0..maps-1), each with reduces
// partitions of "m<map>r<reduce>" repeated size times, for testUser.
func testService(t *testing.T, cfg Config, maps, reduces, size int) *Service {
	t.Helper()
	dir := t.TempDir()
	for m := range maps {
		var parts [][]byte
		for r := range reduces {
			parts = append(parts, bytes.Repeat([]byte("m"+strconv.Itoa(m)+"r"+strconv.Itoa(r)), size))
		}
		data, index := makeMapOutput(parts...)
		placeMapOutput(t, dir, testUser, testApp, attempt(m), data, index)
	}
	cfg.LocalDirs = append(cfg.LocalDirs, dir)
	s := startService(t, cfg)
	register(t, s, testApp, testUser, testSecret)
	return s
}

func mapURI(reduce int, keepAlive bool, maps ...string) string {
	u := "/mapOutput?job=" + testJob + "&reduce=" + strconv.Itoa(reduce) + "&map=" + strings.Join(maps, ",")
	if keepAlive {
		u += "&keepAlive=true"
	}
	return u
}

// wantBody is the answer body for reduce of maps built by testService.
func wantBody(reduce, size int, maps ...int) []byte {
	var b []byte
	for _, m := range maps {
		part := bytes.Repeat([]byte("m"+strconv.Itoa(m)+"r"+strconv.Itoa(reduce)), size)
		b = appendShuffleHeader(b, attempt(m), int64(len(part)), int64(len(part)+1), int32(reduce))
		b = append(b, part...)
	}
	return b
}

func port(s *Service) int { return s.Addr().(*net.TCPAddr).Port }

func statusOf(answer []byte) string {
	line, _, _ := bytes.Cut(answer, []byte("\r\n"))
	return string(line)
}

func bodyOf(answer []byte) []byte {
	_, body, _ := bytes.Cut(answer, []byte("\r\n\r\n"))
	return body
}

func TestServedBodiesAreHeadersAndPartitionsInRequestOrder(t *testing.T) {
	s := testService(t, Config{}, 3, 4, 1000)
	for _, tt := range []struct {
		name   string
		reduce int
		maps   []int
	}{
		{"one map", 0, []int{1}},
		{"maps in the request's order", 3, []int{2, 0, 1}},
		{"a map asked twice", 2, []int{1, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, m := range tt.maps {
				ids = append(ids, attempt(m))
			}
			want := wantBody(tt.reduce, 1000, tt.maps...)
			got, closed := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(tt.reduce, false, ids...), testSecret, port(s)), 0)
			if statusOf(got) != "HTTP/1.1 200 OK" || !bytes.Equal(bodyOf(got), want) {
				t.Fatalf("got %q + %d body bytes, want 200 and %d bytes", statusOf(got), len(bodyOf(got)), len(want))
			}
			if !bytes.Contains(got, []byte("\r\ncontent-length: "+strconv.Itoa(len(want))+"\r\n")) || !closed {
				t.Errorf("want content-length %d and a closed connection, got closed=%v head %q", len(want), closed, got[:200])
			}
		})
	}
}

func TestBadRequestsGetShuffleHandlersAnswers(t *testing.T) {
	s := testService(t, Config{}, 2, 2, 10)
	p := port(s)
	good := mapURI(0, false, attempt(0))
	tests := []struct {
		name   string
		req    []byte
		status string
		body   string
	}{
		{"reduce range is not a reduce", fetchRequest("/mapOutput?job="+testJob+"&reduce=0-1&map="+attempt(0), testSecret, p),
			"HTTP/1.1 400 Bad Request", msgBadReduce},
		{"two reduce parameters", fetchRequest("/mapOutput?job="+testJob+"&reduce=0&reduce=1&map="+attempt(0), testSecret, p),
			"HTTP/1.1 400 Bad Request", msgTooMany},
		{"no job parameter", fetchRequest("/mapOutput?reduce=0&map="+attempt(0), testSecret, p),
			"HTTP/1.1 400 Bad Request", msgRequired},
		{"header check comes before the parameters", []byte("GET /mapOutput HTTP/1.1\r\nname: mapreduce\r\n\r\n"),
			"HTTP/1.1 400 Bad Request", msgIncompatible},
		{"parameters come before the token", fetchRequest("/mapOutput?job=job_1_0001&map=x", nil, p),
			"HTTP/1.1 400 Bad Request", msgRequired},
		{"the token comes before the hash", fetchRequest("/mapOutput?job=job_1_0001&reduce=0&map=x", nil, p),
			"HTTP/1.1 401 Unauthorized", "Can't find job token for job job_1_0001 !!"},
		{"hash for another port", fetchRequest(good, testSecret, p+1),
			"HTTP/1.1 401 Unauthorized", msgHashFailed},
		{"hash under another secret", fetchRequest(good, []byte("other"), p),
			"HTTP/1.1 401 Unauthorized", msgHashFailed},
		{"negative reduce", fetchRequest(mapURI(-1, false, attempt(0)), testSecret, p),
			"HTTP/1.1 500 Internal Server Error", "Invalid request  Map Id = " + attempt(0) + " Reducer = -1 Index Info Length = 2"},
		{"bad percent escape", fetchRequest(good+"&x=%zz", testSecret, p),
			"HTTP/1.1 500 Internal Server Error", ""},
		{"lowercase method", bytes.Replace(fetchRequest(good, testSecret, p), []byte("GET"), []byte("get"), 1),
			"HTTP/1.1 405 Method Not Allowed", ""},
		{"not HTTP", []byte("HELLO\r\n\r\n"), "HTTP/1.1 400 Bad Request", ""},
		{"chunked body", fetchRequest(good, testSecret, p, "Transfer-Encoding: chunked"), "HTTP/1.1 400 Bad Request", ""},
		{"body beyond 64 KiB", fetchRequest(good, testSecret, p, "Content-Length: 70000"),
			"HTTP/1.1 413 Request Entity Too Large", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, closed := exchange(t, s.Addr().String(), nil, tt.req, 0)
			if statusOf(got) != tt.status || string(bodyOf(got)) != tt.body {
				t.Errorf("got %q %q, want %q %q", statusOf(got), bodyOf(got), tt.status, tt.body)
			}
			if !closed {
				t.Error("an error answer left the connection open")
			}
		})
	}
}

func TestIdsThatLeaveTheirFolderAreNeverServed(t *testing.T) {
	s := testService(t, Config{}, 1, 1, 10)
	root := s.cfg.LocalDirs[0]
	// A real map output one level up, and outside the local dir, that a
	// traversal would reach.
	secretData, secretIndex := makeMapOutput([]byte("SECRET"))
	placeMapOutput(t, root, testUser, testApp, "", secretData, secretIndex)
	outside := t.TempDir()
	placeMapOutput(t, outside, "x", "y", "z", secretData, secretIndex)
	link := filepath.Join(root, "usercache", testUser, "appcache", testApp, "output", "attempt_link")
	if err := os.Symlink(filepath.Join(outside, "usercache", "x", "appcache", "y", "output", "z"), link); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"..", ".", "", "../output", "a/../..", `..\..`, "%2e%2e", "%2e%2e%2f" + attempt(0), "attempt_link", "x%00"} {
		t.Run(m, func(t *testing.T) {
			uri := "/mapOutput?job=" + testJob + "&reduce=0&map=" + m
			got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(uri, testSecret, port(s)), 0)
			if statusOf(got) != "HTTP/1.1 500 Internal Server Error" || bytes.Contains(got, []byte("SECRET")) {
				t.Errorf("map %q: got %q", m, got)
			}
		})
	}
}

func TestUsersThatCannotNameAFolderAreRefused(t *testing.T) {
	s := startService(t, Config{})
	for _, user := range []string{"", "..", "a/b", "."} {
		err := s.InitializeApplication(context.Background(), auxservice.Application{
			User: user, ID: mustApp(t, testApp), ServiceData: serviceData(testJob, testSecret),
		})
		if err == nil {
			t.Errorf("user %q was accepted", user)
		}
	}
}

func TestInitializeApplicationNeedsAJobTokenWithAPassword(t *testing.T) {
	s := startService(t, Config{})
	for name, data := range map[string][]byte{
		"no service data": nil,
		"truncated":       serviceData(testJob, testSecret)[:10],
		"empty password":  serviceData(testJob, []byte{}),
	} {
		err := s.InitializeApplication(context.Background(), auxservice.Application{User: testUser, ID: mustApp(t, testApp), ServiceData: data})
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	err := s.InitializeApplication(context.Background(), auxservice.Application{User: testUser, ID: mustApp(t, testApp)})
	if !errors.Is(err, ErrNoServiceData) {
		t.Errorf("nil service data: %v, want ErrNoServiceData", err)
	}
}

func TestStoppedJobsAreRefusedAndTheirIndexesDropped(t *testing.T) {
	s := testService(t, Config{}, 2, 2, 10)
	req := fetchRequest(mapURI(1, false, attempt(0), attempt(1)), testSecret, port(s))
	if got, _ := exchange(t, s.Addr().String(), nil, req, 0); statusOf(got) != "HTTP/1.1 200 OK" {
		t.Fatalf("before stop: %q", statusOf(got))
	}
	if n, _ := s.index.Stats(); n != 2 {
		t.Fatalf("%d cached indexes, want 2", n)
	}
	if err := s.StopApplication(context.Background(), mustApp(t, testApp)); err != nil {
		t.Fatal(err)
	}
	got, _ := exchange(t, s.Addr().String(), nil, req, 0)
	if statusOf(got) != "HTTP/1.1 401 Unauthorized" || string(bodyOf(got)) != "Can't find job token for job "+testJob+" !!" {
		t.Errorf("after stop: %q", got)
	}
	if n, used := s.index.Stats(); n != 0 || used != 0 {
		t.Errorf("after stop: %d cached indexes, %d bytes", n, used)
	}
}

func TestIndexFilesWithABadChecksumOrLengthAreRefused(t *testing.T) {
	_, good := makeMapOutput([]byte("abc"), []byte("de"))
	bad := bytes.Clone(good)
	bad[3] ^= 1
	tests := []struct {
		name  string
		index []byte
		want  error
	}{
		{"flipped bit", bad, errIndexChecksum},
		{"no checksum", good[:48], errIndexMalformed},
		{"empty", nil, errIndexMalformed},
		{"negative offset", func() []byte {
			_, ix := makeMapOutput([]byte("x"))
			binary.BigEndian.PutUint64(ix, 1<<63)
			binary.BigEndian.PutUint64(ix[24:], uint64(crc32.ChecksumIEEE(ix[:24])))
			return ix
		}(), errIndexMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseIndex(tt.index); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	recs, err := parseIndex(good)
	if err != nil || len(recs) != 2 || recs[1] != (indexRecord{start: 3, raw: 3, part: 2}) {
		t.Errorf("good index: %+v, %v", recs, err)
	}
}

func TestCorruptIndexIsAnsweredWithTheChecksumError(t *testing.T) {
	s := testService(t, Config{}, 1, 2, 10)
	ix := filepath.Join(s.cfg.LocalDirs[0], "usercache", testUser, "appcache", testApp, "output", attempt(0), indexFileName)
	b := readFile(t, ix)
	b[0] ^= 0xff
	if err := os.WriteFile(ix, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)), 0)
	want := "Checksum error reading spill index: usercache/" + testUser + "/appcache/" + testApp + "/output/" + attempt(0) + "/file.out.index"
	if statusOf(got) != "HTTP/1.1 500 Internal Server Error" || string(bodyOf(got)) != want {
		t.Errorf("got %q", got)
	}
}

func TestMapOutputShorterThanItsIndexIsAnErrorNotAShortBody(t *testing.T) {
	s := testService(t, Config{}, 1, 2, 10)
	data := filepath.Join(s.cfg.LocalDirs[0], "usercache", testUser, "appcache", testApp, "output", attempt(0), dataFileName)
	if err := os.Truncate(data, 25); err != nil {
		t.Fatal(err)
	}
	got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(1, false, attempt(0)), testSecret, port(s)), 0)
	if statusOf(got) != "HTTP/1.1 500 Internal Server Error" {
		t.Errorf("got %q", got)
	}
}

func TestConnectionsBeyondTheLimitGet429WithRetryAfter(t *testing.T) {
	s := testService(t, Config{MaxConnections: 2}, 1, 1, 10)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitFor(t, func() bool { return s.active.Load() == 2 })
	got, closed := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)), 0)
	want := "HTTP/1.1 429 TOO MANY REQUESTS\r\ncontent-type: text/plain; charset=UTF-8\r\nname: mapreduce\r\nversion: 1.0.0\r\nRetry-After: 1000\r\ncontent-length: 0\r\n\r\n"
	if string(got) != want || !closed {
		t.Errorf("got %q (closed %v), want %q", got, closed, want)
	}
	held[0].Close()
	waitFor(t, func() bool { return s.active.Load() == 1 })
	if got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)), 0); statusOf(got) != "HTTP/1.1 200 OK" {
		t.Errorf("below the limit again: %q", statusOf(got))
	}
}

func TestRequestsOfOneReducerBeyondTheLimitGet429(t *testing.T) {
	s := testService(t, Config{MaxTransfersPerReducer: 1}, 1, 2, 4<<20)
	// A reader that does not read holds reducer 0's transfer open.
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	c.Write(fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)))
	waitFor(t, func() bool {
		s.transfersMu.Lock()
		defer s.transfersMu.Unlock()
		return s.transfers[reducerKey{testJob, 0}] == 1
	})
	got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)), 0)
	if statusOf(got) != "HTTP/1.1 429 TOO MANY REQUESTS" || !bytes.Contains(got, []byte("\r\nRetry-After: 1000\r\n")) {
		t.Errorf("second transfer of reducer 0: %q", statusOf(got))
	}
	got, _ = exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(1, false, attempt(0)), testSecret, port(s)), 0)
	if statusOf(got) != "HTTP/1.1 200 OK" {
		t.Errorf("reducer 1 meanwhile: %q", statusOf(got))
	}
}

func TestOneRequestHoldsAtMostMaxSessionOpenFiles(t *testing.T) {
	for _, limit := range []int{1, 3} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			s := testService(t, Config{MaxSessionOpenFiles: limit}, 8, 1, 100)
			var ids []string
			for m := range 8 {
				ids = append(ids, attempt(m))
			}
			got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, ids...), testSecret, port(s)), 0)
			if !bytes.Equal(bodyOf(got), wantBody(0, 100, 0, 1, 2, 3, 4, 5, 6, 7)) {
				t.Fatalf("body differs: %q", statusOf(got))
			}
			if peak := s.maxOpenFiles.Load(); peak > int64(limit) || peak < 1 {
				t.Errorf("peak open files %d, limit %d", peak, limit)
			}
			waitFor(t, func() bool { return s.openFiles.Load() == 0 })
		})
	}
}

func TestKeepAliveServesTheNextRequestThenTimesOut(t *testing.T) {
	s := testService(t, Config{KeepAliveTimeout: 300 * time.Millisecond}, 2, 2, 10)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 3 {
		c.Write(fetchRequest(mapURI(i%2, true, attempt(i%2)), testSecret, port(s)))
		resp, body := readResponse(t, br)
		if resp.StatusCode != 200 || !bytes.Equal(body, wantBody(i%2, 10, i%2)) {
			t.Fatalf("request %d: %s, %d body bytes", i, resp.Status, len(body))
		}
		if resp.Header.Get("Connection") != "Keep-Alive" || resp.Header.Get("Keep-Alive") != "timeout=1" {
			t.Errorf("request %d: Connection %q, Keep-Alive %q", i, resp.Header.Get("Connection"), resp.Header.Get("Keep-Alive"))
		}
	}
	// Three requests were answered on the connection; idle, the server
	// closes it (EOF, not the read deadline's timeout).
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle kept-alive connection: read %d, %v; want EOF", n, err)
	}
}

func TestKeepAliveEnabledKeepsConnectionsWithoutTheParameter(t *testing.T) {
	s := testService(t, Config{KeepAliveEnabled: true, KeepAliveTimeout: 7 * time.Second}, 1, 1, 10)
	got, closed := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0)), testSecret, port(s)), 1)
	if closed || !bytes.Contains(got, []byte("\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=7\r\ncontent-length: ")) {
		t.Errorf("closed %v, head %q", closed, got)
	}
}

func TestOversizedRequestHeadsAreRefused(t *testing.T) {
	s := testService(t, Config{MaxRequestLineBytes: 256, MaxHeaderBytes: 512}, 1, 1, 10)
	good := mapURI(0, false, attempt(0))
	tests := []struct {
		name string
		req  []byte
	}{
		{"long request line", fetchRequest(good+"&pad="+strings.Repeat("a", 300), testSecret, port(s))},
		{"one long header", fetchRequest(good, testSecret, port(s), "X: "+strings.Repeat("b", 600))},
		{"many headers", fetchRequest(good, testSecret, port(s), strings.Repeat("X: yyyyyyyy\r\n", 60)+"Z: z")},
		{"endless header without newline", append([]byte("GET "+good+" HTTP/1.1\r\nX: "), bytes.Repeat([]byte("c"), 100<<10)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, closed := exchange(t, s.Addr().String(), nil, tt.req, 0)
			if statusOf(got) != "HTTP/1.1 400 Bad Request" || !closed {
				t.Errorf("got %q, closed %v", statusOf(got), closed)
			}
		})
	}
	if got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(good, testSecret, port(s)), 0); statusOf(got) != "HTTP/1.1 200 OK" {
		t.Errorf("a request within the bounds: %q", statusOf(got))
	}
}

func TestTLSServesTheSameBytesThroughABuffer(t *testing.T) {
	serverCfg, clientCfg := testTLS(t)
	s := testService(t, Config{TLS: serverCfg, TLSBufferBytes: 1000}, 2, 2, 3000)
	got, closed := exchange(t, s.Addr().String(), clientCfg, fetchRequest(mapURI(1, false, attempt(1), attempt(0)), testSecret, port(s)), 0)
	if statusOf(got) != "HTTP/1.1 200 OK" || !bytes.Equal(bodyOf(got), wantBody(1, 3000, 1, 0)) || !closed {
		t.Errorf("got %q, %d body bytes, closed %v", statusOf(got), len(bodyOf(got)), closed)
	}
	if s.bufferedCopies.Load() != 2 {
		t.Errorf("%d buffered copies, want 2", s.bufferedCopies.Load())
	}
	// A plain-HTTP client gets no answer from the TLS port.
	got, _ = exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(1, false, attempt(1)), testSecret, port(s)), 0)
	if bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		t.Error("the TLS port answered plain HTTP")
	}
}

func TestPlainTCPBodiesAreSentWithoutABufferedCopy(t *testing.T) {
	s := testService(t, Config{}, 2, 2, 300000)
	got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(mapURI(0, false, attempt(0), attempt(1)), testSecret, port(s)), 0)
	if !bytes.Equal(bodyOf(got), wantBody(0, 300000, 0, 1)) {
		t.Fatalf("body differs: %q", statusOf(got))
	}
	if n := s.bufferedCopies.Load(); n != 0 {
		t.Errorf("%d buffered copies on plain TCP; bodies must go through TCPConn.ReadFrom (sendfile)", n)
	}
}

func TestSSLEnabledWithoutTLSConfigurationFails(t *testing.T) {
	if _, err := New(Config{SSLEnabled: true, LocalDirs: []string{t.TempDir()}, Address: "127.0.0.1:0"}); err == nil {
		t.Error("New served plain HTTP with mapreduce.shuffle.ssl.enabled")
	}
}

func TestServeReturnsNilOnceItsContextEndsAndClosesConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listener: ln, LocalDirs: []string{t.TempDir()}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, func() bool { return s.active.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the open connection survived Serve")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener survived Serve")
	}
	if err := s.Serve(context.Background()); !errors.Is(err, ErrServing) {
		t.Errorf("second Serve: %v", err)
	}
}

func TestCloseWithoutServeReleasesTheListener(t *testing.T) {
	s, err := New(Config{Address: "127.0.0.1:0", LocalDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("listener still open")
	}
	if err := s.Serve(context.Background()); !errors.Is(err, ErrServing) {
		t.Errorf("Serve after Close: %v", err)
	}
}

func TestMetadataIsTheAdvertisedPortElseTheListenersPort(t *testing.T) {
	s := startService(t, Config{})
	if got := binary.BigEndian.Uint32(s.Metadata()); int(got) != port(s) {
		t.Errorf("metadata port %d, listening on %d", got, port(s))
	}
	s2 := startService(t, Config{AdvertisedPort: 31000})
	if got := binary.BigEndian.Uint32(s2.Metadata()); got != 31000 {
		t.Errorf("metadata port %d, advertised 31000", got)
	}
}

func TestConfigFromHadoopReadsPropertyNames(t *testing.T) {
	props := map[string]string{
		PropPort:                   " 13762 ",
		PropLocalDirs:              "/data/1/yarn/local, file:///data/2/yarn/local,",
		PropSSLEnabled:             "TRUE",
		PropSSLFileBufferSize:      "0x10000",
		PropKeepAliveEnabled:       "true",
		PropKeepAliveTimeout:       "9",
		PropMaxConnections:         "100",
		PropMaxSessionOpenFiles:    "5",
		PropIndexCacheMB:           "20",
		PropMaxTransfersPerReducer: "2",
	}
	c, err := ConfigFromHadoop(func(k string) (string, bool) { v, ok := props[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Address: ":13762", LocalDirs: []string{"/data/1/yarn/local", "/data/2/yarn/local"}, SSLEnabled: true,
		TLSBufferBytes: 65536, KeepAliveEnabled: true, KeepAliveTimeout: 9 * time.Second, MaxConnections: 100,
		MaxSessionOpenFiles: 5, IndexCacheBytes: 20 << 20, MaxTransfersPerReducer: 2,
	}
	if c.Address != want.Address || strings.Join(c.LocalDirs, "|") != strings.Join(want.LocalDirs, "|") ||
		c.SSLEnabled != want.SSLEnabled || c.TLSBufferBytes != want.TLSBufferBytes || c.KeepAliveEnabled != want.KeepAliveEnabled ||
		c.KeepAliveTimeout != want.KeepAliveTimeout || c.MaxConnections != want.MaxConnections ||
		c.MaxSessionOpenFiles != want.MaxSessionOpenFiles || c.IndexCacheBytes != want.IndexCacheBytes ||
		c.MaxTransfersPerReducer != want.MaxTransfersPerReducer {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	empty, err := ConfigFromHadoop(func(string) (string, bool) { return "", false })
	if err != nil || empty.withDefaults().Address != ":13562" || empty.withDefaults().IndexCacheBytes != 10<<20 ||
		empty.withDefaults().KeepAliveTimeout != 5*time.Second || empty.withDefaults().MaxSessionOpenFiles != 3 {
		t.Errorf("defaults: %+v, %v", empty.withDefaults(), err)
	}
	if _, err := ConfigFromHadoop(func(k string) (string, bool) { return "ten", k == PropMaxConnections }); err == nil {
		t.Error("a bad int was accepted")
	}
}

// waitFor polls cond until it holds or 5 seconds pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	eventually.True(t, 5*time.Second, "the condition", cond)
}

// testTLS returns a server configuration with a fresh self-signed
// certificate for 127.0.0.1 and a client configuration trusting it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shuffle"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

func TestFailedNewLeavesTheCallersListenerOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := New(Config{Listener: ln}); err == nil {
		t.Fatal("New without local dirs succeeded")
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the listener was closed: %v", err)
	}
	c.Close()
}

func TestRegisteringAgainReplacesTheSecret(t *testing.T) {
	s := testService(t, Config{}, 1, 1, 10)
	register(t, s, testApp, testUser, []byte("rolled"))
	uri := mapURI(0, false, attempt(0))
	if got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(uri, testSecret, port(s)), 0); statusOf(got) != "HTTP/1.1 401 Unauthorized" {
		t.Errorf("old secret: %q", statusOf(got))
	}
	if got, _ := exchange(t, s.Addr().String(), nil, fetchRequest(uri, []byte("rolled"), port(s)), 0); statusOf(got) != "HTTP/1.1 200 OK" {
		t.Errorf("new secret: %q", statusOf(got))
	}
}
