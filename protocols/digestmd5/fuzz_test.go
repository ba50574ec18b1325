package digestmd5

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// fuzzSeeds are the real responses and challenges plus edge cases.
func fuzzSeeds(t testing.TB) []string {
	var seeds []string
	for _, v := range vectors(t) {
		seeds = append(seeds, v.response, v.challenge, v.final)
	}
	return append(seeds,
		"", ",", `a="\"\\"`, "a = b , , c=\"x,y\"", `realm="a",realm="b"`,
		"qop=auth-conf", "nc=00000002", `x="`, `x="\`, "x=\"\r\n\t\"", "\xff=\xff",
	)
}

// FuzzParseDirectives checks that the parser never panics, respects its
// limit, and that whatever it accepts survives re-quoting unchanged.
func FuzzParseDirectives(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ds, err := parseDirectives(in, MaxResponseLen)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLong) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if len(in) > MaxResponseLen {
			t.Fatalf("accepted %d bytes", len(in))
		}
		var sb strings.Builder
		for i, d := range ds {
			if d.name == "" || d.name != strings.ToLower(d.name) {
				t.Fatalf("bad name %q", d.name)
			}
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(d.name)
			sb.WriteByte('=')
			appendQuoted(&sb, d.value)
		}
		again, err := parseDirectives([]byte(sb.String()), 1<<20)
		if err != nil {
			t.Fatalf("re-quoted %q does not parse: %v", sb.String(), err)
		}
		if len(ds) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(ds, again) {
			t.Fatalf("round trip changed %q into %q", ds, again)
		}
	})
}

// FuzzServerEvaluate checks that Evaluate never panics, classifies every
// error, and succeeds only with a well-formed rspauth. The server is bound
// to the README vector's nonce and credentials, so seeds that mutate the
// recorded response explore every check up to the digest comparison.
func FuzzServerEvaluate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add([]byte(s))
	}
	v := readmeVector(f)
	errUnknown := errors.New("unknown user")
	rspauth := regexp.MustCompile(`^rspauth=[0-9a-f]{32}$`)
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := NewServer(ServerConfig{
			Nonce: fixed(v.nonce),
			Lookup: func(u string) (string, error) {
				if u != v.username {
					return "", errUnknown
				}
				return v.password, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Challenge(); err != nil {
			t.Fatal(err)
		}
		final, err := s.Evaluate(in)
		if err != nil {
			for _, known := range []error{ErrTooLong, ErrMalformed, ErrUnsupported, ErrInvalidResponse, ErrAuthFailed, errUnknown} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("unclassified error %v", err)
		}
		if !rspauth.Match(final) || s.Username() != v.username {
			t.Fatalf("success with final %q, Username %q", final, s.Username())
		}
		if _, err := s.Evaluate(in); !errors.Is(err, ErrState) {
			t.Fatalf("second Evaluate = %v", err)
		}
	})
}
