package digestmd5

import (
	"errors"
	"testing"

	"github.com/beltran/gosasl"
)

// gosasl is an independent Go DIGEST-MD5 client (no charset directive, its
// own directive order, strconv.Quote quoting). These tests check that our
// Server accepts it and that it accepts our rspauth.

func gosaslClient(username, password string) *gosasl.Client {
	return gosasl.NewSaslClient(DefaultServerName, gosasl.NewDigestMD5Mechanism("", username, password))
}

func TestGosaslClientAuthenticatesToServer(t *testing.T) {
	user, pass := hadoopPassword(t, amrmKeyHex, amrmIDHex)
	s, err := NewServer(ServerConfig{Lookup: lookupOnly(user, pass)})
	if err != nil {
		t.Fatal(err)
	}
	c := gosaslClient(user, pass)
	if first, err := c.Start(); err != nil || first != nil {
		t.Fatalf("Start = %q, %v", first, err)
	}
	ch, err := s.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Step(ch)
	if err != nil {
		t.Fatal(err)
	}
	final, err := s.Evaluate(resp)
	if err != nil {
		t.Fatalf("Evaluate(%s) = %v", resp, err)
	}
	if _, err := c.Step(final); err != nil {
		t.Fatalf("gosasl rejected our %s: %v", final, err)
	}
	if !c.Complete() || s.Username() != user {
		t.Errorf("Complete() = %v, Username() = %q", c.Complete(), s.Username())
	}
}

func TestGosaslClientWithWrongPasswordIsRejected(t *testing.T) {
	user, pass := hadoopPassword(t, amrmKeyHex, amrmIDHex)
	s, _ := NewServer(ServerConfig{Lookup: lookupOnly(user, pass)})
	c := gosaslClient(user, "d3JvbmcK")
	ch, _ := s.Challenge()
	resp, err := c.Step(ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Evaluate(resp); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Evaluate = %v, want ErrAuthFailed", err)
	}
}

func TestGosaslClientRejectsWrongRspauth(t *testing.T) {
	// Shows that the acceptance above means something: gosasl checks rspauth.
	user, pass := hadoopPassword(t, amrmKeyHex, amrmIDHex)
	s, _ := NewServer(ServerConfig{Lookup: lookupOnly(user, pass)})
	c := gosaslClient(user, pass)
	ch, _ := s.Challenge()
	resp, err := c.Step(ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Evaluate(resp); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step([]byte("rspauth=00000000000000000000000000000000")); err == nil {
		t.Fatal("gosasl accepted a wrong rspauth")
	}
}

func TestGosaslResponseOmitsCharset(t *testing.T) {
	// Documents why the Server must accept a response without charset.
	s, _ := NewServer(ServerConfig{Lookup: lookupOnly("u", "p")})
	ch, _ := s.Challenge()
	resp, err := gosaslClient("u", "p").Step(ch)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := parseDirectives(resp, MaxResponseLen)
	if err != nil {
		t.Fatal(err)
	}
	m, err := index(ds, isResponseDirective)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := get(m, "charset"); ok {
		t.Errorf("gosasl now sends charset: %s", resp)
	}
}
