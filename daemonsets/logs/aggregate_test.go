package logs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"go.uber.org/goleak"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/test/eventually"
)

const endedApp = "application_1795680442682_0007"

func layOut(t *testing.T) Dirs {
	t.Helper()
	dirs := Dirs{t.TempDir(), t.TempDir()}
	write := func(root, cid, name, content string) {
		dir := filepath.Join(root, endedApp, cid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dirs[0], "container_1795680442682_0007_01_000001", "stdout", "am out\n")
	write(dirs[0], "container_1795680442682_0007_01_000001", "stderr", "")
	write(dirs[1], "container_1795680442682_0007_01_000002", "stdout", "task out\n")
	if err := dirs.SetRecord(endedApp, AppRecord{Owner: "alice", ACLs: []aggregated.ACL{{Type: "VIEW_APP", Value: "bob"}}}); err != nil {
		t.Fatal(err)
	}
	return dirs
}

// laidOut is what layOut puts on the node: container (last six digits) /
// file → content.
var laidOut = map[string]string{"000001/stdout": "am out\n", "000001/stderr": "", "000002/stdout": "task out\n"}

// contents reads every log of an aggregated file, keyed as laidOut.
func contents(t *testing.T, r aggregated.Reader) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := r.Walk(func(f aggregated.LogFile, c io.Reader) error {
		b, err := io.ReadAll(c)
		got[f.ContainerID[len(f.ContainerID)-6:]+"/"+f.Name] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, what, cond)
}

func runAggregator(t *testing.T, cfg AggregatorConfig) *Aggregator {
	t.Helper()
	a, err := NewAggregator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return a
}

func TestAggregatorWritesBothFormatsAndRemovesLocalCopy(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
	for _, format := range []aggregated.Format{aggregated.FormatTFile, aggregated.FormatIndexed} {
		t.Run(string(format), func(t *testing.T) {
			dirs := layOut(t)
			remote := t.TempDir()
			layout := aggregated.LayoutFor(format, func(k string) (string, bool) {
				if k == aggregated.ConfRemoteDir {
					return "file://" + remote, true
				}
				return "", false
			})
			a := runAggregator(t, AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Format: format, Layout: layout, Store: LocalStore{}})
			if err := a.ApplicationEnded(context.Background(), endedApp); err != nil {
				t.Fatal(err)
			}
			appDir, _ := layout.AppDir("alice", endedApp)
			path := filepath.Join(remote, appDir[len("file://"+remote):], "127.0.1.1_8041")
			waitFor(t, "the node's copy to go", func() bool {
				_, err := os.Stat(filepath.Join(dirs[0], endedApp))
				return errors.Is(err, os.ErrNotExist)
			})
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := aggregated.Open(format, bytes.NewReader(b), int64(len(b)), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if h := r.Header(); h.Owner != "alice" || !slices.Equal(h.ACLs, []aggregated.ACL{{Type: "VIEW_APP", Value: "bob"}}) {
				t.Errorf("header %+v", h)
			}
			if got := contents(t, r); !maps.Equal(got, laidOut) {
				t.Errorf("aggregated %v, want %v", got, laidOut)
			}
			if _, err := os.Stat(filepath.Join(dirs[1], endedApp)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("second log dir kept: %v", err)
			}
			waitFor(t, "the aggregation counted", func() bool { return a.Stats().Aggregated == 1 })
			if st := a.Stats(); st.Uploads != 1 || st.Bytes != int64(len(b)) || st.Failed != 0 || st.UploadFailures != 0 {
				t.Errorf("stats %+v, want one upload of %d bytes", st, len(b))
			}
		})
	}
}

type failingStore struct{ calls atomic.Int32 }

func (f *failingStore) Put(context.Context, string, io.ReaderAt, int64) error {
	f.calls.Add(1)
	return errors.New("store refuses")
}

func TestAggregatorKeepsLogsWhenTheStoreFails(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
	dirs := layOut(t)
	store := &failingStore{}
	layout := aggregated.Layout{Format: aggregated.FormatTFile, Root: "s3a://bucket/logs", Suffix: "logs-tfile"}
	a := runAggregator(t, AggregatorConfig{Dirs: dirs, NodeID: "n:1", Layout: layout, Store: store, MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})
	if err := a.ApplicationEnded(context.Background(), endedApp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "aggregation to give up", func() bool {
		_, err := os.Stat(filepath.Join(dirs[0], endedApp, failedMarker))
		return err == nil
	})
	if n := store.calls.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
	waitFor(t, "the failure counted", func() bool { return a.Stats().Failed == 1 })
	if st := a.Stats(); st.UploadFailures != 3 || st.Uploads != 0 || st.Aggregated != 0 {
		t.Errorf("stats %+v, want 3 failed attempts and no upload", st)
	}
	for _, p := range []string{filepath.Join(dirs[0], endedApp, "container_1795680442682_0007_01_000001", "stdout"), filepath.Join(dirs[1], endedApp, "container_1795680442682_0007_01_000002", "stdout")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("log deleted before it was stored: %v", err)
		}
	}
}

