package shuffle

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/writable"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/test/recordings"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recordedPort is the port the recorded ShuffleHandler listened on, the
// port every recorded UrlHash covers.
const recordedPort = 13562

// shuffleData returns a path under ../shared/testdata/hadoop-shuffle.
func shuffleData(t testing.TB, parts ...string) string {
	t.Helper()
	return recordings.Path(t, append([]string{"hadoop-shuffle"}, parts...)...)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustApp parses an application id.
func mustApp(t testing.TB, s string) yarnid.ApplicationID {
	t.Helper()
	id, err := yarnid.ParseApplicationID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// shuffleSecret reads the MapReduceShuffleToken secret of a recorded
// Credentials file.
func shuffleSecret(t testing.TB, path string) []byte {
	t.Helper()
	c, err := token.ParseCredentials(readFile(t, path))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	secret, ok := c.Secret("MapReduceShuffleToken")
	if !ok {
		t.Fatalf("%s holds no MapReduceShuffleToken", path)
	}
	return secret
}

// serviceData is what an MR AM puts in service_data for job: the job
// token Writable whose password is the shuffle secret.
func serviceData(jobName string, secret []byte) []byte {
	id := writable.AppendText(nil, jobName)
	return token.Token{Identifier: id, Password: secret, Kind: "mapreduce.job", Service: jobName}.AppendWritable(nil)
}

// placeMapOutput copies a map's file.out and file.out.index into the
// usercache layout under localDir.
func placeMapOutput(t testing.TB, localDir, user, app, attempt string, data, index []byte) {
	t.Helper()
	dir := filepath.Join(localDir, "usercache", user, "appcache", app, "output", attempt)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if err := os.WriteFile(filepath.Join(dir, dataFileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if index != nil {
		if err := os.WriteFile(filepath.Join(dir, indexFileName), index, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testLogger discards below warnings, and writes through t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startService builds a service on 127.0.0.1:0 from cfg (LocalDirs and
// Logger defaulted) and serves it until the test ends.
func startService(t testing.TB, cfg Config) *Service {
	t.Helper()
	if cfg.Listener == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = ln
	}
	if cfg.LocalDirs == nil {
		cfg.LocalDirs = []string{t.TempDir()}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// register initializes app on s with the shuffle secret.
func register(t testing.TB, s *Service, app, user string, secret []byte) {
	t.Helper()
	id := mustApp(t, app)
	if err := s.InitializeApplication(context.Background(), auxservice.Application{
		User: user, ID: id, ServiceData: serviceData(jobID(id), secret),
	}); err != nil {
		t.Fatal(err)
	}
}

// exchange sends req on a new connection and reads the answer until the
// server closes, want bytes have arrived and nothing more comes for a
// moment, or the deadline passes. It reports whether the server closed.
func exchange(t testing.TB, addr string, tlsCfg *tls.Config, req []byte, want int) (got []byte, closed bool) {
	t.Helper()
	var c net.Conn
	var err error
	if tlsCfg != nil {
		c, err = tls.Dial("tcp", addr, tlsCfg)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 64<<10)
	for {
		if len(got) >= want {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		} else {
			c.SetReadDeadline(deadline)
		}
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, false
			}
			return got, true
		}
	}
}

// fetchRequest is a Fetcher-shaped request for uri with a UrlHash under
// secret for port.
func fetchRequest(uri string, secret []byte, port int, extra ...string) []byte {
	var b bytes.Buffer
	b.WriteString("GET " + uri + " HTTP/1.1\r\n")
	if secret != nil {
		b.WriteString("UrlHash: " + shuffleHash(secret, []byte(hashMessage(port, uri))) + "\r\n")
	}
	b.WriteString("name: mapreduce\r\nversion: 1.0.0\r\n")
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Host: localhost:" + strconv.Itoa(port) + "\r\n\r\n")
	return b.Bytes()
}

// readResponse reads one HTTP answer (head and content-length body) from br.
func readResponse(t testing.TB, br *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, body
}
