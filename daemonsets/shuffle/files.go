package shuffle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// Map output file names (YarnOutputFiles / ShuffleHandler).
const (
	dataFileName  = "file.out"
	indexFileName = "file.out.index"
)

// errNotFound is LocalDirAllocator's DiskErrorException: no local dir
// holds the file. Its message is the one ShuffleHandler sends.
type errNotFound struct{ rel string }

func (e *errNotFound) Error() string {
	return "Could not find " + e.rel + " in any of the directories"
}

// rootSet opens each local dir as an os.Root once it exists, so that map
// output paths resolve inside it: no "..", absolute path or symlink leads
// out of a local dir.
type rootSet struct {
	dirs []string

	mu    sync.Mutex
	roots []*os.Root // nil until opened
}

func newRootSet(dirs []string) *rootSet {
	return &rootSet{dirs: dirs, roots: make([]*os.Root, len(dirs))}
}

// root returns local dir i as a Root, opening it on first use.
func (r *rootSet) root(i int) (*os.Root, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roots[i] != nil {
		return r.roots[i], nil
	}
	rt, err := os.OpenRoot(r.dirs[i])
	if err != nil {
		return nil, err
	}
	r.roots[i] = rt
	return rt, nil
}

// close closes every opened root.
func (r *rootSet) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rt := range r.roots {
		if rt != nil {
			rt.Close()
			r.roots[i] = nil
		}
	}
}

// open opens rel in the first local dir that holds it, as
// LocalDirAllocator.getLocalPathToRead searches them, and says which dir.
func (r *rootSet) open(rel string) (*os.File, int, error) {
	for i := range r.dirs {
		rt, err := r.root(i)
		if err != nil {
			continue
		}
		f, err := rt.Open(rel)
		if err == nil {
			return f, i, nil
		}
	}
	return nil, -1, &errNotFound{rel: rel}
}

// openIn opens rel in local dir i.
func (r *rootSet) openIn(i int, rel string) (*os.File, error) {
	rt, err := r.root(i)
	if err != nil {
		return nil, err
	}
	return rt.Open(rel)
}

// readIndexFile reads rel from the first local dir holding it, within
// maxIndexFileBytes.
func (r *rootSet) readIndexFile(rel string) ([]indexRecord, error) {
	f, _, err := r.open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	recs, err := parseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, rel)
	}
	return recs, nil
}

// isPathElement reports whether s can name one folder under a local dir:
// not empty, not "." or "..", without separators or NUL.
func isPathElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// mapOutputBase is the folder of a job's map outputs under a local dir,
// ShuffleHandler's getBaseLocation: usercache/<user>/appcache/<app>/output.
func mapOutputBase(j job) string {
	return "usercache/" + j.user + "/appcache/" + j.app.String() + "/output"
}

// isNotExist reports a file that is not there.
func isNotExist(err error) bool {
	var nf *errNotFound
	return errors.As(err, &nf) || errors.Is(err, fs.ErrNotExist)
}
