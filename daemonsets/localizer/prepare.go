package localizer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// Defaults of Config's zero values.
const (
	// DefaultCacheTargetBytes is yarn.nodemanager.localizer.cache.target-size-mb's 10240.
	DefaultCacheTargetBytes = 10240 << 20
	// DefaultFetchThreads is yarn.nodemanager.localizer.fetch.thread-count's 4.
	DefaultFetchThreads = 4
	// DefaultMaxResourceBytes bounds one resource, downloaded or unpacked.
	DefaultMaxResourceBytes = 32 << 30
	// DefaultMaxArchiveEntries bounds the entries of one archive.
	DefaultMaxArchiveEntries = 1 << 20
	// DefaultHomeDir is yarn.nodemanager.user-home-dir's default.
	DefaultHomeDir = "/home/"
)

// The container's own folders, as the DefaultContainerExecutor makes them
// before the launch (launchContainer): its work folder and the tmp folder
// in it with APPDIR_PERM, its log folders with
// yarn.nodemanager.default-container-executor.log-dirs.permissions' 710.
// The container's user owns them (chownContainer), so it has them whole;
// its group may only pass through. knit-node reads them as root.
const (
	workDirPerm = 0o710
	logDirPerm  = 0o710
	// TmpDirName is the folder in the work folder that MapReduce's and
	// Spark's JVMs take as java.io.tmpdir ($PWD/tmp,
	// YarnConfiguration.DEFAULT_CONTAINER_TEMP_DIR).
	TmpDirName = "tmp"
)

// Config is the node's localizer configuration.
type Config struct {
	// LocalDirs are yarn.nodemanager.local-dirs; the first holds the
	// cache and the work folders, all get the application folders that
	// LOCAL_DIRS lists.
	LocalDirs []string
	// LogDirs are yarn.nodemanager.log-dirs.
	LogDirs []string
	// HomeDir is HOME for containers; DefaultHomeDir if empty.
	HomeDir string
	// Whitelist holds the node's values of yarn.nodemanager.env-whitelist.
	Whitelist []launch.EnvVar
	// AuxServices maps each aux service to its metadata.
	AuxServices map[string][]byte
	// S3 and HDFS configure those sources.
	S3   S3Config
	HDFS HDFSConfig
	// HTTPClient serves http(s) resources, and S3 if set; nil means a
	// client of its own (requests are bounded by their contexts).
	HTTPClient *http.Client
	// Sources adds or replaces the source of a URL scheme.
	Sources map[string]Source
	// CacheTargetBytes is the size the PUBLIC and PRIVATE caches are
	// trimmed to; DefaultCacheTargetBytes if ≤ 0.
	CacheTargetBytes int64
	// FetchThreads bounds the node's concurrent downloads, and each
	// Prepare's concurrent asks; DefaultFetchThreads if ≤ 0.
	FetchThreads int
	// MaxResourceBytes bounds one resource's download and its unpacked
	// size; DefaultMaxResourceBytes if ≤ 0.
	MaxResourceBytes int64
	// MaxArchiveEntries bounds one archive's entries;
	// DefaultMaxArchiveEntries if ≤ 0.
	MaxArchiveEntries int
	// Logger receives the localizer's logs; none if nil.
	Logger *slog.Logger
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// AMRMProxy, if set, takes the real AMRMToken of every AM container
	// started on the node, whose token file gets the proxy's local token.
	AMRMProxy AMRMProxy
	// AMConfDir, with AMRMProxy, is the HADOOP_CONF_DIR of AM containers:
	// the node's configuration with the proxy as scheduler.
	AMConfDir string
}

// Localizer prepares containers on one node.
type Localizer struct {
	cfg   Config
	log   *slog.Logger
	cache *cache
	stats stats
}

