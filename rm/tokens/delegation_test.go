package tokens

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// javaDelegationBytes builds, field by field, what
// YARNDelegationTokenIdentifier.write gives when only non-default fields are
// copied into its builder.
func javaDelegationBytes(owner, renewer, realUser string, issue, max int64, seq, key int32) []byte {
	var b []byte
	str := func(num protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	varint := func(num protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(1, owner)
	str(2, renewer)
	str(3, realUser)
	varint(4, issue)
	varint(5, max)
	varint(6, int64(seq))
	varint(7, int64(key))
	return b
}

func TestDelegationIdentifierEncoding(t *testing.T) {
	tests := []struct {
		name string
		id   DelegationTokenIdentifier
	}{
		{"plain user: no realUser", DelegationTokenIdentifier{Owner: "alice", Renewer: "yarn", IssueDate: 1, MaxDate: 2, SequenceNumber: 3, MasterKeyID: 4}},
		{"proxy user without renewer", DelegationTokenIdentifier{Owner: "bob", RealUser: "oozie", IssueDate: 1795334400000, MaxDate: 1795939200000, SequenceNumber: 1, MasterKeyID: 1}},
		{"negative key id", DelegationTokenIdentifier{Owner: "o", MasterKeyID: -7}},
		{"all defaults", DelegationTokenIdentifier{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.id
			want := javaDelegationBytes(id.Owner, id.Renewer, id.RealUser, id.IssueDate, id.MaxDate, id.SequenceNumber, id.MasterKeyID)
			got := id.Bytes()
			if !bytes.Equal(got, want) {
				t.Fatalf("bytes %x, want %x", got, want)
			}
			back, err := ParseDelegationTokenIdentifier(got)
			if err != nil || back != id {
				t.Errorf("parsed back %+v, %v; want %+v", back, err, id)
			}
		})
	}
	want := "RM_DELEGATION_TOKEN owner=bob, renewer=, realUser=oozie, issueDate=1795334400000, maxDate=1795939200000, sequenceNumber=1, masterKeyId=1"
	if got := tests[1].id.String(); got != want {
		t.Errorf("String() = %q\nwant       %q", got, want)
	}
	if got := formatTime(t0.Add(time.Millisecond).UnixMilli()); got != "2026-11-22 08:00:00,001+0000" {
		t.Errorf("formatTime = %q", got)
	}
}

// TestDelegationTokenLifecycle issues, renews, rolls, restarts, cancels
// and outlives RM delegation tokens with Hadoop's default schedule (new key
// daily, renew interval 1 day, maximum lifetime 7 days).
func TestDelegationTokenLifecycle(t *testing.T) {
	const day = 24 * time.Hour
	ctx := context.Background()
	clock := newClock(t0)
	store := &memStore{}
	cfg := testConfig(clock, store)
	m := newManager(t, cfg)
	dt := m.Delegation()
	at := func(d time.Duration, roll bool) {
		t.Helper()
		clock.Set(t0.Add(d))
		if roll {
			if err := m.Roll(ctx, t0.Add(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lookup := func(tok token.Token) error {
		s, err := dt.SecretLookup()(ctx, tok.Identifier)
		if err == nil && (!bytes.Equal(s.Password, tok.Password) || s.User != mustParse(t, tok).Owner) {
			return fmt.Errorf("lookup gave %+v", s)
		}
		return err
	}

	// Issue: alice's token, renewable by the RM's principal.
	tok1, id1, err := dt.Issue(ctx, "alice", "yarn/rm.example.com@EXAMPLE.COM", "", "10.0.0.1:8032")
	if err != nil {
		t.Fatal(err)
	}
	issued, maxDate := t0.UnixMilli(), t0.Add(7*day).UnixMilli()
	if want := javaDelegationBytes("alice", "yarn", "", issued, maxDate, 1, 1); !bytes.Equal(tok1.Identifier, want) {
		t.Fatalf("identifier %x, want %x", tok1.Identifier, want)
	}
	if tok1.Kind != KindRMDelegation || tok1.Service != "10.0.0.1:8032" || !bytes.Equal(tok1.Password, password(m.Keys().Delegation.Keys[0].Secret, tok1.Identifier)) {
		t.Fatalf("token %v", tok1)
	}
	id1s := fmt.Sprintf("(RM_DELEGATION_TOKEN owner=alice, renewer=yarn, realUser=, issueDate=%d, maxDate=%d, sequenceNumber=1, masterKeyId=1)", issued, maxDate)
	// A proxy user's token without a renewer.
	tok2, id2, err := dt.Issue(ctx, "bob", "", "oozie", "10.0.0.1:8032")
	if err != nil {
		t.Fatal(err)
	}
	if want := javaDelegationBytes("bob", "", "oozie", issued, maxDate, 2, 1); !bytes.Equal(tok2.Identifier, want) {
		t.Fatalf("identifier %x, want %x", tok2.Identifier, want)
	}
	wantError(t, lookup(tok1), "", "")
	wantError(t, lookup(tok2), "", "")

	// Refusals, in renewToken's and cancelToken's order and words.
	forged := tok1
	forged.Password = bytes.Repeat([]byte{1}, 20)
	unknownKey := id1
	unknownKey.MasterKeyID = 99
	notIssued := id1
	notIssued.SequenceNumber = 77
	noOwner := id1
	noOwner.Owner = ""
	sign := func(id DelegationTokenIdentifier) token.Token {
		raw := id.Bytes()
		return token.Token{Identifier: raw, Password: password(m.Keys().Delegation.Keys[0].Secret, raw), Kind: KindRMDelegation}
	}
	renew := func(tok token.Token, who string) func() error {
		return func() error { _, err := dt.Renew(ctx, tok, who); return err }
	}
	cancel := func(tok token.Token, who string) func() error {
		return func() error { _, err := dt.Cancel(ctx, tok, who); return err }
	}
	refusals := []struct {
		name string
		op   func() error
		want want
	}{
		{"renew by another user", renew(tok1, "mallory"), want{yarnerr.AccessControl,
			"mallory tries to renew a token " + id1s + " with non-matching renewer yarn"}},
		{"renew a token without renewer", renew(tok2, "yarn"), want{yarnerr.AccessControl,
			"yarn tried to renew a token " + formatTokenID(id2) + " without a renewer"}},
		{"renew with a wrong password", renew(forged, "yarn"), want{yarnerr.AccessControl,
			"yarn is trying to renew a token " + id1s + " with wrong password"}},
		{"renew under an unknown key", renew(sign(unknownKey), "yarn"), want{yarnerr.InvalidToken,
			"Unable to find master key for keyId=99 from cache. Failed to renew an unexpired token " +
				formatTokenID(unknownKey) + " with sequenceNumber=1"}},
		{"renew a token never issued", renew(sign(notIssued), "yarn"), want{yarnerr.InvalidToken,
			"Renewal request for unknown token " + formatTokenID(notIssued)}},
		{"cancel by another user", cancel(tok1, "mallory"), want{yarnerr.AccessControl,
			"mallory is not authorized to cancel the token " + id1s}},
		{"cancel a token with no owner", cancel(sign(noOwner), "alice"), want{yarnerr.InvalidToken,
			"Token with no owner " + formatTokenID(noOwner)}},
		{"verify a forged password", func() error { _, err := dt.Verify(forged); return err }, want{yarnerr.InvalidToken,
			"token " + id1s + " is invalid, password doesn't match"}},
	}
	saves := store.saves
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) { wantError(t, r.op(), r.want.class, r.want.msg) })
	}
	if store.saves != saves {
		t.Errorf("refused operations saved %d times", store.saves-saves)
	}

	// Renew alice's token an hour in: it now lives until 25h.
	at(time.Hour, false)
	next, err := dt.Renew(ctx, tok1, "yarn")
	if err != nil || !next.Equal(t0.Add(25*time.Hour)) {
		t.Fatalf("Renew = %v, %v; want %v", next, err, t0.Add(25*time.Hour))
	}
	// Bob's was not renewed: expired a millisecond after its renew date.
	at(day+time.Millisecond, false)
	wantError(t, lookup(tok1), "", "")
	wantError(t, lookup(tok2), yarnerr.InvalidToken,
		"Token oozie has expired, current time: 2026-11-23 08:00:00,001+0000 expected renewal time: 2026-11-23 08:00:00,000+0000")
	// The daily roll: a new key, and the expired token dropped.
	at(day+time.Millisecond, true)
	wantError(t, lookup(tok2), yarnerr.InvalidToken, "Token for real user: oozie, can't be found in cache")
	if ids := keyIDs(m); !slices.Equal(ids, []int32{1, 2}) || m.Keys().Delegation.CurrentKeyID != 2 {
		t.Fatalf("delegation keys %v (current %d), want [1 2] (2)", ids, m.Keys().Delegation.CurrentKeyID)
	}
	tok3, id3, err := dt.Issue(ctx, "alice", "yarn", "", "10.0.0.1:8032")
	if err != nil || id3.MasterKeyID != 2 || id3.SequenceNumber != 3 {
		t.Fatalf("Issue after the roll: %+v, %v", id3, err)
	}

	// A restarted RM knows every live token, key and the sequence number.
	m = newManager(t, cfg)
	dt = m.Delegation()
	wantError(t, lookup(tok1), "", "")
	wantError(t, lookup(tok3), "", "")
	if _, id4, err := dt.Issue(ctx, "carol", "yarn", "", "10.0.0.1:8032"); err != nil || id4.SequenceNumber != 4 {
		t.Fatalf("Issue after restart: %+v, %v", id4, err)
	}

	// The renewer (by short name) and the owner may cancel; then it is gone.
	if got, err := dt.Cancel(ctx, tok1, "yarn/other.example.com@EXAMPLE.COM"); err != nil || got != id1 {
		t.Fatalf("Cancel by renewer = %+v, %v", got, err)
	}
	wantError(t, cancel(tok1, "alice")(), yarnerr.InvalidToken, "Token not found "+id1s)
	wantError(t, lookup(tok1), yarnerr.InvalidToken, "Token for real user: , can't be found in cache")
	if _, err := dt.Cancel(ctx, tok3, "alice"); err != nil {
		t.Fatalf("Cancel by owner: %v", err)
	}

	// A token renewed daily still ends at its maximum lifetime.
	tok5, id5, err := dt.Issue(ctx, "dave", "yarn", "", "")
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	for d := day - time.Hour; d < 7*day; d += day - time.Hour {
		at(start.Sub(t0)+d, true)
		if _, err := dt.Renew(ctx, tok5, "yarn"); err != nil {
			t.Fatalf("renew at +%v: %v", d, err)
		}
	}
	last, err := dt.Renew(ctx, tok5, "yarn")
	if err != nil || last.UnixMilli() != id5.MaxDate {
		t.Fatalf("last renewal = %v, %v; want the maximum date %d", last, err, id5.MaxDate)
	}
	end := start.Add(7*day + time.Millisecond)
	at(end.Sub(t0), false)
	wantError(t, renew(tok5, "yarn")(), yarnerr.InvalidToken, fmt.Sprintf(
		"yarn tried to renew an expired token %s max expiration date: %s currentTime: %s",
		formatTokenID(id5), formatTime(id5.MaxDate), formatTime(end.UnixMilli())))
	// Keys outlive their last token's maximum date, then go: key 1 was
	// retired at +1d, so it expired at +8d.
	at(end.Sub(t0), true)
	if ids := keyIDs(m); slices.Contains(ids, 1) || len(m.Keys().Delegation.Tokens) != 0 {
		t.Errorf("after every token expired: keys %v, %d tokens", ids, len(m.Keys().Delegation.Tokens))
	}
}

func keyIDs(m *Manager) []int32 {
	var ids []int32
	for _, k := range m.Keys().Delegation.Keys {
		ids = append(ids, k.ID)
	}
	return ids
}

func mustParse(t *testing.T, tok token.Token) DelegationTokenIdentifier {
	t.Helper()
	id, err := ParseDelegationTokenIdentifier(tok.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
