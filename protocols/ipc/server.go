package ipc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/knitdev/knit/protocols/accept"
)

// Secret is what a SecretLookup knows of a token: the password a client must
// prove it holds, the user the token authenticates, and whatever the lookup
// decoded from the identifier (handed to handlers as Caller.TokenIdentity).
type Secret struct {
	Password []byte
	User     string
	// RealUser, if set, is the user behind User, a proxy user, that the
	// token speaks for too (a delegation token's realUser): a token
	// authenticates both, as Hadoop's token identifier's getUser gives a
	// proxy user.
	RealUser string
	Identity any
}

// SecretLookup finds the password of a token identifier presented over SASL.
// It returns an error naming Hadoop's InvalidToken class (a JavaError) for
// an unknown, expired or forged identifier; errors that name no class are
// reported as SaslException.
type SecretLookup func(ctx context.Context, identifier []byte) (Secret, error)

// Config holds a server's settings. One Server is one Hadoop RPC port, so its
// authentication settings are those of the protocols it serves.
type Config struct {
	// Simple enables SIMPLE authentication: the caller is the user named in
	// the connection context. Hadoop's scheduler port has it off.
	Simple bool
	// Tokens, if set, enables TOKEN authentication over SASL DIGEST-MD5 and
	// verifies the tokens presented.
	Tokens SecretLookup
	// AuthorizeConnection, if set, is asked once per connection, after the
	// connection context, whether the caller may use the protocol; an error
	// closes the connection with FATAL_UNAUTHORIZED (proxy-user rules live here).
	AuthorizeConnection func(ctx context.Context, c Caller) error
	// ConnContext, if set, derives the context of a new connection, which
	// SecretLookup, AuthorizeConnection and every handler of the
	// connection see (as net/http's Server.ConnContext): a listener that
	// learns something of a connection before the RPC starts passes it on
	// here.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// MaxDataLength bounds a request frame (ipc.maximum.data.length). Zero
	// means DefaultMaxDataLength.
	MaxDataLength int
	// IdleTimeout closes a connection that has no call in flight and has sent
	// nothing for this long. Zero means 20s, twice the Java client's own idle
	// close, so the client is the one that normally hangs up.
	IdleTimeout time.Duration
	// MaxInFlight bounds the calls being handled at once across all
	// connections; a full server stops reading new calls until one ends.
	// Zero means 4096.
	MaxInFlight int
	// MaxConnInFlight bounds the calls of one connection being handled at
	// once: a connection at its bound is not read until one of its calls
	// ends, so one client cannot take all of MaxInFlight. Zero means 256.
	MaxConnInFlight int
	// MaxConns bounds the open connections (Hadoop's
	// ipc.server.max.connections): a connection accepted beyond it is
	// closed at once, unanswered, as Hadoop's ConnectionManager drops it.
	// Zero means no bound.
	MaxConns int
	// AdmitCall, if set, is asked before each call's handler runs, with the
	// call's context (CallerFrom works) and its protocol and method. An
	// error answers the call as a handler's error would, and the connection
	// stays open: a standby ResourceManager answers every call with
	// StandbyException here. It runs on the call's own goroutine. A call
	// to a protocol or method the server does not serve is put to it too,
	// on the connection's reading goroutine (so it must be quick), and
	// answered with its error if it refuses, else as unknown.
	AdmitCall func(ctx context.Context, protocol, method string) error
	// Observer, if set, is told of every call a handler answered (or
	// AdmitCall refused), as Hadoop's RpcMetrics and RpcDetailedMetrics
	// count them.
	Observer CallObserver
	// Logger receives connection-level events. Nil means slog.Default().
	Logger *slog.Logger
}

