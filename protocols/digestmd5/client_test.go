package digestmd5

import (
	"errors"
	"strings"
	"testing"
)

func TestClientAndServerAuthenticate(t *testing.T) {
	amrmUser, amrmPass := hadoopPassword(t, amrmKeyHex, amrmIDHex)
	tests := []struct {
		name     string
		client   ClientConfig
		server   ServerConfig
		password string // what the server's Lookup returns
		// stripCharset removes charset=utf-8 from the challenge, so that
		// both sides fall back to ISO-8859-1.
		stripCharset bool
	}{
		{name: "hadoop amrm token", client: ClientConfig{Username: amrmUser, Password: amrmPass}, password: amrmPass},
		{name: "rfc example service", client: ClientConfig{Username: "chris", Password: "secret", Protocol: "imap", ServerName: "elwood.innosoft.com"},
			server: ServerConfig{Protocol: "imap", ServerName: "elwood.innosoft.com"}, password: "secret"},
		{name: "server name case differs", client: ClientConfig{Username: "u", Password: "p", ServerName: "DEFAULT"}, password: "p"},
		{name: "quotes and backslashes in credentials", client: ClientConfig{Username: `a"b\c`, Password: `p"\`}, password: `p"\`},
		{name: "latin-1 username in utf-8", client: ClientConfig{Username: "j\u00fcrgen", Password: "p\u00e4ss"}, password: "p\u00e4ss"},
		{name: "non-latin-1 username in utf-8", client: ClientConfig{Username: "\u65e5\u672c", Password: "\u30d1\u30b9"}, password: "\u30d1\u30b9"},
		{name: "latin-1 username without charset", client: ClientConfig{Username: "j\u00fcrgen", Password: "p\u00e4ss"}, password: "p\u00e4ss", stripCharset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var looked string
			scfg := tt.server
			scfg.Lookup = func(u string) (string, error) { looked = u; return tt.password, nil }
			s, err := NewServer(scfg)
			if err != nil {
				t.Fatal(err)
			}
			c := NewClient(tt.client)
			ch, err := s.Challenge()
			if err != nil {
				t.Fatal(err)
			}
			if tt.stripCharset {
				ch = []byte(strings.Replace(string(ch), ",charset=utf-8", "", 1))
			}
			resp, err := c.Respond(ch)
			if err != nil {
				t.Fatal(err)
			}
			final, err := s.Evaluate(resp)
			if err != nil {
				t.Fatalf("Evaluate(%s) = %v", resp, err)
			}
			if err := c.Verify(final); err != nil {
				t.Fatalf("Verify(%s) = %v", final, err)
			}
			if looked != tt.client.Username || s.Username() != tt.client.Username {
				t.Errorf("Lookup got %q, Username() = %q, want %q", looked, s.Username(), tt.client.Username)
			}
		})
	}
}

func TestClientWithWrongPasswordIsRejectedByServer(t *testing.T) {
	s, _ := NewServer(ServerConfig{Lookup: lookupOnly("u", "right")})
	c := NewClient(ClientConfig{Username: "u", Password: "wrong"})
	ch, _ := s.Challenge()
	resp, err := c.Respond(ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Evaluate(resp); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Evaluate = %v, want ErrAuthFailed", err)
	}
}

func TestClientRejectsBadChallenges(t *testing.T) {
	const good = `realm="default",nonce="abc",qop="auth",charset=utf-8,algorithm=md5-sess`
	tests := []struct {
		name      string
		challenge string
		want      error
	}{
		{"server offers only auth-conf", `realm="default",nonce="abc",qop="auth-conf",cipher="rc4",charset=utf-8,algorithm=md5-sess`, ErrUnsupported},
		{"server offers integrity and privacy only", `realm="default",nonce="abc",qop="auth-int,auth-conf",charset=utf-8,algorithm=md5-sess`, ErrUnsupported},
		{"algorithm missing", `realm="default",nonce="abc",qop="auth",charset=utf-8`, ErrMalformed},
		{"algorithm md5", strings.Replace(good, "md5-sess", "md5", 1), ErrUnsupported},
		{"charset not utf-8", strings.Replace(good, "utf-8", "iso-8859-1", 1), ErrUnsupported},
		{"nonce missing", `realm="default",qop="auth",charset=utf-8,algorithm=md5-sess`, ErrMalformed},
		{"nonce empty", strings.Replace(good, `nonce="abc"`, `nonce=""`, 1), ErrMalformed},
		{"nonce repeated", good + `,nonce="def"`, ErrMalformed},
		{"algorithm repeated", good + `,algorithm=md5-sess`, ErrMalformed},
		{"syntax error", `realm="default`, ErrMalformed},
		{"oversized", good + ",x=" + strings.Repeat("a", MaxChallengeLen), ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(ClientConfig{Username: "u", Password: "p", CNonce: fixed("c")})
			resp, err := c.Respond([]byte(tt.challenge))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Respond = %q, %v; want %v", resp, err, tt.want)
			}
		})
	}
}

