package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

// Marker files in an application's log folder (the first log dir).
const (
	// endedMarker says the application ended on the node and its logs
	// wait for aggregation; it survives a knit-node restart.
	endedMarker = ".knit-ended"
	// failedMarker says aggregation gave up; the logs stay on the node.
	failedMarker = ".knit-aggregation-failed"
	// doneMarker says the logs are stored: what is left on the node only
	// waits to be removed (a restart during the removal finishes it).
	doneMarker = ".knit-aggregated"
	// tmpSuffix is LogAggregationUtils.TMP_FILE_SUFFIX.
	tmpSuffix = ".tmp"
	// rollKey prefixes the queue key of an application's rolling
	// aggregation; the bare id is its final one. One worker takes both, so
	// they never run at once.
	rollKey = "roll/"
	// defaultFilesPerApp is YarnConfiguration's
	// DEFAULT_NM_LOG_AGGREGATION_NUM_LOG_FILES_SIZE_PER_APP.
	defaultFilesPerApp = 30
)

// remoteTree is a Store that lists and deletes, which the cap on a
// rolling application's files needs.
type remoteTree interface {
	Entries(ctx context.Context, dir string) ([]RemoteEntry, error)
	Delete(ctx context.Context, path string) error
}

// Store is the remote app log dir's file system.
type Store interface {
	// Put stores the size bytes of r at path (a path or URI under the
	// layout's root), replacing any file there, so that readers see the
	// whole file or none.
	Put(ctx context.Context, path string, r io.ReaderAt, size int64) error
}

// StreamStore is a Store that takes a file as it is written, so
// aggregation needs no local copy.
type StreamStore interface {
	Store
	Create(ctx context.Context, path string) (Upload, error)
}

// Upload is a file being written to a StreamStore: nothing is visible at
// its path until Commit; Abort drops it.
type Upload interface {
	io.Writer
	Commit() error
	Abort()
}

// AggregatorConfig configures log aggregation.
type AggregatorConfig struct {
	Dirs Dirs
	// NodeID is the node's NodeId ("host:port"), which names its files.
	NodeID string
	Format aggregated.Format
	Layout aggregated.Layout
	// Store is the remote app log dir. Without one, aggregation is off and
	// an ended application's logs are deleted Retain after its end, as
	// the NodeManager's NonAggregatingLogHandler does.
	Store Store
	// Retain is yarn.nodemanager.log.retain-seconds, used without a Store.
	Retain time.Duration
	// Status, if set, hears how each application's aggregation goes
	// (a *StatusPublisher, for the RM's reports).
	Status StatusSink
	// MaxAttempts bounds the stores of one application; then its
	// aggregation is FAILED and its logs stay on the node. Zero means 10.
	MaxAttempts int
	// RollInterval, when positive, aggregates every interval the logs of
	// running applications that asked for rolling (a rolled-logs include
	// pattern), and names every aggregated file after its upload time
	// (<node file>_<ms>), as the NodeManager does once the interval is set.
	RollInterval time.Duration
	// FilesPerApp is yarn.nodemanager.log-aggregation.num-log-files-per-app:
	// before each upload of a rolling application, the node's oldest files
	// of it are deleted so that at most this many stay. Zero means 30.
	FilesPerApp int
	// BaseDelay and MaxDelay bound the backoff between attempts; zero
	// means 1 s and 2 min.
	BaseDelay, MaxDelay time.Duration
	Logger              *slog.Logger
	Now                 func() time.Time
}

// Aggregator writes ended applications' logs to the remote app log dir,
// one application at a time, and deletes the node's copy once stored.
type Aggregator struct {
	cfg   AggregatorConfig
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	attempts map[string]int
	stats    aggStats
}