// CallObserver learns of the calls a Server answers. ObserveCall runs on
// the call's goroutine before the answer is sent: it must be quick and safe
// for concurrent use. queued is the time from the call's frame being read
// to its handler starting (waiting for a free slot), processing the
// handler's own time; err is the handler's error, nil on success.
type CallObserver interface {
	ObserveCall(protocol, method string, queued, processing time.Duration, err error)
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("ipc: server closed")

// Server answers Hadoop RPC calls on the listeners given to Serve.
type Server struct {
	cfg      Config
	log      *slog.Logger
	services atomic.Pointer[map[string]*service]
	regMu    sync.Mutex

	inFlight chan struct{}
	frames   framePool
	calls    callPool
	vectors  vectorPool

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   atomic.Bool
	done      chan struct{} // closed once closing is set
	connsDone sync.WaitGroup

	// work hands a call to an idle worker; workers counts the workers
	// (workers.go).
	work    chan *serverCall
	workers sync.WaitGroup

	// acceptBackoff is the first and the largest pause after a temporary
	// accept error; tests lengthen it.
	acceptBackoff [2]time.Duration

	// nonce, when set by tests, fixes the DIGEST-MD5 nonce so that recorded
	// exchanges replay.
	nonce func() (string, error)

	// baseCtx parents every handler context; Close cancels it.
	baseCtx    context.Context
	cancelBase context.CancelFunc
}

type service struct {
	name    string
	version uint64
	methods map[string]Method
}

// NewServer returns a server with no protocols registered.
func NewServer(cfg Config) (*Server, error) {
	if !cfg.Simple && cfg.Tokens == nil {
		return nil, errors.New("ipc: new server: no authentication method enabled")
	}
	if cfg.MaxDataLength <= 0 {
		cfg.MaxDataLength = DefaultMaxDataLength
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 20 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 4096
	}
	if cfg.MaxConnInFlight <= 0 {
		cfg.MaxConnInFlight = 256
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		log:       log,
		inFlight:  make(chan struct{}, cfg.MaxInFlight),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
		done:      make(chan struct{}),
		work:      make(chan *serverCall),
		baseCtx:   ctx,
		// As net/http: 5ms, doubling, at most 1s.
		acceptBackoff: [2]time.Duration{5 * time.Millisecond, time.Second},
		cancelBase:    cancel,
	}
	empty := map[string]*service{}
	s.services.Store(&empty)
	return s, nil
}

// Register serves a protocol under its Hadoop name (for example
// "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB") at version 1.
// It may be called while serving; a protocol is registered once.
func (s *Server) Register(protocol string, methods ...Method) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	old := *s.services.Load()
	if _, ok := old[protocol]; ok {
		return fmt.Errorf("ipc: register %s: already registered", protocol)
	}
	svc := &service{name: protocol, version: ProtocolVersion, methods: map[string]Method{}}
	for _, m := range methods {
		if _, dup := svc.methods[m.name]; dup {
			return fmt.Errorf("ipc: register %s: method %s twice", protocol, m.name)
		}
		svc.methods[m.name] = m
	}
	next := make(map[string]*service, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[protocol] = svc
	s.services.Store(&next)
	return nil
}

// Serve accepts connections on l until Shutdown or Close, serving each on its
// own goroutine. It returns ErrServerClosed after either.
func (s *Server) Serve(l net.Listener) error {
	if !s.trackListener(l, true) {
		return ErrServerClosed
	}
	defer s.trackListener(l, false)

	backoff := accept.Backoff{Min: s.acceptBackoff[0], Max: s.acceptBackoff[1]}
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			if delay, ok := backoff.Next(err); ok {
				s.log.Warn("ipc accept", "err", err, "retry_in", delay)
				if !s.pause(delay) {
					return ErrServerClosed
				}
				continue
			}
			return fmt.Errorf("ipc: accept: %w", err)
		}
		backoff.Reset()
		c := newConn(s, nc)
		switch err := s.addConn(c); {
		case errors.Is(err, ErrServerClosed):
			c.cancel()
			_ = nc.Close()
			return ErrServerClosed
		case err != nil:
			s.log.Warn("ipc connection dropped", "remote", nc.RemoteAddr().String(), "err", err)
			c.cancel()
			_ = nc.Close()
			continue
		}
		go func() {
			defer s.removeConn(c)
			c.serve()
		}()
	}
}

func (s *Server) trackListener(l net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closing.Load() {
			return false
		}
		s.listeners[l] = struct{}{}
	} else {
		delete(s.listeners, l)
	}
	return true
}

// pause waits d, or less if the server closes first; it reports whether
// the server is still open.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// errTooManyConns is a connection beyond Config.MaxConns.
var errTooManyConns = errors.New("connection limit reached")

// addConn tracks a new connection, refusing it once the server closes
// (ErrServerClosed) or holds MaxConns (errTooManyConns).
func (s *Server) addConn(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return ErrServerClosed
	}
	if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
		return fmt.Errorf("%w: %d connections", errTooManyConns, len(s.conns))
	}
	s.conns[c] = struct{}{}
	s.connsDone.Add(1)
	return nil
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.connsDone.Done()
}

// Shutdown stops accepting connections and new calls, lets the calls in
// flight finish and send their answers, and closes every connection. If ctx
// ends first, the rest are closed at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	done := make(chan struct{})
	go func() {
		s.connsDone.Wait()
		close(done)
	}()
	// Once the connections are done, so are their calls: the workers
	// are idle, and end as the server is closing.
	select {
	case <-done:
		s.cancelBase()
		s.workers.Wait()
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		s.workers.Wait()
		return ctx.Err()
	}
}

// Close closes every listener and connection at once and cancels the
// contexts of calls in flight.
func (s *Server) Close() error {
	s.beginClose()
	s.cancelBase()
	s.mu.Lock()
	for c := range s.conns {
		c.abort()
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing.Swap(true) {
		close(s.done)
	}
	for l := range s.listeners {
		_ = l.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
}
