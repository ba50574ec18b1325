package shuffle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/internal/lru"
	"github.com/knitdev/knit/protocols/accept"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/writable"
	"github.com/knitdev/knit/protocols/yarnid"
)

// ServiceName is the service's name in yarn.nodemanager.aux-services and
// in service_data.
const ServiceName = "mapreduce_shuffle"

var _ auxservice.Service = (*Service)(nil)

// Errors of the Service's methods.
var (
	// ErrServing: Serve was called a second time, or after Close.
	ErrServing = errors.New("shuffle: already serving or closed")
	// ErrNoServiceData: an application's container carried no
	// service_data for mapreduce_shuffle.
	ErrNoServiceData = errors.New("shuffle: no service data")
)

// serviceDataLimits bound what InitializeApplication reads of service data.
var serviceDataLimits = writable.Limits{MaxLength: 64 << 10, MaxTotal: 256 << 10}

// job is what the service knows of a registered job.
type job struct {
	app    yarnid.ApplicationID
	user   string
	secret []byte
}

// Service is the MapReduce shuffle service. Build it with New; it serves
// from Serve until its context ends. Its methods are safe for concurrent use.
type Service struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	port int // the advertised port: Metadata, and the port hashes cover

	index *lru.Cache[indexKey, []indexRecord]
	roots *rootSet

	mu   sync.RWMutex
	jobs map[string]job // by job id string

	serving atomic.Bool
	active  atomic.Int64 // open connections

	transfersMu sync.Mutex
	transfers   map[reducerKey]int

	// bufferedCopies counts bodies sent by a buffered copy rather than
	// sendfile; tests check plain TCP never takes it.
	bufferedCopies atomic.Int64
	// openFiles counts map output files open now; maxOpenFiles is its peak.
	openFiles, maxOpenFiles atomic.Int64
}

// reducerKey names one reducer: its job and reduce number.
type reducerKey struct {
	job    string
	reduce int32
}

// New returns a service that listens on cfg.Listener, or on cfg.Address
// when that is nil. The service owns the listener once New succeeds: Serve
// closes it when it returns, Close when Serve never ran. When New fails, a
// listener given in cfg is left open for the caller.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if len(cfg.LocalDirs) == 0 {
		return nil, errors.New("shuffle: no local dirs")
	}
	if cfg.SSLEnabled && cfg.TLS == nil {
		return nil, fmt.Errorf("shuffle: %s is set but no TLS configuration was given", PropSSLEnabled)
	}
	if cfg.AdvertisedPort < 0 || cfg.AdvertisedPort > 65535 {
		return nil, fmt.Errorf("shuffle: advertised port %d out of range", cfg.AdvertisedPort)
	}
	port := cfg.AdvertisedPort
	if port == 0 && cfg.Listener != nil {
		tcp, ok := cfg.Listener.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("shuffle: listener address %v has no port; set AdvertisedPort", cfg.Listener.Addr())
		}
		port = tcp.Port
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Address); err != nil {
			return nil, fmt.Errorf("shuffle: listen: %w", err)
		}
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
	}
	cfg.Listener = nil
	return &Service{
		cfg:       cfg,
		log:       cfg.Logger.With("service", ServiceName),
		ln:        ln,
		port:      port,
		index:     lru.New[indexKey, []indexRecord](cfg.IndexCacheBytes),
		roots:     newRootSet(cfg.LocalDirs),
		jobs:      map[string]job{},
		transfers: map[reducerKey]int{},
	}, nil
}

// Name is "mapreduce_shuffle".
func (s *Service) Name() string { return ServiceName }

// Metadata is the advertised port as a 4-byte big-endian int, what
// ShuffleHandler.serializeMetaData writes and the MR AM reads.
func (s *Service) Metadata() []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(s.port))
}

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
		return fmt.Errorf("shuffle: close listener: %w", err)
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
	s.log.InfoContext(ctx, "serving", "addr", s.ln.Addr().String(), "port", s.port, "tls", s.cfg.TLS != nil)
	defer s.roots.close()
	if err := accept.Serve(ctx, s.ln, s.log, s.serveConn); err != nil {
		return fmt.Errorf("shuffle: %w", err)
	}
	return nil
}

// InitializeApplication registers the job of app: its secret is the
// password of the Token Writable in app.ServiceData
// (ShuffleHandler.deserializeServiceData), kept under the job id
// job_<cluster ts>_<app seq> with app.User. Registering again replaces the
// secret and user.
func (s *Service) InitializeApplication(ctx context.Context, app auxservice.Application) error {
	if app.ServiceData == nil {
		return fmt.Errorf("shuffle: initialize %s: %w", app.ID, ErrNoServiceData)
	}
	secret, err := parseServiceData(app.ServiceData)
	if err != nil {
		return fmt.Errorf("shuffle: initialize %s: %w", app.ID, err)
	}
	if !isPathElement(app.User) {
		return fmt.Errorf("shuffle: initialize %s: user %q cannot name a folder", app.ID, app.User)
	}
	id := jobID(app.ID)
	s.mu.Lock()
	old, known := s.jobs[id]
	s.jobs[id] = job{app: app.ID, user: app.User, secret: secret}
	s.mu.Unlock()
	if known && old.user != app.User {
		s.roots.forget(mapOutputBase(old))
	}
	s.log.InfoContext(ctx, "job registered", "job", id, "user", app.User)
	return nil
}

// StopApplication forgets the job of id, so its map outputs are no longer
// served, and drops its cached indexes.
func (s *Service) StopApplication(ctx context.Context, id yarnid.ApplicationID) error {
	j := jobID(id)
	s.mu.Lock()
	old, known := s.jobs[j]
	delete(s.jobs, j)
	s.mu.Unlock()
	s.index.RemoveFunc(func(k indexKey) bool { return k.job == j })
	if known {
		s.roots.forget(mapOutputBase(old))
	}
	s.log.InfoContext(ctx, "job stopped", "job", j, "known", known)
	return nil
}

// lookupJob returns the registered job of id.
func (s *Service) lookupJob(id string) (job, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, ok := s.jobs[id]
	return j, ok
}

// parseServiceData reads the shuffle secret from service data: the
// password of a Token Writable.
func parseServiceData(b []byte) ([]byte, error) {
	t, err := token.ReadToken(writable.NewBytesReader(b, serviceDataLimits))
	if err != nil {
		return nil, fmt.Errorf("service data: %w", err)
	}
	if len(t.Password) == 0 {
		return nil, errors.New("service data: the job token has no password")
	}
	return t.Password, nil
}

// jobID is the MapReduce job id of an application, as Hadoop's
// TypeConverter makes it: job_<cluster ts>_<seq, at least 4 digits>.
func jobID(app yarnid.ApplicationID) string {
	return "job_" + strings.TrimPrefix(app.String(), "application_")
}

// acquireTransfer counts one more request of reducer k being answered;
// false when MaxTransfersPerReducer are already.
func (s *Service) acquireTransfer(k reducerKey) bool {
	if s.cfg.MaxTransfersPerReducer <= 0 {
		return true
	}
	s.transfersMu.Lock()
	defer s.transfersMu.Unlock()
	if s.transfers[k] >= s.cfg.MaxTransfersPerReducer {
		return false
	}
	s.transfers[k]++
	return true
}

func (s *Service) releaseTransfer(k reducerKey) {
	if s.cfg.MaxTransfersPerReducer <= 0 {
		return
	}
	s.transfersMu.Lock()
	defer s.transfersMu.Unlock()
	if s.transfers[k]--; s.transfers[k] <= 0 {
		delete(s.transfers, k)
	}
}