// NewAggregator returns an aggregator; Run works its queue.
func NewAggregator(cfg AggregatorConfig) (*Aggregator, error) {
	if len(cfg.Dirs) == 0 || cfg.NodeID == "" {
		return nil, errors.New("logs: Dirs and NodeID are required")
	}
	if cfg.Store != nil && cfg.Layout.Root == "" {
		return nil, errors.New("logs: aggregation needs a Layout")
	}
	if cfg.Store == nil && cfg.Retain <= 0 {
		return nil, errors.New("logs: without aggregation, Retain must be positive")
	}
	if cfg.Format == "" {
		cfg.Format = aggregated.FormatTFile
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.FilesPerApp <= 0 {
		cfg.FilesPerApp = defaultFilesPerApp
	}
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay = time.Second
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Aggregator{
		cfg: cfg, log: cfg.Logger, attempts: map[string]int{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.BaseDelay, cfg.MaxDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "log-aggregation"}),
	}, nil
}

// ApplicationEnded marks the application's logs for aggregation, durably,
// and queues it. The localizer calls it when the application ends on the
// node, before it removes the application's local dirs (the log dirs are
// apart and stay).
func (a *Aggregator) ApplicationEnded(_ context.Context, app string) error {
	if !validName(app) {
		return nil
	}
	dir := filepath.Join(a.cfg.Dirs[0], app)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // no logs here
	}
	if err := os.WriteFile(filepath.Join(dir, endedMarker), nil, 0o644); err != nil {
		return fmt.Errorf("logs: mark %s ended: %w", app, err)
	}
	a.setStatus(app, StatusRunning)
	a.queue.Add(app)
	return nil
}

