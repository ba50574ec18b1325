package logs

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// treeS3 is a fake S3 server with bucket "logs", counting the
// DeleteObjects calls it answers.
type treeS3 struct {
	backend *s3mem.Backend
	store   *S3Store
	deletes atomic.Int32
}

func newTreeS3(t *testing.T, mtime time.Time) *treeS3 {
	t.Helper()
	s := &treeS3{backend: s3mem.New(s3mem.WithTimeSource(gofakes3.FixedTimeSource(mtime)))}
	if err := s.backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(s.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
			s.deletes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.store = NewS3Store(S3Config{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1", AccessKeyID: "id", SecretAccessKey: "secret"})
	return s
}

func (s *treeS3) put(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := s.backend.PutObject("logs", k, nil, bytes.NewReader(nil), 0, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *treeS3) keys(t *testing.T) []string {
	t.Helper()
	res, err := s.backend.ListBucket("logs", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range res.Contents {
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

func TestS3DeleteTakesAKeyAndEverythingUnderItInBatchesOf1000(t *testing.T) {
	s := newTreeS3(t, time.Now())
	const app = "r/alice/bucket-logs-tfile/0001/application_1_0001"
	s.put(t, app, app+"0/n1_8041", "r/other")
	for i := range 2500 {
		s.put(t, fmt.Sprintf("%s/n%04d_8041", app, i))
	}
	if err := s.store.Delete(t.Context(), "s3a://logs/"+app); err != nil {
		t.Fatal(err)
	}
	if got, want := s.keys(t), []string{app + "0/n1_8041", "r/other"}; !slices.Equal(got, want) {
		t.Errorf("left %d keys %.5q, want %q", len(got), got, want)
	}
	// 2501 keys: the key itself and the 2500 under it.
	if n := s.deletes.Load(); n != 3 {
		t.Errorf("%d DeleteObjects calls, want 3", n)
	}
}

func TestS3DeleteRefusesAWholeBucket(t *testing.T) {
	s := newTreeS3(t, time.Now())
	s.put(t, "r/x")
	for _, p := range []string{"s3a://logs", "s3a://logs/", "s3://logs//"} {
		if err := s.store.Delete(t.Context(), p); err == nil {
			t.Errorf("Delete(%s) succeeded", p)
		}
	}
	if got := s.keys(t); len(got) != 1 {
		t.Errorf("left %q", got)
	}
}

func TestS3EntriesAreTheFilesAndFoldersOneLevelDown(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newTreeS3(t, mtime)
	s.put(t, "r/", "r/alice/bucket-logs-tfile/0001/a", "r/bob/x", "r/README", "rr/y", "top")
	tests := []struct {
		dir  string
		want []RemoteEntry
	}{
		{"s3a://logs/r", []RemoteEntry{
			{Path: "s3a://logs/r/README", Name: "README", ModTime: mtime},
			{Path: "s3a://logs/r/alice", Name: "alice", Dir: true},
			{Path: "s3a://logs/r/bob", Name: "bob", Dir: true},
		}},
		{"s3://logs/r/alice/", []RemoteEntry{{Path: "s3://logs/r/alice/bucket-logs-tfile", Name: "bucket-logs-tfile", Dir: true}}},
		{"s3a://logs", []RemoteEntry{
			{Path: "s3a://logs/r", Name: "r", Dir: true},
			{Path: "s3a://logs/rr", Name: "rr", Dir: true},
			{Path: "s3a://logs/top", Name: "top", ModTime: mtime},
		}},
		{"s3a://logs/missing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := s.store.Entries(t.Context(), tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b RemoteEntry) bool {
				return a.Path == b.Path && a.Name == b.Name && a.Dir == b.Dir && a.ModTime.Equal(b.ModTime)
			}) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLocalEntriesAndDelete(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "alice", "bucket-logs-tfile", "0001", "application_1_0001")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "n1_8041"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(app, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	es, err := LocalStore{}.Entries(t.Context(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Name != "alice" || !es[0].Dir || es[0].Path != filepath.Join(root, "alice") || es[0].ModTime.IsZero() {
		t.Errorf("entries %+v, want the folder alice alone (no link)", es)
	}
	if es, err := (LocalStore{}).Entries(t.Context(), filepath.Join(root, "missing")); err != nil || es != nil {
		t.Errorf("a missing folder lists %v, %v", es, err)
	}
	if err := (LocalStore{}).Delete(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(app); !os.IsNotExist(err) {
		t.Errorf("application folder still there: %v", err)
	}
	if err := (LocalStore{}).Delete(t.Context(), app); err != nil {
		t.Errorf("deleting what is gone: %v", err)
	}
	for _, p := range []string{"", "/", "file:///", "//"} {
		if err := (LocalStore{}).Delete(t.Context(), p); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("Delete(%q) = %v, want a refusal", p, err)
		}
	}
}