// New checks cfg, creates the local and log folders and rebuilds the
// cache index from what an earlier run left.
func New(cfg Config) (*Localizer, error) {
	if len(cfg.LocalDirs) == 0 || len(cfg.LogDirs) == 0 {
		return nil, errors.New("localizer: no local or log folders configured")
	}
	for _, d := range slices.Concat(cfg.LocalDirs, cfg.LogDirs) {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("localizer: folder %q is not absolute", d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("localizer: %w", err)
		}
	}
	if cfg.HomeDir == "" {
		cfg.HomeDir = DefaultHomeDir
	}
	if cfg.CacheTargetBytes <= 0 {
		cfg.CacheTargetBytes = DefaultCacheTargetBytes
	}
	if cfg.FetchThreads <= 0 {
		cfg.FetchThreads = DefaultFetchThreads
	}
	if cfg.MaxResourceBytes <= 0 {
		cfg.MaxResourceBytes = DefaultMaxResourceBytes
	}
	if cfg.MaxArchiveEntries <= 0 {
		cfg.MaxArchiveEntries = DefaultMaxArchiveEntries
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	hdfs, err := newHDFSSource(cfg.HDFS)
	if err != nil {
		return nil, err
	}
	s3 := &s3Source{cfg: cfg.S3, http: cfg.HTTPClient}
	sources := map[string]Source{
		"file":  fileSource{},
		"http":  httpSource{client: hc},
		"https": httpSource{client: hc},
		"hdfs":  hdfs,
		"s3":    s3,
		"s3a":   s3,
	}
	maps.Copy(sources, cfg.Sources)
	f := &fetcher{
		sources: sources,
		limits:  limits{maxBytes: cfg.MaxResourceBytes, maxEntries: cfg.MaxArchiveEntries},
		now:     cfg.Now,
		slots:   make(chan struct{}, cfg.FetchThreads),
	}
	l := &Localizer{cfg: cfg, log: cfg.Logger}
	l.cache = newCache(cfg.LocalDirs[0], cfg.CacheTargetBytes, f.fetch, cfg.Logger, cfg.Now)
	if err := l.cache.rescan(); err != nil {
		return nil, err
	}
	return l, nil
}

// Close stops the downloads in flight and waits for them.
func (l *Localizer) Close() error {
	l.cache.close()
	return nil
}

// namedResource is one entry of the launch context's local resources.
type namedResource struct {
	link string // the key, cleaned: the link's path in the work folder
	res  *resource
	path string // the localized resource, once held
}

// Prepare localizes the container's resources and builds its work
// folder. A localization error, in YARN's words, comes back as Failure
// with a nil error, so that the container fails with it; a nil Failure
// means the container may start. Errors are the node's: bad input from
// RKS or a failing disk.
func (l *Localizer) Prepare(ctx context.Context, c launch.Context, credentials []byte) (launch.Files, error) {
	started := l.cfg.Now()
	cid, err := yarnid.ParseContainerID(c.ContainerID)
	if err != nil {
		return launch.Files{}, fmt.Errorf("localizer: %w", err)
	}
	if !safeName(c.User) {
		return launch.Files{}, fmt.Errorf("localizer: user %q cannot name a folder", c.User)
	}
	var clc yarnpb.ContainerLaunchContextProto
	if err := proto.Unmarshal(c.LaunchContext, &clc); err != nil {
		return launch.Files{}, fmt.Errorf("localizer: decode the launch context of %s: %w", c.ContainerID, err)
	}
	app := cid.Attempt.App.String()
	files := l.files(c, app, &clc)
	if err := l.makeDirs(files); err != nil {
		return launch.Files{}, err
	}

	res, err := l.resources(&clc, c.User, app)
	var count counters
	if err == nil {
		count, err = l.localize(ctx, c.ContainerID, res)
		files.LocalizationCounters = count.String(l.cfg.Now().Sub(started).Milliseconds())
	}
	if err == nil {
		err = linkAll(files.WorkDir, res)
	}
	if err == nil {
		err = makeTmpDir(files.WorkDir)
	}
	if err == nil {
		// The NodeManager writes the token file, and sets
		// HADOOP_TOKEN_FILE_LOCATION, for every container: a launch
		// context without tokens gets an empty Credentials file.
		if len(credentials) == 0 {
			credentials, _ = (&token.Credentials{}).Marshal(token.FormatWritable)
		}
		credentials, err = l.proxyAM(ctx, c, cid.Attempt, &files, credentials)
	}
	if err == nil {
		files.TokenFile = filepath.Join(files.WorkDir, launch.TokenFileName)
		if werr := renameio.WriteFile(files.TokenFile, credentials, 0o600); werr != nil {
			err = fmt.Errorf("localizer: write the token file: %w", werr)
		}
	}
	var fl *failure
	if err == nil || errors.As(err, &fl) {
		l.stats.count(count, l.cfg.Now().Sub(started), err != nil)
	}
	switch {
	case errors.As(err, &fl):
		l.cache.release(c.ContainerID)
		files.Failure = fl.msg
		l.log.Warn("localizer: container failed to localize", "container", c.ContainerID, "diagnostics", fl.msg)
		return files, nil
	case err != nil:
		l.cache.release(c.ContainerID)
		return launch.Files{}, err
	}
	if err := chownContainer(files, c.RunAsUser, c.RunAsGroup); err != nil {
		l.cache.release(c.ContainerID)
		return launch.Files{}, err
	}
	l.log.Info("localizer: container prepared", "container", c.ContainerID, "user", c.User,
		"resources", len(res), "duration", l.cfg.Now().Sub(started))
	return files, nil
}

// files fills what the node knows of the container before localizing.
func (l *Localizer) files(c launch.Context, app string, clc *yarnpb.ContainerLaunchContextProto) launch.Files {
	f := launch.Files{
		ContainerID: c.ContainerID, User: c.User,
		NMHost: c.NMHost, NMPort: c.NMPort, NMHTTPPort: c.NMHTTPPort,
		HomeDir:       l.cfg.HomeDir,
		AppSubmitTime: c.AppSubmitTime, WebProxyBase: c.WebProxyBase,
		AuxServices: maps.Clone(l.cfg.AuxServices),
		Whitelist:   slices.Clone(l.cfg.Whitelist),
		Env:         make([]launch.EnvVar, 0, len(clc.GetEnvironment())),
		Commands:    append([]string{}, clc.GetCommand()...),
	}
	for _, d := range l.cfg.LocalDirs {
		user := filepath.Join(d, "usercache", c.User)
		f.LocalUserDirs = append(f.LocalUserDirs, user+string(filepath.Separator))
		f.LocalDirs = append(f.LocalDirs, filepath.Join(user, "appcache", app))
	}
	f.WorkDir = filepath.Join(f.LocalDirs[0], c.ContainerID)
	for _, d := range l.cfg.LogDirs {
		f.LogDirs = append(f.LogDirs, filepath.Join(d, app, c.ContainerID))
	}
	for _, kv := range clc.GetEnvironment() {
		f.Env = append(f.Env, launch.EnvVar{Name: kv.GetKey(), Value: kv.GetValue()})
	}
	return f
}

// chownContainer gives the container's user what it must write or read
// alone: its work folder and the tmp folder in it, log folders,
// application folders and token file. Localized resources stay readable
// by all, as in YARN's caches.
func chownContainer(f launch.Files, uid, gid *int64) error {
	if uid == nil && gid == nil {
		return nil
	}
	u, g := -1, -1
	if uid != nil {
		u = int(*uid)
	}
	if gid != nil {
		g = int(*gid)
	}
	paths := slices.Concat(f.LocalDirs, []string{f.WorkDir, filepath.Join(f.WorkDir, TmpDirName)}, f.LogDirs)
	if f.TokenFile != "" {
		paths = append(paths, f.TokenFile)
	}
	for _, p := range paths {
		if err := os.Lchown(p, u, g); err != nil {
			return fmt.Errorf("localizer: hand %s to uid %d gid %d: %w", p, u, g, err)
		}
	}
	return nil
}

// makeDirs makes the container's application, work and log folders. The
// application folders stay open to all (0755): other node services read
// what the container leaves there, such as map outputs.
func (l *Localizer) makeDirs(f launch.Files) error {
	for _, d := range f.LocalDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
	}
	if err := makeDir(f.WorkDir, workDirPerm); err != nil {
		return err
	}
	for _, d := range f.LogDirs {
		if err := makeDir(d, logDirPerm); err != nil {
			return err
		}
	}
	return nil
}

