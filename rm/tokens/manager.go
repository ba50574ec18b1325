package tokens

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Clock tells the Manager the time when it signs or checks a token.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

// Now is time.Now.
func (wallClock) Now() time.Time { return time.Now() }

// RollPolicy is how one family of master keys rolls. Zero fields take
// Hadoop's defaults.
type RollPolicy struct {
	// Interval between rolls (yarn.resourcemanager.{am-rm-tokens,
	// nm-tokens,container-tokens}.master-key-rolling-interval-secs); zero
	// means 24h.
	Interval time.Duration
	// ActivationDelay between creating a key and making it current, so that
	// every AM (AMRM) or node (NM, container) has it before tokens under it
	// arrive: 1.5 × the AM or NM expiry interval in Hadoop. Zero means 15m
	// (1.5 × 10m). It must be less than half of Interval.
	ActivationDelay time.Duration
}

func (p RollPolicy) withDefaults() RollPolicy {
	if p.Interval == 0 {
		p.Interval = 24 * time.Hour
	}
	if p.ActivationDelay == 0 {
		p.ActivationDelay = 15 * time.Minute
	}
	return p
}

func (p RollPolicy) validate(name string) error {
	if p.Interval < 0 || p.ActivationDelay < 0 {
		return fmt.Errorf("tokens: %s roll policy: negative duration", name)
	}
	// Hadoop refuses to start unless the rolling interval exceeds twice the
	// activation delay: a key must be active a while before the next roll.
	if p.Interval <= 2*p.ActivationDelay {
		return fmt.Errorf("tokens: %s rolling interval %v must be more than twice the activation delay %v",
			name, p.Interval, p.ActivationDelay)
	}
	return nil
}

// DelegationPolicy is the RM delegation token schedule. Zero fields take
// Hadoop's defaults.
type DelegationPolicy struct {
	// KeyUpdateInterval between new delegation keys
	// (yarn.resourcemanager.delegation.key.update-interval); zero means 24h.
	KeyUpdateInterval time.Duration
	// MaxLifetime of a token however often it is renewed
	// (yarn.resourcemanager.delegation.token.max-lifetime); zero means 7 days.
	MaxLifetime time.Duration
	// RenewInterval a renewal extends a token by
	// (yarn.resourcemanager.delegation.token.renew-interval); zero means 24h.
	RenewInterval time.Duration
}

func (p DelegationPolicy) withDefaults() DelegationPolicy {
	if p.KeyUpdateInterval == 0 {
		p.KeyUpdateInterval = 24 * time.Hour
	}
	if p.MaxLifetime == 0 {
		p.MaxLifetime = 7 * 24 * time.Hour
	}
	if p.RenewInterval == 0 {
		p.RenewInterval = 24 * time.Hour
	}
	return p
}

