package sparkshuffle

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// Spark's auth engine (network-common crypto/AuthEngine, Spark 3.5): each
// side sends an AuthMessage holding its ephemeral X25519 public key,
// AES-GCM encrypted under a key HKDF derives from the app secret, a random
// salt and the transcript so far; the shared X25519 secret then keys
// AES/CTR over the rest of the connection, both ways.

const (
	authMessageTag = 0xFB
	saltLen        = 16
	gcmKeyLen      = 16
)

// authMessage is Spark's AuthMessage.
type authMessage struct {
	appID      string
	salt       []byte
	ciphertext []byte
}

func (m *authMessage) encode() []byte {
	b := []byte{authMessageTag}
	b = appendString(b, m.appID)
	b = appendBytes(b, m.salt)
	return appendBytes(b, m.ciphertext)
}

// decodeAuthMessage decodes an AuthMessage; anything else fails (then a
// server with SASL fallback tries the bytes as a SaslMessage).
func decodeAuthMessage(b []byte) (*authMessage, error) {
	r := &javaBuf{b: b}
	tag, err := r.byte()
	if err != nil {
		return nil, err
	}
	if tag != authMessageTag {
		return nil, illegalArgument("Expected ClientChallenge, received something else.")
	}
	m := &authMessage{}
	if m.appID, err = r.str(); err != nil {
		return nil, err
	}
	n, err := r.int()
	if err != nil {
		return nil, err
	}
	if m.salt, err = r.bytes(n); err != nil {
		return nil, err
	}
	if n, err = r.int(); err != nil {
		return nil, err
	}
	if m.ciphertext, err = r.bytes(n); err != nil {
		return nil, err
	}
	return m, nil
}

// errAuthFailed is every auth engine failure; Spark answers all of them
// alike and closes the connection.
var errAuthFailed = illegalArgument("Authentication failed.")

// sessionKeys are what a finished exchange derives: the AES key, and the
// counter blocks of the client→server and server→client streams.
type sessionKeys struct {
	key          []byte
	clientToServ []byte // the server's input IV, the client's output IV
	servToClient []byte // the server's output IV, the client's input IV
}

func (k sessionKeys) streams(server bool) (in, out cipher.Stream, err error) {
	block, err := aes.NewCipher(k.key)
	if err != nil {
		return nil, nil, fmt.Errorf("session cipher: %w", err)
	}
	c2s := cipher.NewCTR(block, k.clientToServ)
	s2c := cipher.NewCTR(block, k.servToClient)
	if server {
		return c2s, s2c, nil
	}
	return s2c, c2s, nil
}

func hkdfKey(secret, salt []byte, info []byte, n int) ([]byte, error) {
	return hkdf.Key(sha256.New, secret, salt, string(info), n)
}

