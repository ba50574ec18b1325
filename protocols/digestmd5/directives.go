package digestmd5

import (
	"fmt"
	"strings"
)

// directive is one name=value pair; name is lower-cased because directive
// names are case-insensitive (the JDK compares them so), value is unquoted.
type directive struct {
	name, value string
}

// parseDirectives parses a comma-separated directive list by the RFC 2831
// §7.1 rules: "#rule" lists allow empty elements and linear white space
// around every word, values are tokens or quoted-strings with backslash
// escapes. Unquoted values are read more loosely than RFC tokens (any
// visible ASCII but ',' and '"'), as the JDK reads them, because clients
// send base64 and '/' unquoted in practice.
func parseDirectives(b []byte, limit int) ([]directive, error) {
	if len(b) > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLong, len(b), limit)
	}
	var out []directive
	i := 0
	for {
		for i < len(b) && (isLWS(b[i]) || b[i] == ',') {
			i++
		}
		if i == len(b) {
			return out, nil
		}
		start := i
		for i < len(b) && isTokenChar(b[i]) {
			i++
		}
		if i == start {
			return nil, syntaxError(i, "expected a directive name")
		}
		name := strings.ToLower(string(b[start:i]))
		i = skipLWS(b, i)
		if i == len(b) || b[i] != '=' {
			return nil, syntaxError(i, "expected '=' after %q", name)
		}
		i = skipLWS(b, i+1)
		var value string
		if i < len(b) && b[i] == '"' {
			var err error
			if value, i, err = parseQuoted(b, i); err != nil {
				return nil, err
			}
		} else {
			start = i
			for i < len(b) && isValueChar(b[i]) {
				i++
			}
			if i == start {
				return nil, syntaxError(i, "expected a value for %q", name)
			}
			value = string(b[start:i])
		}
		out = append(out, directive{name: name, value: value})
		i = skipLWS(b, i)
		if i < len(b) && b[i] != ',' {
			return nil, syntaxError(i, "expected ',' after the value of %q", name)
		}
	}
}

// parseQuoted reads the quoted-string starting at b[i] == '"' and returns its
// unescaped content and the index just past the closing quote.
func parseQuoted(b []byte, i int) (string, int, error) {
	open := i
	var sb strings.Builder
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return sb.String(), i + 1, nil
		case c == '\\':
			// The JDK unescapes any byte after a backslash; RFC 2831 says
			// any CHAR. Accepting any byte keeps quoting reversible.
			if i+1 == len(b) {
				return "", 0, syntaxError(i, "backslash at end of input")
			}
			i++
			sb.WriteByte(b[i])
		case isCTL(c) && c != '\t' && c != '\r' && c != '\n':
			return "", 0, syntaxError(i, "control byte 0x%02x in quoted string", c)
		default:
			sb.WriteByte(c)
		}
	}
	return "", 0, syntaxError(open, "unterminated quoted string")
}

func syntaxError(at int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrMalformed, at, fmt.Sprintf(format, args...))
}

// index maps directive names to values. RFC 2831 §2.1 tells the receiver
// to abort when most directives repeat; once says which. Repeats of names
// once does not know are kept, as unknown directives must be ignored.
func index(ds []directive, once func(name string) bool) (map[string][]string, error) {
	m := make(map[string][]string, len(ds))
	for _, d := range ds {
		if len(m[d.name]) > 0 && once(d.name) {
			return nil, fmt.Errorf("%w: directive %q appears more than once", ErrMalformed, d.name)
		}
		m[d.name] = append(m[d.name], d.value)
	}
	return m, nil
}

// get returns the first value of a directive; index has made sure there is
// at most one for the directives callers ask about.
func get(m map[string][]string, name string) (string, bool) {
	v := m[name]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// appendQuoted writes s as a quoted-string, escaping what the JDK escapes so
// that any peer that follows the RFC reads back the same bytes.
func appendQuoted(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || (isCTL(c) && c != '\t' && c != '\r' && c != '\n') {
			sb.WriteByte('\\')
		}
		sb.WriteByte(c)
	}
	sb.WriteByte('"')
}

func isCTL(c byte) bool { return c < 0x20 || c == 0x7f }

func isLWS(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipLWS(b []byte, i int) int {
	for i < len(b) && isLWS(b[i]) {
		i++
	}
	return i
}

// isTokenChar reports an RFC 2616 token byte: visible ASCII but separators.
func isTokenChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	return !strings.ContainsRune(`()<>@,;:\"/[]?={}`, rune(c))
}

func isValueChar(c byte) bool {
	return c > ' ' && c < 0x7f && c != ',' && c != '"'
}
