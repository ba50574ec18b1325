package shuffle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Request errors. Each is answered 400 and the connection closed, except
// errBodyTooLarge (413).
var (
	// errHeadTooLarge: the request line or the header lines exceed their bound.
	errHeadTooLarge = errors.New("request head too large")
	// errMalformed: the request head is not HTTP/1.x.
	errMalformed = errors.New("malformed request")
	// errBodyTooLarge: Content-Length beyond maxBodyBytes.
	errBodyTooLarge = errors.New("request body too large")
)

// maxBodyBytes is the largest request body read and dropped: Netty's
// HttpObjectAggregator bound in ShuffleChannelInitializer (1 << 16).
const maxBodyBytes = 1 << 16

// maxHeaderLines bounds the number of header lines, whatever their size.
const maxHeaderLines = 256

// header is one request header: the name as sent, the value trimmed of
// surrounding blanks as Netty trims it.
type header struct {
	name, value string
}

// request is one parsed HTTP/1.x request head.
type request struct {
	method  string
	uri     string
	proto   string
	headers []header
	// contentLength is the declared body length; zero when absent.
	contentLength int64
}

// header returns the first value of the named header, matched without
// regard to case as Netty's HttpHeaders.get matches.
func (r *request) header(name string) (string, bool) {
	for _, h := range r.headers {
		if strings.EqualFold(h.name, name) {
			return h.value, true
		}
	}
	return "", false
}

// readRequest reads one request head from br: the request line within
// maxLine bytes and the header lines within maxHeader bytes together.
// Blank lines before the request line are skipped, as Netty skips them.
// io.EOF means the peer closed before sending anything.
func readRequest(br *bufio.Reader, maxLine, maxHeader int) (*request, error) {
	var line []byte
	var err error
	for skipped := 0; ; skipped++ {
		line, err = readLine(br, maxLine)
		if err != nil {
			if errors.Is(err, io.EOF) && skipped == 0 && len(line) == 0 {
				return nil, io.EOF
			}
			return nil, err
		}
		if len(line) > 0 {
			break
		}
		if skipped > 8 {
			return nil, fmt.Errorf("%w: blank lines before the request line", errMalformed)
		}
	}
	r := &request{}
	f := strings.Fields(string(line))
	if len(f) != 3 {
		return nil, fmt.Errorf("%w: request line has %d fields", errMalformed, len(f))
	}
	r.method, r.uri, r.proto = f[0], f[1], f[2]
	if r.proto != "HTTP/1.1" && r.proto != "HTTP/1.0" {
		return nil, fmt.Errorf("%w: protocol %.16q", errMalformed, r.proto)
	}
	left := maxHeader
	for {
		line, err = readLine(br, left)
		if err != nil {
			return nil, err
		}
		left -= len(line) + 2
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// obs-fold: the line continues the previous header's value.
			if len(r.headers) == 0 {
				return nil, fmt.Errorf("%w: continuation before the first header", errMalformed)
			}
			h := &r.headers[len(r.headers)-1]
			h.value = strings.TrimSpace(h.value + " " + strings.TrimSpace(string(line)))
			continue
		}
		if len(r.headers) == maxHeaderLines {
			return nil, fmt.Errorf("%w: more than %d header lines", errHeadTooLarge, maxHeaderLines)
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%w: header line %.32q", errMalformed, line)
		}
		r.headers = append(r.headers, header{name: string(name), value: strings.Trim(string(value), " \t")})
	}
	if _, ok := r.header("Transfer-Encoding"); ok {
		return nil, fmt.Errorf("%w: transfer-encoding is not supported", errMalformed)
	}
	var cl string
	for _, h := range r.headers {
		if !strings.EqualFold(h.name, "Content-Length") {
			continue
		}
		if cl != "" && cl != h.value {
			return nil, fmt.Errorf("%w: conflicting content-length", errMalformed)
		}
		cl = h.value
	}
	if cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 || cl[0] == '+' {
			return nil, fmt.Errorf("%w: content-length %.24q", errMalformed, cl)
		}
		r.contentLength = n
	}
	return r, nil
}

