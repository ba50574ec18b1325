package amrmproxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// maxIdentifierBytes bounds an identifier presented over SASL: an
// AMRMTokenIdentifierProto is a few dozen bytes.
const maxIdentifierBytes = 1024

// SecretsConfig configures Secrets.
type SecretsConfig struct {
	// RollInterval is how often a next key is made
	// (yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs,
	// which YARN's AMRMProxy reads too).
	RollInterval time.Duration
	// ActivationDelay is how long a next key waits before it becomes the
	// current one: 1.5 × yarn.am.liveness-monitor.expiry-interval-ms in
	// YARN, so every live AM has heartbeated and been handed a token under
	// it. It must be under half RollInterval, or a key could be replaced
	// before the AMs have it.
	ActivationDelay time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Logger receives key rolls; none if nil.
	Logger *slog.Logger
	// Keys keeps the keys across a restart of the node, so the tokens of
	// AMs still running stay valid; nil keeps them in memory only.
	Keys KeyStore
}

// KeyStore keeps the node's keys (FileStore is one).
type KeyStore interface {
	SaveKeys(KeysState) error
	LoadKeys() (KeysState, bool, error)
}

// masterKey is one HMAC-SHA1 secret and the id tokens name it by.
type masterKey struct {
	id     int32
	secret []byte
}

// Secrets signs and checks the local AMRMTokens of the node's AMs
// (AMRMProxyTokenSecretManager). With a KeyStore its keys outlive the
// process, as the pipelines of the Service's StateStore do. Safe for
// concurrent use.
type Secrets struct {
	cfg SecretsConfig
	log *slog.Logger

	mu       sync.RWMutex
	current  masterKey
	next     *masterKey
	activate time.Time // when next becomes current
	serial   int32
	// attempts are the attempts the node signed a token for and that
	// have not finished: only their tokens are valid.
	attempts map[yarnid.AttemptID]bool
}

// NewSecrets returns a secret manager with the keys its KeyStore kept, or
// else a fresh current key.
func NewSecrets(cfg SecretsConfig) (*Secrets, error) {
	if cfg.RollInterval <= 2*cfg.ActivationDelay {
		return nil, fmt.Errorf("amrmproxy: key roll interval %s must be more than twice the activation delay %s", cfg.RollInterval, cfg.ActivationDelay)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("amrmproxy: key serial: %w", err)
	}
	// Like Hadoop, ids start at a random number and count up, so a
	// restarted node does not reuse the ids of tokens still around.
	s := &Secrets{cfg: cfg, log: log, serial: int32(binary.BigEndian.Uint32(b[:]) & 0x7fffffff), attempts: map[yarnid.AttemptID]bool{}}
	if cfg.Keys != nil {
		kept, ok, err := cfg.Keys.LoadKeys()
		if err != nil {
			return nil, err
		}
		if ok && len(kept.Current.Secret) > 0 {
			s.current = masterKey{id: kept.Current.ID, secret: kept.Current.Secret}
			if kept.Next != nil {
				s.next = &masterKey{id: kept.Next.ID, secret: kept.Next.Secret}
				s.activate = kept.Activate
			}
			s.serial = kept.Serial
			log.Info("AMRMProxy master keys recovered", "key", s.current.id, "next", kept.Next != nil)
			return s, nil
		}
	}
	key, err := s.newKey()
	if err != nil {
		return nil, err
	}
	s.current = key
	if err := s.saveLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// saveLocked hands the keys to the KeyStore, if any.
func (s *Secrets) saveLocked() error {
	if s.cfg.Keys == nil {
		return nil
	}
	k := KeysState{Current: KeyState{ID: s.current.id, Secret: s.current.secret}, Serial: s.serial}
	if s.next != nil {
		k.Next, k.Activate = &KeyState{ID: s.next.id, Secret: s.next.secret}, s.activate
	}
	return s.cfg.Keys.SaveKeys(k)
}

// Adopt makes a recovered attempt's tokens valid again, as Create made
// them before the restart.
func (s *Secrets) Adopt(attempt yarnid.AttemptID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[attempt] = true
}

func (s *Secrets) newKey() (masterKey, error) {
	secret := make([]byte, 20)
	if _, err := rand.Read(secret); err != nil {
		return masterKey{}, fmt.Errorf("amrmproxy: new master key: %w", err)
	}
	k := masterKey{id: s.serial, secret: secret}
	s.serial++
	return k, nil
}

// Roll makes a next key; it becomes current after the activation delay
// (Activate). Until then new tokens are signed under it, and tokens under
// either key are valid.
func (s *Secrets) Roll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, err := s.newKey()
	if err != nil {
		return err
	}
	s.next = &key
	s.activate = s.cfg.Now().Add(s.cfg.ActivationDelay)
	s.log.Info("rolled the AMRMProxy master key", "next_key", key.id, "activate_at", s.activate)
	if err := s.saveLocked(); err != nil {
		// The roll stands: the AMs are handed tokens under the new key
		// either way; only a restart before the next save loses them.
		s.log.Warn("saving the AMRMProxy master keys", "err", err)
	}
	return nil
}

