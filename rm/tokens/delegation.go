package tokens

import (
	"bytes"
	"context"
	"crypto/hmac"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// KindRMDelegation is the kind of RM delegation tokens
// (RMDelegationTokenIdentifier.KIND_NAME).
const KindRMDelegation = "RM_DELEGATION_TOKEN"

// DelegationTokenIdentifier is an RMDelegationTokenIdentifier. Times are
// milliseconds since the epoch, as Java keeps them.
type DelegationTokenIdentifier struct {
	Owner, Renewer, RealUser string
	IssueDate, MaxDate       int64
	SequenceNumber           int32
	MasterKeyID              int32
}

// Bytes returns the identifier as Hadoop 3 writes it: a
// YARNDelegationTokenIdentifierProto in which only the fields that differ
// from their defaults are set. YARNDelegationTokenIdentifier.setBuilderFields
// copies a field into a fresh builder only when it differs from the
// builder's value, so an empty realUser or a zero date is absent, not
// present and empty; that changes the bytes, hence the password.
func (id DelegationTokenIdentifier) Bytes() []byte {
	p := &yarnpb.YARNDelegationTokenIdentifierProto{}
	if id.Owner != "" {
		p.Owner = proto.String(id.Owner)
	}
	if id.Renewer != "" {
		p.Renewer = proto.String(id.Renewer)
	}
	if id.RealUser != "" {
		p.RealUser = proto.String(id.RealUser)
	}
	if id.IssueDate != 0 {
		p.IssueDate = proto.Int64(id.IssueDate)
	}
	if id.MaxDate != 0 {
		p.MaxDate = proto.Int64(id.MaxDate)
	}
	if id.SequenceNumber != 0 {
		p.SequenceNumber = proto.Int32(id.SequenceNumber)
	}
	if id.MasterKeyID != 0 {
		p.MasterKeyId = proto.Int32(id.MasterKeyID)
	}
	// Marshalling a message with no required fields cannot fail.
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	return b
}

// ParseDelegationTokenIdentifier reads identifier bytes Bytes (or a Hadoop
// 3 RM) wrote. Absent fields read as their defaults, as Java's getters do.
func ParseDelegationTokenIdentifier(b []byte) (DelegationTokenIdentifier, error) {
	var p yarnpb.YARNDelegationTokenIdentifierProto
	if err := proto.Unmarshal(b, &p); err != nil {
		return DelegationTokenIdentifier{}, fmt.Errorf("tokens: parse delegation token identifier: %w", err)
	}
	return DelegationTokenIdentifier{
		Owner:          p.GetOwner(),
		Renewer:        p.GetRenewer(),
		RealUser:       p.GetRealUser(),
		IssueDate:      p.GetIssueDate(),
		MaxDate:        p.GetMaxDate(),
		SequenceNumber: p.GetSequenceNumber(),
		MasterKeyID:    p.GetMasterKeyId(),
	}, nil
}

// String is AbstractDelegationTokenIdentifier.toString, which Hadoop's
// error messages quote.
func (id DelegationTokenIdentifier) String() string {
	return fmt.Sprintf("%s owner=%s, renewer=%s, realUser=%s, issueDate=%d, maxDate=%d, sequenceNumber=%d, masterKeyId=%d",
		KindRMDelegation, id.Owner, id.Renewer, id.RealUser, id.IssueDate, id.MaxDate, id.SequenceNumber, id.MasterKeyID)
}

// formatTokenID is AbstractDelegationTokenSecretManager.formatTokenId.
func formatTokenID(id DelegationTokenIdentifier) string {
	return "(" + id.String() + ")"
}

// formatTime is Hadoop's Time.formatTime ("yyyy-MM-dd HH:mm:ss,SSSZ"),
// in UTC where Java would use the JVM's zone.
func formatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05,000-0700")
}

// DelegationTokens is the RM delegation token secret manager
// (RMDelegationTokenSecretManager): getDelegationToken, renew and cancel for
// ClientRMService, and the SASL check for clients that authenticate with
// such a token.
type DelegationTokens struct{ m *Manager }

// Delegation returns the RM delegation token secret manager.
func (m *Manager) Delegation() DelegationTokens { return DelegationTokens{m} }

