package tokens

import (
	"context"
	"testing"

	"github.com/knitdev/knit/protocols/token"
)

// FuzzChecks feeds arbitrary identifier bytes, as a client's DIGEST-MD5 user
// name or a startContainers request carries them, to every check: none may
// panic, and none may accept bytes it did not sign.
func FuzzChecks(f *testing.F) {
	m, err := New(testConfig(newClock(t0), nil))
	if err != nil {
		f.Fatal(err)
	}
	if err := m.Activate(context.Background(), testRMIdentifier); err != nil {
		f.Fatal(err)
	}
	ctok, _, err := m.ContainerTokens().Create(testContainerSpec())
	if err != nil {
		f.Fatal(err)
	}
	dt, _, err := m.Delegation().Issue(context.Background(), "alice", "yarn", "", "")
	if err != nil {
		f.Fatal(err)
	}
	for _, tok := range []token.Token{
		m.AMRM().Create(testAttempt), m.NMTokens().Create(testAttempt, testNode, "root"), ctok, dt,
		m.ClientToAM().Create(testAttempt, "alice"),
	} {
		f.Add(tok.Identifier, tok.Password)
	}
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, []byte("x"))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, identifier, pw []byte) {
		_, _, _ = m.AMRM().RetrievePassword(ctx, identifier)
		_, _, _ = m.NMTokens().RetrievePassword(identifier, testNode)
		_, _, _ = m.ClientToAM().RetrievePassword(ctx, identifier)
		_, _, _ = m.Delegation().RetrievePassword(identifier)
		tok := token.Token{Identifier: identifier, Password: pw}
		if _, err := m.ContainerTokens().Verify(tok); err == nil && !containsSigned(m, tok) {
			t.Errorf("container token %x accepted with password %x", identifier, pw)
		}
		if _, err := m.Delegation().Verify(tok); err == nil && !containsSigned(m, tok) {
			t.Errorf("delegation token %x accepted with password %x", identifier, pw)
		}
	})
}

// containsSigned reports whether pw is the HMAC of identifier under one of
// m's container or delegation keys.
func containsSigned(m *Manager, tok token.Token) bool {
	k := m.Keys()
	secrets := [][]byte{k.ContainerToken.Current.Secret}
	for _, d := range k.Delegation.Keys {
		secrets = append(secrets, d.Secret)
	}
	for _, s := range secrets {
		if string(password(s, tok.Identifier)) == string(tok.Password) {
			return true
		}
	}
	return false
}