// readLine reads one line ending in LF (a CR before it dropped) of at most
// limit bytes. A line that does not end within limit is errHeadTooLarge.
// The returned slice is the caller's.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit+2 {
			return nil, errHeadTooLarge
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return line, io.ErrUnexpectedEOF
		}
		return line, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > limit {
		return nil, errHeadTooLarge
	}
	return line, nil
}

// maxQueryParams is Netty's QueryStringDecoder default maxParams.
const maxQueryParams = 1024

// errBadEscape is a % escape that is not two hex digits; Netty throws
// IllegalArgumentException, which ShuffleHandler answers 500.
var errBadEscape = errors.New("bad percent escape")

// parseQuery decodes the parameters of a request URI as Netty 4.1's
// QueryStringDecoder(uri).parameters() does: the query starts after the
// first '?' or '#' of the path, ends at '#', splits on '&' and ';', takes a
// name without '=' as having the value "", skips empty names, decodes %XX
// (as UTF-8) and '+', and keeps at most 1024 parameters.
func parseQuery(uri string) (map[string][]string, error) {
	params := map[string][]string{}
	from := strings.IndexAny(uri, "?#")
	if from < 0 {
		return params, nil
	}
	if uri[from] == '?' {
		from++
	}
	left := maxQueryParams
	nameStart, valueStart := from, -1
	add := func(end int) error {
		if nameStart >= end {
			return nil
		}
		vs := valueStart
		if vs <= nameStart {
			vs = end + 1
		}
		name, err := decodeComponent(uri[nameStart : vs-1])
		if err != nil {
			return err
		}
		value := ""
		if vs <= end {
			if value, err = decodeComponent(uri[vs:end]); err != nil {
				return err
			}
		}
		params[name] = append(params[name], value)
		left--
		return nil
	}
	i := from
loop:
	for ; i < len(uri); i++ {
		switch uri[i] {
		case '=':
			if nameStart == i {
				nameStart = i + 1
			} else if valueStart < nameStart {
				valueStart = i + 1
			}
		case '&', ';':
			if err := add(i); err != nil {
				return nil, err
			}
			if left == 0 {
				return params, nil
			}
			nameStart = i + 1
		case '#':
			break loop
		}
	}
	if err := add(i); err != nil {
		return nil, err
	}
	return params, nil
}

// decodeComponent undoes %XX escapes and '+' as Netty's decodeComponent
// does for query components; invalid UTF-8 becomes U+FFFD, as Java's
// decoder replaces it.
func decodeComponent(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b = append(b, ' ')
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("%w: unterminated escape at index %d", errBadEscape, i)
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: invalid hex at index %d", errBadEscape, i+1)
			}
			b = append(b, hi<<4|lo)
			i += 2
		default:
			b = append(b, c)
		}
	}
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD"), nil
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// splitMaps joins the map parameters' comma lists as ShuffleChannelHandler's
// splitMaps does with Java's String.split(","): trailing empty strings are
// dropped, so "a,b," is [a b] and "," is []; an empty value is [""].
// A nil list (no map parameter) stays nil.
func splitMaps(values []string) []string {
	if values == nil {
		return nil
	}
	out := []string{}
	for _, v := range values {
		parts := strings.Split(v, ",")
		if len(parts) > 1 {
			for len(parts) > 0 && parts[len(parts)-1] == "" {
				parts = parts[:len(parts)-1]
			}
		}
		out = append(out, parts...)
	}
	return out
}

// parseJavaInt reads a reduce number as Integer.parseInt does: an optional
// sign and decimal digits within 32 bits.
func parseJavaInt(s string) (int32, error) {
	if s == "" || strings.ContainsRune(s, '_') {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, err
	}
	return int32(n), nil
}
