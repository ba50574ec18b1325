package localizer

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestPrepareUnpacksArchives(t *testing.T) {
	e := newEnv(t)
	plain := []archiveEntry{{name: "a.txt", body: "A"}, {name: "sub/", dir: true}, {name: "sub/b.txt", body: "B"}}
	jar := makeZip(t, []archiveEntry{
		{name: "META-INF/MANIFEST.MF", body: "Manifest-Version: 1.0"},
		{name: "classes/A.class", body: "class A"},
		{name: "lib/dep.jar", body: "dep"},
		{name: "other.txt", body: "other"},
	})
	tests := []struct {
		name    string
		file    string
		data    []byte
		typ     string
		pattern string
		want    map[string]string // path under the key → content
		absent  []string
	}{
		{"zip archive", "conf.zip", makeZip(t, plain), "ARCHIVE", "", map[string]string{"a.txt": "A", "sub/b.txt": "B"}, nil},
		{"tar.gz archive", "libs.tar.gz", makeTar(t, plain, true), "ARCHIVE", "", map[string]string{"a.txt": "A", "sub/b.txt": "B"}, nil},
		{"tgz archive", "libs.tgz", makeTar(t, plain, true), "ARCHIVE", "", map[string]string{"a.txt": "A", "sub/b.txt": "B"}, nil},
		{"tar archive", "libs.TAR", makeTar(t, plain, false), "ARCHIVE", "", map[string]string{"a.txt": "A", "sub/b.txt": "B"}, nil},
		{"jar archive", "job.jar", jar, "ARCHIVE", "", map[string]string{"classes/A.class": "class A", "other.txt": "other"}, nil},
		{
			"tar with a link inside", "venv.tar",
			makeTar(t, []archiveEntry{{name: "lib/libx.so.1", body: "x"}, {name: "lib/libx.so", symlink: "libx.so.1"}, {name: "bin/x", symlink: "../lib/libx.so"}}, false),
			"ARCHIVE", "", map[string]string{"lib/libx.so": "x", "bin/x": "x"}, nil,
		},
		{
			"pattern jar keeps matching entries and the jar", "app.jar", jar, "PATTERN", `(?:classes/|lib/).*`,
			map[string]string{"classes/A.class": "class A", "lib/dep.jar": "dep", "app.jar": string(jar)},
			[]string{"other.txt", "META-INF/MANIFEST.MF"},
		},
		{"pattern zip is unpacked whole", "p.zip", makeZip(t, plain), "PATTERN", `nothing`, map[string]string{"a.txt": "A", "sub/b.txt": "B"}, nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, size, ts := e.file(tc.file, tc.data)
			typ := typeArchive
			if tc.typ == "PATTERN" {
				typ = typePattern
			}
			f := e.prepare(i+1, []kv{{"res", lr(t, u, size, ts, typ, visPrivate, tc.pattern)}}, nil)
			if f.Failure != "" {
				t.Fatalf("Failure: %s", f.Failure)
			}
			for p, want := range tc.want {
				if got := readLink(t, f, filepath.Join("res", p)); got != want {
					t.Errorf("%s holds %q, want %q", p, got, want)
				}
			}
			for _, p := range tc.absent {
				if _, err := os.Lstat(filepath.Join(f.WorkDir, "res", p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s was unpacked, want it left out (err %v)", p, err)
				}
			}
		})
	}
}

func TestPrepareCopiesWhatIsNotAnArchive(t *testing.T) {
	e := newEnv(t)
	zipData := makeZip(t, []archiveEntry{{name: "a.txt", body: "A"}})
	tests := []struct {
		name, file string
		data       []byte
		typ        string
	}{
		{"FILE named .zip is not unpacked", "x.zip", zipData, "FILE"},
		{"ARCHIVE of unknown suffix is copied", "data.bin", []byte("raw"), "ARCHIVE"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, size, ts := e.file(tc.file, tc.data)
			typ := typeFile
			if tc.typ == "ARCHIVE" {
				typ = typeArchive
			}
			f := e.prepare(i+1, []kv{{"res", lr(t, u, size, ts, typ, visPrivate, "")}}, nil)
			if f.Failure != "" {
				t.Fatalf("Failure: %s", f.Failure)
			}
			if got := readLink(t, f, "res"); got != string(tc.data) {
				t.Errorf("res holds %q, want the source's bytes", got)
			}
		})
	}
}

