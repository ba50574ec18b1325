package digestmd5

import (
	"crypto/subtle"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxResponseLen is the longest response a Server accepts; the JDK's
// DigestMD5Server has the same limit. A Hadoop response is about 300 bytes.
const MaxResponseLen = 4096

// DefaultServerName is the server name and realm Hadoop uses for token
// authentication (SaslRpcServer.SASL_DEFAULT_REALM).
const DefaultServerName = "default"

// ServerConfig configures a Server.
type ServerConfig struct {
	// ServerName is both the realm offered and the host part of the
	// expected digest-uri. If empty, DefaultServerName is used.
	ServerName string
	// Protocol is the service part of the digest-uri; Hadoop uses "".
	Protocol string
	// Nonce returns a fresh nonce for each Server. It must never repeat: a
	// response is bound to its nonce only. If nil, 30 bytes from
	// crypto/rand in base64 are used, as the JDK does.
	Nonce func() (string, error)
	// Lookup returns the password of username (in Hadoop the base64 of the
	// token password, looked up from the base64 token identifier). Its
	// error is returned by Evaluate wrapped with %w. Required.
	Lookup func(username string) (password string, err error)
}

type serverState int

const (
	serverNew serverState = iota + 1
	serverChallenged
	serverDone
)

// Server is the server side of one DIGEST-MD5 exchange: Challenge, then
// Evaluate once. It is not safe for concurrent use.
type Server struct {
	serverName, protocol string
	newNonce             func() (string, error)
	lookup               func(string) (string, error)

	state    serverState
	nonce    string
	username string // set only after a successful Evaluate
}

// NewServer returns a Server for one exchange. It fails only when cfg.Lookup
// is nil.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Lookup == nil {
		return nil, fmt.Errorf("digestmd5: ServerConfig.Lookup is nil")
	}
	s := &Server{
		serverName: cfg.ServerName,
		protocol:   cfg.Protocol,
		newNonce:   cfg.Nonce,
		lookup:     cfg.Lookup,
		state:      serverNew,
	}
	if s.serverName == "" {
		s.serverName = DefaultServerName
	}
	if s.newNonce == nil {
		s.newNonce = randomNonce
	}
	return s, nil
}

// Challenge returns the server's first and only challenge, in the JDK's
// exact form: realm="…",nonce="…",qop="auth",charset=utf-8,algorithm=md5-sess.
// Hadoop sends it in the NEGOTIATE reply. It may be called once.
func (s *Server) Challenge() ([]byte, error) {
	if s.state != serverNew {
		return nil, fmt.Errorf("%w: Challenge called twice", ErrState)
	}
	s.state = serverDone // a failed nonce source leaves the Server unusable
	nonce, err := s.newNonce()
	if err != nil {
		return nil, fmt.Errorf("digestmd5: make nonce: %w", err)
	}
	if nonce == "" {
		return nil, fmt.Errorf("digestmd5: nonce source returned an empty nonce")
	}
	s.nonce = nonce
	s.state = serverChallenged
	var sb strings.Builder
	sb.WriteString("realm=")
	appendQuoted(&sb, s.serverName)
	sb.WriteString(",nonce=")
	appendQuoted(&sb, nonce)
	sb.WriteString(`,qop="auth",charset=utf-8,algorithm=md5-sess`)
	return []byte(sb.String()), nil
}

// Evaluate checks the client's response to the challenge and, if it proves
// knowledge of the password, returns the final message "rspauth=…" that the
// client must see to complete. It may be called once, after Challenge,
// whatever its outcome, so that no nonce is answered twice. Errors wrap one
// of the Err sentinels or the Lookup error.
func (s *Server) Evaluate(response []byte) ([]byte, error) {
	switch s.state {
	case serverNew:
		return nil, fmt.Errorf("%w: Evaluate called before Challenge", ErrState)
	case serverDone:
		return nil, fmt.Errorf("%w: exchange already finished", ErrState)
	}
	s.state = serverDone
	e, sent, err := s.check(response)
	if err != nil {
		return nil, err
	}
	password, err := s.lookup(e.username)
	if err != nil {
		return nil, fmt.Errorf("digestmd5: look up password: %w", err)
	}
	e.password = password
	if subtle.ConstantTimeCompare([]byte(sent), []byte(e.response())) != 1 {
		return nil, fmt.Errorf("%w: response digest does not match (wrong password or token)", ErrAuthFailed)
	}
	s.username = e.username
	return []byte("rspauth=" + e.rspauth()), nil
}