// makeDir makes the folder dir, its parents 0755, and gives it perm,
// whatever the umask and whatever an earlier Prepare left.
func makeDir(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return nil
}

// makeTmpDir makes the work folder's tmp folder, which the NodeManager's
// container executors always make. It comes after the resource links: a
// resource named tmp keeps its link (in YARN the launch script's
// `ln -sf` would put the link inside the tmp folder instead).
func makeTmpDir(workDir string) error {
	tmp := filepath.Join(workDir, TmpDirName)
	if st, err := os.Lstat(tmp); err == nil && !st.IsDir() {
		return nil
	}
	return makeDir(tmp, workDirPerm)
}

// resources reads and checks the launch context's local resources; a key
// given twice keeps its last value, as Java's map does.
func (l *Localizer) resources(clc *yarnpb.ContainerLaunchContextProto, user, app string) ([]namedResource, error) {
	var out []namedResource
	at := map[string]int{}
	for _, kv := range clc.GetLocalResources() {
		key := kv.GetKey()
		link := filepath.Clean(key)
		if !filepath.IsLocal(key) || slices.Contains(strings.Split(key, "/"), "..") {
			return nil, failf(nil, "Invalid local resource key %q: it must be a relative path without \"..\"", key)
		}
		if link == launch.TokenFileName {
			return nil, failf(nil, "Invalid local resource key %q: the work folder's token file has that name", key)
		}
		r, err := newResource(kv.GetValue(), user, app)
		if err != nil {
			return nil, err
		}
		if i, ok := at[link]; ok {
			out[i].res = r
			continue
		}
		at[link] = len(out)
		out = append(out, namedResource{link: link, res: r})
	}
	return out, nil
}

