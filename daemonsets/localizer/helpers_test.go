package localizer

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

const (
	testUser = "alice"
	testApp  = "application_1700000000000_0001"
)

// testContainer is the n-th container id of testApp's first attempt.
func testContainer(n int) string {
	return "container_1700000000000_0001_01_" + pad6(n)
}

func pad6(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}

// fixedNow is the clock of every test localizer.
func fixedNow() time.Time { return time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC) }

// env is a localizer on temporary folders, with a world-readable folder
// for file:// resources.
type env struct {
	t   *testing.T
	cfg Config
	l   *Localizer
	src string
}

func newEnv(t *testing.T, opts ...func(*Config)) *env {
	t.Helper()
	root := t.TempDir()
	cfg := Config{
		LocalDirs: []string{filepath.Join(root, "local1"), filepath.Join(root, "local2")},
		LogDirs:   []string{filepath.Join(root, "logs")},
		Now:       fixedNow,
	}
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, cfg: cfg, src: publicDir(t)}
	e.open()
	return e
}

// open (re)starts the localizer on the env's folders.
func (e *env) open() {
	e.t.Helper()
	l, err := New(e.cfg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.l = l
	e.t.Cleanup(func() { _ = l.Close() })
}

// publicDir is a temporary folder that FSDownload.isPublic would accept:
// it and its ancestors searchable by others.
func publicDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != "."; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(p, st.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// file writes a source file and returns its URL, size and mtime (ms).
func (e *env) file(name string, data []byte) (string, int64, int64) {
	e.t.Helper()
	p := filepath.Join(e.src, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return "file://" + p, st.Size(), st.ModTime().UnixMilli()
}

// prepare runs Prepare for container n with the given resources.
func (e *env) prepare(n int, res []kv, creds []byte) launch.Files {
	e.t.Helper()
	f, err := e.l.Prepare(context.Background(), launchContext(e.t, n, res, nil, nil), creds)
	if err != nil {
		e.t.Fatalf("Prepare: %v", err)
	}
	return f
}

// kv is one local resource of a launch context.
type kv struct {
	key string
	res *yarnpb.LocalResourceProto
}

func lr(t *testing.T, u string, size, ts int64, typ yarnpb.LocalResourceTypeProto, vis yarnpb.LocalResourceVisibilityProto, pattern string) *yarnpb.LocalResourceProto {
	t.Helper()
	p := &yarnpb.LocalResourceProto{
		Resource:   urlProto(t, u),
		Size:       proto.Int64(size),
		Timestamp:  proto.Int64(ts),
		Type:       typ.Enum(),
		Visibility: vis.Enum(),
	}
	if pattern != "" {
		p.Pattern = proto.String(pattern)
	}
	return p
}

// urlProto is what a Java client's URL.fromURI sends for u.
func urlProto(t *testing.T, s string) *yarnpb.URLProto {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	p := &yarnpb.URLProto{Scheme: proto.String(u.Scheme), File: proto.String(u.Path)}
	if u.Hostname() != "" {
		p.Host = proto.String(u.Hostname())
	}
	if u.Port() != "" {
		n, _ := strconv.Atoi(u.Port())
		p.Port = proto.Int32(int32(n))
	} else {
		p.Port = proto.Int32(-1)
	}
	if u.User != nil {
		p.UserInfo = proto.String(u.User.String())
	}
	return p
}

func launchContext(t *testing.T, n int, res []kv, env [][2]string, cmds []string) launch.Context {
	t.Helper()
	clc := &yarnpb.ContainerLaunchContextProto{Command: cmds}
	for _, r := range res {
		clc.LocalResources = append(clc.LocalResources, &yarnpb.StringLocalResourceMapProto{Key: proto.String(r.key), Value: r.res})
	}
	for _, v := range env {
		clc.Environment = append(clc.Environment, &yarnpb.StringStringMapProto{Key: proto.String(v[0]), Value: proto.String(v[1])})
	}
	b, err := proto.Marshal(clc)
	if err != nil {
		t.Fatal(err)
	}
	return launch.Context{
		ContainerID: testContainer(n), User: testUser,
		NMHost: "node1", NMPort: 8041, NMHTTPPort: 8042,
		LaunchContext: b,
	}
}

func readLink(t *testing.T, f launch.Files, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.WorkDir, key))
	if err != nil {
		t.Fatalf("read %s through the work folder: %v", key, err)
	}
	return string(b)
}

// archiveEntry is one entry of a test archive.
type archiveEntry struct {
	name     string
	body     string
	symlink  string // target, for a symbolic link
	hardlink string // target, for a tar hard link
	dir      bool
}

func makeZip(t testing.TB, entries []archiveEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		switch {
		case e.symlink != "":
			h.SetMode(fs.ModeSymlink | 0o777)
		case e.dir:
			h.SetMode(fs.ModeDir | 0o755)
		default:
			h.SetMode(0o644)
		}
		fw, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		body := e.body
		if e.symlink != "" {
			body = e.symlink
		}
		if _, err := fw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func makeTar(t testing.TB, entries []archiveEntry, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	var tw *tar.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.symlink != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.symlink, 0
		case e.hardlink != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.hardlink, 0
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
