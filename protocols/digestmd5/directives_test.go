package digestmd5

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []directive
	}{
		{"empty input", "", nil},
		{"only separators and white space", " ,\t, \r\n,", nil},
		{"token values", "nc=00000001,qop=auth", []directive{{"nc", "00000001"}, {"qop", "auth"}}},
		{"quoted value", `realm="default"`, []directive{{"realm", "default"}}},
		{"empty quoted value", `authzid=""`, []directive{{"authzid", ""}}},
		{"comma inside quotes", `qop="auth,auth-int"`, []directive{{"qop", "auth,auth-int"}}},
		{"escaped quote and backslash", `username="a\"b\\c"`, []directive{{"username", `a"b\c`}}},
		{"any escaped byte is itself", `x="\a\,"`, []directive{{"x", "a,"}}},
		{"white space around words", " a = \"1\" ,\tb\r\n=\t2 ", []directive{{"a", "1"}, {"b", "2"}}},
		{"null elements", ",,a=1,,,b=2,", []directive{{"a", "1"}, {"b", "2"}}},
		{"names are case-insensitive", "NoNcE=x,Digest-URI=y", []directive{{"nonce", "x"}, {"digest-uri", "y"}}},
		{"unquoted value with slash plus and equals", "u=/a+b==", []directive{{"u", "/a+b=="}}},
		{"quoted utf-8 and white space kept", "u=\"j\u00fcr gen\tx\"", []directive{{"u", "j\u00fcr gen\tx"}}},
		{"repeated names kept in order", "realm=a,realm=b", []directive{{"realm", "a"}, {"realm", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDirectives([]byte(tt.in), MaxResponseLen)
			if err != nil {
				t.Fatalf("parseDirectives(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseDirectives(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseDirectivesRejectsMalformedInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"name without value", "nonce", ErrMalformed},
		{"equals without value", "nonce=", ErrMalformed},
		{"equals then comma", "nonce=,nc=1", ErrMalformed},
		{"value without name", "=x", ErrMalformed},
		{"separator in name", "no/nce=x", ErrMalformed},
		{"unterminated quoted string", `nonce="abc`, ErrMalformed},
		{"backslash at end", `nonce="abc\`, ErrMalformed},
		{"missing comma between directives", "a=1 b=2", ErrMalformed},
		{"quote after token value", `a=b"c"`, ErrMalformed},
		{"control byte in quoted string", "a=\"x\x01\"", ErrMalformed},
		{"control byte in token value", "a=x\x00", ErrMalformed},
		{"non-ascii token value", "a=j\u00fcrgen", ErrMalformed},
		{"one byte over the limit", "a=" + strings.Repeat("x", MaxResponseLen-1), ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDirectives([]byte(tt.in), MaxResponseLen)
			if !errors.Is(err, tt.want) {
				t.Fatalf("parseDirectives(%q) = %q, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseDirectivesAcceptsInputAtTheLimit(t *testing.T) {
	in := "a=" + strings.Repeat("x", MaxResponseLen-2)
	if _, err := parseDirectives([]byte(in), MaxResponseLen); err != nil {
		t.Fatalf("input of exactly %d bytes: %v", MaxResponseLen, err)
	}
}

func TestAppendQuotedRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `a"b\c`, "ctl\x00\x1f\x7f", "tab\tcr\rlf\n", "utf-8 \u00fc\u65e5", "\xff\xfe"} {
		var sb strings.Builder
		sb.WriteString("x=")
		appendQuoted(&sb, s)
		got, err := parseDirectives([]byte(sb.String()), MaxResponseLen)
		if err != nil || len(got) != 1 || got[0].value != s {
			t.Errorf("quote %q -> %s -> %q, %v", s, sb.String(), got, err)
		}
	}
}

func TestIndexRejectsRepeatsOnlyWhereTheRFCSays(t *testing.T) {
	once := func(name string) bool { return name == "nonce" }
	if _, err := index([]directive{{"nonce", "a"}, {"nonce", "a"}}, once); !errors.Is(err, ErrMalformed) {
		t.Errorf("repeated nonce: %v, want ErrMalformed", err)
	}
	m, err := index([]directive{{"realm", "a"}, {"realm", "b"}, {"x-unknown", "1"}, {"x-unknown", "2"}}, once)
	if err != nil {
		t.Fatalf("repeatable directives: %v", err)
	}
	if !reflect.DeepEqual(m["realm"], []string{"a", "b"}) {
		t.Errorf("realms = %q", m["realm"])
	}
}
