package sparkshuffle

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/knitdev/knit/protocols/digestmd5"
)

// Spark's SASL (network-common sasl/): DIGEST-MD5 carried in SaslMessages,
// with user name base64("sparkSaslUser"), the app secret's base64 as the
// password, protocol "null" and server name "default" (so the digest-uri is
// "null/default"). The app id in the first SaslMessage picks the secret.

const (
	saslMessageTag = 0xEA
	// saslUser is base64 of SparkSaslServer's "sparkSaslUser".
	saslUser = "c3BhcmtTYXNsVXNlcg=="
)

// saslMessage is Spark's SaslMessage: the tag, the app id, a body length
// (ignored, the body is the rest) and the SASL token.
type saslMessage struct {
	appID string
	token []byte
}

func (m *saslMessage) encode() []byte {
	b := appendString([]byte{saslMessageTag}, m.appID)
	return appendBytes(b, m.token)
}

func decodeSaslMessage(b []byte) (*saslMessage, error) {
	r := &javaBuf{b: b}
	tag, err := r.byte()
	if err != nil {
		return nil, err
	}
	if tag != saslMessageTag {
		return nil, illegalState("Expected SaslMessage, received something else (maybe your client does not have SASL enabled?)")
	}
	m := &saslMessage{}
	if m.appID, err = r.str(); err != nil {
		return nil, err
	}
	if _, err := r.int(); err != nil {
		return nil, err
	}
	m.token = r.rest()
	return m, nil
}

// errNoSecret: the application has no registered secret.
var errNoSecret = errors.New("no secret registered")

// saslExchange is the server side of one connection's SASL handshake.
type saslExchange struct {
	app    string
	server *digestmd5.Server
	step   int
}

func newSaslExchange(appID string, secret func(app string) []byte) (*saslExchange, error) {
	x := &saslExchange{app: appID}
	srv, err := digestmd5.NewServer(digestmd5.ServerConfig{
		ServerName: "default",
		Protocol:   "null",
		Lookup: func(user string) (string, error) {
			s := secret(appID)
			if s == nil {
				return "", errNoSecret
			}
			if user != saslUser {
				return "", digestmd5.ErrAuthFailed
			}
			return base64.StdEncoding.EncodeToString(s), nil
		},
	})
	if err != nil {
		return nil, err
	}
	x.server = srv
	return x, nil
}

// respond evaluates one client token: the challenge for the first, the
// rspauth for the second, after which done is true. Errors carry the text
// Spark answers with.
func (x *saslExchange) respond(token []byte) (resp []byte, done bool, err error) {
	x.step++
	switch x.step {
	case 1:
		if len(token) != 0 {
			return nil, false, saslErr("DIGEST-MD5 must not have an initial response")
		}
		ch, err := x.server.Challenge()
		if err != nil {
			return nil, false, runtimeErr(err.Error())
		}
		return ch, false, nil
	case 2:
		final, err := x.server.Evaluate(token)
		switch {
		case errors.Is(err, errNoSecret):
			return nil, false, &JavaError{Class: "java.lang.NullPointerException", Message: "Password cannot be null if SASL is enabled"}
		case errors.Is(err, digestmd5.ErrAuthFailed):
			return nil, false, saslErr("DIGEST-MD5: digest response format violation. Mismatched response.")
		case err != nil:
			return nil, false, saslErr(fmt.Sprintf("DIGEST-MD5: %v", err))
		}
		return final, true, nil
	}
	return nil, false, saslErr("DIGEST-MD5: authentication already failed")
}

// saslErr is a SaslException as SparkSaslServer.response propagates it.
func saslErr(msg string) error {
	return runtimeErr("javax.security.sasl.SaslException: " + msg)
}

// saslClient is the client side (SparkSaslClient), for Client and tests.
type saslClient struct {
	appID  string
	client *digestmd5.Client
}

func newSaslClient(appID string, secret []byte) *saslClient {
	return &saslClient{appID: appID, client: digestmd5.NewClient(digestmd5.ClientConfig{
		Username:   saslUser,
		Password:   base64.StdEncoding.EncodeToString(secret),
		Protocol:   "null",
		ServerName: "default",
	})}
}
