package sparkshuffle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf16"
)

// nonNegativeHash is Spark's JavaUtils.nonNegativeHash of a string: Java's
// String.hashCode over UTF-16 code units, its absolute value, and 0 for
// Integer.MIN_VALUE.
func nonNegativeHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == -1<<31:
		return 0
	case h < 0:
		return -h
	}
	return h
}

// execDir is one registered local dir of an executor, split into the
// application folder files are opened beneath (an os.Root) and the path
// within it.
type execDir struct {
	full string // as registered, cleaned
	root string // <local dir>/usercache/<user>/appcache/<app>
	rel  string // full relative to root; "." for the folder itself
}

// executor is a registered executor.
type executor struct {
	info ExecutorShuffleInfo
	user string
	dirs []execDir
}

// file is where an executor's file of name lives: Spark's
// ExecutorDiskUtils.getFilePath (dir by hash, then the "%02x" sub-dir).
func (e *executor) file(name string) (full, root, rel string) {
	h := nonNegativeHash(name)
	n := int32(len(e.dirs))
	d := e.dirs[h%n]
	sub := fmt.Sprintf("%02x", (h/n)%e.info.SubDirsPerLocalDir)
	return filepath.Join(d.full, sub, name), d.root, filepath.Join(d.rel, sub, name)
}

// knownManagers are the shuffle managers whose files the service reads
// (ExternalShuffleBlockResolver.knownManagers).
func knownManager(m string) bool {
	return m == "org.apache.spark.shuffle.sort.SortShuffleManager" ||
		m == "org.apache.spark.shuffle.unsafe.UnsafeShuffleManager"
}

// resolveExecutor checks a registration and finds the application folder
// of each of its dirs: every dir must lie in
// <node local dir>/usercache/<user>/appcache/<app>, with one user for all
// and, when the node knows the application's user, that user. Spark trusts
// the executor here; Knit does not let one application name another's
// files, or any other file of the node.
func resolveExecutor(localDirs []string, app, knownUser string, info ExecutorShuffleInfo) (*executor, error) {
	if !knownManager(info.ShuffleManager) {
		return nil, unsupported(fmt.Sprintf("Unsupported shuffle manager of executor: ExecutorShuffleInfo[localDirs=[%s],subDirsPerLocalDir=%d,shuffleManager=%s]",
			strings.Join(info.LocalDirs, ", "), info.SubDirsPerLocalDir, info.ShuffleManager))
	}
	if len(info.LocalDirs) == 0 || info.SubDirsPerLocalDir <= 0 {
		return nil, illegalArgument(fmt.Sprintf("executor registers %d local dirs with %d sub-dirs each", len(info.LocalDirs), info.SubDirsPerLocalDir))
	}
	if !isPathElement(app) {
		return nil, illegalArgument(fmt.Sprintf("application id %q cannot name a folder", app))
	}
	e := &executor{info: info, user: knownUser}
	for _, d := range info.LocalDirs {
		ed, user, ok := appFolder(localDirs, app, d)
		if !ok || (e.user != "" && user != e.user) {
			return nil, illegalArgument(fmt.Sprintf("local dir %s is not in the folder of application %s on this node", d, app))
		}
		e.user = user
		e.dirs = append(e.dirs, ed)
	}
	return e, nil
}

// appFolder splits dir into <node dir>/usercache/<user>/appcache/<app> and
// the rest.
func appFolder(nodeDirs []string, app, dir string) (execDir, string, bool) {
	if !filepath.IsAbs(dir) {
		return execDir{}, "", false
	}
	clean := filepath.Clean(dir)
	for _, nd := range nodeDirs {
		nd = filepath.Clean(nd)
		rest, ok := strings.CutPrefix(clean, nd+string(filepath.Separator))
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, string(filepath.Separator), 5)
		if len(parts) < 4 || parts[0] != "usercache" || !isPathElement(parts[1]) || parts[2] != "appcache" || parts[3] != app {
			continue
		}
		rel := "."
		if len(parts) == 5 {
			rel = parts[4]
		}
		return execDir{full: clean, root: filepath.Join(nd, "usercache", parts[1], "appcache", app), rel: rel}, parts[1], true
	}
	return execDir{}, "", false
}

// isPathElement reports whether s is one folder or file name.
func isPathElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// rootSet keeps an os.Root open per application folder, so a chunk costs
// one open beneath it: no "..", absolute path or symlink leads out.
type rootSet struct {
	mu    sync.Mutex
	roots map[string]*os.Root // nil once closed
}

func newRootSet() *rootSet { return &rootSet{roots: map[string]*os.Root{}} }

func (rs *rootSet) get(dir string) (*os.Root, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.roots == nil {
		return nil, os.ErrClosed
	}
	if r, ok := rs.roots[dir]; ok {
		return r, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	rs.roots[dir] = r
	return r, nil
}

// open opens rel beneath the folder root.
func (rs *rootSet) open(root, rel string) (*os.File, error) {
	r, err := rs.get(root)
	if err != nil {
		return nil, err
	}
	return r.Open(rel)
}

// forget closes the roots of an application's folders.
func (rs *rootSet) forget(app string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for dir, r := range rs.roots {
		if filepath.Base(dir) == app {
			r.Close()
			delete(rs.roots, dir)
		}
	}
}

func (rs *rootSet) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.roots {
		r.Close()
	}
	rs.roots = nil
}

// indexKey names an index file in the service's cache
// (spark.shuffle.service.index.cache.size), which counts 8 bytes an
// offset, the path and 64 bytes of overhead against its bound. Like Spark's
// shuffleIndexCache it is not told of removed files: a data file removed
// under a cached index fails when its bytes are sent.
type indexKey struct {
	app  string
	path string // the index file's full path, as registered
}

// maxIndexBytes bounds an index file: 2^24 partitions.
const maxIndexBytes = 8 << 24

// readIndex reads an index file: big-endian int64 offsets
// (ShuffleIndexInformation).
func readIndex(rs *rootSet, root, rel string) ([]int64, error) {
	f, err := rs.open(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxIndexBytes || len(b)%8 != 0 {
		return nil, fmt.Errorf("index file of %d bytes is not a whole number of offsets within bounds", len(b))
	}
	offs := make([]int64, len(b)/8)
	for i := range offs {
		offs[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
	}
	return offs, nil
}

// noSuchFile is the Java exception name of a file open failure.
func noSuchFile(err error, path string) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "java.nio.file.NoSuchFileException: " + path
	}
	return "java.io.IOException: " + err.Error()
}