// Config holds a Manager's settings. Every zero value is documented.
type Config struct {
	// Store keeps the keys across restarts; nil keeps them in memory only
	// (tokens then die with the process).
	Store KeyStore
	// Clock is read when tokens are signed and checked; nil means the wall
	// clock. Roll takes its time from the caller instead.
	Clock Clock
	// Rand supplies key material and initial key ids; nil means crypto/rand.
	// It is read only under the Manager's change lock, so it need not be
	// safe for concurrent use.
	Rand io.Reader
	// KeyLength is the length of new master keys in bytes; zero means 20.
	// Hadoop's KeyGenerator makes 8-byte keys; any length verifies the same
	// way, and 20 bytes fills HMAC-SHA1's output size.
	KeyLength int
	// AttemptValid reports whether an application attempt is still live.
	// AMRMTokens and ClientToAM tokens of other attempts are refused, and
	// NMToken pins of dead attempts are dropped by Roll. It is called on
	// every token check, never with the Manager's locks held, so it may take
	// the RM's own locks but should be quick. Nil means every attempt is
	// live.
	AttemptValid func(ctx context.Context, attempt *yarnpb.ApplicationAttemptIdProto) bool
	// TokenService gives the service field of NMTokens and ContainerTokens
	// for a node: Hadoop puts "ip:port" there (SecurityUtil.buildTokenService).
	// Nil means host:port as given.
	TokenService func(host string, port int32) string
	// ShortName maps a principal to the user name delegation-token renewers
	// are compared by (HadoopKerberosName.getShortName). Nil means the part
	// before the first '/' or '@'.
	ShortName func(principal string) string
	// AMRM, NMToken and ContainerToken are the roll policies of the three
	// families of master keys.
	AMRM, NMToken, ContainerToken RollPolicy
	// ContainerTokenLifetime is how long a container token is valid after it
	// is signed (yarn.resourcemanager.rm.container-allocation.expiry-interval-ms);
	// zero means 10m.
	ContainerTokenLifetime time.Duration
	// Delegation is the RM delegation token schedule.
	Delegation DelegationPolicy
	// Shared says that other Managers write Store too: the Routers of a
	// federation share one, as YARN's Routers share their
	// RouterDelegationTokenSecretManager's state through the federation
	// store. Each change then starts from the keys Store holds, a Save
	// that fails with ErrKeysChanged is redone on the keys loaded again,
	// and a delegation token check that fails on this Manager's keys is
	// tried again on the stored ones (another Manager may have issued or
	// renewed the token since), as the Router's getTokenInfo reads the
	// store on a miss. Store must not be nil.
	Shared bool
	// DelegationOnly makes and rolls the RM delegation keys alone, for a
	// process that issues no other token (the Router): Activate and Roll
	// then keep no AMRM, NMToken, ContainerToken or ClientToAM secret.
	DelegationOnly bool
}

// ErrKeysChanged is what a shared KeyStore's Save returns (wrapped) when
// the keys it holds changed since this Manager last loaded or saved them:
// another Manager wrote in between, and the change must be redone on its
// keys. A KeyStore of a Shared Manager must refuse such a write.
var ErrKeysChanged = errors.New("tokens: stored keys changed since they were read")

// sharedTries bounds how often a change of a Shared Manager is redone after
// ErrKeysChanged: each retry follows a write by another Manager, so running
// out means the store is written far faster than Routers issue tokens.
const sharedTries = 8

// sharedBackOff spaces a Shared Manager's tries after ErrKeysChanged,
// jittered: Managers that retried at once at once would write over each
// other again, and one of them could lose every try (three Routers issuing
// together did, under the race detector).
func sharedBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(time.Millisecond),
		backoff.WithRandomizationFactor(1),
		backoff.WithMaxInterval(50*time.Millisecond),
		backoff.WithMaxElapsedTime(0),
	)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.KeyLength == 0 {
		c.KeyLength = 20
	}
	if c.AttemptValid == nil {
		c.AttemptValid = func(context.Context, *yarnpb.ApplicationAttemptIdProto) bool { return true }
	}
	if c.TokenService == nil {
		c.TokenService = defaultTokenService
	}
	if c.ShortName == nil {
		c.ShortName = defaultShortName
	}
	c.AMRM = c.AMRM.withDefaults()
	c.NMToken = c.NMToken.withDefaults()
	c.ContainerToken = c.ContainerToken.withDefaults()
	if c.ContainerTokenLifetime == 0 {
		c.ContainerTokenLifetime = 10 * time.Minute
	}
	c.Delegation = c.Delegation.withDefaults()
	return c
}

func (c Config) validate() error {
	if c.KeyLength < 8 {
		return fmt.Errorf("tokens: key length %d is below Hadoop's 8 bytes", c.KeyLength)
	}
	for _, p := range []struct {
		name string
		p    RollPolicy
	}{{"AMRM", c.AMRM}, {"NMToken", c.NMToken}, {"ContainerToken", c.ContainerToken}} {
		if err := p.p.validate(p.name); err != nil {
			return err
		}
	}
	if c.Shared && c.Store == nil {
		return errors.New("tokens: a shared Manager needs a store")
	}
	d := c.Delegation
	if c.ContainerTokenLifetime < 0 || d.KeyUpdateInterval < 0 || d.MaxLifetime < 0 || d.RenewInterval < 0 {
		return errors.New("tokens: negative lifetime or interval")
	}
	return nil
}