func TestPrepareFailsOnBadArchives(t *testing.T) {
	e := newEnv(t)
	tgz := makeTar(t, []archiveEntry{{name: "a", body: strings.Repeat("a", 100000)}}, true)
	tests := []struct {
		name, file string
		data       []byte
		want       string // after "Failed to unpack resource <url>: "
	}{
		{"traversal", "evil.zip", makeZip(t, []archiveEntry{{name: "../../evil", body: "x"}}), `entry "../../evil" would create file outside of the archive's folder`},
		{"truncated tar.gz", "cut.tgz", tgz[:len(tgz)/2], "unexpected EOF"},
		{"not a zip", "fake.zip", []byte("text"), "zip: not a valid zip file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, size, ts := e.file(tc.file, tc.data)
			f := e.prepare(i+1, []kv{{"res", lr(t, u, size, ts, typeArchive, visPrivate, "")}}, nil)
			want := "Failed to unpack resource " + strings.Replace(u, "file://", "file:", 1) + ": " + tc.want
			if f.Failure != want {
				t.Errorf("Failure = %q\nwant      %q", f.Failure, want)
			}
		})
	}
}

// unpackInto unpacks data (a zip, a tar, or a tar.gz) into <root>/dst.
func unpackInto(t testing.TB, root, kind string, data []byte, lim limits) error {
	t.Helper()
	dst := filepath.Join(root, "dst")
	ctx := context.Background()
	switch kind {
	case "zip":
		src := filepath.Join(root, "in.zip")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return unzip(ctx, src, dst, nil, lim)
	case "tar":
		return untar(ctx, bytes.NewReader(data), dst, false, lim)
	default:
		return untar(ctx, bytes.NewReader(data), dst, true, lim)
	}
}

// assertContained fails if anything but the input and dst is in root, or
// if a link under dst leads out of it.
func assertContained(t testing.TB, root string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "dst" && e.Name() != "in.zip" {
			t.Errorf("%s was written outside the archive's folder", e.Name())
		}
	}
	dst := filepath.Join(root, "dst")
	realDst, err := filepath.EvalSymlinks(dst)
	if err != nil {
		return
	}
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			if rel, err := filepath.Rel(realDst, r); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("link %s leads to %s, outside", p, r)
			}
		}
		return nil
	})
}

func TestUnpackRejectsUntrustedArchives(t *testing.T) {
	lim := limits{maxBytes: 1 << 20, maxEntries: 100}
	big := strings.Repeat("0", 4096)
	tests := []struct {
		name    string
		kind    string
		entries []archiveEntry
		lim     limits
	}{
		{"zip parent traversal", "zip", []archiveEntry{{name: "../evil", body: "x"}}, lim},
		{"zip absolute path", "zip", []archiveEntry{{name: "/tmp/evil", body: "x"}}, lim},
		{"zip traversal after a folder", "zip", []archiveEntry{{name: "a/../../evil", body: "x"}}, lim},
		{"zip absolute link", "zip", []archiveEntry{{name: "l", symlink: "/etc"}}, lim},
		{"zip link to the parent", "zip", []archiveEntry{{name: "l", symlink: "../x"}}, lim},
		{"zip links chaining out", "zip", []archiveEntry{{name: "a", symlink: "."}, {name: "b", symlink: "a/a/../.."}}, lim},
		{"tar parent traversal", "tar", []archiveEntry{{name: "../evil", body: "x"}}, lim},
		{"tar absolute link", "tar", []archiveEntry{{name: "passwd", symlink: "/etc/passwd"}}, lim},
		{"tar hard link out", "tar", []archiveEntry{{name: "h", hardlink: "../../etc/passwd"}}, lim},
		{
			"tar hard link moving a relative link", "tar",
			[]archiveEntry{{name: "d/e/", dir: true}, {name: "d/e/l", symlink: "../.."}, {name: "l2", hardlink: "d/e/l"}}, lim,
		},
		{"tar.gz write through an outward link", "tgz", []archiveEntry{{name: "up", symlink: ".."}, {name: "up/evil", body: "x"}}, lim},
		{"too many entries", "zip", []archiveEntry{{name: "1"}, {name: "2"}, {name: "3"}, {name: "4"}}, limits{maxBytes: 1 << 20, maxEntries: 3}},
		{"unpacks past the byte limit", "zip", []archiveEntry{{name: "bomb", body: big}}, limits{maxBytes: 1000, maxEntries: 10}},
		{"tar past the byte limit", "tgz", []archiveEntry{{name: "a", body: big}, {name: "b", body: big}}, limits{maxBytes: 5000, maxEntries: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			if tc.kind == "zip" {
				data = makeZip(t, tc.entries)
			} else {
				data = makeTar(t, tc.entries, tc.kind == "tgz")
			}
			root := t.TempDir()
			err := unpackInto(t, root, tc.kind, data, tc.lim)
			if !errors.Is(err, errBadArchive) {
				t.Errorf("got %v, want a bad archive", err)
			}
			assertContained(t, root)
		})
	}
}

