package sparkshuffle

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"sync/atomic"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/internal/lru"
	"github.com/knitdev/knit/protocols/accept"
	"github.com/knitdev/knit/protocols/yarnid"
)

var _ auxservice.Service = (*Service)(nil)

// ErrServing: Serve was called a second time, or after Close.
var ErrServing = errors.New("sparkshuffle: already serving or closed")

// app is what the node told the service of an application.
type app struct {
	user   string
	secret []byte // nil: none registered
}

// Service is Spark's external shuffle service. Build it with New; it serves
// from Serve until its context ends. Its methods are safe for concurrent use.
type Service struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	rand io.Reader

	index *lru.Cache[indexKey, []int64]
	roots *rootSet

	mu    sync.RWMutex
	execs map[execKey]*executor
	apps  map[string]app
	// saveMu orders state file writes; it is taken before mu.
	saveMu sync.Mutex

	nextStream     atomic.Int64
	chunksInFlight atomic.Int64
	serving        atomic.Bool

	// bufferedCopies counts block bodies sent by a buffered copy rather
	// than sendfile (encrypted connections); tests check plain ones never do.
	bufferedCopies atomic.Int64

	// Figures for Stats.
	conns, blocksSent, bytesSent, authFailures atomic.Int64
}

// New returns a service listening on cfg.Listener, or on cfg.Address when
// that is nil, with the executors registered before a restart loaded from
// cfg.StateFile. The service owns the listener once New succeeds; when New
// fails, a listener given in cfg is left open for the caller.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if len(cfg.LocalDirs) == 0 {
		return nil, errors.New("sparkshuffle: no local dirs")
	}
	if cfg.AuthEngineVersion != 1 && cfg.AuthEngineVersion != 2 {
		return nil, fmt.Errorf("sparkshuffle: auth engine version %d is not 1 or 2", cfg.AuthEngineVersion)
	}
	stored, err := loadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:   cfg,
		log:   cfg.Logger.With("service", cfg.Name),
		rand:  rand.Reader,
		index: lru.New[indexKey, []int64](cfg.IndexCacheBytes),
		roots: newRootSet(),
		execs: map[execKey]*executor{},
		apps:  map[string]app{},
	}
	for _, r := range stored {
		e, err := resolveExecutor(cfg.LocalDirs, r.App, "", r.Info)
		if err != nil {
			s.log.Warn("stored executor dropped", "app", r.App, "exec", r.Exec, "err", err)
			continue
		}
		s.execs[execKey{r.App, r.Exec}] = e
	}
	// OneForOneStreamManager starts its ids at a random int times 1000.
	base, err := rand.Int(rand.Reader, big.NewInt(1<<31-1))
	if err != nil {
		return nil, fmt.Errorf("sparkshuffle: stream ids: %w", err)
	}
	s.nextStream.Store(base.Int64() * 1000)
	s.ln = cfg.Listener
	if s.ln == nil {
		if s.ln, err = net.Listen("tcp", cfg.Address); err != nil {
			return nil, fmt.Errorf("sparkshuffle: listen: %w", err)
		}
	}
	s.cfg.Listener = nil
	if len(stored) > 0 {
		s.log.Info("registered executors reloaded", "executors", len(s.execs), "state", cfg.StateFile)
	}
	return s, nil
}

// Name is the aux service's name, "spark_shuffle" by default.
func (s *Service) Name() string { return s.cfg.Name }

// Metadata is empty, as YarnShuffleService.getMetaData is: executors find
// the service on spark.shuffle.service.port, not through the NM.
func (s *Service) Metadata() []byte { return []byte{} }

// Addr is the address the service listens on.
func (s *Service) Addr() net.Addr { return s.ln.Addr() }

// Close closes the listener of a service whose Serve never ran; after it,
// Serve fails with ErrServing. It is a no-op once Serve has started.
func (s *Service) Close() error {
	if !s.serving.CompareAndSwap(false, true) {
		return nil
	}
	s.roots.close()
	if err := s.ln.Close(); err != nil {
		return fmt.Errorf("sparkshuffle: close listener: %w", err)
	}
	return nil
}

// Serve accepts and answers connections until ctx ends, then closes the
// listener and every connection, waits for their goroutines and returns
// nil. A listener that fails for good ends Serve with that error.
func (s *Service) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return ErrServing
	}
	s.log.InfoContext(ctx, "serving", "addr", s.ln.Addr().String(), "authenticate", s.cfg.Authenticate,
		"crypto", s.cfg.CryptoEnabled, "executors", s.executorCount())
	defer s.roots.close()
	if err := accept.Serve(ctx, s.ln, s.log, s.serveConn); err != nil {
		return fmt.Errorf("sparkshuffle: %w", err)
	}
	return nil
}

func (s *Service) executorCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.execs)
}