// Issue signs a delegation token for owner (the caller's user name),
// renewable by renewer (shortened with Config.ShortName, as Hadoop stores
// it), with realUser set when owner is a proxy user. service is the RM
// client address, "ip:port". The token is saved before it is returned.
func (d DelegationTokens) Issue(ctx context.Context, owner, renewer, realUser, service string) (token.Token, DelegationTokenIdentifier, error) {
	var tok token.Token
	var id DelegationTokenIdentifier
	now := d.m.cfg.Clock.Now()
	err := d.m.update(ctx, func(k *Keys) (bool, error) {
		ds := &k.Delegation
		key := ds.key(ds.CurrentKeyID)
		if key == nil {
			return false, fmt.Errorf("tokens: no current delegation key")
		}
		ds.SequenceNumber++
		id = DelegationTokenIdentifier{
			Owner:          owner,
			Renewer:        d.m.cfg.ShortName(renewer),
			RealUser:       realUser,
			IssueDate:      now.UnixMilli(),
			MaxDate:        now.Add(d.m.cfg.Delegation.MaxLifetime).UnixMilli(),
			SequenceNumber: ds.SequenceNumber,
			MasterKeyID:    key.ID,
		}
		raw := id.Bytes()
		tok = token.Token{Identifier: raw, Password: password(key.Secret, raw), Kind: KindRMDelegation, Service: service}
		ds.Tokens = append(ds.Tokens, StoredDelegationToken{Identifier: raw, RenewDate: now.Add(d.m.cfg.Delegation.RenewInterval)})
		return true, nil
	})
	if err != nil {
		return token.Token{}, DelegationTokenIdentifier{}, err
	}
	return tok, id, nil
}

// ShortName is the user name renewers are compared by for principal
// (Config.ShortName): what a caller renews as.
func (d DelegationTokens) ShortName(principal string) string { return d.m.cfg.ShortName(principal) }

