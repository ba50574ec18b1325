package tokens

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// KeyStore keeps Keys where a restarted or newly elected RM finds them (in
// Knit, a Kubernetes Secret). Save replaces what is stored. It is called
// before a new key signs anything, before a delegation token is handed out,
// renewed or cancelled, and before a new NMToken pin counts, so a Save
// error fails that operation and leaves the Manager unchanged. Changes are
// serialized: Save runs under the Manager's change lock and must not call
// back into the Manager. Load returns the zero Keys and no error when
// nothing is stored yet.
type KeyStore interface {
	Load(ctx context.Context) (Keys, error)
	Save(ctx context.Context, keys Keys) error
}

// KeysVersion is the version of the Keys layout this package writes.
const KeysVersion = 1

// Keys is everything the token secret managers must keep across restarts:
// the rolled master keys with their schedule, the NMToken keys attempts are
// pinned to, the ClientToAM root secret, and the RM delegation keys, tokens
// and sequence numbers. Values returned by Manager.Keys share no memory with
// the Manager. Encode it with encoding/json (or EncodeKeys).
type Keys struct {
	// Version is KeysVersion; zero means nothing was stored yet.
	Version        int           `json:"version"`
	AMRM           KeyRing       `json:"amrm"`
	NMToken        KeyRing       `json:"nmToken"`
	ContainerToken KeyRing       `json:"containerToken"`
	NMTokenPins    []NMTokenPin  `json:"nmTokenPins,omitempty"`
	ClientToAMRoot []byte        `json:"clientToAMRoot,omitempty"`
	Delegation     DelegationSet `json:"delegation"`
}

// MasterKey is one HMAC-SHA1 secret and the id tokens name it by.
type MasterKey struct {
	ID     int32  `json:"id"`
	Secret []byte `json:"secret"`
}

// RetiredKey is a replaced master key that still verifies tokens until
// DropAt (and, for NMToken keys, while an attempt is pinned to it).
type RetiredKey struct {
	MasterKey
	DropAt time.Time `json:"dropAt"`
}

// KeyRing is the state of one family of rolled master keys.
type KeyRing struct {
	// Current signs tokens (AMRM: while there is no Next).
	Current *MasterKey `json:"current,omitempty"`
	// Next, if set, was created at the last roll and becomes Current at
	// ActivateAt.
	Next       *MasterKey `json:"next,omitempty"`
	ActivateAt time.Time  `json:"activateAt,omitzero"`
	// NextRollAt is when the next key is due to be created.
	NextRollAt time.Time    `json:"nextRollAt,omitzero"`
	Retired    []RetiredKey `json:"retired,omitempty"`
	// NextSerial is the id the next new key gets. Hadoop starts it at a
	// random int32 and counts up, so ids of keys in use never repeat.
	NextSerial int32 `json:"nextSerial"`
}

// NMTokenPin records that an attempt started a container with an NMToken
// under KeyID, which therefore keeps verifying that attempt's NMTokens for as
// long as the attempt lives (NMTokenSecretManagerInNM.oldMasterKeys).
type NMTokenPin struct {
	ClusterTimestamp int64 `json:"clusterTimestamp"`
	AppID            int32 `json:"appId"`
	AttemptID        int32 `json:"attemptId"`
	KeyID            int32 `json:"keyId"`
}

// DelegationSet is the state of the RM delegation token secret manager
// (AbstractDelegationTokenSecretManager's allKeys, currentId,
// delegationTokenSequenceNumber and currentTokens).
type DelegationSet struct {
	// CurrentKeyID names the key new tokens are signed with.
	CurrentKeyID int32 `json:"currentKeyId"`
	// LastKeyID is the id the latest key got; ids count up from 1.
	LastKeyID int32           `json:"lastKeyId"`
	Keys      []DelegationKey `json:"keys,omitempty"`
	// LastRoll is when the current key was made.
	LastRoll time.Time `json:"lastRoll,omitzero"`
	// SequenceNumber is the sequence number of the latest token issued.
	SequenceNumber int32                   `json:"sequenceNumber"`
	Tokens         []StoredDelegationToken `json:"tokens,omitempty"`
}

// DelegationKey is a delegation master key (Hadoop's DelegationKey): dropped
// once Expiry has passed.
type DelegationKey struct {
	MasterKey
	Expiry time.Time `json:"expiry"`
}

// StoredDelegationToken is one live delegation token: its identifier bytes
// and the time it expires unless renewed. Its password is recomputed from
// its key on load, as addPersistedDelegationToken does.
type StoredDelegationToken struct {
	Identifier []byte    `json:"identifier"`
	RenewDate  time.Time `json:"renewDate"`
}

// EncodeKeys returns k as the bytes a KeyStore may keep.
func EncodeKeys(k Keys) ([]byte, error) {
	b, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("tokens: encode keys: %w", err)
	}
	return b, nil
}

// DecodeKeys reads bytes EncodeKeys wrote. Empty input is the zero Keys.
func DecodeKeys(b []byte) (Keys, error) {
	var k Keys
	if len(bytes.TrimSpace(b)) == 0 {
		return k, nil
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return Keys{}, fmt.Errorf("tokens: decode keys: %w", err)
	}
	return k, nil
}

// clone returns a deep copy of k.
func (k Keys) clone() Keys {
	c := k
	c.AMRM = k.AMRM.clone()
	c.NMToken = k.NMToken.clone()
	c.ContainerToken = k.ContainerToken.clone()
	c.NMTokenPins = slices.Clone(k.NMTokenPins)
	c.ClientToAMRoot = bytes.Clone(k.ClientToAMRoot)
	c.Delegation = k.Delegation.clone()
	return c
}

func (m *MasterKey) clone() *MasterKey {
	if m == nil {
		return nil
	}
	return &MasterKey{ID: m.ID, Secret: bytes.Clone(m.Secret)}
}

func (r KeyRing) clone() KeyRing {
	c := r
	c.Current = r.Current.clone()
	c.Next = r.Next.clone()
	c.Retired = make([]RetiredKey, len(r.Retired))
	for i, k := range r.Retired {
		c.Retired[i] = RetiredKey{MasterKey: *k.MasterKey.clone(), DropAt: k.DropAt}
	}
	if len(c.Retired) == 0 {
		c.Retired = nil
	}
	return c
}

func (d DelegationSet) clone() DelegationSet {
	c := d
	c.Keys = make([]DelegationKey, len(d.Keys))
	for i, k := range d.Keys {
		c.Keys[i] = DelegationKey{MasterKey: *k.MasterKey.clone(), Expiry: k.Expiry}
	}
	c.Tokens = make([]StoredDelegationToken, len(d.Tokens))
	for i, t := range d.Tokens {
		c.Tokens[i] = StoredDelegationToken{Identifier: bytes.Clone(t.Identifier), RenewDate: t.RenewDate}
	}
	if len(c.Keys) == 0 {
		c.Keys = nil
	}
	if len(c.Tokens) == 0 {
		c.Tokens = nil
	}
	return c
}

// password is Hadoop's SecretManager.createPassword: HMAC-SHA1 of the
// identifier bytes under the key.
func password(secret, identifier []byte) []byte {
	mac := hmac.New(sha1.New, secret)
	mac.Write(identifier)
	return mac.Sum(nil)
}
