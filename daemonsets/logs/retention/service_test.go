package retention

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"go.uber.org/goleak"

	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/protocols/yarnid"
)

const (
	retain = time.Hour
	old    = 2 * time.Hour // past the retain time
	young  = 10 * time.Minute
)

// now is the sweeps' clock; the cutoff is an hour before it.
var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// States of the applications the fake RM holds; any other is unknown to it.
type rmApps map[string]string

func (a rmApps) ApplicationTerminated(id yarnid.ApplicationID) bool {
	switch a[id.String()] {
	case "RUNNING", "ACCEPTED":
		return false
	}
	return true
}

var apps = rmApps{
	"application_1700000000000_0001": "FINISHED",
	"application_1700000000000_0002": "RUNNING",
	"application_1700000000000_0003": "KILLED",
	// application_1700000000000_0004 is unknown.
}

// tree is a remote root log dir: the age of every node file, and of the
// folders whose age is not old. S3 has no folder times.
type tree struct {
	files map[string]time.Duration
	dirs  map[string]time.Duration
}

const (
	finished = "alice/bucket-logs-tfile/0001/application_1700000000000_0001"
	running  = "alice/bucket-logs-tfile/0002/application_1700000000000_0002"
	killed   = "bob/bucket-logs-ifile/0003/application_1700000000000_0003"
	unknown  = "bob/bucket-logs-tfile/0004/application_1700000000000_0004"
	// older is the layout before Hadoop 3.3, <root>/<user>/<suffix>/<app>.
	older = "alice/logs-tfile/application_1700000000000_0001"
)

type sweepCase struct {
	name string
	tree tree
	// kept are the node files left after one sweep.
	kept []string
	// gone are application folders deleted whole.
	gone  []string
	swept Swept
	// localOnly cases rest on folder times, which S3 does not have.
	localOnly bool
}

func sweepCases() []sweepCase {
	return []sweepCase{
		{
			name:  "a finished application's folder goes when it and all its files are past the retain time",
			tree:  tree{files: map[string]time.Duration{finished + "/n1_8041": old, finished + "/n2_8041": old}},
			gone:  []string{finished},
			swept: Swept{Applications: 1},
		},
		{
			name: "a finished application's folder stays whole while one of its files is within the retain time",
			tree: tree{files: map[string]time.Duration{finished + "/n1_8041": old, finished + "/n2_8041": young}},
			kept: []string{finished + "/n1_8041", finished + "/n2_8041"},
		},
		{
			name:      "a finished application's folder stays while the folder itself is within the retain time",
			tree:      tree{files: map[string]time.Duration{finished + "/n1_8041": old}, dirs: map[string]time.Duration{finished: young}},
			kept:      []string{finished + "/n1_8041"},
			localOnly: true,
		},
		{
			name:  "a killed application's folder of another format goes",
			tree:  tree{files: map[string]time.Duration{killed + "/n1_8041": old}},
			gone:  []string{killed},
			swept: Swept{Applications: 1},
		},
		{
			name:  "an application the RM does not know has ended, and its folder goes",
			tree:  tree{files: map[string]time.Duration{unknown + "/n1_8041": old}},
			gone:  []string{unknown},
			swept: Swept{Applications: 1},
		},
		{
			name:  "a running application loses only its node files past the retain time",
			tree:  tree{files: map[string]time.Duration{running + "/n1_8041": old, running + "/n2_8041": young, running + "/n3_8041.tmp": old}},
			kept:  []string{running + "/n2_8041"},
			swept: Swept{Files: 2},
		},
		{
			name:      "a running application whose folder is within the retain time keeps every file",
			tree:      tree{files: map[string]time.Duration{running + "/n1_8041": old}, dirs: map[string]time.Duration{running: young}},
			kept:      []string{running + "/n1_8041"},
			localOnly: true,
		},
		{
			name: "the older layout is left alone, as YARN 3.4.1 leaves it",
			tree: tree{files: map[string]time.Duration{older + "/n1_8041": old}},
			kept: []string{older + "/n1_8041"},
		},
		{
			name: "a user's folder not named bucket-* is left alone, whatever it holds",
			tree: tree{files: map[string]time.Duration{"alice/archive/0001/application_1700000000000_0001/n1_8041": old}},
			kept: []string{"alice/archive/0001/application_1700000000000_0001/n1_8041"},
		},
		{
			name: "a folder in a bucket that is not an application's is left alone",
			tree: tree{files: map[string]time.Duration{"alice/bucket-logs-tfile/0001/lost+found/x": old}},
			kept: []string{"alice/bucket-logs-tfile/0001/lost+found/x"},
		},
		{
			name: "files beside the user, suffix and bucket folders are left alone",
			tree: tree{files: map[string]time.Duration{"README": old, "alice/notes": old, "alice/bucket-logs-tfile/0001.txt": old}},
			kept: []string{"README", "alice/bucket-logs-tfile/0001.txt", "alice/notes"},
		},
		{
			name: "everything at once",
			tree: tree{files: map[string]time.Duration{
				finished + "/n1_8041": old, running + "/n1_8041": old, running + "/n2_8041": young,
				killed + "/n1_8041": young, unknown + "/n1_8041": old, older + "/n1_8041": old,
			}},
			kept:  []string{killed + "/n1_8041", older + "/n1_8041", running + "/n2_8041"},
			gone:  []string{finished, unknown},
			swept: Swept{Applications: 2, Files: 1},
		},
	}
}

