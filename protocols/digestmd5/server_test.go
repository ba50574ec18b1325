package digestmd5

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// invalidTokenError stands in for the IPC layer's SecretManager$InvalidToken.
type invalidTokenError struct{ msg string }

func (e *invalidTokenError) Error() string { return e.msg }

// readmeVector is the scripted AMRM exchange from hadoop-wire/README.md.
func readmeVector(t testing.TB) vector {
	t.Helper()
	for _, v := range vectors(t) {
		if v.name == "hadoop-wire readme amrm 8030" {
			return v
		}
	}
	t.Fatal("readme vector missing")
	return vector{}
}

func challengedServer(t *testing.T, nonce string, lookup func(string) (string, error)) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Nonce: fixed(nonce), Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Challenge(); err != nil {
		t.Fatal(err)
	}
	return s
}

// signed builds a response with a correct digest for the README vector's
// credentials, so that a test changes exactly one thing.
func signed(v vector, edit func(e *exchange) []string) string {
	e := exchange{
		username: v.username, realm: "default", password: v.password,
		nonce: v.nonce, cnonce: v.cnonce, nc: "00000001", qop: "auth", digestURI: "/default",
	}
	extra := edit(&e)
	d := []string{
		`charset=utf-8`, `username="` + e.username + `"`, `realm="` + e.realm + `"`,
		`nonce="` + e.nonce + `"`, `nc=` + e.nc, `cnonce="` + e.cnonce + `"`,
		`digest-uri="` + e.digestURI + `"`, `maxbuf=65536`, `response=` + e.response(), `qop=` + e.qop,
	}
	return strings.Join(append(d, extra...), ",")
}

func TestServerRejectsBadResponses(t *testing.T) {
	v := readmeVector(t)
	good := v.response
	swap := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct {
		name     string
		response string
		password string
		want     error
	}{
		{"wrong password", good, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", ErrAuthFailed},
		{"wrong digest", swap("response=e1d3", "response=e1d4"), v.password, ErrAuthFailed},
		{"wrong nonce", swap(`nonce="VYIJ`, `nonce="WYIJ`), v.password, ErrInvalidResponse},
		{"nonce count 2", swap("nc=00000001", "nc=00000002"), v.password, ErrInvalidResponse},
		{"nonce count without leading zeros", swap("nc=00000001", "nc=1"), v.password, ErrInvalidResponse},
		{"digest-uri with hadoop protocol", swap(`digest-uri="/default"`, `digest-uri="hadoop/default"`), v.password, ErrInvalidResponse},
		{"digest-uri for another server", swap(`digest-uri="/default"`, `digest-uri="/other"`), v.password, ErrInvalidResponse},
		{"qop auth-conf requested", swap("qop=auth", "qop=auth-conf"), v.password, ErrUnsupported},
		{"qop auth-int requested", swap("qop=auth", "qop=auth-int"), v.password, ErrUnsupported},
		{"unknown qop", swap("qop=auth", "qop=none"), v.password, ErrUnsupported},
		{"realm not offered", swap(`realm="default"`, `realm="elsewhere"`), v.password, ErrInvalidResponse},
		{"realm missing", swap(`realm="default",`, ``), v.password, ErrInvalidResponse},
		{"charset other than utf-8", swap("charset=utf-8", "charset=iso-8859-1"), v.password, ErrInvalidResponse},
		{"authzid of another user", good + `,authzid="someone-else"`, v.password, ErrInvalidResponse},
		{"username missing", swap(`username="Cg0KCQgBEIDb0Ie1MhABEPGH56cE",`, ``), v.password, ErrMalformed},
		{"username empty", swap(`username="Cg0KCQgBEIDb0Ie1MhABEPGH56cE"`, `username=""`), v.password, ErrMalformed},
		{"nonce missing", swap(`nonce="VYIJP51hYpZJG8OlFZEZyyxe2L0UslKHrF+nBZcR",`, ``), v.password, ErrMalformed},
		{"nc missing", swap(`nc=00000001,`, ``), v.password, ErrMalformed},
		{"cnonce missing", swap(`cnonce="qXvXfjmv/lSl806CY2Ab6IkhrJXCaqL2egkY+eer",`, ``), v.password, ErrMalformed},
		{"digest-uri missing", swap(`digest-uri="/default",`, ``), v.password, ErrMalformed},
		{"response missing", swap(`response=e1d3227e08ebac47b315ec8b9046c386,`, ``), v.password, ErrMalformed},
		{"response in upper case", swap("response=e1d3227e08ebac47b315ec8b9046c386", "response=E1D3227E08EBAC47B315EC8B9046C386"), v.password, ErrMalformed},
		{"response too short", swap("response=e1d3227e08ebac47b315ec8b9046c386", "response=e1d3"), v.password, ErrMalformed},
		{"duplicate nonce", good + `,nonce="VYIJP51hYpZJG8OlFZEZyyxe2L0UslKHrF+nBZcR"`, v.password, ErrMalformed},
		{"duplicate username", good + `,username="other"`, v.password, ErrMalformed},
		{"duplicate maxbuf", good + `,maxbuf=65536`, v.password, ErrMalformed},
		{"username not utf-8", swap(`username="Cg0K`, "username=\"\xff\xfe"), v.password, ErrMalformed},
		{"unterminated quote", good[:40], v.password, ErrMalformed},
		{"empty response", "", v.password, ErrMalformed},
		{"binary garbage", "\x00\x01\x02", v.password, ErrMalformed},
		{"oversized response", good + ",x=" + strings.Repeat("a", MaxResponseLen), v.password, ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := challengedServer(t, v.nonce, lookupOnly(v.username, tt.password))
			final, err := s.Evaluate([]byte(tt.response))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Evaluate = %q, %v; want %v", final, err, tt.want)
			}
			if final != nil || s.Username() != "" {
				t.Errorf("failed Evaluate left final %q, Username %q", final, s.Username())
			}
		})
	}
}

