package localizer

import (
	"context"
	"errors"
	"github.com/knitdev/knit/test/eventually"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedServer serves body to every GET once open is closed, counting the
// requests.
type gatedServer struct {
	*httptest.Server
	requests atomic.Int32
	open     chan struct{}
	gone     chan struct{} // receives when a request's context ends early
}

func newGatedServer(t *testing.T, body string) *gatedServer {
	t.Helper()
	s := &gatedServer{open: make(chan struct{}), gone: make(chan struct{}, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		select {
		case <-s.open:
			_, _ = w.Write([]byte(body))
		case <-r.Context().Done():
			s.gone <- struct{}{}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// waiters is how many asks wait on the download of the entry for url.
func (e *env) waiters(url string) int {
	c := e.l.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, en := range c.entries {
		if k.URL == url && en.flight != nil {
			return en.flight.waiters
		}
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, what, cond)
}

// settle waits for the background downloads, and their evictions, to end.
func (e *env) settle() { e.l.cache.wg.Wait() }

func TestConcurrentPreparesDownloadAPublicResourceOnce(t *testing.T) {
	const containers = 8
	srv := newGatedServer(t, "shared")
	e := newEnv(t)
	u := srv.URL + "/spark-libs.jar"
	var wg sync.WaitGroup
	files := make([]string, containers)
	for i := range containers {
		wg.Go(func() {
			f, err := e.l.Prepare(context.Background(), launchContext(t, i+1, []kv{{"libs.jar", lr(t, u, 6, 0, typeFile, visPublic, "")}}, nil, nil), nil)
			if err != nil || f.Failure != "" {
				t.Errorf("Prepare: %v %s", err, f.Failure)
				return
			}
			files[i], _ = os.Readlink(filepath.Join(f.WorkDir, "libs.jar"))
		})
	}
	waitFor(t, "every container to wait on one download", func() bool { return e.waiters(u) == containers })
	close(srv.open)
	wg.Wait()
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("the resource was requested %d times, want once", n)
	}
	for i, p := range files {
		if p != files[0] || !strings.HasPrefix(p, filepath.Join(e.cfg.LocalDirs[0], "filecache")+"/") {
			t.Errorf("container %d links %q, want the one public copy %q", i+1, p, files[0])
		}
	}
}

func TestCancelledSoleAskStopsTheDownload(t *testing.T) {
	srv := newGatedServer(t, "late")
	e := newEnv(t)
	u := srv.URL + "/big.jar"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.l.Prepare(ctx, launchContext(t, 1, []kv{{"big.jar", lr(t, u, 4, 0, typeFile, visPublic, "")}}, nil, nil), nil)
		done <- err
	}()
	waitFor(t, "the download to start", func() bool { return srv.requests.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Prepare = %v, want context.Canceled (the node's error, not a Failure)", err)
	}
	select {
	case <-srv.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the download went on with nobody waiting")
	}
	close(srv.open)
	f := e.prepare(2, []kv{{"big.jar", lr(t, u, 4, 0, typeFile, visPublic, "")}}, nil)
	if f.Failure != "" || readLink(t, f, "big.jar") != "late" {
		t.Errorf("a later ask did not download afresh: %q", f.Failure)
	}
}

func TestEvictionTrimsLeastRecentlyUsedAndKeepsWhatIsInUse(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CacheTargetBytes = 25 })
	res := make([]kv, 4)
	for i := range res {
		name := []string{"r1", "r2", "r3", "r4"}[i]
		u, size, ts := e.file(name, []byte("0123456789"))
		res[i] = kv{name, lr(t, u, size, ts, typeFile, visPublic, "")}
	}
	cached := map[string]string{}
	hold := func(container int, r ...kv) {
		t.Helper()
		f := e.prepare(container, r, nil)
		if f.Failure != "" {
			t.Fatal(f.Failure)
		}
		for _, x := range r {
			cached[x.key], _ = os.Readlink(filepath.Join(f.WorkDir, x.key))
		}
		e.settle()
	}
	present := func(name string) bool {
		_, err := os.Stat(cached[name])
		return err == nil
	}

	hold(1, res[0])
	hold(2, res[1])
	e.l.Release(testContainer(2))
	hold(3, res[2]) // 30 bytes: r2, unused, goes
	if present("r2") || !present("r1") || !present("r3") {
		t.Fatalf("after r3: r1 %v r2 %v r3 %v, want r2 evicted only", present("r1"), present("r2"), present("r3"))
	}
	e.l.Release(testContainer(3))
	hold(4, res[3]) // 30 bytes again: r3 is the only one unused
	if present("r3") || !present("r1") || !present("r4") {
		t.Fatalf("after r4: r1 %v r3 %v r4 %v, want r3 evicted, r1 kept in use", present("r1"), present("r3"), present("r4"))
	}
	hold(5, res[1], res[2]) // 40 bytes, all in use: nothing goes
	for _, n := range []string{"r1", "r2", "r3", "r4"} {
		if !present(n) {
			t.Errorf("%s was evicted while in use", n)
		}
	}
	e.l.Release(testContainer(1))
	e.l.Release(testContainer(4))
	e.l.Release(testContainer(5))
	left := 0
	for _, n := range []string{"r1", "r2", "r3", "r4"} {
		if present(n) {
			left++
		}
	}
	if left != 2 {
		t.Errorf("%d resources left once nothing is in use, want 2 (20 of the 25 bytes)", left)
	}
}

func TestCacheLayoutFollowsVisibility(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("lib.jar", []byte("lib"))
	local := e.cfg.LocalDirs[0]
	tests := []struct {
		name string
		res  kv
		dir  string
	}{
		{"PUBLIC", kv{"lib.jar", lr(t, u, size, ts, typeFile, visPublic, "")}, filepath.Join(local, "filecache")},
		{"PRIVATE", kv{"lib.jar", lr(t, u, size, ts, typeFile, visPrivate, "")}, filepath.Join(local, "usercache", testUser, "filecache")},
		{"APPLICATION", kv{"lib.jar", lr(t, u, size, ts, typeFile, visApp, "")}, filepath.Join(local, "usercache", testUser, "appcache", testApp, "filecache")},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := e.prepare(i+1, []kv{tc.res}, nil)
			p, err := os.Readlink(filepath.Join(f.WorkDir, "lib.jar"))
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(tc.dir, p)
			if err != nil || len(strings.Split(rel, "/")) != 2 || filepath.Base(rel) != "lib.jar" {
				t.Errorf("localized at %s, want %s/<n>/lib.jar", p, tc.dir)
			}
		})
	}
}

func TestCleanApplicationRemovesItsFolders(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("lib.jar", []byte("lib"))
	f := e.prepare(1, []kv{
		{"app.jar", lr(t, u, size, ts, typeFile, visApp, "")},
		{"pub.jar", lr(t, u, size, ts, typeFile, visPublic, "")},
	}, nil)
	pub, _ := os.Readlink(filepath.Join(f.WorkDir, "pub.jar"))
	e.l.Release(testContainer(1))
	if apps, err := e.l.Applications(); err != nil || len(apps) != 1 || apps[0] != testApp {
		t.Errorf("Applications = %v %v, want [%s]", apps, err, testApp)
	}
	if err := e.l.CleanApplication(testApp); err != nil {
		t.Fatal(err)
	}
	for _, d := range f.LocalDirs {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", d, err)
		}
	}
	if _, err := os.Stat(pub); err != nil {
		t.Errorf("the PUBLIC copy went with the application: %v", err)
	}
	f = e.prepare(2, []kv{{"app.jar", lr(t, u, size, ts, typeFile, visApp, "")}}, nil)
	if f.Failure != "" || readLink(t, f, "app.jar") != "lib" {
		t.Errorf("the application's resource was not localized again: %q", f.Failure)
	}
	if err := e.l.CleanApplication(testApp); err != nil {
		t.Fatal(err)
	}
	if apps, _ := e.l.Applications(); len(apps) != 0 {
		t.Errorf("Applications = %v after cleaning", apps)
	}
	if err := e.l.CleanApplication("../../etc"); err == nil {
		t.Error("CleanApplication took a path for an application id")
	}
}