func newService(t *testing.T, root string, st Store, interval time.Duration) *Service {
	t.Helper()
	s, err := New(Config{
		Settings: Settings{Enabled: true, Retain: retain, Interval: interval, Roots: []string{root}},
		Stores:   map[string]Store{root: st},
		Apps:     apps,
		Now:      func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeLocal lays the tree out under root with its times.
func writeLocal(t *testing.T, root string, tr tree) {
	t.Helper()
	dirs := map[string]bool{}
	for f, age := range tr.files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Folder times last: writing into a folder changes its time.
	for d := range dirs {
		age, ok := tr.dirs[d]
		if !ok {
			age = old
		}
		if err := os.Chtimes(filepath.Join(root, d), now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
}

// localFiles lists the files under root, relative and sorted.
func localFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSweepOfALocalFolder(t *testing.T) {
	for _, tc := range sweepCases() {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeLocal(t, root, tc.tree)
			got, err := newService(t, root, logs.LocalStore{}, time.Minute).Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.swept {
				t.Errorf("swept %+v, want %+v", got, tc.swept)
			}
			if files := localFiles(t, root); !slices.Equal(files, sorted(tc.kept)) {
				t.Errorf("left %q, want %q", files, sorted(tc.kept))
			}
			for _, g := range tc.gone {
				if _, err := os.Stat(filepath.Join(root, g)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s not deleted whole: %v", g, err)
				}
			}
		})
	}
}

// clock is gofakes3's time source, set before each object is put so that
// it has the tree's time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// fakeS3 is an S3 server holding bucket "logs", and a store on it.
type fakeS3 struct {
	backend *s3mem.Backend
	clock   *clock
	store   *logs.S3Store
}

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	c := &clock{t: now}
	backend := s3mem.New(s3mem.WithTimeSource(c))
	if err := backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	st := logs.NewS3Store(logs.S3Config{Endpoint: srv.URL, PathStyle: true, Region: "us-east-1", AccessKeyID: "id", SecretAccessKey: "secret"})
	return &fakeS3{backend: backend, clock: c, store: st}
}

func (f *fakeS3) put(t *testing.T, key string, mtime time.Time) {
	t.Helper()
	f.clock.set(mtime)
	if _, err := f.backend.PutObject("logs", key, nil, bytes.NewReader([]byte(key)), int64(len(key)), nil); err != nil {
		t.Fatal(err)
	}
	f.clock.set(now)
}

func (f *fakeS3) keys(t *testing.T, prefix string) []string {
	t.Helper()
	res, err := f.backend.ListBucket("logs", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range res.Contents {
		if rest, ok := strings.CutPrefix(o.Key, prefix); ok {
			out = append(out, rest)
		}
	}
	return sorted(out)
}

func TestSweepOfAnS3Prefix(t *testing.T) {
	for _, tc := range sweepCases() {
		if tc.localOnly {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			s3 := newFakeS3(t)
			for f, age := range tc.tree.files {
				s3.put(t, "app-logs/"+f, now.Add(-age))
			}
			// A neighbour beside the root is not the root's.
			s3.put(t, "app-logs-other/alice/bucket-logs-tfile/0001/application_1700000000000_0001/n1_8041", now.Add(-old))
			got, err := newService(t, "s3a://logs/app-logs", s3.store, time.Minute).Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.swept {
				t.Errorf("swept %+v, want %+v", got, tc.swept)
			}
			if keys := s3.keys(t, "app-logs/"); !slices.Equal(keys, sorted(tc.kept)) {
				t.Errorf("left %q, want %q", keys, sorted(tc.kept))
			}
			if n := len(s3.keys(t, "app-logs-other/")); n != 1 {
				t.Errorf("%d objects beside the root, want 1", n)
			}
		})
	}
}

// flaky fails its first listings of folders ending in listDir (every
// folder when empty) and its first deletes, then is the store it wraps.
type flaky struct {
	Store
	listDir              string
	failList, failDelete atomic.Int32
}

var errDown = errors.New("store down")

func (f *flaky) Entries(ctx context.Context, dir string) ([]logs.RemoteEntry, error) {
	if strings.HasSuffix(dir, f.listDir) && f.failList.Add(-1) >= 0 {
		return nil, errDown
	}
	return f.Store.Entries(ctx, dir)
}

func (f *flaky) Delete(ctx context.Context, p string) error {
	if f.failDelete.Add(-1) >= 0 {
		return errDown
	}
	return f.Store.Delete(ctx, p)
}

func TestAFailingStoreIsTriedAgainNextRound(t *testing.T) {
	tests := []struct {
		name                 string
		listDir              string
		failList, failDelete int32
	}{
		{"listing the root fails", "", 1, 0},
		{"listing the root fails for three rounds", "", 3, 0},
		{"listing an application's folder fails", filepath.FromSlash(finished), 1, 0},
		{"deleting fails", "", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeLocal(t, root, tree{files: map[string]time.Duration{finished + "/n1_8041": old, running + "/n1_8041": old}})
			st := &flaky{Store: logs.LocalStore{}, listDir: tt.listDir}
			st.failList.Store(tt.failList)
			st.failDelete.Store(tt.failDelete)
			s := newService(t, root, st, time.Minute)
			var rounds int
			for ; rounds < 10; rounds++ {
				_, err := s.Sweep(t.Context())
				if err == nil {
					break
				}
				if !errors.Is(err, errDown) {
					t.Fatalf("round %d: %v, want the store's error", rounds, err)
				}
			}
			if want := max(tt.failList, tt.failDelete); int32(rounds) != want {
				t.Errorf("%d rounds failed, want %d", rounds, want)
			}
			if files := localFiles(t, root); len(files) != 0 {
				t.Errorf("left %q after %d failed rounds and a good one", files, rounds)
			}
		})
	}
}

// TestRunKeepsGoingPastAFailingRound: a round that fails neither stops Run
// nor keeps the next round from deleting.
func TestRunKeepsGoingPastAFailingRound(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opts) })
	root := t.TempDir()
	writeLocal(t, root, tree{files: map[string]time.Duration{finished + "/n1_8041": old}})
	st := &flaky{Store: logs.LocalStore{}}
	st.failList.Store(3)
	s := newService(t, root, st, time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(localFiles(t, root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the application's logs were not deleted after the store came back")
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended before its context: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	good := Config{
		Settings: Settings{Enabled: true, Retain: retain, Interval: time.Minute, Roots: []string{"/r"}},
		Stores:   map[string]Store{"/r": logs.LocalStore{}},
		Apps:     apps,
	}
	if _, err := New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"not enabled", func(c *Config) { c.Settings.Enabled = false }},
		{"no interval", func(c *Config) { c.Settings.Interval = 0 }},
		{"no RM", func(c *Config) { c.Apps = nil }},
		{"a root without a store", func(c *Config) { c.Stores = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Stores = maps.Clone(good.Stores)
			tt.change(&c)
			if _, err := New(c); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
