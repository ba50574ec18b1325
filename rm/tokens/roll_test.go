package tokens

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

const (
	clusterTS   = 1732230000000
	attemptStr  = "appattempt_1732230000000_0001_000001"
	containerID = "container_1732230000000_0001_01_000002"
)

var (
	testAttempt = attempt(1, clusterTS, 1)
	testNode    = node("127.0.0.1", 45454)
)

func testContainerSpec() ContainerTokenSpec {
	return ContainerTokenSpec{
		ContainerID:  &yarnpb.ContainerIdProto{AppAttemptId: testAttempt, Id: proto.Int64(2)},
		NodeID:       testNode,
		AppSubmitter: "root",
		Resource:     &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
		Priority:     &yarnpb.PriorityProto{Priority: proto.Int32(0)},
	}
}

// family is one kind of rolled token as the scenarios see it: sign one now,
// check one now.
type family struct {
	create func(t *testing.T, m *Manager) token.Token
	check  func(m *Manager, tok token.Token) error
}

// checkPassword turns a RetrievePassword result into a check of tok.
func checkPassword(pw []byte, err error, tok token.Token) error {
	if err != nil {
		return err
	}
	if !bytes.Equal(pw, tok.Password) {
		return fmt.Errorf("password %x does not match the token's %x", pw, tok.Password)
	}
	return nil
}

var (
	amrmFamily = family{
		create: func(_ *testing.T, m *Manager) token.Token { return m.AMRM().Create(testAttempt) },
		check: func(m *Manager, tok token.Token) error {
			_, pw, err := m.AMRM().RetrievePassword(context.Background(), tok.Identifier)
			return checkPassword(pw, err, tok)
		},
	}
	nmFamily = family{
		create: func(_ *testing.T, m *Manager) token.Token { return m.NMTokens().Create(testAttempt, testNode, "root") },
		check: func(m *Manager, tok token.Token) error {
			_, pw, err := m.NMTokens().RetrievePassword(tok.Identifier, testNode)
			return checkPassword(pw, err, tok)
		},
	}
	containerFamily = family{
		create: func(t *testing.T, m *Manager) token.Token {
			tok, _, err := m.ContainerTokens().Create(testContainerSpec())
			if err != nil {
				t.Fatal(err)
			}
			return tok
		},
		check: func(m *Manager, tok token.Token) error {
			_, err := m.ContainerTokens().Verify(tok)
			return err
		},
	}
)

// want is an expected check result: no class means success.
type want struct {
	class yarnerr.Class
	msg   string
}

var ok = want{}

// step moves the clock to t0+at, calls Roll there, signs the token named
// create (if any) and checks the named tokens.
type step struct {
	at     time.Duration
	create string
	checks map[string]want
}