// defaultShortName is what Hadoop's DEFAULT auth_to_local rule gives for a
// principal of the default realm: its first component.
func defaultShortName(principal string) string {
	if i := strings.IndexAny(principal, "/@"); i >= 0 {
		return principal[:i]
	}
	return principal
}

// Manager holds every token secret manager of the RM and the keys they
// share a store with. Use the per-kind views (AMRM, NMTokens,
// ContainerTokens, ClientToAM, Delegation) to sign and check tokens.
type Manager struct {
	cfg Config
	// rmIdentifier is set by Activate, before any token is signed.
	rmIdentifier atomic.Int64

	// opMu serializes changes: each takes the current snapshot, saves the
	// changed Keys, then publishes a new snapshot.
	opMu sync.Mutex
	snap atomic.Pointer[snapshot]

	// sent records which NMTokens each attempt got: node → id of the key
	// the token was signed with. It is not persisted: after a restart every
	// attempt gets fresh NMTokens, as after a Hadoop RM restart.
	sentMu sync.Mutex
	sent   map[attemptKey]map[nodeKey]int32
}

// snapshot is an immutable view of Keys with indexes for the checks.
type snapshot struct {
	keys Keys
	pins map[attemptKey]int32
	// dt holds the live delegation tokens by sequence number.
	dt map[int32]dtEntry
}

type dtEntry struct {
	id        DelegationTokenIdentifier
	password  []byte
	renewDate time.Time
}

// New returns a Manager that holds no keys yet: it reads and writes
// nothing until Activate.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, sent: map[attemptKey]map[nodeKey]int32{}}
	snap, err := newSnapshot(Keys{})
	if err != nil {
		return nil, err
	}
	m.snap.Store(snap)
	return m, nil
}

// Activate takes up the keys cfg.Store holds, creating any key that is
// missing and doing whatever rolling is due at cfg.Clock's time (a store
// with no keys gets its first ones), and the RM's identifier: it goes into
// every ContainerTokenIdentifier and must match when one is checked
// (Hadoop uses the RM's cluster timestamp). The RM activates its Manager
// once it leads, before it signs or checks a token.
func (m *Manager) Activate(ctx context.Context, rmIdentifier int64) error {
	m.rmIdentifier.Store(rmIdentifier)
	if err := m.reload(ctx); err != nil {
		return err
	}
	return m.Roll(ctx, m.cfg.Clock.Now())
}

// Roll does every key transition due at now: it creates the first keys,
// creates a next key where a roll is due, activates next keys whose delay
// has passed, drops retired keys and NMToken pins no longer needed, rolls
// the delegation key and drops delegation tokens past their renew date. It
// saves the keys if anything changed; on a save error nothing changes and
// the next Roll tries again. The RM calls it from a ticker; calling it late
// or often is harmless.
func (m *Manager) Roll(ctx context.Context, now time.Time) error {
	dead := m.deadPinnedAttempts(ctx)
	if err := m.update(ctx, func(k *Keys) (bool, error) { return m.advance(k, now, dead) }); err != nil {
		return err
	}
	m.forgetDeadAttempts(ctx)
	return nil
}

// deadPinnedAttempts asks Config.AttemptValid about every pinned attempt.
// It runs before Roll takes its lock: the callback belongs to the RM, which
// may hold locks of its own while it calls into the Manager.
func (m *Manager) deadPinnedAttempts(ctx context.Context) map[attemptKey]bool {
	dead := map[attemptKey]bool{}
	for ak := range m.snap.Load().pins {
		if !m.cfg.AttemptValid(ctx, ak.proto()) {
			dead[ak] = true
		}
	}
	return dead
}

// Keys returns a copy of everything the Manager would store.
func (m *Manager) Keys() Keys {
	return m.snap.Load().keys.clone()
}

