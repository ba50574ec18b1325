package metrics

import (
	"strings"
	"unicode"
)

// HadoopName is the name Hadoop's PrometheusMetricsSink gives metric of
// record: both capitalised and joined, split into words before an upper
// case letter that follows a lower case one or a digit, and before an
// upper case letter that starts a capitalised word ("NMs" → "n_ms"),
// lower-cased, every run of other characters made one "_".
func HadoopName(record, metric string) string {
	s := []rune(capitalize(record) + capitalize(metric))
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			prev := s[i-1]
			afterLower := !unicode.IsUpper(prev) && prev != '_'
			startsWord := i+1 < len(s) && unicode.IsLower(s[i+1])
			if afterLower || startsWord {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	// Runs of characters outside [a-z0-9] become one underscore.
	var out strings.Builder
	under := false
	for _, r := range b.String() {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			out.WriteRune(r)
			under = false
			continue
		}
		if !under {
			out.WriteByte('_')
			under = true
		}
	}
	return out.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
