package localizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// metaName is the file beside a cached resource that says what it is, so
// that a restarted localizer finds its cache again.
const metaName = ".knit-resource.json"

// resourceKey identifies one localized resource: YARN's
// LocalResourceRequest (URL, timestamp, type, pattern) plus the size, and
// the owner where the visibility has one (user for PRIVATE, user and
// application for APPLICATION).
type resourceKey struct {
	URL        string `json:"url"`
	Size       int64  `json:"size"`
	Timestamp  int64  `json:"timestamp"`
	Type       string `json:"type"`
	Pattern    string `json:"pattern,omitempty"`
	Visibility string `json:"visibility"`
	User       string `json:"user,omitempty"`
	App        string `json:"app,omitempty"`
}

// shared reports whether the entry counts against the cache target:
// APPLICATION resources go with their application instead.
func (k resourceKey) shared() bool {
	return k.Visibility != yarnpb.LocalResourceVisibilityProto_APPLICATION.String()
}

// entryMeta is the content of metaName.
type entryMeta struct {
	Key  resourceKey `json:"key"`
	Name string      `json:"name"`
	Size int64       `json:"size"`
}

// entry is one resource in the cache, downloading or ready.
type entry struct {
	key  resourceKey
	dir  string // <base>/<n>: what eviction removes
	path string // <dir>/<name>: what work folders link to
	size int64  // bytes on disk, once ready
	// users counts, per container, the asks that hold the entry: an entry
	// with users is never evicted.
	users    map[string]int
	lastUsed time.Time
	flight   *flight // non-nil while downloading
}

// flight is one download, shared by every ask that arrives meanwhile.
type flight struct {
	done    chan struct{}
	err     error // set before done closes
	waiters int
	cancel  context.CancelFunc
}

// fetchFunc fills dir (a fresh temporary folder) with the resource, at
// dir/<name>, and returns its size on disk.
type fetchFunc func(ctx context.Context, r *resource, dir string) (int64, error)

// cache is the node's resource cache under the first local dir, in
// YARN's layout. Its index is in memory; the folders carry metaName so
// that New can rebuild it.
type cache struct {
	localDir string
	target   int64
	fetch    fetchFunc
	log      *slog.Logger
	now      func() time.Time

	// ctx ends every download when the localizer closes.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	entries map[resourceKey]*entry
	next    int64 // the next <n>
}

func newCache(localDir string, target int64, fetch fetchFunc, log *slog.Logger, now func() time.Time) *cache {
	ctx, cancel := context.WithCancel(context.Background())
	return &cache{
		localDir: localDir, target: target, fetch: fetch, log: log, now: now,
		ctx: ctx, cancel: cancel, entries: map[resourceKey]*entry{}, next: 1,
	}
}

// base is the folder holding the numbered entries of a visibility.
func (c *cache) base(k resourceKey) string {
	switch k.Visibility {
	case yarnpb.LocalResourceVisibilityProto_PUBLIC.String():
		return filepath.Join(c.localDir, "filecache")
	case yarnpb.LocalResourceVisibilityProto_PRIVATE.String():
		return filepath.Join(c.localDir, "usercache", k.User, "filecache")
	default:
		return filepath.Join(c.localDir, "usercache", k.User, "appcache", k.App, "filecache")
	}
}

// acquire returns the local path of r, downloading it unless it is cached
// or being downloaded, and holds it for containerID until release; cached
// says it was there already (a hit in YARN's localization counters).
func (c *cache) acquire(ctx context.Context, r *resource, containerID string) (path string, cached bool, err error) {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return "", false, errors.New("localizer: closed")
	}
	e := c.entries[r.key]
	if e == nil {
		e = c.start(r)
	}
	e.users[containerID]++
	e.lastUsed = c.now()
	fl := e.flight
	if fl == nil {
		c.mu.Unlock()
		return e.path, true, nil
	}
	fl.waiters++
	c.mu.Unlock()

	select {
	case <-fl.done:
	case <-ctx.Done():
		c.mu.Lock()
		c.drop(e, containerID)
		// Nobody waits any more: stop the download, and let a later ask
		// start afresh rather than join a cancelled one.
		if fl.waiters--; fl.waiters == 0 && e.flight == fl {
			fl.cancel()
			if c.entries[e.key] == e {
				delete(c.entries, e.key)
			}
		}
		c.mu.Unlock()
		return "", false, ctx.Err()
	}
	if fl.err != nil {
		c.mu.Lock()
		c.drop(e, containerID)
		c.mu.Unlock()
		return "", false, fl.err
	}
	return e.path, false, nil
}

// start registers a new entry for r and downloads it in the background.
// c.mu is held.
func (c *cache) start(r *resource) *entry {
	n := c.next
	c.next++
	dir := filepath.Join(c.base(r.key), strconv.FormatInt(n, 10))
	ctx, cancel := context.WithCancel(c.ctx)
	e := &entry{
		key: r.key, dir: dir, path: filepath.Join(dir, r.name),
		users:  map[string]int{},
		flight: &flight{done: make(chan struct{}), cancel: cancel},
	}
	c.entries[r.key] = e
	c.wg.Go(func() { c.download(ctx, r, e) })
	return e
}