// InitializeApplication tells the service of an application on the node:
// its user (whose folder its executors must register) and, when
// Authenticate is set, its secret. The secret is the service data: a JSON
// object's "secret" string (what Spark sends with
// spark.yarn.shuffle.server.recovery.disabled) or else the data's bytes as
// a string; empty data registers no secret, so the application's
// connections are refused. Calling it again replaces both.
func (s *Service) InitializeApplication(ctx context.Context, a auxservice.Application) error {
	id := a.ID.String()
	var secret []byte
	if s.cfg.Authenticate {
		secret = parseSecret(a.ServiceData)
	}
	s.mu.Lock()
	s.apps[id] = app{user: a.User, secret: secret}
	// Executors reloaded from the state file learn their user now.
	for k, e := range s.execs {
		if k.app == id && e.user != a.User {
			s.log.WarnContext(ctx, "executor registered under another user dropped", "app", id, "exec", k.exec, "user", e.user)
			delete(s.execs, k)
		}
	}
	s.mu.Unlock()
	s.log.InfoContext(ctx, "application initialized", "app", id, "user", a.User, "secret", secret != nil)
	return nil
}

// parseSecret reads the application secret from spark_shuffle service
// data, as YarnShuffleService.initializeApplication does.
func parseSecret(data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err == nil {
		if v, ok := obj["secret"].(string); ok && v != "" {
			return []byte(v)
		}
	}
	return append([]byte(nil), data...)
}

// StopApplication forgets an application: its secret, its registered
// executors (also in the state file) and its cached indexes, as the YARN
// service's stopApplication does (applicationRemoved without cleaning the
// local dirs; the node removes them).
func (s *Service) StopApplication(ctx context.Context, id yarnid.ApplicationID) error {
	name := id.String()
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	delete(s.apps, name)
	removed := 0
	for k := range s.execs {
		if k.app == name {
			delete(s.execs, k)
			removed++
		}
	}
	snapshot := s.snapshotLocked(removed > 0)
	s.mu.Unlock()
	s.index.RemoveFunc(func(k indexKey) bool { return k.app == name })
	s.roots.forget(name)
	s.log.InfoContext(ctx, "application stopped", "app", name, "executors", removed)
	if snapshot != nil {
		return saveState(s.cfg.StateFile, snapshot)
	}
	return nil
}

// snapshotLocked copies the executors for saving, or nil when unchanged.
func (s *Service) snapshotLocked(changed bool) map[execKey]*executor {
	if !changed || s.cfg.StateFile == "" {
		return nil
	}
	m := make(map[execKey]*executor, len(s.execs))
	for k, v := range s.execs {
		m[k] = v
	}
	return m
}

// secretOf is the registered secret of app, nil when none.
func (s *Service) secretOf(appID string) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.apps[appID].secret
}

func (s *Service) executor(appID, execID string) (*executor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.execs[execKey{appID, execID}]
	return e, ok
}

// registerExecutor records where an executor's files are and saves it.
func (s *Service) registerExecutor(ctx context.Context, m *RegisterExecutor) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	e, err := resolveExecutor(s.cfg.LocalDirs, m.AppID, s.apps[m.AppID].user, m.Info)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.execs[execKey{m.AppID, m.ExecID}] = e
	snapshot := s.snapshotLocked(true)
	s.mu.Unlock()
	s.log.InfoContext(ctx, "executor registered", "app", m.AppID, "exec", m.ExecID, "dirs", len(m.Info.LocalDirs))
	if err := saveState(s.cfg.StateFile, snapshot); err != nil {
		// Served now, lost on a restart: the executor re-registers then
		// only if it is still alive, so say so.
		s.log.ErrorContext(ctx, "registration not saved", "app", m.AppID, "exec", m.ExecID, "err", err)
	}
	return nil
}

func notRegistered(appID, execID string) error {
	return runtimeErr(fmt.Sprintf("Executor is not registered (appId=%s, execId=%s)", appID, execID))
}

// removeBlocks deletes block files of an executor and counts those that
// were there (ExternalShuffleBlockResolver.removeBlocks).
func (s *Service) removeBlocks(ctx context.Context, m *RemoveBlocks) (int32, error) {
	e, ok := s.executor(m.AppID, m.ExecID)
	if !ok {
		return 0, notRegistered(m.AppID, m.ExecID)
	}
	var n int32
	for _, id := range m.BlockIDs {
		if !isPathElement(id) {
			s.log.WarnContext(ctx, "block id is not a file name", "app", m.AppID, "block", id)
			continue
		}
		_, root, rel := e.file(id)
		r, err := s.roots.get(root)
		if err != nil {
			continue
		}
		if err := r.Remove(rel); err == nil {
			n++
		}
	}
	return n, nil
}

// localDirs answers GetLocalDirsForExecutors.
func (s *Service) localDirs(m *GetLocalDirsForExecutors) (*LocalDirsForExecutors, error) {
	out := &LocalDirsForExecutors{}
	seen := map[string]bool{}
	for _, id := range m.ExecIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		if id == "shuffle-push-merger" {
			return nil, errMergingOff
		}
		e, ok := s.executor(m.AppID, id)
		if !ok {
			return nil, notRegistered(m.AppID, id)
		}
		out.ExecIDs = append(out.ExecIDs, id)
		out.NumDirs = append(out.NumDirs, int32(len(e.info.LocalDirs)))
		out.LocalDirs = append(out.LocalDirs, e.info.LocalDirs...)
	}
	return out, nil
}