// counters are YARN's localization counters of one container: bytes and
// files downloaded for it (missed) and found in the cache (hit), and the
// time localizing took.
type counters struct {
	bytesMissed, bytesHit, filesMissed, filesHit int64
}

// String is the LOCALIZATION_COUNTERS value the NodeManager sets
// (ContainerImpl.localizationCountersAsString), with millis.
func (c counters) String(millis int64) string {
	return fmt.Sprintf("%d,%d,%d,%d,%d", c.bytesMissed, c.bytesHit, c.filesMissed, c.filesHit, millis)
}

// localize holds every resource for the container, downloading what the
// cache lacks, a few at a time; the first failure stops the rest.
func (l *Localizer) localize(ctx context.Context, containerID string, res []namedResource) (counters, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(l.cfg.FetchThreads)
	paths := make([]string, len(res))
	hits := make([]bool, len(res))
	for i, nr := range res {
		g.Go(func() error {
			p, hit, err := l.cache.acquire(gctx, nr.res, containerID)
			paths[i], hits[i] = p, hit
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return counters{}, err
	}
	var c counters
	for i := range res {
		res[i].path = paths[i]
		if hits[i] {
			c.bytesHit += res[i].res.size
			c.filesHit++
		} else {
			c.bytesMissed += res[i].res.size
			c.filesMissed++
		}
	}
	return c, nil
}

// linkAll links each resource into the work folder under its key, as the
// launch script's `ln -sf`, creating the folders of keys with a '/'.
// Through an os.Root, so that no key's folder leads out of the work
// folder, even through an earlier key's link.
func linkAll(workDir string, res []namedResource) error {
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	defer root.Close()
	for _, nr := range res {
		if dir := filepath.Dir(nr.link); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return failf(err, "Cannot link local resource %q: %v", nr.link, err)
			}
		}
		st, err := root.Lstat(nr.link)
		switch {
		case err == nil && st.IsDir():
			return failf(nil, "Cannot link local resource %q: a folder of that name is in the way", nr.link)
		case err == nil:
			if err := root.Remove(nr.link); err != nil {
				return fmt.Errorf("localizer: %w", err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("localizer: %w", err)
		}
		if err := root.Symlink(nr.path, nr.link); err != nil {
			return fmt.Errorf("localizer: %w", err)
		}
	}
	return nil
}

// Release lets the cache evict what the container held; the controller
// calls it when the container's pod is gone.
func (l *Localizer) Release(containerID string) {
	l.cache.release(containerID)
	// The AM container (sequence 1) gone, its attempt talks to no proxy.
	if cid, err := yarnid.ParseContainerID(containerID); err == nil && cid.Sequence == 1 && l.cfg.AMRMProxy != nil {
		l.cfg.AMRMProxy.EndAttempt(cid.Attempt)
	}
}

// CleanApplication removes the application's folders from every local
// dir (appcache/<appId>, with its work folders and APPLICATION
// resources), once the application's last pod on the node is gone.
func (l *Localizer) CleanApplication(appID string) error {
	id, err := yarnid.ParseApplicationID(appID)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	app := id.String()
	l.cache.dropApplication(app)
	var errs []error
	for _, d := range l.cfg.LocalDirs {
		dirs, err := filepath.Glob(filepath.Join(d, "usercache", "*", "appcache", app))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, dir := range dirs {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("localizer: clean %s: %w", app, err)
	}
	l.log.Info("localizer: application cleaned", "application", app)
	return nil
}

// Applications lists the applications that have folders on the node's
// local dirs, so that a restarted controller can clean those whose pods
// are gone.
func (l *Localizer) Applications() ([]string, error) {
	var apps []string
	for _, d := range l.cfg.LocalDirs {
		dirs, err := filepath.Glob(filepath.Join(d, "usercache", "*", "appcache", "*"))
		if err != nil {
			return nil, fmt.Errorf("localizer: %w", err)
		}
		for _, dir := range dirs {
			if id, err := yarnid.ParseApplicationID(filepath.Base(dir)); err == nil {
				apps = append(apps, id.String())
			}
		}
	}
	slices.Sort(apps)
	return slices.Compact(apps), nil
}

// WriteFiles writes f for the pod podUID under launchDir, atomically, at
// launch.FilesPath: knit-launcher starts once it appears.
func WriteFiles(launchDir, podUID string, f launch.Files) error {
	b, err := launch.EncodeFiles(f)
	if err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	return writeLaunchFile(launch.FilesPath(launchDir, podUID), podUID, b)
}

// WriteThreadDumps hands knit-launcher a pod's thread dump count (the
// value of launch.AnnotationThreadDumps), unless it has it already.
func WriteThreadDumps(launchDir, podUID, count string) error {
	if _, err := strconv.ParseUint(count, 10, 32); err != nil {
		return fmt.Errorf("localizer: thread dump count %q: %w", count, err)
	}
	path := launch.ThreadDumpsPath(launchDir, podUID)
	if b, err := os.ReadFile(path); err == nil && string(b) == count {
		return nil
	}
	return writeLaunchFile(path, podUID, []byte(count))
}

// writeLaunchFile writes one file of a pod's launch folder, whole or not
// at all: knit-launcher polls for it.
func writeLaunchFile(path, podUID string, b []byte) error {
	if !safeName(podUID) {
		return fmt.Errorf("localizer: pod uid %q cannot name a folder", podUID)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("localizer: %w", err)
	}
	if err := renameio.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("localizer: write %s: %w", path, err)
	}
	return nil
}

// safeName reports whether s can be one path element.
func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}