func TestAggregatorWritesToS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	conf := map[string]string{
		aggregated.ConfRemoteDir: "s3a://logs/app-logs", "fs.s3a.endpoint": srv.URL, "fs.s3a.path.style.access": "true",
		"fs.s3a.access.key": "id", "fs.s3a.secret.key": "secret", aggregated.ConfEnable: "true",
	}
	lookup := func(k string) (string, bool) { v, ok := conf[k]; return v, ok }
	s, err := SettingsFromHadoop(lookup)
	if err != nil || !s.Aggregate {
		t.Fatalf("settings %+v, %v", s, err)
	}
	store, err := StoreFor(s.Layout.Root, lookup)
	if err != nil {
		t.Fatal(err)
	}
	dirs := layOut(t)
	a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Format: s.Format, Layout: s.Layout, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Aggregate(t.Context(), endedApp); err != nil {
		t.Fatal(err)
	}
	obj, err := backend.GetObject("logs", "app-logs/alice/bucket-logs-tfile/0007/"+endedApp+"/127.0.1.1_8041", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Contents.Close()
	b, _ := io.ReadAll(obj.Contents)
	r, err := aggregated.OpenTFile(bytes.NewReader(b), int64(len(b)), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.Header().Owner != "alice" {
		t.Errorf("owner %q", r.Header().Owner)
	}
	if got := contents(t, r); !maps.Equal(got, laidOut) {
		t.Errorf("aggregated %v, want %v", got, laidOut)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], endedApp)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node copy kept after upload: %v", err)
	}
}

// TestAggregatorResumesAfterARestart: an application marked ended before
// a restart is aggregated on start; one already stored is only removed.
func TestAggregatorResumesAfterARestart(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
	dirs := layOut(t)
	const stored = "application_1795680442682_0008"
	if err := os.MkdirAll(filepath.Join(dirs[0], stored, "container_1795680442682_0008_01_000001"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{filepath.Join(dirs[0], stored, doneMarker), filepath.Join(dirs[0], endedApp, endedMarker)} {
		if err := os.WriteFile(m, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remote := t.TempDir()
	runAggregator(t, AggregatorConfig{Dirs: dirs, NodeID: "n:1", Layout: aggregated.Layout{Root: remote, Suffix: "logs-tfile"}, Store: LocalStore{}})
	waitFor(t, "both applications to leave the node", func() bool {
		apps, _ := dirs.Applications()
		return len(apps) == 0
	})
	if _, err := os.Stat(filepath.Join(remote, "alice", "bucket-logs-tfile", "0007", endedApp, "n_1")); err != nil {
		t.Errorf("ended application not aggregated: %v", err)
	}
	if _, err := os.Stat(filepath.Join(remote, "alice", "bucket-logs-tfile", "0008")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stored application aggregated again: %v", err)
	}
}

// TestLogsWithoutAggregationGoAfterTheRetainTime: with aggregation off,
// an ended application's logs stay yarn.nodemanager.log.retain-seconds,
// then go.
func TestLogsWithoutAggregationGoAfterTheRetainTime(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
	dirs := layOut(t)
	a := runAggregator(t, AggregatorConfig{Dirs: dirs, NodeID: "n:1", Retain: 300 * time.Millisecond})
	start := time.Now()
	if err := a.ApplicationEnded(context.Background(), endedApp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the logs to go", func() bool {
		apps, _ := dirs.Applications()
		return len(apps) == 0
	})
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("logs deleted after %v, before the retain time", d)
	}
	if err := a.Aggregate(context.Background(), endedApp); err == nil {
		t.Error("Aggregate without a store succeeded")
	}
}