func TestRestartFindsTheCacheAgain(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("lib.jar", []byte("kept"))
	f := e.prepare(1, []kv{{"lib.jar", lr(t, u, size, ts, typeFile, visPublic, "")}}, nil)
	first, _ := os.Readlink(filepath.Join(f.WorkDir, "lib.jar"))
	if err := e.l.Close(); err != nil {
		t.Fatal(err)
	}
	fileCache := filepath.Join(e.cfg.LocalDirs[0], "filecache")
	for _, d := range []string{"90_tmp", "91"} {
		if err := os.MkdirAll(filepath.Join(fileCache, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(strings.TrimPrefix(u, "file://")); err != nil {
		t.Fatal(err)
	}

	e.open()
	f = e.prepare(1, []kv{{"lib.jar", lr(t, u, size, ts, typeFile, visPublic, "")}}, nil)
	if f.Failure != "" {
		t.Fatalf("the restarted localizer went to the (gone) source: %s", f.Failure)
	}
	if again, _ := os.Readlink(filepath.Join(f.WorkDir, "lib.jar")); again != first {
		t.Errorf("linked %s after the restart, want the cached %s", again, first)
	}
	if _, err := os.Stat(filepath.Join(fileCache, "90_tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a half-written download was left (%v)", err)
	}
	v, size2, ts2 := e.file("new.jar", []byte("new"))
	f = e.prepare(2, []kv{{"new.jar", lr(t, v, size2, ts2, typeFile, visPublic, "")}}, nil)
	if p, _ := os.Readlink(filepath.Join(f.WorkDir, "new.jar")); p != filepath.Join(fileCache, "92", "new.jar") {
		t.Errorf("new download at %s, want the numbering to go on past 91", p)
	}
}
