package tokens

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// TestRestartedRMVerifiesTokensItSignedBefore signs one token of each kind,
// starts a second Manager from the same store and checks them there.
func TestRestartedRMVerifiesTokensItSignedBefore(t *testing.T) {
	ctx := context.Background()
	clock := newClock(t0)
	store := &memStore{}
	cfg := testConfig(clock, store)
	first := newManager(t, cfg)
	if store.saves != 1 {
		t.Fatalf("a new Manager saved %d times, want once", store.saves)
	}
	// Sign during a roll, so that current and next keys both matter.
	roll(t, first, clock, 24*time.Hour)
	amrm := first.AMRM().Create(testAttempt)
	nm := first.NMTokens().Create(testAttempt, testNode, "root")
	ctok, _, err := first.ContainerTokens().Create(testContainerSpec())
	if err != nil {
		t.Fatal(err)
	}
	dt, _, err := first.Delegation().Issue(ctx, "alice", "yarn", "", "")
	if err != nil {
		t.Fatal(err)
	}
	saves := store.saves

	second := newManager(t, cfg)
	if store.saves != saves {
		t.Errorf("restart with nothing due saved %d times", store.saves-saves)
	}
	if !bytes.Equal(mustEncode(t, first.Keys()), mustEncode(t, second.Keys())) {
		t.Error("restarted Manager holds other keys")
	}
	checks := []struct {
		name string
		err  error
	}{
		{"AMRM", amrmFamily.check(second, amrm)},
		{"NM", nmFamily.check(second, nm)},
		{"container", containerFamily.check(second, ctok)},
		{"delegation", func() error { _, err := second.Delegation().Verify(dt); return err }()},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { wantError(t, c.err, "", "") })
	}
	// The pending key activates on the schedule the first RM set.
	roll(t, second, clock, 24*time.Hour+15*time.Minute)
	if got, want := second.Keys().AMRM.Current.ID, first.Keys().AMRM.Next.ID; got != want {
		t.Errorf("after activation the current AMRM key is %d, want %d", got, want)
	}
}

// TestFailedSaveChangesNothing: a key must never sign a token before it is
// stored, so a failed save leaves the Manager as it was.
func TestFailedSaveChangesNothing(t *testing.T) {
	ctx := context.Background()
	clock := newClock(t0)
	store := &memStore{}
	m := newManager(t, testConfig(clock, store))
	before := mustEncode(t, m.Keys())
	down := errors.New("apiserver unavailable")
	store.setFail(down)

	ops := []struct {
		name string
		op   func() error
	}{
		{"Roll", func() error { return m.Roll(ctx, t0.Add(24*time.Hour)) }},
		{"Issue", func() error { _, _, err := m.Delegation().Issue(ctx, "alice", "yarn", "", ""); return err }},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			if err := o.op(); !errors.Is(err, down) {
				t.Fatalf("err = %v, want it to wrap %v", err, down)
			}
			if after := mustEncode(t, m.Keys()); !bytes.Equal(after, before) {
				t.Errorf("keys changed:\n%s\n%s", before, after)
			}
		})
	}
	// Once the store is back, the next Roll does the pending work.
	store.setFail(nil)
	if err := m.Roll(ctx, t0.Add(24*time.Hour)); err != nil || m.Keys().AMRM.Next == nil {
		t.Fatalf("Roll after recovery: %v, next key %v", err, m.Keys().AMRM.Next)
	}
}

func TestStoredKeysOfAnotherVersionAreRefused(t *testing.T) {
	store := &memStore{data: []byte(`{"version": 2}`)}
	m, err := New(testConfig(newClock(t0), store))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Activate(context.Background(), testRMIdentifier); err == nil {
		t.Error("Activate accepted keys of version 2")
	}
}

func TestKeysEncodingRoundTrips(t *testing.T) {
	clock := newClock(t0)
	m := newManager(t, testConfig(clock, nil))
	roll(t, m, clock, 24*time.Hour)
	roll(t, m, clock, 24*time.Hour+15*time.Minute)
	if _, _, err := m.Delegation().Issue(context.Background(), "alice", "yarn", "", ""); err != nil {
		t.Fatal(err)
	}
	b := mustEncode(t, m.Keys())
	k, err := DecodeKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	if again := mustEncode(t, k); !bytes.Equal(again, b) {
		t.Errorf("encoding changed after a round trip:\n%s\n%s", b, again)
	}
	if empty, err := DecodeKeys(nil); err != nil || empty.Version != 0 {
		t.Errorf("DecodeKeys(nil) = %+v, %v", empty, err)
	}
}

func mustEncode(t *testing.T, k Keys) []byte {
	t.Helper()
	b, err := EncodeKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countingStore counts the reads and writes of the keys.
type countingStore struct{ loads, saves int }

func (s *countingStore) Load(context.Context) (Keys, error) { s.loads++; return Keys{}, nil }
func (s *countingStore) Save(context.Context, Keys) error   { s.saves++; return nil }

func TestAManagerTouchesItsStoreOnlyOnceActivated(t *testing.T) {
	store := &countingStore{}
	m, err := New(testConfig(newClock(t0), store))
	if err != nil {
		t.Fatal(err)
	}
	if store.loads != 0 || store.saves != 0 {
		t.Fatalf("New read the keys %d times and wrote them %d times; a standby must do neither", store.loads, store.saves)
	}
	if err := m.Activate(context.Background(), testRMIdentifier); err != nil {
		t.Fatal(err)
	}
	if store.loads != 1 || store.saves != 1 {
		t.Errorf("Activate read the keys %d times and wrote them %d times, want the first keys read once and saved once", store.loads, store.saves)
	}
}
