package localizer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/knitdev/knit/rks/launch"
)

func TestPrepareBuildsTheWorkFolder(t *testing.T) {
	whitelist := []launch.EnvVar{{Name: "JAVA_HOME", Value: "/usr/lib/jvm"}, {Name: "HADOOP_CONF_DIR", Value: "/etc/hadoop"}}
	aux := map[string][]byte{"mapreduce_shuffle": {0, 0, 0x35, 0x0e}}
	e := newEnv(t, func(c *Config) { c.Whitelist, c.AuxServices = whitelist, aux })
	jarURL, jarSize, jarTS := e.file("job.jar", []byte("jar"))
	xmlURL, xmlSize, xmlTS := e.file("core-site.xml", []byte("<configuration/>"))
	c := launchContext(t, 1, []kv{
		{"job.jar", lr(t, jarURL, jarSize, jarTS, typeFile, visApp, "")},
		{"conf/core-site.xml", lr(t, xmlURL, xmlSize, xmlTS, typeFile, visPrivate, "")},
	}, [][2]string{{"CLASSPATH", "$PWD/*"}, {"A", "1"}, {"B", "$A"}}, []string{"$JAVA_HOME/bin/java", "-cp", "job.jar", "Main"})
	c.AppSubmitTime, c.WebProxyBase = 1700000000999, "/proxy/"+testApp
	creds := []byte("HDTS\x00\x00\x00")
	f, err := e.l.Prepare(context.Background(), c, creds)
	if err != nil || f.Failure != "" {
		t.Fatalf("Prepare: %v %s", err, f.Failure)
	}

	var appDirs, userDirs []string
	for _, d := range e.cfg.LocalDirs {
		userDirs = append(userDirs, filepath.Join(d, "usercache", testUser)+"/")
		appDirs = append(appDirs, filepath.Join(d, "usercache", testUser, "appcache", testApp))
	}
	workDir := filepath.Join(appDirs[0], testContainer(1))
	want := launch.Files{
		ContainerID: testContainer(1), User: testUser, NMHost: "node1", NMPort: 8041, NMHTTPPort: 8042,
		LocalDirs: appDirs, LocalUserDirs: userDirs,
		LogDirs: []string{filepath.Join(e.cfg.LogDirs[0], testApp, testContainer(1))},
		WorkDir: workDir, TokenFile: filepath.Join(workDir, "container_tokens"), HomeDir: "/home/",
		AppSubmitTime: 1700000000999, WebProxyBase: "/proxy/" + testApp,
		AuxServices: aux, Whitelist: whitelist,
		Env:      []launch.EnvVar{{Name: "CLASSPATH", Value: "$PWD/*"}, {Name: "A", Value: "1"}, {Name: "B", Value: "$A"}},
		Commands: []string{"$JAVA_HOME/bin/java", "-cp", "job.jar", "Main"},
		// Both downloaded for this container; the clock stands still.
		LocalizationCounters: fmt.Sprintf("%d,0,2,0,0", jarSize+xmlSize),
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("Files\n got %+v\nwant %+v", f, want)
	}
	for _, d := range append(slicesOf(f.LocalDirs, f.LogDirs), f.WorkDir) {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("folder %s not made: %v", d, err)
		}
	}
	if got := readLink(t, f, "job.jar"); got != "jar" {
		t.Errorf("job.jar holds %q", got)
	}
	if got := readLink(t, f, "conf/core-site.xml"); got != "<configuration/>" {
		t.Errorf("conf/core-site.xml holds %q", got)
	}
	if st, err := os.Lstat(filepath.Join(f.WorkDir, "job.jar")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("job.jar is not a link: %v", err)
	}
	if st, err := os.Stat(filepath.Join(f.WorkDir, "job.jar")); err != nil || st.Mode().Perm() != 0o555 {
		t.Errorf("job.jar is localized with mode %v (%v), want 0555 as FSDownload's", st.Mode(), err)
	}
	st, err := os.Stat(f.TokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v, want 0600", err, st.Mode())
	}
	if b, _ := os.ReadFile(f.TokenFile); string(b) != string(creds) {
		t.Errorf("token file holds %q, want the credentials", b)
	}
	// A second container of the application finds both in the cache.
	if _, err := e.l.Prepare(context.Background(), launchContext(t, 2, []kv{
		{"job.jar", lr(t, jarURL, jarSize, jarTS, typeFile, visApp, "")},
		{"conf/core-site.xml", lr(t, xmlURL, xmlSize, xmlTS, typeFile, visPrivate, "")},
	}, nil, []string{"true"}), creds); err != nil {
		t.Fatal(err)
	}
	wantStats := Stats{Prepared: 2, BytesFetched: jarSize + xmlSize, BytesCached: jarSize + xmlSize, FilesFetched: 2, FilesCached: 2}
	if got := e.l.Stats(); got != wantStats {
		t.Errorf("Stats %+v, want %+v", got, wantStats)
	}
}

