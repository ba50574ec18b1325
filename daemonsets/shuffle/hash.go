package shuffle

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"strconv"
	"strings"
)

// hashMessage is what a fetcher's UrlHash covers, SecureShuffleUtils.buildMsgFrom
// of new URL("http", "", port, uri): the port, then the URI without its
// fragment; a URI without '?' gets "?null", as Java's URL.getQuery gives null.
func hashMessage(port int, uri string) string {
	if i := strings.IndexByte(uri, '#'); i >= 0 {
		uri = uri[:i]
	}
	p := strconv.Itoa(port)
	if !strings.Contains(uri, "?") {
		return p + uri + "?null"
	}
	return p + uri
}

// shuffleHash is base64(HMAC-SHA1(secret, msg)), SecureShuffleUtils.generateHash.
func shuffleHash(secret, msg []byte) string {
	m := hmac.New(sha1.New, secret)
	m.Write(msg)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// verifyShuffleHash reports whether b64 is the hash of msg under secret,
// decoding b64 as commons-codec's Base64.decodeBase64 does (verifyReply):
// characters outside the alphabet are skipped, the URL-safe alphabet is
// accepted too, '=' ends the input and leftover bits are dropped. The
// comparison takes constant time.
func verifyShuffleHash(secret, msg []byte, b64 string) bool {
	m := hmac.New(sha1.New, secret)
	m.Write(msg)
	return hmac.Equal(decodeBase64Lenient(b64), m.Sum(nil))
}

// decodeBase64Lenient decodes as commons-codec's lenient Base64 decoder.
func decodeBase64Lenient(s string) []byte {
	out := make([]byte, 0, len(s)*3/4+1)
	var acc uint32
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case 'A' <= c && c <= 'Z':
			v = c - 'A'
		case 'a' <= c && c <= 'z':
			v = c - 'a' + 26
		case '0' <= c && c <= '9':
			v = c - '0' + 52
		case c == '+' || c == '-':
			v = 62
		case c == '/' || c == '_':
			v = 63
		case c == '=':
			i = len(s)
			continue
		default:
			continue
		}
		acc = acc<<6 | uint32(v)
		n++
		if n == 4 {
			out = append(out, byte(acc>>16), byte(acc>>8), byte(acc))
			acc, n = 0, 0
		}
	}
	switch n {
	case 2:
		out = append(out, byte(acc>>4))
	case 3:
		out = append(out, byte(acc>>10), byte(acc>>2))
	}
	return out
}