// Username returns the authenticated username after a successful Evaluate
// and "" before. It is also the authorization identity: Evaluate rejects an
// authzid that differs from it, as Hadoop does.
func (s *Server) Username() string { return s.username }

// check validates everything in the response that needs no password, so
// that garbage never reaches Lookup, and returns the exchange and the
// response value the client sent.
func (s *Server) check(response []byte) (*exchange, string, error) {
	ds, err := parseDirectives(response, MaxResponseLen)
	if err != nil {
		return nil, "", err
	}
	m, err := index(ds, isResponseDirective)
	if err != nil {
		return nil, "", err
	}
	e := &exchange{}

	e.qop = "auth"
	if qop, ok := get(m, "qop"); ok {
		if !strings.EqualFold(qop, "auth") {
			return nil, "", fmt.Errorf("%w: client asked for qop %q; only \"auth\" is offered (set hadoop.rpc.protection=authentication)", ErrUnsupported, qop)
		}
		e.qop = qop
	}
	utf8Mode := false
	if cs, ok := get(m, "charset"); ok {
		if !strings.EqualFold(cs, "utf-8") {
			return nil, "", fmt.Errorf("%w: charset %q, the challenge offered utf-8", ErrInvalidResponse, cs)
		}
		utf8Mode = true
	}
	text := func(name string) (string, error) {
		v, _ := get(m, name)
		if !utf8Mode {
			return latin1ToString(v), nil
		}
		if !utf8.ValidString(v) {
			return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformed, name)
		}
		return v, nil
	}

	if v, _ := get(m, "username"); v == "" {
		return nil, "", fmt.Errorf("%w: username missing", ErrMalformed)
	}
	if e.username, err = text("username"); err != nil {
		return nil, "", err
	}
	if _, ok := get(m, "realm"); !ok {
		return nil, "", fmt.Errorf("%w: realm missing, the challenge offered %q", ErrInvalidResponse, s.serverName)
	}
	if e.realm, err = text("realm"); err != nil {
		return nil, "", err
	}
	if e.realm != s.serverName {
		return nil, "", fmt.Errorf("%w: realm %q was not offered", ErrInvalidResponse, e.realm)
	}
	nonce, ok := get(m, "nonce")
	if !ok {
		return nil, "", fmt.Errorf("%w: nonce missing", ErrMalformed)
	}
	if nonce != s.nonce {
		return nil, "", fmt.Errorf("%w: nonce does not match the challenge", ErrInvalidResponse)
	}
	e.nonce = nonce
	nc, ok := get(m, "nc")
	if !ok {
		return nil, "", fmt.Errorf("%w: nc missing", ErrMalformed)
	}
	// Subsequent authentication is not supported, so the only count is 1.
	if nc != "00000001" {
		return nil, "", fmt.Errorf("%w: nonce count %q, want 00000001", ErrInvalidResponse, nc)
	}
	e.nc = nc
	if e.cnonce, _ = get(m, "cnonce"); e.cnonce == "" {
		return nil, "", fmt.Errorf("%w: cnonce missing", ErrMalformed)
	}
	uri, ok := get(m, "digest-uri")
	if !ok {
		return nil, "", fmt.Errorf("%w: digest-uri missing", ErrMalformed)
	}
	if want := s.protocol + "/" + s.serverName; !strings.EqualFold(uri, want) {
		return nil, "", fmt.Errorf("%w: digest-uri %q, want %q", ErrInvalidResponse, uri, want)
	}
	e.digestURI = uri
	if authzid, ok := get(m, "authzid"); ok {
		// Hadoop's callback authorizes only a client acting as itself.
		if authzid != e.username {
			return nil, "", fmt.Errorf("%w: authzid %q differs from the username", ErrInvalidResponse, authzid)
		}
		e.authzid = authzid
	}
	sent, _ := get(m, "response")
	if !isLowerHex32(sent) {
		return nil, "", fmt.Errorf("%w: response is not 32 lowercase hex digits", ErrMalformed)
	}
	return e, sent, nil
}

// isResponseDirective reports the directives RFC 2831 §2.1.2 allows once
// in a response.
func isResponseDirective(name string) bool {
	switch name {
	case "username", "realm", "nonce", "cnonce", "nc", "qop", "digest-uri",
		"response", "maxbuf", "charset", "cipher", "authzid":
		return true
	}
	return false
}