func TestPrepareMakesTheFoldersAndFilesTheNodeManagerDoes(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("tmp.jar", []byte("jar"))
	tests := []struct {
		name  string
		res   []kv
		creds []byte
		check func(t *testing.T, f launch.Files)
	}{
		{
			name:  "the work folder and the tmp folder in it are 0710, as DefaultContainerExecutor.APPDIR_PERM",
			creds: []byte("HDTS\x00\x00\x00"),
			check: func(t *testing.T, f launch.Files) {
				for _, d := range []string{f.WorkDir, filepath.Join(f.WorkDir, "tmp")} {
					if st, err := os.Lstat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o710 {
						t.Errorf("%s: %v, %v; want a folder with mode 0710", d, st, err)
					}
				}
			},
		},
		{
			name: "the log folders are 0710, as yarn.nodemanager.default-container-executor.log-dirs.permissions",
			check: func(t *testing.T, f launch.Files) {
				for _, d := range f.LogDirs {
					if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o710 {
						t.Errorf("%s: %v, %v; want mode 0710", d, st, err)
					}
				}
			},
		},
		{
			name: "the application folders stay open for the node's other services",
			check: func(t *testing.T, f launch.Files) {
				for _, d := range f.LocalDirs {
					if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o755 {
						t.Errorf("%s: %v, %v; want mode 0755", d, st, err)
					}
				}
			},
		},
		{
			name: "a container without credentials gets an empty Credentials file, as the NodeManager writes",
			check: func(t *testing.T, f launch.Files) {
				if f.TokenFile != filepath.Join(f.WorkDir, launch.TokenFileName) {
					t.Fatalf("TokenFile = %q", f.TokenFile)
				}
				if b, err := os.ReadFile(f.TokenFile); err != nil || string(b) != "HDTS\x00\x00\x00" {
					t.Errorf("token file %q, %v; want empty WRITABLE Credentials", b, err)
				}
			},
		},
		{
			name: "a resource named tmp keeps its link",
			res:  []kv{{"tmp", lr(t, u, size, ts, typeFile, visApp, "")}},
			check: func(t *testing.T, f launch.Files) {
				if got := readLink(t, f, "tmp"); got != "jar" {
					t.Errorf("tmp holds %q", got)
				}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := e.prepare(i+1, tt.res, tt.creds)
			if f.Failure != "" {
				t.Fatalf("Failure: %s", f.Failure)
			}
			tt.check(t, f)
		})
	}
}

func TestPrepareAgainRestoresTheFolders(t *testing.T) {
	e := newEnv(t)
	f := e.prepare(1, nil, nil)
	for _, d := range []string{f.WorkDir, filepath.Join(f.WorkDir, "tmp")} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(f.TokenFile); err != nil {
		t.Fatal(err)
	}
	f = e.prepare(1, nil, nil)
	for _, d := range []string{f.WorkDir, filepath.Join(f.WorkDir, "tmp")} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o710 {
			t.Errorf("%s: %v, %v; want mode 0710 again", d, st, err)
		}
	}
	if _, err := os.Stat(f.TokenFile); err != nil {
		t.Errorf("token file not written again: %v", err)
	}
}

func slicesOf(a, b []string) []string { return append(append([]string{}, a...), b...) }

func TestPrepareRejectsBadKeys(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("lib.jar", []byte("lib"))
	for i, key := range []string{"../x", "/etc/passwd", "a/../../b", "a/../b", "", "container_tokens"} {
		t.Run(key, func(t *testing.T) {
			f := e.prepare(i+1, []kv{{key, lr(t, u, size, ts, typeFile, visPrivate, "")}}, nil)
			if !strings.HasPrefix(f.Failure, "Invalid local resource key") {
				t.Errorf("Failure = %q, want the key rejected", f.Failure)
			}
		})
	}
}

func TestPrepareLinksAsLnSf(t *testing.T) {
	e := newEnv(t)
	a, aSize, aTS := e.file("a.jar", []byte("a"))
	b, bSize, bTS := e.file("b.jar", []byte("b"))
	e.prepare(1, []kv{{"lib.jar", lr(t, a, aSize, aTS, typeFile, visPrivate, "")}}, nil)
	f := e.prepare(1, []kv{{"lib.jar", lr(t, b, bSize, bTS, typeFile, visPrivate, "")}}, nil)
	if got := readLink(t, f, "lib.jar"); got != "b" {
		t.Errorf("a second Prepare left lib.jar holding %q, want it replaced", got)
	}
	tests := []struct {
		name string
		res  []kv
		want string
	}{
		{
			"a key under another key's link",
			[]kv{{"x", lr(t, a, aSize, aTS, typeFile, visPrivate, "")}, {"x/y", lr(t, b, bSize, bTS, typeFile, visPrivate, "")}},
			`Cannot link local resource "x/y"`,
		},
		{
			"a key naming another key's folder",
			[]kv{{"d/y", lr(t, a, aSize, aTS, typeFile, visPrivate, "")}, {"d", lr(t, b, bSize, bTS, typeFile, visPrivate, "")}},
			`Cannot link local resource "d": a folder of that name is in the way`,
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := e.prepare(i+2, tc.res, nil)
			if !strings.HasPrefix(f.Failure, tc.want) {
				t.Errorf("Failure = %q, want %q…", f.Failure, tc.want)
			}
		})
	}
}