// Activate makes the next key current, if there is one due; tokens under
// the old current key stop being valid.
func (s *Secrets) Activate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil || s.cfg.Now().Before(s.activate) {
		return
	}
	s.current, s.next = *s.next, nil
	s.log.Info("activated the AMRMProxy master key", "key", s.current.id)
	if err := s.saveLocked(); err != nil {
		s.log.Warn("saving the AMRMProxy master keys", "err", err)
	}
}

// Run rolls the key every RollInterval and activates it ActivationDelay
// later, until ctx ends.
func (s *Secrets) Run(ctx context.Context) error {
	roll := time.NewTicker(s.cfg.RollInterval)
	defer roll.Stop()
	var activate <-chan time.Time
	s.mu.RLock()
	if s.next != nil {
		// A next key kept from before a restart still becomes current.
		activate = time.After(max(0, s.activate.Sub(s.cfg.Now())))
	}
	s.mu.RUnlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-roll.C:
			if err := s.Roll(); err != nil {
				return err
			}
			activate = time.After(s.cfg.ActivationDelay)
		case <-activate:
			activate = nil
			s.Activate()
		}
	}
}

// Create signs a local token for attempt under the newest key and makes
// the attempt's tokens valid until Forget. Its service is empty, as the
// RM's are: the AM's client sets it to its scheduler address.
func (s *Secrets) Create(attempt yarnid.AttemptID) token.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[attempt] = true
	return s.signLocked(attempt)
}

func (s *Secrets) signLocked(attempt yarnid.AttemptID) token.Token {
	key := s.current
	if s.next != nil {
		key = *s.next
	}
	id := &yarnpb.AMRMTokenIdentifierProto{AppAttemptId: attempt.Proto(), KeyId: proto.Int32(key.id)}
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(id) // no required fields: cannot fail
	return token.Token{Identifier: raw, Password: hmacSHA1(key.secret, raw), Kind: client.KindAMRMToken}
}

// Refresh is the allocate-time key check: while a next key waits, an AM
// whose token is under another key gets a new token (ok true), which
// the proxy puts in the allocate answer.
func (s *Secrets) Refresh(presented *yarnpb.AMRMTokenIdentifierProto) (tok token.Token, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.next == nil || presented.GetKeyId() == s.next.id {
		return token.Token{}, false
	}
	attempt, err := yarnid.AttemptIDFromProto(presented.GetAppAttemptId())
	if err != nil || !s.attempts[attempt] {
		return token.Token{}, false
	}
	return s.signLocked(attempt), true
}

// Forget ends an attempt's tokens (applicationMasterFinished).
func (s *Secrets) Forget(attempt yarnid.AttemptID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.attempts, attempt)
}

// ErrTooLong is returned for identifiers over the size any AMRMToken has.
var ErrTooLong = errors.New("amrmproxy: token identifier too long")

// RetrievePassword checks a presented identifier: a live attempt of the
// node's, under the current or the next key. Errors name InvalidToken, as
// the RM's do.
func (s *Secrets) RetrievePassword(identifier []byte) (*yarnpb.AMRMTokenIdentifierProto, []byte, error) {
	if len(identifier) > maxIdentifierBytes {
		return nil, nil, yarnerr.InvalidToken.Errorf("%v", ErrTooLong)
	}
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(identifier, &id); err != nil {
		return nil, nil, yarnerr.InvalidToken.Errorf("cannot decode the AMRMToken identifier: %v", err)
	}
	attempt, err := yarnid.AttemptIDFromProto(id.GetAppAttemptId())
	if err != nil {
		return nil, nil, yarnerr.InvalidToken.Errorf("cannot decode the AMRMToken identifier: %v", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.attempts[attempt] {
		return nil, nil, yarnerr.InvalidToken.Errorf("%s not found in AMRMProxyTokenSecretManager.", attempt)
	}
	switch {
	case id.GetKeyId() == s.current.id:
		return &id, hmacSHA1(s.current.secret, identifier), nil
	case s.next != nil && id.GetKeyId() == s.next.id:
		return &id, hmacSHA1(s.next.secret, identifier), nil
	}
	return nil, nil, yarnerr.InvalidToken.Errorf("Invalid AMRMToken from %s", attempt)
}

// SecretLookup is the check of the proxy's ipc.Server: the caller is the
// attempt id string and its identity the *yarnpb.AMRMTokenIdentifierProto.
func (s *Secrets) SecretLookup() ipc.SecretLookup {
	return func(_ context.Context, identifier []byte) (ipc.Secret, error) {
		id, pw, err := s.RetrievePassword(identifier)
		if err != nil {
			return ipc.Secret{}, err
		}
		attempt, _ := yarnid.AttemptIDFromProto(id.GetAppAttemptId()) // checked by RetrievePassword
		return ipc.Secret{Password: pw, User: attempt.String(), Identity: id}, nil
	}
}

func hmacSHA1(key, msg []byte) []byte {
	m := hmac.New(sha1.New, key)
	m.Write(msg)
	return m.Sum(nil)
}
