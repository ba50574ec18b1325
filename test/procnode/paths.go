package procnode

import (
	"path"
	"sort"
	"strings"
)

// pathMapping says where one path a container expects (a volumeMount's
// mountPath, its terminationMessagePath) really is on this machine.
type pathMapping struct {
	From string `json:"from"` // clean absolute path as the container sees it
	To   string `json:"to"`   // host path
}

// pathTranslator rewrites container paths to host paths inside strings. A
// process has no mount namespace, so this is the only way a command line
// such as `cat /etc/config/app.yaml` can reach the volume mounted there.
type pathTranslator struct {
	maps []pathMapping // longest From first, so /data/sub wins over /data
}

func newPathTranslator(maps []pathMapping) pathTranslator {
	cp := make([]pathMapping, 0, len(maps))
	for _, m := range maps {
		from := path.Clean(m.From)
		if from == "/" || !path.IsAbs(from) {
			// A mount at / would swallow every absolute path; the API server
			// rejects it anyway, and relative paths cannot be found in text.
			continue
		}
		cp = append(cp, pathMapping{From: from, To: m.To})
	}
	sort.SliceStable(cp, func(i, j int) bool { return len(cp[i].From) > len(cp[j].From) })
	return pathTranslator{maps: cp}
}

// isPathDelimiter reports whether c ends or starts a path inside a command
// line or an environment value: white space, quotes and the separators of
// shell syntax, flag values (--x=/p) and path lists (/a:/b). The characters
// a file name usually holds (letters, digits, '.', '-', '_', '/', '+', '@')
// are not delimiters, so /data never matches inside /data2 or /x/data.
func isPathDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f',
		'"', '\'', '`', ';', ':', ',', '=', '(', ')', '<', '>', '|', '&', '{', '}', '[', ']', '$', '!', '*', '?':
		return true
	}
	return false
}

// translate rewrites every occurrence of a mapped path that stands on its
// own: preceded by the start of s or a delimiter, and followed by the end of
// s, '/' or a delimiter. It scans once from left to right, so a host path
// that itself contains a mapped path is never rewritten twice.
func (t pathTranslator) translate(s string) string {
	if len(t.maps) == 0 || !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '/' || (i > 0 && !isPathDelimiter(s[i-1])) {
			continue
		}
		for _, m := range t.maps {
			if !strings.HasPrefix(s[i:], m.From) {
				continue
			}
			end := i + len(m.From)
			if end < len(s) && s[end] != '/' && !isPathDelimiter(s[end]) {
				continue
			}
			b.WriteString(s[last:i])
			b.WriteString(m.To)
			last = end
			i = end - 1
			break
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func (t pathTranslator) translateAll(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = t.translate(s)
	}
	return out
}
