package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/rm/tokens"
)

// countingKeys counts the writes of the Routers' token state.
type countingKeys struct {
	store.RouterKeys
	keyWrites, tokenWrites, tokenDeletes atomic.Int64
}

func (c *countingKeys) PutRouterKeys(ctx context.Context, data []byte, version string) (string, error) {
	c.keyWrites.Add(1)
	return c.RouterKeys.PutRouterKeys(ctx, data, version)
}

func (c *countingKeys) PutRouterToken(ctx context.Context, t store.RouterToken) (string, error) {
	c.tokenWrites.Add(1)
	return c.RouterKeys.PutRouterToken(ctx, t)
}

func (c *countingKeys) DeleteRouterToken(ctx context.Context, seq int32, version string) error {
	c.tokenDeletes.Add(1)
	return c.RouterKeys.DeleteRouterToken(ctx, seq, version)
}

// storedKeys decodes the keys record.
func storedKeys(t *testing.T, s store.RouterKeys) (tokens.Keys, int) {
	t.Helper()
	data, _, err := s.GetRouterKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tokens.DecodeKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	return keys, len(data)
}

// Each live token is a record of its own, so the keys record stays the
// size of the keys however many tokens live; each change writes the
// records it changes and no other, and a restarted Router finds them all.
func TestTheRoutersKeepEachLiveTokenInARecordOfItsOwn(t *testing.T) {
	ctx := t.Context()
	s := &countingKeys{RouterKeys: store.NewMemory(nil)}
	clock := testingclock.NewFakeClock(tokenEpoch)
	m := routerTokens(t, s, clock)
	const n = 50
	var issued []token.Token
	for i := range n {
		tok, _, err := m.Delegation().Issue(ctx, fmt.Sprintf("user%d", i), "yarn", "", testTokenService)
		if err != nil {
			t.Fatal(err)
		}
		issued = append(issued, tok)
	}
	keys, size := storedKeys(t, s)
	if len(keys.Delegation.Tokens) != 0 || keys.Delegation.SequenceNumber != n {
		t.Errorf("the keys record holds %d tokens and sequence number %d; want none and %d", len(keys.Delegation.Tokens), keys.Delegation.SequenceNumber, n)
	}
	if size > 2<<10 {
		t.Errorf("the keys record takes %d bytes with %d tokens live", size, n)
	}
	records, err := s.GetRouterTokens(ctx)
	if err != nil || len(records) != n {
		t.Fatalf("%d token records, %v; want %d", len(records), err, n)
	}

	tests := []struct {
		name                                       string
		change                                     func() error
		keyWrites, tokenWrites, tokenDeletes, live int64
	}{
		{"an issue", func() error {
			_, _, err := m.Delegation().Issue(ctx, "late", "yarn", "", testTokenService)
			return err
		}, 1, 1, 0, n + 1},
		{"a renewal", func() error {
			_, err := m.Delegation().Renew(ctx, issued[0], "yarn")
			return err
		}, 0, 1, 0, n + 1},
		{"a cancellation", func() error {
			_, err := m.Delegation().Cancel(ctx, issued[1], "user1")
			return err
		}, 0, 0, 1, n},
		{"a roll with nothing due", func() error { return m.Roll(ctx, clock.Now()) }, 0, 0, 0, n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k0, w0, d0 := s.keyWrites.Load(), s.tokenWrites.Load(), s.tokenDeletes.Load()
			clock.Step(time.Minute)
			if err := tt.change(); err != nil {
				t.Fatal(err)
			}
			if k, w, d := s.keyWrites.Load()-k0, s.tokenWrites.Load()-w0, s.tokenDeletes.Load()-d0; k != tt.keyWrites || w != tt.tokenWrites || d != tt.tokenDeletes {
				t.Errorf("wrote the keys %d times, tokens %d, deleted %d; want %d, %d, %d", k, w, d, tt.keyWrites, tt.tokenWrites, tt.tokenDeletes)
			}
			if records, err := s.GetRouterTokens(ctx); err != nil || int64(len(records)) != tt.live {
				t.Errorf("%d token records, %v; want %d", len(records), err, tt.live)
			}
		})
	}

	// A restarted Router honours every live token, and not the cancelled.
	restarted := routerTokens(t, s, clock)
	for i, tok := range issued {
		_, err := restarted.Delegation().Verify(tok)
		if live := i != 1; (err == nil) != live {
			t.Errorf("token %d after a restart: %v; live %v", i, err, live)
		}
	}
	// Past their renew date (the renewed one's a minute later than the
	// late issue's) the roll drops every token but the renewed one
	// and deletes their records.
	clock.SetTime(tokenEpoch.Add(24*time.Hour + 90*time.Second))
	if err := restarted.Roll(ctx, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if records, err := s.GetRouterTokens(ctx); err != nil || len(records) != 1 || records[0].SequenceNumber != 1 {
		t.Errorf("token records after the roll: %v, %v; want the renewed token 1's", records, err)
	}
}

