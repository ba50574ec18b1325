package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/protocols/yarnid"
)

// Store is a remote root log dir as the deletion walks it
// (logs.LocalStore and logs.S3Store).
type Store interface {
	// Entries lists the files and folders directly in dir; a folder that
	// does not exist has none.
	Entries(ctx context.Context, dir string) ([]logs.RemoteEntry, error)
	// Delete removes a file, or a folder with everything in it.
	Delete(ctx context.Context, path string) error
}

// Applications is what the deletion asks the RM.
type Applications interface {
	// ApplicationTerminated reports whether id is FINISHED, FAILED or
	// KILLED as clients see it, or unknown to the RM (YARN's
	// isApplicationTerminated, which takes ApplicationNotFoundException
	// for an ended application).
	ApplicationTerminated(id yarnid.ApplicationID) bool
}

// bucketPrefix starts the name of every format's bucket folder
// (LogAggregationUtils.getBucketSuffix).
const bucketPrefix = "bucket-"

// Config is what a Service needs.
type Config struct {
	Settings Settings
	// Stores holds the store of each of Settings.Roots.
	Stores map[string]Store
	Apps   Applications
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service deletes aggregated logs past their retain time.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and returns its Service.
func New(cfg Config) (*Service, error) {
	if !cfg.Settings.Enabled {
		return nil, errors.New("retention: aggregated log deletion is not enabled")
	}
	if cfg.Settings.Interval <= 0 {
		return nil, fmt.Errorf("retention: check interval %v is not positive", cfg.Settings.Interval)
	}
	if cfg.Apps == nil {
		return nil, errors.New("retention: no Applications")
	}
	for _, root := range cfg.Settings.Roots {
		if cfg.Stores[root] == nil {
			return nil, fmt.Errorf("retention: no store for %s", root)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log}, nil
}

// Run sweeps at once, then every check interval, until ctx ends; a failed
// sweep is logged and the next one tries again.
func (s *Service) Run(ctx context.Context) error {
	s.log.InfoContext(ctx, "aggregated log deletion scheduled", "retain", s.cfg.Settings.Retain, "interval", s.cfg.Settings.Interval, "roots", s.cfg.Settings.Roots)
	t := time.NewTicker(s.cfg.Settings.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "aggregated log deletion", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Swept counts what one sweep deleted.
type Swept struct {
	// Applications are whole application folders, Files node files of
	// running applications.
	Applications, Files int
}

// Sweep walks every root once with the cutoff now - retain. Each failure
// is logged, the walk goes on past it, and all of them are returned.
func (s *Service) Sweep(ctx context.Context) (Swept, error) {
	w := sweep{Service: s, cutoff: s.cfg.Now().Add(-s.cfg.Settings.Retain)}
	for _, root := range s.cfg.Settings.Roots {
		w.store = s.cfg.Stores[root]
		w.root(ctx, root)
	}
	if w.swept != (Swept{}) || len(w.errs) > 0 {
		s.log.InfoContext(ctx, "aggregated log deletion finished", "applications", w.swept.Applications, "files", w.swept.Files, "errors", len(w.errs))
	}
	return w.swept, errors.Join(w.errs...)
}

// sweep is one walk.
type sweep struct {
	*Service
	cutoff time.Time
	store  Store
	swept  Swept
	errs   []error
}

func (w *sweep) fail(ctx context.Context, msg, path string, err error) {
	w.log.WarnContext(ctx, msg, "path", path, "err", err)
	w.errs = append(w.errs, err)
}

// entries lists dir, noting a failure.
func (w *sweep) entries(ctx context.Context, dir string) ([]logs.RemoteEntry, bool) {
	es, err := w.store.Entries(ctx, dir)
	if err != nil {
		w.fail(ctx, "aggregated log deletion: cannot list", dir, err)
		return nil, false
	}
	return es, true
}

// root walks <root>/<user>/bucket-*/<bucket>/ and looks at every
// application folder there.
func (w *sweep) root(ctx context.Context, root string) {
	users, _ := w.entries(ctx, root)
	for _, u := range users {
		if !u.Dir {
			continue
		}
		suffixes, _ := w.entries(ctx, u.Path)
		for _, sfx := range suffixes {
			if !sfx.Dir || !strings.HasPrefix(sfx.Name, bucketPrefix) {
				continue
			}
			buckets, _ := w.entries(ctx, sfx.Path)
			for _, b := range buckets {
				if !b.Dir {
					continue
				}
				apps, _ := w.entries(ctx, b.Path)
				for _, app := range apps {
					if ctx.Err() != nil {
						return
					}
					w.app(ctx, app)
				}
			}
		}
	}
}

// app is deleteAppDirLogs: a folder older than the cutoff goes whole when
// its application has terminated and none of its files is newer; while
// the application runs, its files older than the cutoff go.
func (w *sweep) app(ctx context.Context, app logs.RemoteEntry) {
	if !app.Dir || !app.ModTime.Before(w.cutoff) {
		return
	}
	id, err := yarnid.ParseApplicationID(app.Name)
	if err != nil {
		// Not an application's folder: YARN logs it every round too.
		w.log.WarnContext(ctx, "aggregated log deletion: not an application folder", "path", app.Path, "err", err)
		return
	}
	files, ok := w.entries(ctx, app.Path)
	if !ok {
		return
	}
	if !w.cfg.Apps.ApplicationTerminated(id) {
		for _, f := range files {
			if !f.ModTime.Before(w.cutoff) {
				continue
			}
			if err := w.store.Delete(ctx, f.Path); err != nil {
				w.fail(ctx, "aggregated log deletion: cannot delete", f.Path, err)
				continue
			}
			w.swept.Files++
		}
		return
	}
	for _, f := range files {
		if !f.ModTime.Before(w.cutoff) {
			return
		}
	}
	w.log.InfoContext(ctx, "deleting aggregated logs", "path", app.Path, "application", id.String())
	if err := w.store.Delete(ctx, app.Path); err != nil {
		w.fail(ctx, "aggregated log deletion: cannot delete", app.Path, err)
		return
	}
	w.swept.Applications++
}