func TestClientAcceptsChallengeVariants(t *testing.T) {
	tests := []struct {
		name      string
		challenge string
		wantRealm string // the realm directive in the response; "" = none
	}{
		{"auth among other qops", `nonce="abc",realm="r",qop=" auth-int , auth ",charset=utf-8,algorithm=md5-sess`, `realm="r"`},
		{"qop absent means auth", `nonce="abc",realm="r",algorithm=md5-sess`, `realm="r"`},
		{"several realms take the first", `realm="r1",realm="r2",nonce="abc",algorithm=md5-sess`, `realm="r1"`},
		{"no realm offered", `nonce="abc",algorithm=md5-sess`, ""},
		{"stale and maxbuf ignored", `nonce="abc",realm="r",stale=true,maxbuf=1024,algorithm=md5-sess`, `realm="r"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(ClientConfig{Username: "u", Password: "p", CNonce: fixed("c")})
			resp, err := c.Respond([]byte(tt.challenge))
			if err != nil {
				t.Fatal(err)
			}
			if hasRealm := strings.Contains(string(resp), "realm="); hasRealm != (tt.wantRealm != "") ||
				(hasRealm && !strings.Contains(string(resp), tt.wantRealm)) {
				t.Errorf("response %s, want realm %q", resp, tt.wantRealm)
			}
			if !strings.HasSuffix(string(resp), ",qop=auth") {
				t.Errorf("response %s does not choose qop=auth", resp)
			}
		})
	}
}

func TestClientRejectsBadFinalMessages(t *testing.T) {
	v := readmeVector(t)
	tests := []struct {
		name  string
		final string
		want  error
	}{
		{"wrong rspauth", "rspauth=00000000000000000000000000000000", ErrAuthFailed},
		{"rspauth of another exchange", "rspauth=7232101adcae6ba9092b50ecb310211e", ErrAuthFailed},
		{"rspauth missing", "", ErrMalformed},
		{"rspauth repeated", v.final + "," + v.final, ErrMalformed},
		{"syntax error", `rspauth="`, ErrMalformed},
		{"oversized", v.final + ",x=" + strings.Repeat("a", MaxChallengeLen), ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(ClientConfig{Username: v.username, Password: v.password, CNonce: fixed(v.cnonce)})
			if _, err := c.Respond([]byte(v.challenge)); err != nil {
				t.Fatal(err)
			}
			if err := c.Verify([]byte(tt.final)); !errors.Is(err, tt.want) {
				t.Fatalf("Verify(%q) = %v, want %v", tt.final, err, tt.want)
			}
		})
	}
}

func TestClientIsSingleUse(t *testing.T) {
	v := readmeVector(t)
	newClient := func() *Client {
		return NewClient(ClientConfig{Username: v.username, Password: v.password, CNonce: fixed(v.cnonce)})
	}
	t.Run("verify before respond", func(t *testing.T) {
		if err := newClient().Verify([]byte(v.final)); !errors.Is(err, ErrState) {
			t.Fatalf("Verify = %v, want ErrState", err)
		}
	})
	t.Run("respond twice", func(t *testing.T) {
		c := newClient()
		if _, err := c.Respond([]byte(v.challenge)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Respond([]byte(v.challenge)); !errors.Is(err, ErrState) {
			t.Fatalf("second Respond = %v, want ErrState", err)
		}
	})
	t.Run("verify twice", func(t *testing.T) {
		c := newClient()
		if _, err := c.Respond([]byte(v.challenge)); err != nil {
			t.Fatal(err)
		}
		if err := c.Verify([]byte(v.final)); err != nil {
			t.Fatal(err)
		}
		if err := c.Verify([]byte(v.final)); !errors.Is(err, ErrState) {
			t.Fatalf("second Verify = %v, want ErrState", err)
		}
	})
	t.Run("verify after a failed respond", func(t *testing.T) {
		c := newClient()
		if _, err := c.Respond([]byte("garbage")); err == nil {
			t.Fatal("Respond accepted garbage")
		}
		if err := c.Verify([]byte(v.final)); !errors.Is(err, ErrState) {
			t.Fatalf("Verify = %v, want ErrState", err)
		}
	})
}

func TestClientNeedsUTF8ForNonLatin1Names(t *testing.T) {
	c := NewClient(ClientConfig{Username: "\u65e5\u672c", Password: "p", CNonce: fixed("c")})
	if _, err := c.Respond([]byte(`realm="default",nonce="n",qop="auth",algorithm=md5-sess`)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Respond = %v, want ErrUnsupported", err)
	}
}

func TestClientCNonceErrors(t *testing.T) {
	broken := errors.New("entropy gone")
	ch := []byte(`realm="default",nonce="n",qop="auth",charset=utf-8,algorithm=md5-sess`)
	c := NewClient(ClientConfig{Username: "u", Password: "p", CNonce: func() (string, error) { return "", broken }})
	if _, err := c.Respond(ch); !errors.Is(err, broken) {
		t.Errorf("Respond with failing cnonce source = %v", err)
	}
	c = NewClient(ClientConfig{Username: "u", Password: "p", CNonce: fixed("")})
	if _, err := c.Respond(ch); err == nil {
		t.Error("Respond accepted an empty cnonce")
	}
}
