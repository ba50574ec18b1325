package shuffle

import (
	"fmt"
	"io"
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

// rootSet opens each local dir as an os.Root once it exists, and each
// job's output folder in it (usercache/<user>/appcache/<app>/output) as a
// Root of its own, kept until the job stops: a map output path resolves
// inside that folder, so no id, ".." or symlink leads out of it, and an
// open walks two path elements rather than eight.
type rootSet struct {
	dirs []string

	mu    sync.Mutex
	roots []*os.Root            // nil until opened
	jobs  map[string][]*os.Root // by output folder
}

func newRootSet(dirs []string) *rootSet {
	return &rootSet{dirs: dirs, roots: make([]*os.Root, len(dirs)), jobs: map[string][]*os.Root{}}
}

// outputDir returns a job's output folder base in local dir i, opening it
// (and the local dir) on first use. A folder that is not there yet is
// looked for again next time.
func (r *rootSet) outputDir(i int, base string) (*os.Root, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if js := r.jobs[base]; js != nil && js[i] != nil {
		return js[i], nil
	}
	if r.roots[i] == nil {
		rt, err := os.OpenRoot(r.dirs[i])
		if err != nil {
			return nil, err
		}
		r.roots[i] = rt
	}
	od, err := r.roots[i].OpenRoot(base)
	if err != nil {
		return nil, err
	}
	if r.jobs[base] == nil {
		r.jobs[base] = make([]*os.Root, len(r.dirs))
	}
	r.jobs[base][i] = od
	return od, nil
}

// forget closes a job's output folders base. Opens in progress on them
// fail.
func (r *rootSet) forget(base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, od := range r.jobs[base] {
		if od != nil {
			od.Close()
		}
	}
	delete(r.jobs, base)
}

// close closes every opened root.
func (r *rootSet) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for base, ods := range r.jobs {
		for _, od := range ods {
			if od != nil {
				od.Close()
			}
		}
		delete(r.jobs, base)
	}
	for i, rt := range r.roots {
		if rt != nil {
			rt.Close()
			r.roots[i] = nil
		}
	}
}

// open opens rel, relative to a job's output folder base, in the first
// local dir that holds it, as LocalDirAllocator.getLocalPathToRead
// searches them, and says which dir.
func (r *rootSet) open(base, rel string) (*os.File, int, error) {
	for i := range r.dirs {
		od, err := r.outputDir(i, base)
		if err != nil {
			continue
		}
		if f, err := od.Open(rel); err == nil {
			return f, i, nil
		}
	}
	return nil, -1, &errNotFound{rel: base + "/" + rel}
}

// stat finds rel, relative to a job's output folder base, in the first
// local dir that holds it, as open does, without opening it.
func (r *rootSet) stat(base, rel string) (os.FileInfo, int, error) {
	for i := range r.dirs {
		od, err := r.outputDir(i, base)
		if err != nil {
			continue
		}
		if fi, err := od.Stat(rel); err == nil {
			return fi, i, nil
		}
	}
	return nil, -1, &errNotFound{rel: base + "/" + rel}
}

// openIn opens rel of a job's output folder base in local dir i.
func (r *rootSet) openIn(i int, base, rel string) (*os.File, error) {
	od, err := r.outputDir(i, base)
	if err != nil {
		return nil, err
	}
	return od.Open(rel)
}

// readIndexFile reads rel of a job's output folder base from the first
// local dir holding it, within maxIndexFileBytes.
func (r *rootSet) readIndexFile(base, rel string) ([]indexRecord, error) {
	f, _, err := r.open(base, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", base, rel, err)
	}
	return parseIndex(b)
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
