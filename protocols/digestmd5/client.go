package digestmd5

import (
	"crypto/subtle"
	"fmt"
	"strings"
)

// MaxChallengeLen is the longest challenge or final message a Client
// accepts, the JDK DigestMD5Client's limit.
const MaxChallengeLen = 2048

// ClientConfig configures a Client.
type ClientConfig struct {
	// Username and Password are the credentials; in Hadoop the base64 of
	// the token identifier and the base64 of the token password.
	Username, Password string
	// Protocol is the service part of the digest-uri; Hadoop uses "".
	Protocol string
	// ServerName is the host part of the digest-uri. If empty,
	// DefaultServerName is used.
	ServerName string
	// CNonce returns the client nonce. If nil, 30 bytes from crypto/rand
	// in base64 are used, as the JDK does.
	CNonce func() (string, error)
}

type clientState int

const (
	clientNew clientState = iota + 1
	clientResponded
	clientDone
)

// Client is the client side of one DIGEST-MD5 exchange: Respond to the
// challenge, then Verify the server's final message. It is not safe for
// concurrent use.
type Client struct {
	cfg   ClientConfig
	state clientState
	e     exchange // filled by Respond for Verify
}

// NewClient returns a Client for one exchange.
func NewClient(cfg ClientConfig) *Client {
	if cfg.ServerName == "" {
		cfg.ServerName = DefaultServerName
	}
	if cfg.CNonce == nil {
		cfg.CNonce = randomNonce
	}
	return &Client{cfg: cfg, state: clientNew}
}

// Respond answers the server's challenge. The response has the JDK's
// directive order (charset, username, realm, nonce, nc, cnonce, digest-uri,
// maxbuf, response, qop), so Knit's client looks like a Java one on the
// wire. It may be called once. A challenge that offers no "auth" qop gets
// ErrUnsupported.
func (c *Client) Respond(challenge []byte) ([]byte, error) {
	if c.state != clientNew {
		return nil, fmt.Errorf("%w: Respond called twice", ErrState)
	}
	c.state = clientDone
	ds, err := parseDirectives(challenge, MaxChallengeLen)
	if err != nil {
		return nil, err
	}
	m, err := index(ds, isChallengeDirective)
	if err != nil {
		return nil, err
	}
	nonce, _ := get(m, "nonce")
	if nonce == "" {
		return nil, fmt.Errorf("%w: challenge has no nonce", ErrMalformed)
	}
	algorithm, ok := get(m, "algorithm")
	if !ok {
		return nil, fmt.Errorf("%w: challenge has no algorithm", ErrMalformed)
	}
	if !strings.EqualFold(algorithm, "md5-sess") {
		return nil, fmt.Errorf("%w: algorithm %q", ErrUnsupported, algorithm)
	}
	utf8Mode := false
	if cs, ok := get(m, "charset"); ok {
		if !strings.EqualFold(cs, "utf-8") {
			return nil, fmt.Errorf("%w: charset %q", ErrUnsupported, cs)
		}
		utf8Mode = true
	}
	if qops, ok := get(m, "qop"); ok && !offersAuth(qops) {
		return nil, fmt.Errorf("%w: server offers qop %q, only \"auth\" is supported", ErrUnsupported, qops)
	}
	// Like the JDK with Hadoop's callback handler, take the first realm
	// offered; none means the empty realm, and no realm directive.
	realm := ""
	if realms := m["realm"]; len(realms) > 0 {
		realm = realms[0]
		if !utf8Mode {
			realm = latin1ToString(realm)
		}
	}
	cnonce, err := c.cfg.CNonce()
	if err != nil {
		return nil, fmt.Errorf("digestmd5: make cnonce: %w", err)
	}
	if cnonce == "" {
		return nil, fmt.Errorf("digestmd5: cnonce source returned an empty cnonce")
	}
	wireUser, wireRealm := c.cfg.Username, realm
	if !utf8Mode {
		var ok1, ok2 bool
		wireUser, ok1 = stringToLatin1(c.cfg.Username)
		wireRealm, ok2 = stringToLatin1(realm)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: username or realm needs UTF-8 and the server did not offer charset=utf-8", ErrUnsupported)
		}
	}
	c.e = exchange{
		username:  c.cfg.Username,
		realm:     realm,
		password:  c.cfg.Password,
		nonce:     nonce,
		cnonce:    cnonce,
		nc:        "00000001",
		qop:       "auth",
		digestURI: c.cfg.Protocol + "/" + c.cfg.ServerName,
	}

	var sb strings.Builder
	if utf8Mode {
		sb.WriteString("charset=utf-8,")
	}
	sb.WriteString("username=")
	appendQuoted(&sb, wireUser)
	if realm != "" {
		sb.WriteString(",realm=")
		appendQuoted(&sb, wireRealm)
	}
	sb.WriteString(",nonce=")
	appendQuoted(&sb, nonce)
	sb.WriteString(",nc=00000001,cnonce=")
	appendQuoted(&sb, cnonce)
	sb.WriteString(",digest-uri=")
	appendQuoted(&sb, c.e.digestURI)
	sb.WriteString(",maxbuf=65536,response=")
	sb.WriteString(c.e.response())
	sb.WriteString(",qop=auth")
	c.state = clientResponded
	return []byte(sb.String()), nil
}

// Verify checks the server's final message "rspauth=…". Only a nil result
// proves that the server knows the password; Hadoop's client sends nothing
// more before that. It may be called once, after Respond.
func (c *Client) Verify(final []byte) error {
	if c.state != clientResponded {
		return fmt.Errorf("%w: Verify without a successful Respond", ErrState)
	}
	c.state = clientDone
	ds, err := parseDirectives(final, MaxChallengeLen)
	if err != nil {
		return err
	}
	m, err := index(ds, func(name string) bool { return name == "rspauth" })
	if err != nil {
		return err
	}
	got, ok := get(m, "rspauth")
	if !ok {
		return fmt.Errorf("%w: final message has no rspauth", ErrMalformed)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.e.rspauth())) != 1 {
		return fmt.Errorf("%w: server's rspauth does not match", ErrAuthFailed)
	}
	return nil
}

// offersAuth reports whether a challenge's qop-options list (a quoted,
// comma-separated list) contains "auth".
func offersAuth(list string) bool {
	for _, q := range strings.Split(list, ",") {
		if strings.EqualFold(strings.Trim(q, " \t\r\n"), "auth") {
			return true
		}
	}
	return false
}

// isChallengeDirective reports the directives RFC 2831 §2.1.1 allows once
// in a challenge; realm may repeat.
func isChallengeDirective(name string) bool {
	switch name {
	case "nonce", "qop", "stale", "maxbuf", "charset", "algorithm", "cipher":
		return true
	}
	return false
}
