package digestmd5

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
)

// exchange holds the values of one authentication that enter the digests.
// username, realm and password are text (Go strings); the others are the
// exact bytes sent on the wire.
type exchange struct {
	username, realm, password string
	nonce, cnonce, nc, qop    string
	digestURI, authzid        string
}

// response is the client's proof (RFC 2831 §2.1.2.1, qop "auth").
func (e *exchange) response() string { return e.kd("AUTHENTICATE:" + e.digestURI) }

// rspauth is the server's proof (RFC 2831 §2.1.3): the same with no method.
func (e *exchange) rspauth() string { return e.kd(":" + e.digestURI) }

// kd computes HEX(H(HEX(H(A1)) ":" nonce ":" nc ":" cnonce ":" qop ":" HEX(H(A2)))),
// with A1 = H(username ":" realm ":" password) ":" nonce ":" cnonce [":" authzid].
func (e *exchange) kd(a2 string) string {
	inner := md5.New()
	inner.Write(latin1IfPossible(e.username))
	inner.Write([]byte{':'})
	inner.Write(latin1IfPossible(e.realm))
	inner.Write([]byte{':'})
	inner.Write(latin1IfPossible(e.password))
	a1 := inner.Sum(nil)
	a1 = append(a1, ':')
	a1 = append(a1, e.nonce...)
	a1 = append(a1, ':')
	a1 = append(a1, e.cnonce...)
	if e.authzid != "" {
		a1 = append(a1, ':')
		a1 = append(a1, e.authzid...)
	}
	ha1 := md5.Sum(a1)
	ha2 := md5.Sum([]byte(a2))
	kd := hex.EncodeToString(ha1[:]) + ":" + e.nonce + ":" + e.nc + ":" + e.cnonce + ":" + e.qop + ":" + hex.EncodeToString(ha2[:])
	sum := md5.Sum([]byte(kd))
	return hex.EncodeToString(sum[:])
}

// latin1IfPossible encodes s for hashing as RFC 2831 §2.1.2.1 asks: in
// ISO-8859-1 when every character fits, in UTF-8 otherwise. Peers that use
// UTF-8 and those that do not then compute the same digest for Latin-1
// names; Hadoop's base64 names are ASCII and unaffected.
func latin1IfPossible(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff { // invalid UTF-8 decodes as U+FFFD, also > 0xff
			return []byte(s)
		}
		out = append(out, byte(r))
	}
	return out
}

// latin1ToString reads bytes sent without charset=utf-8, which RFC 2831
// says are ISO-8859-1.
func latin1ToString(b string) string {
	r := make([]rune, len(b))
	for i := 0; i < len(b); i++ {
		r[i] = rune(b[i])
	}
	return string(r)
}

// stringToLatin1 is the inverse; ok is false when s has a character that
// ISO-8859-1 cannot carry.
func stringToLatin1(s string) (b string, ok bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff { // invalid UTF-8 decodes as U+FFFD, also > 0xff
			return "", false
		}
		out = append(out, byte(r))
	}
	return string(out), true
}

// randomNonce returns 30 random bytes in base64 (40 characters), the size
// the JDK uses for both nonce and cnonce.
func randomNonce() (string, error) {
	b := make([]byte, 30)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func isLowerHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