// update applies change to a copy of the keys and, if it changed anything,
// saves them and publishes them. change's error leaves everything as it was.
// A Shared Manager first takes up the stored keys, and redoes the change on
// them again when another Manager saved in between.
func (m *Manager) update(ctx context.Context, change func(k *Keys) (bool, error)) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	var wait backoff.BackOff
	for try := 1; ; try++ {
		if m.cfg.Shared {
			if err := m.reloadLocked(ctx); err != nil {
				return err
			}
		}
		err := m.applyLocked(ctx, change)
		if !m.cfg.Shared || !errors.Is(err, ErrKeysChanged) || try == sharedTries {
			return err
		}
		if wait == nil {
			wait = sharedBackOff()
		}
		t := time.NewTimer(wait.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// applyLocked is one try of update, with opMu held.
func (m *Manager) applyLocked(ctx context.Context, change func(k *Keys) (bool, error)) error {
	keys := m.snap.Load().keys.clone()
	changed, err := change(&keys)
	if err != nil || !changed {
		return err
	}
	keys.Version = KeysVersion
	snap, err := newSnapshot(keys)
	if err != nil {
		return err
	}
	if m.cfg.Store != nil {
		if err := m.cfg.Store.Save(ctx, keys.clone()); err != nil {
			return fmt.Errorf("tokens: save keys: %w", err)
		}
	}
	m.snap.Store(snap)
	return nil
}

// reload takes up the keys the store holds now, for a Shared Manager whose
// snapshot failed a check.
func (m *Manager) reload(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	return m.reloadLocked(ctx)
}

// reloadLocked loads the stored keys and publishes them, with opMu held;
// without a store there are none.
func (m *Manager) reloadLocked(ctx context.Context) error {
	var keys Keys
	if m.cfg.Store != nil {
		var err error
		if keys, err = m.cfg.Store.Load(ctx); err != nil {
			return fmt.Errorf("tokens: load keys: %w", err)
		}
	}
	if keys.Version != 0 && keys.Version != KeysVersion {
		return fmt.Errorf("tokens: stored keys have version %d, want %d", keys.Version, KeysVersion)
	}
	snap, err := newSnapshot(keys)
	if err != nil {
		return err
	}
	m.snap.Store(snap)
	return nil
}

// advance makes the key transitions due at now on k, dropping the pins of
// the dead attempts.
func (m *Manager) advance(k *Keys, now time.Time, dead map[attemptKey]bool) (bool, error) {
	changed := false
	mark := func(c bool, err error) error {
		changed = changed || c
		return err
	}
	if m.cfg.DelegationOnly {
		return m.rollDelegation(&k.Delegation, now)
	}
	if len(k.ClientToAMRoot) == 0 {
		secret, err := m.newSecret()
		if err != nil {
			return false, err
		}
		k.ClientToAMRoot = secret
		changed = true
	}
	// Pins go first so that keys only they held are dropped in this Roll.
	live := k.NMTokenPins[:0]
	for _, p := range k.NMTokenPins {
		if !dead[attemptKey{clusterTimestamp: p.ClusterTimestamp, app: p.AppID, attempt: p.AttemptID}] {
			live = append(live, p)
		}
	}
	if len(live) != len(k.NMTokenPins) {
		changed = true
	}
	k.NMTokenPins = slices.Clip(live)
	pinned := func(id int32) bool {
		return slices.ContainsFunc(k.NMTokenPins, func(p NMTokenPin) bool { return p.KeyID == id })
	}
	never := func(int32) bool { return false }
	containerRetention := max(m.cfg.ContainerToken.Interval, m.cfg.ContainerTokenLifetime)
	if err := mark(m.rollRing(&k.AMRM, now, m.cfg.AMRM, 0, never)); err != nil {
		return false, err
	}
	if err := mark(m.rollRing(&k.NMToken, now, m.cfg.NMToken, m.cfg.NMToken.Interval, pinned)); err != nil {
		return false, err
	}
	if err := mark(m.rollRing(&k.ContainerToken, now, m.cfg.ContainerToken, containerRetention, never)); err != nil {
		return false, err
	}
	if err := mark(m.rollDelegation(&k.Delegation, now)); err != nil {
		return false, err
	}
	return changed, nil
}

// rollRing does the due transitions of one key family (the timers of
// Hadoop's MasterKeyRoller and NextKeyActivator). retention is how long a
// replaced key keeps verifying; zero drops it at once.
func (m *Manager) rollRing(r *KeyRing, now time.Time, p RollPolicy, retention time.Duration, pinned func(int32) bool) (bool, error) {
	changed := false
	if r.Current == nil {
		if r.NextSerial == 0 {
			// Hadoop starts each family's serial at SecureRandom.nextInt().
			var b [4]byte
			if _, err := io.ReadFull(m.cfg.Rand, b[:]); err != nil {
				return false, fmt.Errorf("tokens: key id: %w", err)
			}
			r.NextSerial = int32(binary.BigEndian.Uint32(b[:]))
		}
		key, err := m.newKey(r)
		if err != nil {
			return false, err
		}
		r.Current = key
		r.NextRollAt = now.Add(p.Interval)
		changed = true
	}
	if r.Next != nil && !now.Before(r.ActivateAt) {
		if retention > 0 || pinned(r.Current.ID) {
			r.Retired = append(r.Retired, RetiredKey{MasterKey: *r.Current, DropAt: now.Add(retention)})
		}
		r.Current, r.Next, r.ActivateAt = r.Next, nil, time.Time{}
		changed = true
	}
	if r.Next == nil && !now.Before(r.NextRollAt) {
		key, err := m.newKey(r)
		if err != nil {
			return false, err
		}
		r.Next = key
		r.ActivateAt = now.Add(p.ActivationDelay)
		r.NextRollAt = now.Add(p.Interval)
		changed = true
	}
	kept := r.Retired[:0]
	for _, k := range r.Retired {
		if now.Before(k.DropAt) || pinned(k.ID) {
			kept = append(kept, k)
		}
	}
	if len(kept) != len(r.Retired) {
		changed = true
	}
	r.Retired = slices.Clip(kept)
	if len(r.Retired) == 0 {
		r.Retired = nil
	}
	return changed, nil
}

func (m *Manager) newKey(r *KeyRing) (*MasterKey, error) {
	secret, err := m.newSecret()
	if err != nil {
		return nil, err
	}
	key := &MasterKey{ID: r.NextSerial, Secret: secret}
	r.NextSerial++
	return key, nil
}

func (m *Manager) newSecret() ([]byte, error) {
	b := make([]byte, m.cfg.KeyLength)
	if _, err := io.ReadFull(m.cfg.Rand, b); err != nil {
		return nil, fmt.Errorf("tokens: new key: %w", err)
	}
	return b, nil
}

// newSnapshot indexes k for the checks, recomputing delegation token
// passwords from their keys.
func newSnapshot(k Keys) (*snapshot, error) {
	s := &snapshot{keys: k, pins: map[attemptKey]int32{}, dt: map[int32]dtEntry{}}
	for _, p := range k.NMTokenPins {
		s.pins[attemptKey{clusterTimestamp: p.ClusterTimestamp, app: p.AppID, attempt: p.AttemptID}] = p.KeyID
	}
	for _, t := range k.Delegation.Tokens {
		id, err := ParseDelegationTokenIdentifier(t.Identifier)
		if err != nil {
			return nil, fmt.Errorf("tokens: stored delegation token: %w", err)
		}
		e := dtEntry{id: id, renewDate: t.RenewDate}
		if key := k.Delegation.key(id.MasterKeyID); key != nil {
			e.password = password(key.Secret, t.Identifier)
		} else {
			// addPersistedDelegationToken: a token whose key is gone is
			// kept as expired, to be dropped by the next Roll.
			e.renewDate = time.UnixMilli(0).UTC()
		}
		s.dt[id.SequenceNumber] = e
	}
	return s, nil
}

// find returns the key of the ring with id that still verifies at now:
// the current or next key, or (if retired is true) a retired key before its
// drop time. pinned, if set, also admits a retired key past that time.
func (r *KeyRing) find(id int32, now time.Time, retired bool, pinned func(int32) bool) *MasterKey {
	if r.Current != nil && r.Current.ID == id {
		return r.Current
	}
	if r.Next != nil && r.Next.ID == id {
		return r.Next
	}
	if !retired {
		return nil
	}
	for i := range r.Retired {
		k := &r.Retired[i]
		if k.ID == id && (now.Before(k.DropAt) || (pinned != nil && pinned(id))) {
			return &k.MasterKey
		}
	}
	return nil
}