func TestPrepareReturnsNodeErrors(t *testing.T) {
	e := newEnv(t)
	good := launchContext(t, 1, nil, nil, nil)
	tests := []struct {
		name   string
		mutate func(*launch.Context)
	}{
		{"bad container id", func(c *launch.Context) { c.ContainerID = "container_x" }},
		{"user that is a path", func(c *launch.Context) { c.User = "../root" }},
		{"undecodable launch context", func(c *launch.Context) { c.LaunchContext = []byte{0xff, 0xff} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mutate(&c)
			if _, err := e.l.Prepare(context.Background(), c, nil); err == nil || !strings.HasPrefix(err.Error(), "localizer: ") {
				t.Errorf("Prepare = %v, want a localizer error", err)
			}
		})
	}
}

func TestNewNeedsFolders(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no local dirs", Config{LogDirs: []string{t.TempDir()}}},
		{"no log dirs", Config{LocalDirs: []string{t.TempDir()}}},
		{"relative folder", Config{LocalDirs: []string{"local"}, LogDirs: []string{t.TempDir()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func TestWriteFilesIsWhatTheLauncherReads(t *testing.T) {
	dir := t.TempDir()
	f := launch.Files{ContainerID: testContainer(1), WorkDir: "/w", Env: []launch.EnvVar{{Name: "A", Value: "1"}}, Commands: []string{"true"}}
	if err := WriteFiles(dir, "uid-1", f); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(launch.FilesPath(dir, "uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := launch.DecodeFiles(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("read back %+v, want %+v", got, f)
	}
	if err := WriteFiles(dir, "../escape", f); err == nil {
		t.Error("WriteFiles took a path for a pod uid")
	}
}

func TestPrepareHandsTheContainersFoldersToItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("handing files to another user needs root, as knit-node runs")
	}
	e := newEnv(t)
	c := launchContext(t, 1, nil, nil, []string{"true"})
	uid, gid := int64(4321), int64(8765)
	c.RunAsUser, c.RunAsGroup = &uid, &gid
	f, err := e.l.Prepare(context.Background(), c, []byte("HDTS\x00\x00\x00"))
	if err != nil || f.Failure != "" {
		t.Fatalf("Prepare: %v %s", err, f.Failure)
	}
	for _, p := range append(slicesOf(f.LocalDirs, f.LogDirs), f.WorkDir, filepath.Join(f.WorkDir, "tmp"), f.TokenFile) {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if int64(st.Uid) != uid || int64(st.Gid) != gid {
			t.Errorf("%s belongs to %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
}

func TestAResourceInTheCacheCountsAsAHit(t *testing.T) {
	e := newEnv(t)
	u, size, ts := e.file("libs.jar", []byte("public bytes"))
	res := []kv{{"libs.jar", lr(t, u, size, ts, typeFile, visPublic, "")}}
	first, err := e.l.Prepare(context.Background(), launchContext(t, 1, res, nil, nil), nil)
	if err != nil || first.Failure != "" {
		t.Fatalf("Prepare: %v %s", err, first.Failure)
	}
	second, err := e.l.Prepare(context.Background(), launchContext(t, 2, res, nil, nil), nil)
	if err != nil || second.Failure != "" {
		t.Fatalf("Prepare: %v %s", err, second.Failure)
	}
	if want := fmt.Sprintf("%d,0,1,0,0", size); first.LocalizationCounters != want {
		t.Errorf("first container's counters %q, want %q", first.LocalizationCounters, want)
	}
	if want := fmt.Sprintf("0,%d,0,1,0", size); second.LocalizationCounters != want {
		t.Errorf("second container's counters %q, want %q", second.LocalizationCounters, want)
	}
}

func TestWriteThreadDumpsHandsOnTheCount(t *testing.T) {
	dir := t.TempDir()
	path := launch.ThreadDumpsPath(dir, "uid-1")
	for _, n := range []string{"1", "1", "2"} {
		if err := WriteThreadDumps(dir, "uid-1", n); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != n {
			t.Fatalf("count file %q, %v; want %q", b, err, n)
		}
	}
	for _, bad := range []string{"", "-1", "many"} {
		if err := WriteThreadDumps(dir, "uid-1", bad); err == nil {
			t.Errorf("count %q accepted", bad)
		}
	}
	if err := WriteThreadDumps(dir, "..", "1"); err == nil {
		t.Error("a pod uid of .. accepted")
	}
}