// Routers issuing at once over one store never share a sequence number
// and lose no token.
func TestRoutersIssuingAtOnceLoseNoTokenAndShareNoSequenceNumber(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	clock := testingclock.NewFakeClock(tokenEpoch)
	routers := []*tokens.Manager{routerTokens(t, s, clock), routerTokens(t, s, clock), routerTokens(t, s, clock)}
	const each = 10
	var mu sync.Mutex
	var issued []token.Token
	var wg sync.WaitGroup
	for r, m := range routers {
		wg.Go(func() {
			for i := range each {
				tok, _, err := m.Delegation().Issue(ctx, fmt.Sprintf("r%d-%d", r, i), "yarn", "", testTokenService)
				if err != nil {
					t.Errorf("router %d issue %d: %v", r, i, err)
					return
				}
				mu.Lock()
				issued = append(issued, tok)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	seen := map[int32]bool{}
	check := routerTokens(t, s, clock)
	for _, tok := range issued {
		id, err := check.Delegation().Verify(tok)
		if err != nil {
			t.Errorf("token %s: %v", id, err)
		}
		if seen[id.SequenceNumber] {
			t.Errorf("sequence number %d issued twice", id.SequenceNumber)
		}
		seen[id.SequenceNumber] = true
	}
	if len(issued) != len(routers)*each {
		t.Errorf("%d tokens issued, want %d", len(issued), len(routers)*each)
	}
}

// Tokens a Router of before the tokens had records of their own kept in
// the keys record stay live, and move to records of their own on the
// next change.
func TestTokensKeptInTheKeysRecordMoveToRecordsOfTheirOwn(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	clock := testingclock.NewFakeClock(tokenEpoch)
	tok := issueInOldLayout(t, s, clock, "alice")
	if keys, _ := storedKeys(t, s); len(keys.Delegation.Tokens) != 1 {
		t.Fatalf("the old layout holds %d tokens in the keys record", len(keys.Delegation.Tokens))
	}

	m := routerTokens(t, s, clock)
	if _, err := m.Delegation().Verify(tok); err != nil {
		t.Fatalf("the old layout's token: %v", err)
	}
	if _, _, err := m.Delegation().Issue(ctx, "bob", "yarn", "", testTokenService); err != nil {
		t.Fatal(err)
	}
	if keys, _ := storedKeys(t, s); len(keys.Delegation.Tokens) != 0 {
		t.Errorf("the keys record still holds %d tokens", len(keys.Delegation.Tokens))
	}
	if records, err := s.GetRouterTokens(ctx); err != nil || len(records) != 2 {
		t.Errorf("%d token records, %v; want alice's and bob's", len(records), err)
	}
	if _, err := routerTokens(t, s, clock).Delegation().Verify(tok); err != nil {
		t.Errorf("the old layout's token after it moved: %v", err)
	}
}

// issueInOldLayout issues owner a token through a Router keeping the whole
// state in the keys record, as the Routers did before their tokens had
// records of their own.
func issueInOldLayout(t *testing.T, s store.RouterKeys, clock tokens.Clock, owner string) token.Token {
	t.Helper()
	old, err := tokens.New(tokens.Config{Shared: true, DelegationOnly: true, Clock: clock, Store: wholeRecord{s}})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Activate(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	tok, _, err := old.Delegation().Issue(t.Context(), owner, "yarn", "", testTokenService)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// wholeRecord keeps the whole state in the keys record, as the Routers
// did before their tokens had records of their own.
type wholeRecord struct{ s store.RouterKeys }

func (w wholeRecord) Load(ctx context.Context) (tokens.Keys, error) {
	data, _, err := w.s.GetRouterKeys(ctx)
	if err != nil {
		return tokens.Keys{}, err
	}
	return tokens.DecodeKeys(data)
}

func (w wholeRecord) Save(ctx context.Context, keys tokens.Keys) error {
	_, version, err := w.s.GetRouterKeys(ctx)
	if err != nil {
		return err
	}
	data, err := tokens.EncodeKeys(keys)
	if err != nil {
		return err
	}
	_, err = w.s.PutRouterKeys(ctx, data, version)
	return err
}

// failingKeys refuses the next write of the keys record once told to, as
// a conflict with an older Router or an outage would.
type failingKeys struct {
	store.RouterKeys
	fail atomic.Bool
}

func (f *failingKeys) PutRouterKeys(ctx context.Context, data []byte, version string) (string, error) {
	if f.fail.CompareAndSwap(true, false) {
		return "", errors.New("the API server is away")
	}
	return f.RouterKeys.PutRouterKeys(ctx, data, version)
}

// A move to records cut short after a token's record was written leaves
// the token in the keys record too; cancelled then, it must not come back
// from there.
func TestATokenCancelledAfterAMoveCutShortStaysCancelled(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	clock := testingclock.NewFakeClock(tokenEpoch)
	tok := issueInOldLayout(t, s, clock, "alice")

	f := &failingKeys{RouterKeys: s}
	m := routerTokens(t, f, clock)
	f.fail.Store(true)
	if _, _, err := m.Delegation().Issue(ctx, "bob", "yarn", "", testTokenService); err == nil {
		t.Fatal("an issue whose keys write failed succeeded")
	}
	if records, err := s.GetRouterTokens(ctx); err != nil || len(records) != 1 {
		t.Fatalf("%d token records, %v; want alice's, written before the keys write failed", len(records), err)
	}
	if _, err := routerTokens(t, s, clock).Delegation().Cancel(ctx, tok, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := routerTokens(t, s, clock).Delegation().Verify(tok); err == nil {
		t.Error("a cancelled token came back from the keys record")
	}
	if keys, _ := storedKeys(t, s); len(keys.Delegation.Tokens) != 0 {
		t.Errorf("the keys record still holds %d tokens", len(keys.Delegation.Tokens))
	}
}
