package tokens

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// sharedStore is the keys of several Managers, versioned: each Manager
// reaches it through a view that remembers the version it last read or
// wrote, and a write over a version it has not seen is refused with
// ErrKeysChanged, as the federation store refuses it.
type sharedStore struct {
	mu      sync.Mutex
	data    []byte
	version int
	// beforeSave, if set, runs once before the next Save is checked: the
	// write of another Manager that lands between a change and its save.
	beforeSave func()
}

type sharedView struct {
	s    *sharedStore
	seen int
}

func (v *sharedView) Load(context.Context) (Keys, error) {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.seen = v.s.version
	return DecodeKeys(v.s.data)
}

func (v *sharedView) Save(_ context.Context, k Keys) error {
	v.s.mu.Lock()
	if f := v.s.beforeSave; f != nil {
		v.s.beforeSave = nil
		v.s.mu.Unlock()
		f()
		v.s.mu.Lock()
	}
	defer v.s.mu.Unlock()
	if v.seen != v.s.version {
		return fmt.Errorf("version %d, stored %d: %w", v.seen, v.s.version, ErrKeysChanged)
	}
	b, err := EncodeKeys(k)
	if err != nil {
		return err
	}
	v.s.data, v.s.version = b, v.s.version+1
	v.seen = v.s.version
	return nil
}

// sharedManager is a Router's Manager over the shared store.
func sharedManager(t *testing.T, clock Clock, s *sharedStore) *Manager {
	t.Helper()
	cfg := testConfig(clock, &sharedView{s: s})
	cfg.Shared, cfg.DelegationOnly = true, true
	return newManager(t, cfg)
}

func TestSharedManagersHonourTheTokensEachOtherIssued(t *testing.T) {
	ctx := context.Background()
	clock := newClock(t0)
	s := &sharedStore{}
	first := sharedManager(t, clock, s)
	second := sharedManager(t, clock, s)
	lookup := func(m *Manager, tok token.Token) error {
		_, err := m.Delegation().SecretLookup()(ctx, tok.Identifier)
		return err
	}

	if k := first.Keys(); k.AMRM.Current != nil || k.NMToken.Current != nil || k.ContainerToken.Current != nil || len(k.ClientToAMRoot) != 0 {
		t.Errorf("a delegation-only Manager made other keys: %+v", k)
	}
	if got := len(second.Keys().Delegation.Keys); got != 1 {
		t.Fatalf("two Managers activated over one store hold %d delegation keys, want the first one's alone", got)
	}

	tok, id, err := first.Delegation().Issue(ctx, "alice", "yarn", "", "10.0.0.9:8050")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, lookup(second, tok), "", "")

	// The second renews it a day on; the first, whose own copy of the
	// token expired at the first renew date, takes up the renewal.
	clock.Set(t0.Add(20 * time.Hour))
	exp, err := second.Delegation().Renew(ctx, tok, "yarn")
	if err != nil {
		t.Fatalf("renewing on the second Manager: %v", err)
	}
	if want := t0.Add(44 * time.Hour); !exp.Equal(want) {
		t.Errorf("renewed to %v, want %v", exp, want)
	}
	clock.Set(t0.Add(30 * time.Hour))
	wantError(t, lookup(first, tok), "", "")

	// Sequence numbers stay distinct when the two issue in turn, and when
	// the other's write lands between a change and its save.
	tok2, id2, err := second.Delegation().Issue(ctx, "bob", "yarn", "", "10.0.0.9:8050")
	if err != nil {
		t.Fatal(err)
	}
	var raced DelegationTokenIdentifier
	s.beforeSave = func() {
		if _, raced, err = second.Delegation().Issue(ctx, "carol", "yarn", "", ""); err != nil {
			t.Error(err)
		}
	}
	tok3, id3, err := first.Delegation().Issue(ctx, "dave", "yarn", "", "")
	if err != nil {
		t.Fatalf("an issue whose save raced another Manager's: %v", err)
	}
	seqs := map[int32]bool{id.SequenceNumber: true, id2.SequenceNumber: true, raced.SequenceNumber: true, id3.SequenceNumber: true}
	if len(seqs) != 4 {
		t.Errorf("sequence numbers %d %d %d %d repeat", id.SequenceNumber, id2.SequenceNumber, raced.SequenceNumber, id3.SequenceNumber)
	}
	for _, tk := range []token.Token{tok2, tok3} {
		for _, m := range []*Manager{first, second} {
			wantError(t, lookup(m, tk), "", "")
		}
	}

	// Cancelled on one, it is gone for the other.
	if _, err := second.Delegation().Cancel(ctx, tok, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Delegation().Renew(ctx, tok, "yarn"); err == nil {
		t.Error("the first Manager renewed a token the second cancelled")
	}
	wantError(t, lookup(first, tok), yarnerr.InvalidToken, "Token for real user: , can't be found in cache")
}

func TestASharedManagerGivesUpWhenEverySaveRaces(t *testing.T) {
	ctx := context.Background()
	clock := newClock(t0)
	s := &sharedStore{}
	m := sharedManager(t, clock, s)
	other := &sharedView{s: s}
	var race func()
	race = func() {
		k, err := other.Load(ctx)
		if err == nil {
			err = other.Save(ctx, k)
		}
		if err != nil {
			t.Error(err)
		}
		s.beforeSave = race
	}
	s.beforeSave = race
	_, _, err := m.Delegation().Issue(ctx, "alice", "yarn", "", "")
	if !errors.Is(err, ErrKeysChanged) {
		t.Fatalf("an issue that always raced: %v, want ErrKeysChanged", err)
	}
	s.beforeSave = nil
	if _, _, err := m.Delegation().Issue(ctx, "alice", "yarn", "", ""); err != nil {
		t.Errorf("an issue once the races stop: %v", err)
	}
}

func TestASharedManagerNeedsAStore(t *testing.T) {
	if _, err := New(Config{Shared: true}); err == nil {
		t.Error("New took a shared Manager without a store")
	}
}
