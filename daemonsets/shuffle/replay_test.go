package shuffle

// Replay of ../shared/testdata/hadoop-shuffle: the requests unmodified
// Hadoop 3.4.1 reducers (fetcher/) and curl (curl/) sent to a real
// ShuffleHandler are sent to this service, serving the same map outputs
// with the same job secrets, and its answers must be the recorded bytes:
// status line, every header in order and case, and body. The recordings
// carry no Date header, so nothing is ignored.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knitdev/knit/daemonsets/auxservice"
)

const (
	app3 = "application_1795680442682_0003"
	app4 = "application_1795680442682_0004"
)

// replayService serves both recorded jobs' map outputs from a second local
// dir (the first is empty, so the search goes on), with _0003 registered
// from the recorded service data and _0004 from its task credentials.
func replayService(t *testing.T) *Service {
	t.Helper()
	empty, dir := t.TempDir(), t.TempDir()
	for _, m := range []string{"000000", "000001", "000002"} {
		attempt := "attempt_1795680442682_0003_m_" + m + "_0"
		placeMapOutput(t, dir, "root", app3, attempt,
			readFile(t, shuffleData(t, "map-output", attempt+".file.out")),
			readFile(t, shuffleData(t, "map-output", attempt+".file.out.index")))
	}
	for _, m := range []string{"000000", "000001"} {
		attempt := "attempt_1795680442682_0004_m_" + m + "_0"
		placeMapOutput(t, dir, "root", app4, attempt,
			readFile(t, shuffleData(t, "curl", "map-output-job4", attempt+".file.out")),
			readFile(t, shuffleData(t, "curl", "map-output-job4", attempt+".file.out.index")))
	}
	s := startService(t, Config{LocalDirs: []string{empty, dir}, AdvertisedPort: recordedPort})

	sd := readFile(t, shuffleData(t, "nm-rpc", "service_data.mapreduce_shuffle.bin"))
	secret3 := shuffleSecret(t, shuffleData(t, "job-token", "task-container.tokens"))
	got, err := parseServiceData(sd)
	if err != nil || !bytes.Equal(got, secret3) {
		t.Fatalf("recorded service data holds secret %x (%v), the task credentials %x", got, err, secret3)
	}
	ctx := context.Background()
	if err := s.InitializeApplication(ctx, auxservice.Application{User: "root", ID: mustApp(t, app3), ServiceData: sd}); err != nil {
		t.Fatal(err)
	}
	register(t, s, app4, "root", shuffleSecret(t, shuffleData(t, "curl", "job4-task-container.tokens")))
	return s
}

func TestReplayedFetcherRequestsGetTheRecordedAnswers(t *testing.T) {
	s := replayService(t)
	for _, n := range []string{"01", "02", "03", "04", "05"} {
		t.Run(n, func(t *testing.T) {
			req := readFile(t, shuffleData(t, "fetcher", n+"-request.bin"))
			want := readFile(t, shuffleData(t, "fetcher", n+"-response.bin"))
			got, closed := exchange(t, s.Addr().String(), nil, req, len(want))
			compareAnswer(t, got, want)
			if !closed {
				t.Error("the connection stayed open after Connection: close")
			}
		})
	}
}

func TestReplayedCurlRequestsGetTheRecordedAnswers(t *testing.T) {
	s := replayService(t)
	// _0003 finished before the curl tests: its application stopped.
	if err := s.StopApplication(context.Background(), mustApp(t, app3)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// serverCloses: the recorded server closed the connection after its
		// answer; otherwise it kept it open for more requests.
		serverCloses bool
	}{
		{"01-keepalive-2maps", false},
		{"02-keepalive-reuse-same-connection", false},
		{"03-valid-single", true},
		{"04-wrong-urlhash", true},
		{"05-no-urlhash", true},
		{"06-no-name-version", true},
		{"07-wrong-version", true},
		{"08-finished-job", true},
		{"09-unknown-job", true},
		{"10-unknown-map", true},
		{"11-reduce-out-of-range", true},
		{"12-missing-reduce-param", true},
		{"13-post", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := readFile(t, shuffleData(t, "curl", tt.name+".request.bin"))
			want := readFile(t, shuffleData(t, "curl", tt.name+".response.bin"))
			got, closed := exchange(t, s.Addr().String(), nil, req, len(want))
			compareAnswer(t, got, want)
			if closed != tt.serverCloses {
				t.Errorf("server closed the connection: %v, recorded: %v", closed, tt.serverCloses)
			}
		})
	}
}

// TestEveryRecordingIsReplayed keeps the tables above complete: a new
// recording must get a row.
func TestEveryRecordingIsReplayed(t *testing.T) {
	for dir, want := range map[string]int{"fetcher": 5, "curl": 13} {
		reqs, err := filepath.Glob(filepath.Join(shuffleData(t, dir), "*request.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != want {
			t.Errorf("%s holds %d requests, the replay tests %d", dir, len(reqs), want)
		}
	}
}

// compareAnswer compares head lines one by one, then the body bytes.
func compareAnswer(t *testing.T, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	gh, gb, _ := bytes.Cut(got, []byte("\r\n\r\n"))
	wh, wb, _ := bytes.Cut(want, []byte("\r\n\r\n"))
	gl, wl := strings.Split(string(gh), "\r\n"), strings.Split(string(wh), "\r\n")
	for i := range max(len(gl), len(wl)) {
		g, w := "<none>", "<none>"
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("head line %d: got %q, want %q", i, g, w)
		}
	}
	if !bytes.Equal(gb, wb) {
		t.Errorf("body differs: got %d bytes, want %d; first difference at %s", len(gb), len(wb), firstDiff(gb, wb))
	}
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprint(i)
		}
	}
	return fmt.Sprint(min(len(a), len(b)))
}

// The recorded service data and metadata match what the service reads
// and publishes.
func TestMetadataIsTheRecordedPortBytes(t *testing.T) {
	s := startService(t, Config{AdvertisedPort: recordedPort})
	want := readFile(t, shuffleData(t, "nm-rpc", "services_meta_data.mapreduce_shuffle.bin"))
	if got := s.Metadata(); !bytes.Equal(got, want) {
		t.Errorf("Metadata() = %x, recorded %x", got, want)
	}
	if s.Name() != "mapreduce_shuffle" {
		t.Errorf("Name() = %q", s.Name())
	}
}