// Renew extends a token for renewer (the caller's short user name) and
// returns its new expiry, checking what renewToken checks, in its order and
// with its messages: maximum lifetime, renewer, key, password, known token.
func (d DelegationTokens) Renew(ctx context.Context, tok token.Token, renewer string) (time.Time, error) {
	id, err := ParseDelegationTokenIdentifier(tok.Identifier)
	if err != nil {
		return time.Time{}, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	now := d.m.cfg.Clock.Now()
	nowMs := now.UnixMilli()
	var renewed time.Time
	err = d.m.update(ctx, func(k *Keys) (bool, error) {
		if id.MaxDate < nowMs {
			return false, yarnerr.InvalidToken.Errorf("%s tried to renew an expired token %s max expiration date: %s currentTime: %s",
				renewer, formatTokenID(id), formatTime(id.MaxDate), formatTime(nowMs))
		}
		if id.Renewer == "" {
			return false, yarnerr.AccessControl.Errorf("%s tried to renew a token %s without a renewer", renewer, formatTokenID(id))
		}
		if id.Renewer != renewer {
			return false, yarnerr.AccessControl.Errorf("%s tries to renew a token %s with non-matching renewer %s",
				renewer, formatTokenID(id), id.Renewer)
		}
		key := k.Delegation.key(id.MasterKeyID)
		if key == nil {
			return false, yarnerr.InvalidToken.Errorf("Unable to find master key for keyId=%d from cache. Failed to renew an unexpired token %s with sequenceNumber=%d",
				id.MasterKeyID, formatTokenID(id), id.SequenceNumber)
		}
		if !hmac.Equal(password(key.Secret, tok.Identifier), tok.Password) {
			return false, yarnerr.AccessControl.Errorf("%s is trying to renew a token %s with wrong password", renewer, formatTokenID(id))
		}
		i := k.Delegation.tokenIndex(id)
		if i < 0 {
			return false, yarnerr.InvalidToken.Errorf("Renewal request for unknown token %s", formatTokenID(id))
		}
		renewed = time.UnixMilli(min(id.MaxDate, now.Add(d.m.cfg.Delegation.RenewInterval).UnixMilli())).UTC()
		k.Delegation.Tokens[i].RenewDate = renewed
		return true, nil
	})
	if err != nil {
		return time.Time{}, err
	}
	return renewed, nil
}

// Cancel forgets a token at the request of canceller (the caller's full user
// name), who must be its owner or its renewer, and returns its identifier.
func (d DelegationTokens) Cancel(ctx context.Context, tok token.Token, canceller string) (DelegationTokenIdentifier, error) {
	id, err := ParseDelegationTokenIdentifier(tok.Identifier)
	if err != nil {
		return DelegationTokenIdentifier{}, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	err = d.m.update(ctx, func(k *Keys) (bool, error) {
		if id.Owner == "" {
			return false, yarnerr.InvalidToken.Errorf("Token with no owner %s", formatTokenID(id))
		}
		if canceller != id.Owner && (id.Renewer == "" || d.m.cfg.ShortName(canceller) != id.Renewer) {
			return false, yarnerr.AccessControl.Errorf("%s is not authorized to cancel the token %s", canceller, formatTokenID(id))
		}
		i := k.Delegation.tokenIndex(id)
		if i < 0 {
			return false, yarnerr.InvalidToken.Errorf("Token not found %s", formatTokenID(id))
		}
		k.Delegation.Tokens = slices.Delete(k.Delegation.Tokens, i, i+1)
		return true, nil
	})
	if err != nil {
		return DelegationTokenIdentifier{}, err
	}
	return id, nil
}

// RetrievePassword is checkToken plus the password: the token must be live
// and before its renew date.
func (d DelegationTokens) RetrievePassword(identifier []byte) (DelegationTokenIdentifier, []byte, error) {
	id, err := ParseDelegationTokenIdentifier(identifier)
	if err != nil {
		return DelegationTokenIdentifier{}, nil, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	e, ok := d.m.snap.Load().dt[id.SequenceNumber]
	if !ok || e.id != id {
		return id, nil, yarnerr.InvalidToken.Errorf("Token for real user: %s, can't be found in cache", id.RealUser)
	}
	now := d.m.cfg.Clock.Now()
	if e.renewDate.Before(now) {
		return id, nil, yarnerr.InvalidToken.Errorf("Token %s has expired, current time: %s expected renewal time: %s",
			id.RealUser, formatTime(now.UnixMilli()), formatTime(e.renewDate.UnixMilli()))
	}
	return id, bytes.Clone(e.password), nil
}

// Verify checks a token's password (verifyToken).
func (d DelegationTokens) Verify(tok token.Token) (DelegationTokenIdentifier, error) {
	id, pw, err := d.RetrievePassword(tok.Identifier)
	if err != nil {
		return id, err
	}
	if !hmac.Equal(pw, tok.Password) {
		return id, yarnerr.InvalidToken.Errorf("token %s is invalid, password doesn't match", formatTokenID(id))
	}
	return id, nil
}

// SecretLookup returns the check the client port's ipc.Server runs for
// clients that authenticate with an RM delegation token. The caller's user
// is the token's owner, and its real user the token's real user when that
// is another (a token issued to a proxy user); the identity is its
// DelegationTokenIdentifier.
func (d DelegationTokens) SecretLookup() ipc.SecretLookup {
	return func(ctx context.Context, identifier []byte) (ipc.Secret, error) {
		id, pw, err := d.RetrievePassword(identifier)
		if err != nil && d.m.cfg.Shared {
			// Another Manager of the store may have issued or renewed the
			// token since this one last read it.
			if lerr := d.m.reload(ctx); lerr != nil {
				return ipc.Secret{}, lerr
			}
			id, pw, err = d.RetrievePassword(identifier)
		}
		if err != nil {
			return ipc.Secret{}, err
		}
		return ipc.Secret{Password: pw, User: id.Owner, RealUser: id.proxiedBy(), Identity: id}, nil
	}
}

// proxiedBy is the real user behind the owner, as Hadoop's
// AbstractDelegationTokenIdentifier.getUser makes a proxy user of the
// owner only when the real user is set and another: empty otherwise.
func (id DelegationTokenIdentifier) proxiedBy() string {
	if id.RealUser == id.Owner {
		return ""
	}
	return id.RealUser
}

// key returns the delegation key with id, or nil.
func (d *DelegationSet) key(id int32) *DelegationKey {
	for i := range d.Keys {
		if d.Keys[i].ID == id {
			return &d.Keys[i]
		}
	}
	return nil
}

// tokenIndex returns where the token id is stored, or -1. Tokens are equal
// when their identifiers are (Java keys currentTokens by identifier).
func (d *DelegationSet) tokenIndex(id DelegationTokenIdentifier) int {
	for i, t := range d.Tokens {
		if got, err := ParseDelegationTokenIdentifier(t.Identifier); err == nil && got == id {
			return i
		}
	}
	return -1
}

// rollDelegation is ExpiredTokenRemover's work: roll the key when its
// interval has passed (retiring keys past their expiry and giving the old
// current key its final expiry), and drop tokens past their renew date.
func (m *Manager) rollDelegation(d *DelegationSet, now time.Time) (bool, error) {
	p := m.cfg.Delegation
	changed := false
	cur := d.key(d.CurrentKeyID)
	if cur != nil && !now.Before(d.LastRoll.Add(p.KeyUpdateInterval)) {
		// rollMasterKey: the retiring key lives until the last token it
		// signed can no longer be used.
		cur.Expiry = now.Add(p.MaxLifetime)
		cur = nil
	}
	if cur == nil {
		secret, err := m.newSecret()
		if err != nil {
			return false, err
		}
		d.LastKeyID++
		d.Keys = append(d.Keys, DelegationKey{
			MasterKey: MasterKey{ID: d.LastKeyID, Secret: secret},
			Expiry:    now.Add(p.KeyUpdateInterval + p.MaxLifetime),
		})
		d.CurrentKeyID = d.LastKeyID
		d.LastRoll = now
		changed = true
	}
	n := len(d.Keys)
	d.Keys = slices.DeleteFunc(d.Keys, func(k DelegationKey) bool {
		return k.ID != d.CurrentKeyID && k.Expiry.Before(now)
	})
	n2 := len(d.Tokens)
	d.Tokens = slices.DeleteFunc(d.Tokens, func(t StoredDelegationToken) bool {
		return t.RenewDate.Before(now) || !d.hasKeyFor(t.Identifier)
	})
	if len(d.Keys) != n || len(d.Tokens) != n2 {
		changed = true
	}
	return changed, nil
}

// hasKeyFor reports whether the key that signed a stored token is kept.
func (d *DelegationSet) hasKeyFor(identifier []byte) bool {
	id, err := ParseDelegationTokenIdentifier(identifier)
	return err == nil && d.key(id.MasterKeyID) != nil
}