func TestUnpackRejectsCorruptArchives(t *testing.T) {
	tgz := makeTar(t, []archiveEntry{{name: "a", body: strings.Repeat("a", 10000)}}, true)
	tests := []struct {
		name, kind string
		data       []byte
	}{
		{"not a zip", "zip", []byte("not a zip")},
		{"truncated tar.gz", "tgz", tgz[:len(tgz)/2]},
		{"not gzip", "tgz", []byte("plain")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := unpackInto(t, t.TempDir(), tc.kind, tc.data, limits{maxBytes: 1 << 20, maxEntries: 10}); !errors.Is(err, errBadArchive) {
				t.Errorf("got %v, want a bad archive", err)
			}
		})
	}
}

func TestUnzipPatternMatchesWholeName(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "in.zip")
	data := makeZip(t, []archiveEntry{{name: "lib/a.jar", body: "a"}, {name: "xlib/b.jar", body: "b"}})
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	keep := regexp.MustCompile(`^(?:lib/.*)$`)
	if err := unzip(context.Background(), src, filepath.Join(root, "dst"), keep, limits{maxBytes: 1 << 20, maxEntries: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "dst", "lib", "a.jar")); err != nil {
		t.Errorf("lib/a.jar: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "dst", "xlib")); err == nil {
		t.Error("xlib/b.jar matched lib/.* as a substring, not as a whole name as Java's matches()")
	}
}

// fuzzLimits keep fuzzed archives small.
func fuzzLimits() limits { return limits{maxBytes: 1 << 20, maxEntries: 64} }

// fuzzRoots hands each execution a fresh, empty folder under one base made
// once per fuzz process, on tmpfs (/dev/shm) where the machine has it:
// the unpacker must write real files, but a disk's metadata writes and
// t.TempDir's per-test folder would bound the fuzzer at a few hundred
// executions a second. Each folder is removed when its execution ends.
type fuzzRoots struct {
	base string
	n    int
}

func newFuzzRoots(f *testing.F) *fuzzRoots {
	base, err := os.MkdirTemp("/dev/shm", "knit-fuzz-")
	if err != nil {
		base = f.TempDir()
	} else {
		f.Cleanup(func() { _ = os.RemoveAll(base) })
	}
	return &fuzzRoots{base: base}
}

// next is a new empty folder, removed when t ends. Executions of one fuzz
// process run one at a time, so n needs no lock.
func (r *fuzzRoots) next(t *testing.T) string {
	r.n++
	root := filepath.Join(r.base, strconv.Itoa(r.n))
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Error(err)
		}
	})
	return root
}

func FuzzUnzip(f *testing.F) {
	f.Add(makeZip(f, []archiveEntry{{name: "a.txt", body: "A"}, {name: "d/", dir: true}, {name: "d/b", body: "B"}}))
	f.Add(makeZip(f, []archiveEntry{{name: "../evil", body: "x"}}))
	f.Add(makeZip(f, []archiveEntry{{name: "a", symlink: "."}, {name: "b", symlink: "a/a/../.."}}))
	f.Add(makeZip(f, []archiveEntry{{name: "l", symlink: "sub"}, {name: "l/x", body: "x"}}))
	f.Add([]byte{})
	roots := newFuzzRoots(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		root := roots.next(t)
		// The archive is read from memory: the file unzip opens is
		// zip.OpenReader's business, not the unpacker's.
		if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err == nil {
			_ = unzipFrom(context.Background(), zr, filepath.Join(root, "dst"), nil, fuzzLimits())
		}
		assertContained(t, root)
	})
}

func FuzzUntar(f *testing.F) {
	seeds := [][]archiveEntry{
		{{name: "a.txt", body: "A"}, {name: "d/", dir: true}, {name: "d/b", body: "B"}},
		{{name: "../evil", body: "x"}},
		{{name: "up", symlink: ".."}, {name: "up/evil", body: "x"}},
		{{name: "d/e/l", symlink: "../.."}, {name: "l2", hardlink: "d/e/l"}},
	}
	for _, s := range seeds {
		f.Add(makeTar(f, s, false), false)
		f.Add(makeTar(f, s, true), true)
	}
	roots := newFuzzRoots(f)
	f.Fuzz(func(t *testing.T, data []byte, gz bool) {
		root := roots.next(t)
		kind := "tar"
		if gz {
			kind = "tgz"
		}
		_ = unpackInto(t, root, kind, data, fuzzLimits())
		assertContained(t, root)
	})
}