func ms(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

// TestRollingKeepsTokensUntilTheyExpire runs each family through two rolls
// with Hadoop's default schedule (roll every 24h, activate 15m later,
// container tokens valid 10m).
func TestRollingKeepsTokensUntilTheyExpire(t *testing.T) {
	const h, m = time.Hour, time.Minute
	amrmGone := want{yarnerr.InvalidToken, "Invalid AMRMToken from " + attemptStr}
	nmGone := want{yarnerr.InvalidToken, "Given NMToken for application : " + attemptStr + " seems to have been generated illegally."}
	containerGone := want{yarnerr.InvalidToken, "Given Container " + containerID + " seems to have an illegally generated token."}
	expired := func(now, expiry time.Duration) want {
		return want{yarnerr.YarnException, fmt.Sprintf("Unauthorized request to start container.\n"+
			"This token is expired. current time is %d found %d\n"+
			"Note: System times on machines may be out of sync. Check system time and time zones.", ms(now), ms(expiry))}
	}
	tests := []struct {
		name   string
		family family
		steps  []step
	}{
		{"AMRM: signed with the next key during a roll, old key gone at activation", amrmFamily, []step{
			{at: 0, create: "A", checks: map[string]want{"A": ok}},
			{at: 24 * h, create: "B", checks: map[string]want{"A": ok, "B": ok}},
			{at: 24*h + 15*m - time.Millisecond, checks: map[string]want{"A": ok, "B": ok}},
			{at: 24*h + 15*m, checks: map[string]want{"A": amrmGone, "B": ok}},
			{at: 48 * h, create: "C", checks: map[string]want{"B": ok, "C": ok}},
			{at: 48*h + 15*m, checks: map[string]want{"B": amrmGone, "C": ok}},
		}},
		{"NMToken: signed with the current key, previous key kept one interval", nmFamily, []step{
			{at: 0, create: "A", checks: map[string]want{"A": ok}},
			{at: 24 * h, create: "A2", checks: map[string]want{"A": ok, "A2": ok}},
			{at: 24*h + 15*m, create: "B", checks: map[string]want{"A": ok, "A2": ok, "B": ok}},
			{at: 48 * h, checks: map[string]want{"A": ok, "B": ok}},
			{at: 48*h + 15*m - time.Millisecond, checks: map[string]want{"A": ok, "B": ok}},
			{at: 48*h + 15*m, checks: map[string]want{"A": nmGone, "A2": nmGone, "B": ok}},
			{at: 72*h + 15*m, checks: map[string]want{"B": nmGone}},
		}},
		{"ContainerToken: valid until its expiry, also across an activation", containerFamily, []step{
			{at: 0, create: "A", checks: map[string]want{"A": ok}},
			{at: 10 * m, checks: map[string]want{"A": ok}},
			{at: 10*m + time.Millisecond, checks: map[string]want{"A": expired(10*m+time.Millisecond, 10*m)}},
			{at: 24 * h, checks: map[string]want{}},
			{at: 24*h + 14*m, create: "B", checks: map[string]want{"B": ok}},
			{at: 24*h + 16*m, create: "C", checks: map[string]want{"B": ok, "C": ok}},
			{at: 24*h + 25*m, checks: map[string]want{"B": expired(24*h+25*m, 24*h+24*m)}},
			{at: 48*h + 16*m, checks: map[string]want{"B": containerGone}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock(t0)
			m := newManager(t, testConfig(clock, &memStore{}))
			toks := map[string]token.Token{}
			for _, s := range tt.steps {
				now := t0.Add(s.at)
				clock.Set(now)
				if err := m.Roll(context.Background(), now); err != nil {
					t.Fatalf("+%v: Roll: %v", s.at, err)
				}
				if s.create != "" {
					toks[s.create] = tt.family.create(t, m)
				}
				for name, w := range s.checks {
					tok, found := toks[name]
					if !found {
						t.Fatalf("+%v: no token %q", s.at, name)
					}
					t.Run(fmt.Sprintf("+%v/%s", s.at, name), func(t *testing.T) {
						wantError(t, tt.family.check(m, tok), w.class, w.msg)
					})
				}
			}
		})
	}
}

func TestAMRMRefreshHandsOutTheNextKeyDuringARoll(t *testing.T) {
	clock := newClock(t0)
	m := newManager(t, testConfig(clock, nil))
	old := m.AMRM().Create(testAttempt)
	oldID := decodeAMRM(t, old)
	if _, ok := m.AMRM().Refresh(oldID); ok {
		t.Fatal("Refresh before any roll gave a token")
	}
	rolled := t0.Add(24 * time.Hour)
	if err := m.Roll(context.Background(), rolled); err != nil {
		t.Fatal(err)
	}
	fresh, ok := m.AMRM().Refresh(oldID)
	if !ok {
		t.Fatal("Refresh during a roll gave no token")
	}
	freshID := decodeAMRM(t, fresh)
	if freshID.GetKeyId() != m.Keys().AMRM.Next.ID || AttemptString(freshID.GetAppAttemptId()) != attemptStr {
		t.Errorf("refreshed identifier %v, want attempt %s under the next key %d", freshID, attemptStr, m.Keys().AMRM.Next.ID)
	}
	if !fresh.Equal(m.AMRM().Create(testAttempt)) {
		t.Error("Refresh and Create disagree during a roll")
	}
	if _, ok := m.AMRM().Refresh(freshID); ok {
		t.Error("Refresh of a token under the next key gave another")
	}
	if err := m.Roll(context.Background(), rolled.Add(15*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.AMRM().Refresh(freshID); ok {
		t.Error("Refresh after activation gave a token")
	}
	wantError(t, amrmFamily.check(m, fresh), "", "")
}

func decodeAMRM(t *testing.T, tok token.Token) *yarnpb.AMRMTokenIdentifierProto {
	t.Helper()
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(tok.Identifier, &id); err != nil {
		t.Fatal(err)
	}
	return &id
}

// resign returns a token for id, signed with key.
func resign(id proto.Message, key MasterKey, kind string) token.Token {
	raw := marshal(id)
	return token.Token{Identifier: raw, Password: password(key.Secret, raw), Kind: kind}
}

// TestBadTokensAreRefusedWithHadoopsMessages checks each refusal's Java
// class and message against Hadoop's secret managers and NodeManager.
func TestBadTokensAreRefusedWithHadoopsMessages(t *testing.T) {
	clock := newClock(t0)
	live := true
	cfg := testConfig(clock, nil)
	cfg.AttemptValid = func(_ context.Context, a *yarnpb.ApplicationAttemptIdProto) bool {
		return live || AttemptString(a) != attemptStr
	}
	m := newManager(t, cfg)
	keys := m.Keys()
	ctx := context.Background()

	amrm := m.AMRM().Create(testAttempt)
	nm := m.NMTokens().Create(testAttempt, testNode, "root")
	ctok, cid, err := m.ContainerTokens().Create(testContainerSpec())
	if err != nil {
		t.Fatal(err)
	}
	withKeyID := func(tok token.Token, kind string) token.Token {
		switch kind {
		case KindAMRM:
			id := decodeAMRM(t, tok)
			id.KeyId = proto.Int32(keys.AMRM.Current.ID + 1000)
			return resign(id, *keys.AMRM.Current, kind)
		case KindNM:
			var id yarnpb.NMTokenIdentifierProto
			_ = proto.Unmarshal(tok.Identifier, &id)
			id.KeyId = proto.Int32(keys.NMToken.Current.ID + 1000)
			return resign(&id, *keys.NMToken.Current, kind)
		}
		id := proto.Clone(cid).(*yarnpb.ContainerTokenIdentifierProto)
		id.MasterKeyId = proto.Int32(keys.ContainerToken.Current.ID + 1000)
		return resign(id, *keys.ContainerToken.Current, kind)
	}
	tampered := ctok
	tamperedID := proto.Clone(cid).(*yarnpb.ContainerTokenIdentifierProto)
	tamperedID.Resource.Memory = proto.Int64(1 << 20)
	tampered.Identifier = marshal(tamperedID)
	otherRM := proto.Clone(cid).(*yarnpb.ContainerTokenIdentifierProto)
	otherRM.RmIdentifier = proto.Int64(42)
	garbage := token.Token{Identifier: []byte{0xff, 0xff, 0xff}, Password: []byte("x")}

	amrmCheck := func(tok token.Token) error { return amrmFamily.check(m, tok) }
	nmCheck := func(tok token.Token) error { return nmFamily.check(m, tok) }
	nmOnOtherNode := func(tok token.Token) error {
		_, _, err := m.NMTokens().RetrievePassword(tok.Identifier, node("10.0.0.7", 45454))
		return err
	}
	containerCheck := func(tok token.Token) error { return containerFamily.check(m, tok) }
	clientToAM := func(tok token.Token) error {
		_, pw, err := m.ClientToAM().RetrievePassword(ctx, tok.Identifier)
		return checkPassword(pw, err, tok)
	}
	delegation := func(tok token.Token) error { _, err := m.Delegation().Verify(tok); return err }

	tests := []struct {
		name    string
		check   func(token.Token) error
		tok     token.Token
		dead    bool
		want    want
		pwWrong bool
	}{
		{"AMRM: valid", amrmCheck, amrm, false, ok, false},
		{"AMRM: unknown key id", amrmCheck, withKeyID(amrm, KindAMRM), false,
			want{yarnerr.InvalidToken, "Invalid AMRMToken from " + attemptStr}, false},
		{"AMRM: attempt no longer live", amrmCheck, amrm, true,
			want{yarnerr.InvalidToken, attemptStr + " not found in AMRMTokenSecretManager."}, false},
		{"AMRM: not an identifier", amrmCheck, garbage, false, want{yarnerr.InvalidToken, "Can't de-serialize tokenIdentifier"}, false},
		{"NM: valid", nmCheck, nm, false, ok, false},
		{"NM: unknown key id", nmCheck, withKeyID(nm, KindNM), false,
			want{yarnerr.InvalidToken, "Given NMToken for application : " + attemptStr + " seems to have been generated illegally."}, false},
		{"NM: token of another node", nmOnOtherNode, nm, false,
			want{yarnerr.InvalidToken, "Given NMToken for application : " + attemptStr +
				" is not valid for current node manager.expected : 10.0.0.7:45454 found : 127.0.0.1:45454"}, false},
		{"NM: not an identifier", nmCheck, garbage, false, want{yarnerr.InvalidToken, "Can't de-serialize tokenIdentifier"}, false},
		{"container: valid", containerCheck, ctok, false, ok, false},
		{"container: unknown key id", containerCheck, withKeyID(ctok, KindContainer), false,
			want{yarnerr.InvalidToken, "Given Container " + containerID + " seems to have an illegally generated token."}, false},
		{"container: tampered identifier", containerCheck, tampered, false,
			want{yarnerr.InvalidToken, "Invalid container token used for starting container on : 127.0.0.1:45454"}, false},
		{"container: signed for another RM", containerCheck, resign(otherRM, *keys.ContainerToken.Current, KindContainer), false,
			want{yarnerr.InvalidContainer, "\nContainer " + containerID + " rejected as it is allocated by a previous RM"}, false},
		{"container: not an identifier", containerCheck, garbage, false, want{yarnerr.InvalidToken, "Can't de-serialize tokenIdentifier"}, false},
		{"client-to-AM: valid", clientToAM, m.ClientToAM().Create(testAttempt, "alice"), false, ok, false},
		{"client-to-AM: attempt no longer live", clientToAM, m.ClientToAM().Create(testAttempt, "alice"), true,
			want{yarnerr.InvalidToken, "Illegal client-token!"}, false},
		{"delegation: not an identifier", delegation, garbage, false, want{yarnerr.InvalidToken, "Can't de-serialize tokenIdentifier"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live = !tt.dead
			defer func() { live = true }()
			wantError(t, tt.check(tt.tok), tt.want.class, tt.want.msg)
		})
	}
}

func TestTamperedIdentifiersGetAnotherPassword(t *testing.T) {
	// Over SASL a tampered identifier is caught by the DIGEST-MD5 response,
	// which the client computes from the password it holds: the lookup
	// must derive a different one for the changed bytes.
	m := newManager(t, testConfig(newClock(t0), nil))
	tok := m.AMRM().Create(testAttempt)
	id := decodeAMRM(t, tok)
	id.AppAttemptId.AttemptId = proto.Int32(2)
	_, pw, err := m.AMRM().RetrievePassword(context.Background(), marshal(id))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(pw, tok.Password) {
		t.Error("a tampered identifier has the original password")
	}
}

func TestNMTokenPinKeepsAnAttemptsKeyWhileItLives(t *testing.T) {
	const h, min = time.Hour, time.Minute
	clock := newClock(t0)
	live := true
	store := &memStore{}
	cfg := testConfig(clock, store)
	cfg.AttemptValid = func(context.Context, *yarnpb.ApplicationAttemptIdProto) bool { return live }
	m := newManager(t, cfg)
	ctx := context.Background()
	roll := func(at time.Duration) {
		t.Helper()
		clock.Set(t0.Add(at))
		if err := m.Roll(ctx, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	tok := m.NMTokens().Create(testAttempt, testNode, "root")
	id, _, err := m.NMTokens().RetrievePassword(tok.Identifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	// startContainers succeeded with this token.
	if err := m.NMTokens().PinAttempt(ctx, id); err != nil {
		t.Fatal(err)
	}
	saves := store.saves
	if err := m.NMTokens().PinAttempt(ctx, id); err != nil || store.saves != saves {
		t.Fatalf("pinning again: err %v, %d saves, want none", err, store.saves-saves)
	}
	// Two rolls later the key would be gone (see the rolling test), but the
	// attempt is pinned to it, and a restarted RM knows that.
	roll(24 * h)
	roll(24*h + 15*min)
	roll(48 * h)
	roll(48*h + 15*min)
	roll(72 * h)
	m2 := newManager(t, cfg)
	for _, mgr := range []*Manager{m, m2} {
		wantError(t, nmFamily.check(mgr, tok), "", "")
	}
	// Another attempt's token under that key is not covered by the pin.
	other := resign(&yarnpb.NMTokenIdentifierProto{
		AppAttemptId: attempt(1, clusterTS, 2), NodeId: testNode, AppSubmitter: proto.String("root"), KeyId: id.KeyId,
	}, firstRetired(t, m), KindNM)
	wantError(t, nmFamily.check(m, other), yarnerr.InvalidToken,
		"Given NMToken for application : appattempt_1732230000000_0001_000002 seems to have been generated illegally.")
	// An old key cannot become a new pin.
	var otherID yarnpb.NMTokenIdentifierProto
	if err := proto.Unmarshal(other.Identifier, &otherID); err != nil {
		t.Fatal(err)
	}
	wantError(t, m.NMTokens().PinAttempt(ctx, &otherID), yarnerr.InvalidToken,
		"Older NMToken should not be used while starting the container.")
	// Once the attempt ends, Roll drops the pin and the key with it.
	live = false
	roll(72*h + time.Minute)
	if len(m.Keys().NMTokenPins) != 0 || len(m.Keys().NMToken.Retired) != 1 {
		t.Errorf("after the attempt ended: pins %v, %d retired keys, want none and 1", m.Keys().NMTokenPins, len(m.Keys().NMToken.Retired))
	}
	wantError(t, nmFamily.check(m, tok), yarnerr.InvalidToken,
		"Given NMToken for application : "+attemptStr+" seems to have been generated illegally.")
}

// firstRetired returns the oldest retired NMToken key.
func firstRetired(t *testing.T, m *Manager) MasterKey {
	t.Helper()
	r := m.Keys().NMToken.Retired
	if len(r) == 0 {
		t.Fatal("no retired NMToken key")
	}
	return r[0].MasterKey
}

func TestForNodesSendsEachNodeOncePerKey(t *testing.T) {
	clock := newClock(t0)
	cfg := testConfig(clock, nil)
	// As Hadoop's SecurityUtil.buildTokenService, the service is the IP.
	cfg.TokenService = func(host string, port int32) string {
		if host == "node-a" {
			host = "10.0.0.1"
		}
		return defaultTokenService(host, port)
	}
	m := newManager(t, cfg)
	a, b := node("node-a", 8041), node("node-b", 8041)
	nodesOf := func(toks []*yarnpb.NMTokenProto) []string {
		var out []string
		for _, tok := range toks {
			out = append(out, yarnid.NodeString(tok.GetNodeId())+"="+tok.GetToken().GetService())
		}
		return out
	}
	ctx := context.Background()
	steps := []struct {
		name string
		do   func()
		ask  []*yarnpb.NodeIdProto
		want []string
	}{
		{"first allocation on two nodes", nil, []*yarnpb.NodeIdProto{a, b, a}, []string{"node-a:8041=10.0.0.1:8041", "node-b:8041=node-b:8041"}},
		{"again", nil, []*yarnpb.NodeIdProto{a, b}, nil},
		{"node lost", func() { m.NMTokens().ForgetNode(b) }, []*yarnpb.NodeIdProto{a, b}, []string{"node-b:8041=node-b:8041"}},
		{"during a roll", func() { _ = m.Roll(ctx, t0.Add(24*time.Hour)) }, []*yarnpb.NodeIdProto{a}, nil},
		{"after activation", func() { _ = m.Roll(ctx, t0.Add(24*time.Hour+15*time.Minute)) }, []*yarnpb.NodeIdProto{b, a}, []string{"node-b:8041=node-b:8041", "node-a:8041=10.0.0.1:8041"}},
		{"attempt finished", func() { m.NMTokens().ForgetAttempt(testAttempt) }, []*yarnpb.NodeIdProto{a}, []string{"node-a:8041=10.0.0.1:8041"}},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		got := nodesOf(m.NMTokens().ForNodes(testAttempt, "root", s.ask))
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: tokens for %v, want %v", s.name, got, s.want)
		}
	}
}

func TestClientToAMKeysArePerAttemptAndStable(t *testing.T) {
	store := &memStore{}
	cfg := testConfig(newClock(t0), store)
	m := newManager(t, cfg)
	k1 := m.ClientToAM().MasterKey(testAttempt)
	k2 := m.ClientToAM().MasterKey(attempt(1, clusterTS, 2))
	if bytes.Equal(k1, k2) || len(k1) != 20 {
		t.Fatalf("keys of two attempts: %x and %x", k1, k2)
	}
	if again := newManager(t, cfg).ClientToAM().MasterKey(testAttempt); !bytes.Equal(again, k1) {
		t.Errorf("restarted RM gives key %x, want %x", again, k1)
	}
	tok := m.ClientToAM().Create(testAttempt, "alice")
	// What the AM computes with the key from its register response.
	if !bytes.Equal(tok.Password, password(k1, tok.Identifier)) {
		t.Error("token password is not HMAC-SHA1(master key, identifier)")
	}
	want := "0a0d0a0908011080dbd087b53210011205616c696365" // {appAttemptId{app{1, ts}, 1}, clientName "alice"}
	if got := fmt.Sprintf("%x", tok.Identifier); got != want || tok.Kind != KindClientToAM || tok.Service != "" {
		t.Errorf("token %v: identifier %s, want %s", tok, got, want)
	}
}

func TestPolicyValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"interval not above twice the delay", func(c *Config) {
			c.NMToken = RollPolicy{Interval: 30 * time.Minute, ActivationDelay: 15 * time.Minute}
		}, false},
		{"short keys", func(c *Config) { c.KeyLength = 4 }, false},
		{"Hadoop's 8-byte keys", func(c *Config) { c.KeyLength = 8 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(newClock(t0), nil)
			tt.cfg(&cfg)
			_, err := New(cfg)
			if (err == nil) != tt.ok {
				t.Errorf("New: err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