// Run queues the applications marked ended before a restart, then
// aggregates until ctx ends.
func (a *Aggregator) Run(ctx context.Context) error {
	defer a.queue.ShutDown()
	apps, err := a.cfg.Dirs.Applications()
	if err != nil {
		a.log.WarnContext(ctx, "list applications with logs", "err", err)
	}
	for _, app := range apps {
		if a.marked(app, doneMarker) {
			if err := a.remove(app); err != nil {
				a.log.WarnContext(ctx, "remove aggregated logs", "app", app, "err", err)
			}
			continue
		}
		if a.marked(app, endedMarker) {
			a.queue.Add(app)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for a.process(ctx) {
		}
	}()
	if a.cfg.RollInterval > 0 {
		t := time.NewTicker(a.cfg.RollInterval)
		defer t.Stop()
	roll:
		for {
			select {
			case <-ctx.Done():
				break roll
			case <-t.C:
				a.queueRolls(ctx)
			}
		}
	}
	<-ctx.Done()
	a.queue.ShutDown()
	<-done
	return nil
}

// queueRolls queues the rolling aggregation of every application with
// logs on the node that has not ended; those that did not ask for rolling
// are passed over when their turn comes.
func (a *Aggregator) queueRolls(ctx context.Context) {
	apps, err := a.cfg.Dirs.Applications()
	if err != nil {
		a.log.WarnContext(ctx, "list applications with logs", "err", err)
	}
	for _, app := range apps {
		if !a.marked(app, endedMarker) && !a.marked(app, doneMarker) && !a.marked(app, failedMarker) {
			a.queue.Add(rollKey + app)
		}
	}
}

func (a *Aggregator) process(ctx context.Context) bool {
	app, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(app)
	if running, ok := strings.CutPrefix(app, rollKey); ok {
		// A failed roll is tried again at the next interval, as the
		// NodeManager's next cycle does; the final aggregation takes what
		// is left.
		a.queue.Forget(app)
		if err := a.Roll(ctx, running); err != nil && ctx.Err() == nil {
			a.stats.uploadFailures.Add(1)
			a.log.WarnContext(ctx, "rolling log aggregation, will retry at the next interval", "app", running, "err", err)
		}
		return true
	}
	if !a.marked(app, endedMarker) {
		// Queued twice, and already stored or given up.
		a.queue.Forget(app)
		return true
	}
	if a.cfg.Store == nil {
		a.expire(ctx, app)
		return true
	}
	err := a.Aggregate(ctx, app)
	if err == nil {
		a.stats.aggregated.Add(1)
		a.setStatus(app, StatusSucceeded)
		a.queue.Forget(app)
		a.mu.Lock()
		delete(a.attempts, app)
		a.mu.Unlock()
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	a.stats.uploadFailures.Add(1)
	a.mu.Lock()
	a.attempts[app]++
	n := a.attempts[app]
	a.mu.Unlock()
	if n >= a.cfg.MaxAttempts {
		a.log.ErrorContext(ctx, "log aggregation FAILED; the logs stay on the node", "app", app, "attempts", n, "err", err)
		_ = os.WriteFile(filepath.Join(a.cfg.Dirs[0], app, failedMarker), []byte(err.Error()), 0o644)
		_ = os.Remove(filepath.Join(a.cfg.Dirs[0], app, endedMarker))
		a.stats.failed.Add(1)
		a.setStatus(app, StatusFailed)
		a.queue.Forget(app)
		a.mu.Lock()
		delete(a.attempts, app)
		a.mu.Unlock()
		return true
	}
	a.log.WarnContext(ctx, "log aggregation, will retry", "app", app, "attempt", n, "err", err)
	a.queue.AddRateLimited(app)
	return true
}

// Aggregate writes the application's logs on the node into one file in
// the remote app log dir (those its include and exclude patterns pick),
// then removes every log of it from the node. With nothing to upload it
// only removes the folders.
func (a *Aggregator) Aggregate(ctx context.Context, app string) error {
	if a.cfg.Store == nil {
		return errors.New("logs: aggregation is off")
	}
	containers, err := a.cfg.Dirs.Containers(app)
	if err != nil {
		return err
	}
	if len(containers) > 0 {
		rec, err := a.record(app)
		if err != nil {
			return err
		}
		fs, ferr := filtersOf(rec.LogAggregation)
		if ferr != nil {
			a.log.WarnContext(ctx, "log aggregation patterns", "app", app, "err", ferr)
		}
		if _, err := a.upload(ctx, app, rec, containers, fs.final, fs.rolled != nil); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(a.cfg.Dirs[0], app, doneMarker), nil, 0o644); err != nil {
		return fmt.Errorf("logs: mark %s aggregated: %w", app, err)
	}
	if err := a.remove(app); err != nil {
		return fmt.Errorf("logs: remove aggregated logs of %s: %w", app, err)
	}
	return nil
}

// Roll uploads the logs of a running application that its rolled-logs
// patterns pick into a file of their own, and deletes them from the node
// once stored, as the NodeManager's rolling cycle does: a container that
// goes on writing a rolled file writes into a new one.
func (a *Aggregator) Roll(ctx context.Context, app string) error {
	if a.cfg.Store == nil || a.cfg.RollInterval <= 0 || a.marked(app, endedMarker) {
		return nil
	}
	rec, ok := a.cfg.Dirs.Record(app)
	if !ok || rec.LogAggregation == nil {
		return nil
	}
	fs, ferr := filtersOf(rec.LogAggregation)
	if ferr != nil {
		a.log.WarnContext(ctx, "log aggregation patterns", "app", app, "err", ferr)
	}
	if fs.rolled == nil {
		return nil
	}
	containers, err := a.cfg.Dirs.Containers(app)
	if err != nil || len(containers) == 0 {
		return err
	}
	uploaded, err := a.upload(ctx, app, rec, containers, *fs.rolled, true)
	if err != nil {
		return err
	}
	for _, p := range uploaded {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.WarnContext(ctx, "remove a rolled log file after its upload", "app", app, "path", p, "err", err)
		}
	}
	return nil
}

// containerFiles are the log files of one container one upload takes.
type containerFiles struct {
	id    string
	files []FileInfo
}

// upload writes the files keep picks of the application's containers into
// one file in the remote app log dir and returns their local paths. It
// writes nothing when keep picks nothing, as the NodeManager drops an
// empty cycle's file. For a rolling application it first makes room under
// FilesPerApp.
func (a *Aggregator) upload(ctx context.Context, app string, rec AppRecord, containers []string, keep fileFilter, rolling bool) ([]string, error) {
	var picked []containerFiles
	var paths []string
	for _, c := range containers {
		files, err := a.cfg.Dirs.Files(app, c)
		if err != nil {
			return nil, err
		}
		kept := files[:0]
		for _, f := range files {
			if keep.keep(f.Name) {
				kept = append(kept, f)
				paths = append(paths, f.Path)
			}
		}
		if len(kept) > 0 {
			picked = append(picked, containerFiles{id: c, files: kept})
		}
	}
	if len(picked) == 0 {
		return nil, nil
	}
	appDir, err := a.cfg.Layout.AppDir(rec.Owner, app)
	if err != nil {
		return nil, err
	}
	start := a.cfg.Now()
	name := aggregated.NodeFile(a.cfg.NodeID)
	if a.cfg.RollInterval > 0 {
		name += "_" + strconv.FormatInt(start.UnixMilli(), 10)
	}
	remote := appDir + "/" + name
	if rolling && a.cfg.RollInterval > 0 {
		a.cleanOldFiles(ctx, app, appDir)
	}
	var size int64
	if ss, ok := a.cfg.Store.(StreamStore); ok {
		up, err := ss.Create(ctx, remote)
		if err != nil {
			return nil, fmt.Errorf("logs: store %s: %w", remote, err)
		}
		cw := &countWriter{w: up}
		if err := a.write(ctx, app, picked, rec, name, cw); err != nil {
			up.Abort()
			return nil, err
		}
		if err := up.Commit(); err != nil {
			return nil, fmt.Errorf("logs: store %s: %w", remote, err)
		}
		size = cw.n
	} else {
		// Written locally first: the store takes a file of known size.
		tmp, err := os.CreateTemp(filepath.Join(a.cfg.Dirs[0], app), "."+name+".*"+tmpSuffix)
		if err != nil {
			return nil, fmt.Errorf("logs: aggregate %s: %w", app, err)
		}
		defer func() {
			tmp.Close()
			os.Remove(tmp.Name())
		}()
		if err := a.write(ctx, app, picked, rec, name, tmp); err != nil {
			return nil, err
		}
		st, err := tmp.Stat()
		if err != nil {
			return nil, err
		}
		size = st.Size()
		if err := a.cfg.Store.Put(ctx, remote, tmp, size); err != nil {
			return nil, fmt.Errorf("logs: store %s: %w", remote, err)
		}
	}
	a.stats.uploads.Add(1)
	a.stats.bytes.Add(size)
	a.stats.nanos.Add(int64(a.cfg.Now().Sub(start)))
	a.log.InfoContext(ctx, "logs aggregated", "app", app, "containers", len(picked), "files", len(paths), "bytes", size,
		"path", remote, "format", string(a.cfg.Format), "ms", a.cfg.Now().Sub(start).Milliseconds())
	return paths, nil
}

// cleanOldFiles deletes the node's oldest files of a rolling application
// until fewer than FilesPerApp stay, as the file controllers' cleanOldLogs
// does before an upload; what fails is logged and tried again before the
// next one.
func (a *Aggregator) cleanOldFiles(ctx context.Context, app, appDir string) {
	tree, ok := a.cfg.Store.(remoteTree)
	if !ok {
		return
	}
	entries, err := tree.Entries(ctx, appDir)
	if err != nil {
		a.log.WarnContext(ctx, "list the application's aggregated files", "app", app, "err", err)
		return
	}
	node := aggregated.NodeFile(a.cfg.NodeID)
	var mine []RemoteEntry
	for _, e := range entries {
		if !e.Dir && strings.Contains(e.Name, node) && !strings.HasSuffix(e.Name, tmpSuffix) {
			mine = append(mine, e)
		}
	}
	if len(mine) < a.cfg.FilesPerApp {
		return
	}
	slices.SortStableFunc(mine, func(x, y RemoteEntry) int { return x.ModTime.Compare(y.ModTime) })
	for _, e := range mine[:len(mine)-a.cfg.FilesPerApp+1] {
		if err := tree.Delete(ctx, e.Path); err != nil {
			a.log.WarnContext(ctx, "delete an old aggregated file", "app", app, "path", e.Path, "err", err)
		}
	}
}

// write writes the application's aggregated file of the picked files to w.
func (a *Aggregator) write(ctx context.Context, app string, picked []containerFiles, rec AppRecord, name string, w io.Writer) error {
	h := aggregated.Header{Owner: rec.Owner, ACLs: rec.ACLs, NodeID: a.cfg.NodeID}
	var aw aggregated.Writer
	var err error
	if a.cfg.Format == aggregated.FormatIndexed {
		aw, err = aggregated.NewIndexedWriter(w, app, h, name, a.cfg.Now())
	} else {
		aw, err = aggregated.NewTFileWriter(w, h)
	}
	if err != nil {
		return fmt.Errorf("logs: aggregate %s: %w", app, err)
	}
	for _, c := range picked {
		if err := ctx.Err(); err != nil {
			return err
		}
		src := make([]aggregated.SourceFile, 0, len(c.files))
		for _, f := range c.files {
			path := f.Path
			src = append(src, aggregated.SourceFile{
				Name: f.Name, Size: f.Info.Size(), ModTime: f.Info.ModTime(),
				Open: func() (io.ReadCloser, error) { return os.Open(path) },
			})
		}
		if err := aw.WriteContainer(c.id, src); err != nil {
			return fmt.Errorf("logs: aggregate %s: %w", app, err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("logs: aggregate %s: %w", app, err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// setStatus tells the status sink, when aggregation is on.
func (a *Aggregator) setStatus(app, status string) {
	if a.cfg.Status != nil && a.cfg.Store != nil {
		a.cfg.Status.SetStatus(app, status)
	}
}

// expire deletes the logs of an application that ended Retain ago, or
// queues it again for then.
func (a *Aggregator) expire(ctx context.Context, app string) {
	a.queue.Forget(app)
	st, err := os.Stat(filepath.Join(a.cfg.Dirs[0], app, endedMarker))
	if err != nil {
		return
	}
	if wait := st.ModTime().Add(a.cfg.Retain).Sub(a.cfg.Now()); wait > 0 {
		a.queue.AddAfter(app, wait)
		return
	}
	if err := a.remove(app); err != nil {
		a.log.WarnContext(ctx, "delete logs", "app", app, "err", err)
		a.queue.AddAfter(app, a.cfg.BaseDelay)
		return
	}
	a.log.InfoContext(ctx, "logs deleted after yarn.nodemanager.log.retain-seconds", "app", app, "retain", a.cfg.Retain.String())
}

// marked reports whether the application's log folder holds marker.
func (a *Aggregator) marked(app, marker string) bool {
	_, err := os.Stat(filepath.Join(a.cfg.Dirs[0], app, marker))
	return err == nil
}

// remove deletes the application's logs from the node, the first log dir
// (with the markers) last.
func (a *Aggregator) remove(app string) error {
	for i := len(a.cfg.Dirs) - 1; i >= 0; i-- {
		if err := (Dirs{a.cfg.Dirs[i]}).RemoveApplication(app); err != nil {
			return err
		}
	}
	return nil
}

// record returns the application's record (owner, ACLs, log
// aggregation context); without one, the owner of its log folder, with no
// ACLs and every file aggregated.
func (a *Aggregator) record(app string) (AppRecord, error) {
	if rec, ok := a.cfg.Dirs.Record(app); ok {
		return rec, nil
	}
	st, err := os.Stat(filepath.Join(a.cfg.Dirs[0], app))
	if err != nil {
		return AppRecord{}, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if u, err := user.LookupId(strconv.FormatUint(uint64(sys.Uid), 10)); err == nil {
			return AppRecord{Owner: u.Username}, nil
		}
	}
	return AppRecord{}, fmt.Errorf("logs: owner of %s unknown", app)
}