func TestServerAcceptsVariantsTheRFCAllows(t *testing.T) {
	v := readmeVector(t)
	tests := []struct {
		name     string
		response string
	}{
		{"recorded", v.response},
		{"qop absent means auth", strings.TrimSuffix(v.response, ",qop=auth")},
		{"authzid equal to username", signed(v, func(e *exchange) []string {
			e.authzid = e.username
			return []string{`authzid="` + e.username + `"`}
		})},
		{"digest-uri in another case", signed(v, func(e *exchange) []string { e.digestURI = "/DEFAULT"; return nil })},
		{"unknown directives ignored, even repeated", v.response + ",x-new=1,x-new=2"},
		{"white space and null elements", " , " + strings.ReplaceAll(v.response, ",", " ,\r\n\t, ") + " ,"},
		{"directive names in upper case", strings.Replace(strings.Replace(v.response, "username=", "USERNAME=", 1), "cnonce=", "CNonce=", 1)},
		{"cipher ignored for auth", v.response + ",cipher=rc4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := challengedServer(t, v.nonce, lookupOnly(v.username, v.password))
			final, err := s.Evaluate([]byte(tt.response))
			if err != nil {
				t.Fatalf("Evaluate(%s) = %v", tt.response, err)
			}
			if !regexp.MustCompile(`^rspauth=[0-9a-f]{32}$`).Match(final) {
				t.Errorf("final = %q", final)
			}
			if s.Username() != v.username {
				t.Errorf("Username() = %q", s.Username())
			}
		})
	}
}

func TestServerPassesLookupErrorThroughWrapped(t *testing.T) {
	v := readmeVector(t)
	invalid := &invalidTokenError{msg: "token expired"}
	s := challengedServer(t, v.nonce, func(string) (string, error) { return "", invalid })
	_, err := s.Evaluate([]byte(v.response))
	var got *invalidTokenError
	if !errors.As(err, &got) || got != invalid {
		t.Fatalf("Evaluate = %v; want the lookup's *invalidTokenError", err)
	}
}

func TestServerDoesNotCallLookupForMalformedResponses(t *testing.T) {
	v := readmeVector(t)
	called := false
	s := challengedServer(t, v.nonce, func(string) (string, error) { called = true; return v.password, nil })
	if _, err := s.Evaluate([]byte(strings.Replace(v.response, "nc=00000001", "nc=00000002", 1))); err == nil {
		t.Fatal("Evaluate accepted nc=2")
	}
	if called {
		t.Error("Lookup was called for a response that fails without a password")
	}
}

