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
)

// Secret is what a SecretLookup knows of a token: the password a client must
// prove it holds, the user the token authenticates, and whatever the lookup
// decoded from the identifier (handed to handlers as Caller.TokenIdentity).
type Secret struct {
	Password []byte
	User     string
	Identity any
}

// SecretLookup finds the password of a token identifier presented over SASL.
// It returns an error naming Hadoop's InvalidToken class (see Errorf) for an
// unknown, expired or forged identifier; other errors are reported as
// InvalidToken too.
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
	// Logger receives connection-level events. Nil means slog.Default().
	Logger *slog.Logger
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

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   atomic.Bool
	connsDone sync.WaitGroup

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
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:        cfg,
		log:        log,
		inFlight:   make(chan struct{}, cfg.MaxInFlight),
		listeners:  map[net.Listener]struct{}{},
		conns:      map[*conn]struct{}{},
		baseCtx:    ctx,
		cancelBase: cancel,
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

func (s *Server) lookup(protocol string) *service {
	return (*s.services.Load())[protocol]
}

// Serve accepts connections on l until Shutdown or Close, serving each on its
// own goroutine. It returns ErrServerClosed after either.
func (s *Server) Serve(l net.Listener) error {
	if !s.trackListener(l, true) {
		return ErrServerClosed
	}
	defer s.trackListener(l, false)

	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			// Out of file descriptors and the like (EMFILE, ECONNABORTED):
			// back off and keep serving, as net/http does.
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("ipc accept", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("ipc: accept: %w", err)
		}
		delay = 0
		c := newConn(s, nc)
		if !s.trackConn(c, true) {
			_ = nc.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.trackConn(c, false)
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

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closing.Load() {
			return false
		}
		s.conns[c] = struct{}{}
		s.connsDone.Add(1)
	} else {
		delete(s.conns, c)
		s.connsDone.Done()
	}
	return true
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
	select {
	case <-done:
		s.cancelBase()
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
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
	s.closing.Store(true)
	for l := range s.listeners {
		_ = l.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
}