// download fetches into <n>_tmp and renames it to <n> (FSDownload.call),
// then settles the flight.
func (c *cache) download(ctx context.Context, r *resource, e *entry) {
	fl := e.flight
	defer fl.cancel()
	started := c.now()
	size, err := c.fill(ctx, r, e)

	c.mu.Lock()
	current := c.entries[e.key] == e
	switch {
	case err != nil:
		if current {
			delete(c.entries, e.key)
		}
	case !current:
		err = fmt.Errorf("localizer: %s was dropped from the cache while it was downloaded", r.url)
	default:
		e.size = size
		e.flight = nil
	}
	fl.err = err
	close(fl.done)
	c.mu.Unlock()

	if err != nil {
		if !current {
			c.removeAll(e.dir)
		}
		c.log.Warn("localizer: resource not localized", "resource", r.url.String(), "visibility", r.key.Visibility, "error", err)
		return
	}
	c.log.Info("localizer: resource localized", "resource", r.url.String(), "path", e.path,
		"visibility", r.key.Visibility, "bytes", size, "duration", c.now().Sub(started))
	c.evict()
}

func (c *cache) fill(ctx context.Context, r *resource, e *entry) (int64, error) {
	tmp := e.dir + "_tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return 0, fmt.Errorf("localizer: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("localizer: %w", err)
	}
	size, err := c.fetch(ctx, r, tmp)
	if err == nil {
		err = writeMeta(filepath.Join(tmp, metaName), entryMeta{Key: r.key, Name: r.name, Size: size})
	}
	if err == nil {
		err = os.Rename(tmp, e.dir)
	}
	if err != nil {
		c.removeAll(tmp)
		c.removeAll(e.dir)
		return 0, err
	}
	return size, nil
}

func writeMeta(path string, m entryMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := renameio.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}

// drop takes back one ask of containerID. c.mu is held.
func (c *cache) drop(e *entry, containerID string) {
	if e.users[containerID]--; e.users[containerID] <= 0 {
		delete(e.users, containerID)
	}
	e.lastUsed = c.now()
}

// release takes back every ask of containerID, then evicts.
func (c *cache) release(containerID string) {
	c.mu.Lock()
	for _, e := range c.entries {
		if _, ok := e.users[containerID]; ok {
			delete(e.users, containerID)
			e.lastUsed = c.now()
		}
	}
	c.mu.Unlock()
	c.evict()
}

// evict removes least recently used entries that no container holds
// until the PUBLIC and PRIVATE entries fit the target
// (yarn.nodemanager.localizer.cache.target-size-mb).
func (c *cache) evict() {
	c.mu.Lock()
	var total int64
	var idle []*entry
	for _, e := range c.entries {
		if e.flight != nil || !e.key.shared() {
			continue
		}
		total += e.size
		if len(e.users) == 0 {
			idle = append(idle, e)
		}
	}
	if total <= c.target {
		c.mu.Unlock()
		return
	}
	slices.SortFunc(idle, func(a, b *entry) int { return a.lastUsed.Compare(b.lastUsed) })
	var gone []*entry
	for _, e := range idle {
		if total <= c.target {
			break
		}
		delete(c.entries, e.key)
		total -= e.size
		gone = append(gone, e)
	}
	c.mu.Unlock()
	for _, e := range gone {
		c.log.Info("localizer: evicted", "resource", e.key.URL, "path", e.path, "bytes", e.size)
		c.removeAll(e.dir)
	}
	if total > c.target {
		c.log.Warn("localizer: cache over its target, all else in use", "bytes", total, "target", c.target)
	}
}

// dropApplication forgets the APPLICATION entries of app, cancelling
// their downloads; the caller removes the folders.
func (c *cache) dropApplication(app string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.App == app && !k.shared() {
			delete(c.entries, k)
			if e.flight != nil {
				e.flight.cancel()
			}
		}
	}
}

func (c *cache) removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("localizer: remove", "path", dir, "error", err)
	}
}

// close cancels the downloads in flight and waits for them.
func (c *cache) close() {
	// Under mu, so that no acquire starts a download after Wait begins.
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// rescan rebuilds the index from the folders a previous run left: entries
// with their metaName come back unheld (a container still running gets
// them held again when Prepare is called for it again), half-written
// <n>_tmp folders are removed, and the numbering continues past them all.
func (c *cache) rescan() error {
	patterns := []string{
		filepath.Join(c.localDir, "filecache", "*"),
		filepath.Join(c.localDir, "usercache", "*", "filecache", "*"),
		filepath.Join(c.localDir, "usercache", "*", "appcache", "*", "filecache", "*"),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range patterns {
		dirs, err := filepath.Glob(p)
		if err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
		for _, dir := range dirs {
			c.rescanOne(dir)
		}
	}
	return nil
}

// rescanOne indexes one <n> folder. c.mu is held.
func (c *cache) rescanOne(dir string) {
	name := filepath.Base(dir)
	if num, ok := strings.CutSuffix(name, "_tmp"); ok {
		if _, err := strconv.ParseInt(num, 10, 64); err == nil {
			c.removeAll(dir)
		}
		return
	}
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return
	}
	c.next = max(c.next, n+1)
	b, err := os.ReadFile(filepath.Join(dir, metaName))
	var m entryMeta
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil || m.Name == "" || strings.ContainsRune(m.Name, '/') || filepath.Join(c.base(m.Key), name) != dir {
		c.log.Warn("localizer: unknown folder in the cache, left alone", "path", dir, "error", err)
		return
	}
	if _, dup := c.entries[m.Key]; dup {
		c.removeAll(dir)
		return
	}
	st, err := os.Lstat(filepath.Join(dir, m.Name))
	if err != nil {
		c.removeAll(dir)
		return
	}
	c.entries[m.Key] = &entry{
		key: m.Key, dir: dir, path: filepath.Join(dir, m.Name), size: m.Size,
		users: map[string]int{}, lastUsed: st.ModTime(),
	}
}

// diskUsage is the size of a file or folder tree, as FileUtil.getDU.
func diskUsage(path string) (int64, error) {
	var n int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("localizer: %w", err)
	}
	return n, nil
}