func TestServerIsSingleUse(t *testing.T) {
	v := readmeVector(t)
	lookup := lookupOnly(v.username, v.password)

	t.Run("evaluate before challenge", func(t *testing.T) {
		s, _ := NewServer(ServerConfig{Nonce: fixed(v.nonce), Lookup: lookup})
		if _, err := s.Evaluate([]byte(v.response)); !errors.Is(err, ErrState) {
			t.Fatalf("Evaluate before Challenge = %v, want ErrState", err)
		}
	})
	t.Run("challenge twice", func(t *testing.T) {
		s := challengedServer(t, v.nonce, lookup)
		if _, err := s.Challenge(); !errors.Is(err, ErrState) {
			t.Fatalf("second Challenge = %v, want ErrState", err)
		}
	})
	t.Run("replayed response on the same server", func(t *testing.T) {
		s := challengedServer(t, v.nonce, lookup)
		if _, err := s.Evaluate([]byte(v.response)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Evaluate([]byte(v.response)); !errors.Is(err, ErrState) {
			t.Fatalf("replayed Evaluate = %v, want ErrState", err)
		}
		if s.Username() != v.username {
			t.Errorf("replay changed Username to %q", s.Username())
		}
	})
	t.Run("retry after a failure", func(t *testing.T) {
		s := challengedServer(t, v.nonce, lookupOnly(v.username, "wrong"))
		if _, err := s.Evaluate([]byte(v.response)); !errors.Is(err, ErrAuthFailed) {
			t.Fatal(err)
		}
		if _, err := s.Evaluate([]byte(v.response)); !errors.Is(err, ErrState) {
			t.Fatalf("second guess on the same nonce = %v, want ErrState", err)
		}
	})
	t.Run("replayed response on a fresh server", func(t *testing.T) {
		s, _ := NewServer(ServerConfig{Lookup: lookup}) // crypto/rand nonce
		if _, err := s.Challenge(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Evaluate([]byte(v.response)); !errors.Is(err, ErrInvalidResponse) {
			t.Fatalf("Evaluate(old response) = %v, want ErrInvalidResponse", err)
		}
	})
}

func TestServerChallengeHasTheJDKForm(t *testing.T) {
	s, err := NewServer(ServerConfig{Lookup: lookupOnly("u", "p")})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^realm="default",nonce="[A-Za-z0-9+/]{40}",qop="auth",charset=utf-8,algorithm=md5-sess$`)
	if !re.Match(ch) {
		t.Errorf("Challenge() = %s", ch)
	}
}

func TestServerQuotesItsRealmAndNonce(t *testing.T) {
	s, err := NewServer(ServerConfig{ServerName: `we"ird\`, Nonce: fixed(`n"o`), Lookup: lookupOnly("u", "p")})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	if want := `realm="we\"ird\\",nonce="n\"o",qop="auth",charset=utf-8,algorithm=md5-sess`; string(ch) != want {
		t.Errorf("Challenge() = %s, want %s", ch, want)
	}
}

func TestServerConstructionAndNonceErrors(t *testing.T) {
	if _, err := NewServer(ServerConfig{}); err == nil {
		t.Error("NewServer without Lookup succeeded")
	}
	broken := fmt.Errorf("entropy gone")
	s, _ := NewServer(ServerConfig{Nonce: func() (string, error) { return "", broken }, Lookup: lookupOnly("u", "p")})
	if _, err := s.Challenge(); !errors.Is(err, broken) {
		t.Errorf("Challenge with failing nonce source = %v", err)
	}
	s, _ = NewServer(ServerConfig{Nonce: fixed(""), Lookup: lookupOnly("u", "p")})
	if _, err := s.Challenge(); err == nil {
		t.Error("Challenge accepted an empty nonce")
	}
}

func TestServerReadsLatin1WithoutCharset(t *testing.T) {
	// Without charset=utf-8 the username is ISO-8859-1 on the wire (RFC
	// 2831 §2.1.2); Lookup must still get the text as a Go string.
	const nonce, cnonce, password = "n0nce", "cn0nce", "pw"
	e := exchange{username: "j\u00fcrgen", realm: "default", password: password,
		nonce: nonce, cnonce: cnonce, nc: "00000001", qop: "auth", digestURI: "/default"}
	resp := "username=\"j\xfcrgen\",realm=\"default\",nonce=\"" + nonce + "\",nc=00000001,cnonce=\"" + cnonce +
		"\",digest-uri=\"/default\",response=" + e.response() + ",qop=auth"
	s := challengedServer(t, nonce, lookupOnly("j\u00fcrgen", password))
	final, err := s.Evaluate([]byte(resp))
	if err != nil {
		t.Fatal(err)
	}
	if string(final) != "rspauth="+e.rspauth() || s.Username() != "j\u00fcrgen" {
		t.Errorf("final %q, Username %q", final, s.Username())
	}
}