// sealPublicKey encrypts an ephemeral public key as encryptEphemeralPublicKey
// does: HKDF(secret, salt, appId‖salt‖transcript) keys AES-GCM, whose
// output is Tink's: 12-byte nonce, ciphertext, tag; the same bytes are the
// associated data.
func sealPublicKey(rnd io.Reader, appID string, secret, pub, transcript []byte) (*authMessage, error) {
	salt := make([]byte, saltLen)
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return nil, fmt.Errorf("salt: %w", err)
	}
	aad := append(append([]byte(appID), salt...), transcript...)
	key, err := hkdfKey(secret, salt, aad, gcmKeyLen)
	if err != nil {
		return nil, err
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(rnd, nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return &authMessage{appID: appID, salt: salt, ciphertext: aead.Seal(nonce, nonce, pub, aad)}, nil
}

func openPublicKey(m *authMessage, secret, transcript []byte) ([]byte, error) {
	aad := append(append([]byte(m.appID), m.salt...), transcript...)
	key, err := hkdfKey(secret, m.salt, aad, gcmKeyLen)
	if err != nil {
		return nil, err
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(m.ciphertext) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("auth message: ciphertext too short")
	}
	n := aead.NonceSize()
	return aead.Open(nil, m.ciphertext[:n], m.ciphertext[n:], aad)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// deriveSession is generateTransportCipher: version 1 keys AES with the
// raw X25519 secret (Spark's default, UNSAFE_SKIP_HKDF_VERSION), version 2
// with HKDF over the transcript; the IVs are HKDF in both.
func deriveSession(version int, shared, transcript []byte) (sessionKeys, error) {
	var k sessionKeys
	var err error
	if version == 1 {
		k.key = shared
	} else if k.key, err = hkdfKey(shared, transcript, []byte("derivedKey"), gcmKeyLen); err != nil {
		return k, err
	}
	// The client's input IV ("inputIv") is the server→client stream's.
	if k.servToClient, err = hkdfKey(shared, transcript, []byte("inputIv"), gcmKeyLen); err != nil {
		return k, err
	}
	if k.clientToServ, err = hkdfKey(shared, transcript, []byte("outputIv"), gcmKeyLen); err != nil {
		return k, err
	}
	return k, nil
}

// authServerRespond answers a client's AuthMessage (AuthEngine.response):
// the server's AuthMessage and the session keys. Any failure is
// errAuthFailed's to report.
func authServerRespond(rnd io.Reader, version int, secret []byte, client *authMessage) (*authMessage, sessionKeys, error) {
	clientPub, err := openPublicKey(client, secret, nil)
	if err != nil {
		return nil, sessionKeys{}, fmt.Errorf("client key: %w", err)
	}
	peer, err := ecdh.X25519().NewPublicKey(clientPub)
	if err != nil {
		return nil, sessionKeys{}, fmt.Errorf("client key: %w", err)
	}
	priv, err := ecdh.X25519().GenerateKey(rnd)
	if err != nil {
		return nil, sessionKeys{}, fmt.Errorf("server key: %w", err)
	}
	clientBytes := client.encode()
	resp, err := sealPublicKey(rnd, client.appID, secret, priv.PublicKey().Bytes(), clientBytes)
	if err != nil {
		return nil, sessionKeys{}, err
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		return nil, sessionKeys{}, fmt.Errorf("shared secret: %w", err)
	}
	keys, err := deriveSession(version, shared, append(clientBytes, resp.encode()...))
	return resp, keys, err
}

// authClient is the client side of the exchange (AuthClientBootstrap),
// used by Client and by tests.
type authClient struct {
	version int
	secret  []byte
	priv    *ecdh.PrivateKey
	hello   *authMessage
}

func newAuthClient(version int, appID string, secret []byte) (*authClient, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hello, err := sealPublicKey(rand.Reader, appID, secret, priv.PublicKey().Bytes(), nil)
	if err != nil {
		return nil, err
	}
	return &authClient{version: version, secret: secret, priv: priv, hello: hello}, nil
}

// finish reads the server's AuthMessage and derives the session keys.
func (c *authClient) finish(resp []byte) (sessionKeys, error) {
	m, err := decodeAuthMessage(resp)
	if err != nil {
		return sessionKeys{}, err
	}
	if m.appID != c.hello.appID {
		return sessionKeys{}, errors.New("auth: server answered for another application")
	}
	helloBytes := c.hello.encode()
	pub, err := openPublicKey(m, c.secret, helloBytes)
	if err != nil {
		return sessionKeys{}, fmt.Errorf("auth: server key: %w", err)
	}
	peer, err := ecdh.X25519().NewPublicKey(pub)
	if err != nil {
		return sessionKeys{}, fmt.Errorf("auth: server key: %w", err)
	}
	shared, err := c.priv.ECDH(peer)
	if err != nil {
		return sessionKeys{}, err
	}
	return deriveSession(c.version, shared, append(helloBytes, m.encode()...))
}

// cryptReader decrypts everything read through it.
type cryptReader struct {
	s cipher.Stream
	r io.Reader
}

func (c *cryptReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.s.XORKeyStream(p[:n], p[:n])
	return n, err
}

// cryptWriter encrypts everything written through it, reusing one buffer.
type cryptWriter struct {
	s   cipher.Stream
	w   io.Writer
	buf []byte
}

func (c *cryptWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if c.buf == nil {
			c.buf = make([]byte, 64<<10)
		}
		n := min(len(p), len(c.buf))
		c.s.XORKeyStream(c.buf[:n], p[:n])
		m, err := c.w.Write(c.buf[:n])
		written += m
		if err != nil {
			// The key stream has advanced past bytes never sent: the
			// connection cannot go on.
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}
