package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/rm/tokens"
)

// YARN's Router issues, renews and cancels RM delegation tokens itself,
// signed by its RouterDelegationTokenSecretManager, whose keys and tokens
// it keeps in the federation store; no sub-cluster sees the call. Here
// that secret manager is rm/tokens' Manager, Shared over the store's
// RouterKeys (KeyStore), so that every Router of the federation honours
// the tokens any of them issued. The Router's client port accepts those
// tokens for authentication (SecretLookup), and a call so authenticated
// goes on to the sub-clusters as the token's owner, on behalf of the
// token's real user when it was issued to a proxy user: YARN's Router
// calls the sub-clusters as the caller's UGI (RouterServerUtil.setupUser),
// which for such a token is the owner proxied by the real user.
//
// Who may ask is RouterServerUtil.isAllowedDelegationTokenOp for Knit,
// which has no Kerberos: anyone but a caller that itself authenticated
// with a token, as knit-rm decides. A Router without a Manager refuses
// every caller, as YARN's Router refuses one it may not give tokens to.

// delegationRefused is the Router's YarnException for a delegation token
// call it may not serve, verb being "issued", "renewed" or "cancelled",
// with the message of FederationClientInterceptor's IOException for each.
func delegationRefused(verb string) error {
	msg := "Delegation Token can be " + verb + " only with kerberos authentication"
	if verb == "issued" {
		msg += "."
	}
	return yarnerr.YarnException.Wrap(yarnerr.IOException.New(msg))
}

// delegationCaller returns the caller of a delegation token call, and
// whether it may make one.
func (r *Router) delegationCaller(ctx context.Context) (ipc.Caller, bool) {
	c, _ := ipc.CallerFrom(ctx)
	return c, r.tokens != nil && c.Auth != ipc.AuthToken
}

// tokenError is FederationClientInterceptor's catch of an IOException: the
// secret manager's InvalidToken and AccessControlException, and a store
// failure, reach the caller inside a YarnException.
func tokenError(err error) error {
	if e, ok := yarnerr.Find(err); ok && e.Class == yarnerr.YarnException {
		return e
	}
	return yarnerr.YarnException.Wrap(err)
}

// noToken answers a renewal or cancellation that names no token, as
// knit-rm does.
func noToken() error { return yarnerr.YarnException.Wrap(yarnerr.IOException.New("no token given")) }

// GetDelegationToken issues an RM delegation token to the caller, for
// the renewer it names, with the Router's client address as its service.
func (r *Router) GetDelegationToken(ctx context.Context, req *commonpb.GetDelegationTokenRequestProto) (*commonpb.GetDelegationTokenResponseProto, error) {
	if req.Renewer == nil {
		return nil, yarnerr.YarnException.New("Missing getDelegationToken request or Renewer.")
	}
	c, ok := r.delegationCaller(ctx)
	if !ok {
		return nil, delegationRefused("issued")
	}
	tok, id, err := r.tokens.Delegation().Issue(ctx, c.User, req.GetRenewer(), c.RealUser, r.tokenService)
	if err != nil {
		return nil, tokenError(err)
	}
	r.log.Info("issued a delegation token", "owner", id.Owner, "renewer", id.Renewer, "sequenceNumber", id.SequenceNumber)
	return &commonpb.GetDelegationTokenResponseProto{Token: tok.Proto()}, nil
}

// RenewDelegationToken extends a token for the caller, its renewer
// (RouterServerUtil.getRenewerForToken: the caller's short name).
func (r *Router) RenewDelegationToken(ctx context.Context, req *commonpb.RenewDelegationTokenRequestProto) (*commonpb.RenewDelegationTokenResponseProto, error) {
	c, ok := r.delegationCaller(ctx)
	if !ok {
		return nil, delegationRefused("renewed")
	}
	if req.GetToken() == nil {
		return nil, noToken()
	}
	d := r.tokens.Delegation()
	exp, err := d.Renew(ctx, token.FromProto(req.GetToken()), d.ShortName(c.User))
	if err != nil {
		return nil, tokenError(err)
	}
	return &commonpb.RenewDelegationTokenResponseProto{NewExpiryTime: proto.Uint64(uint64(exp.UnixMilli()))}, nil
}

// CancelDelegationToken forgets a token at the request of its owner or
// renewer, for every Router of the federation.
func (r *Router) CancelDelegationToken(ctx context.Context, req *commonpb.CancelDelegationTokenRequestProto) (*commonpb.CancelDelegationTokenResponseProto, error) {
	c, ok := r.delegationCaller(ctx)
	if !ok {
		return nil, delegationRefused("cancelled")
	}
	if req.GetToken() == nil {
		return nil, noToken()
	}
	id, err := r.tokens.Delegation().Cancel(ctx, token.FromProto(req.GetToken()), c.User)
	if err != nil {
		return nil, tokenError(err)
	}
	r.log.Info("cancelled a delegation token", "owner", id.Owner, "by", c.User, "sequenceNumber", id.SequenceNumber)
	return &commonpb.CancelDelegationTokenResponseProto{}, nil
}

// KeyStore is the Routers' shared tokens.KeyStore over the federation
// store's RouterKeys: the master keys, current key id and sequence number
// in the keys record, each live token in a record of its own. It
// remembers the versions it last read or wrote and saves over those
// alone, so that a Router whose keys are stale gets tokens.ErrKeysChanged
// and redoes its change on the stored ones. A Save writes what changed
// since the Load before it: the keys record when the keys or the sequence
// number moved (an issue, a roll), and the records of the tokens issued,
// renewed, cancelled or dropped; the keys record first, so that a token's
// sequence number is taken before its record is written. Give it to a
// tokens.Manager with Config.Shared, which loads before every change.
type KeyStore struct {
	store store.RouterKeys

	mu sync.Mutex
	// version and head are the keys record as last read or written: its
	// version and its bytes without the tokens.
	version string
	head    []byte
	// inline holds the tokens the keys record itself held, as a Router of
	// before the tokens had records of their own wrote them: the next Save
	// moves them to their records.
	inline map[int32]bool
	// keysHoldTokens is whether the keys record still holds tokens, even
	// ones with records of their own (a move cut short after the records
	// were written): the next Save writes it without them, or a token
	// cancelled since would come back from it.
	keysHoldTokens bool
	// tokens are the token records last read or written, by sequence
	// number.
	tokens map[int32]store.RouterToken
}

var _ tokens.KeyStore = (*KeyStore)(nil)

// NewKeyStore returns the KeyStore over s.
func NewKeyStore(s store.RouterKeys) *KeyStore { return &KeyStore{store: s} }

// Load reads every token record, then the keys record; none stored is the
// zero Keys. In that order: a token's master key and sequence number are
// stored before its record, so the keys read after the records cover every
// token read, and a Router rolling from them never takes a token issued
// meanwhile under a key it has not seen for one whose key expired.
func (k *KeyStore) Load(ctx context.Context) (tokens.Keys, error) {
	records, err := k.store.GetRouterTokens(ctx)
	if err != nil {
		return tokens.Keys{}, err
	}
	data, version, err := k.store.GetRouterKeys(ctx)
	if err != nil {
		return tokens.Keys{}, err
	}
	keys, err := tokens.DecodeKeys(data)
	if err != nil {
		return tokens.Keys{}, err
	}
	keysHoldTokens := len(keys.Delegation.Tokens) > 0
	byRecord := make(map[int32]store.RouterToken, len(records))
	all := make([]tokens.StoredDelegationToken, 0, len(records)+len(keys.Delegation.Tokens))
	for _, r := range records {
		var t tokens.StoredDelegationToken
		if err := json.Unmarshal(r.Data, &t); err != nil {
			return tokens.Keys{}, fmt.Errorf("router: token record %d: %w", r.SequenceNumber, err)
		}
		byRecord[r.SequenceNumber] = r
		all = append(all, t)
	}
	inline := map[int32]bool{}
	for _, t := range keys.Delegation.Tokens {
		seq, err := sequenceNumber(t)
		if err != nil {
			return tokens.Keys{}, err
		}
		if _, ok := byRecord[seq]; !ok { // a record, once written, is the token
			inline[seq] = true
			all = append(all, t)
		}
	}
	keys.Delegation.Tokens = all
	head, err := encodeHead(keys)
	if err != nil {
		return tokens.Keys{}, err
	}
	k.mu.Lock()
	k.version, k.head, k.inline, k.tokens, k.keysHoldTokens = version, head, inline, byRecord, keysHoldTokens
	k.mu.Unlock()
	return keys, nil
}

// Save writes what changed since the keys last loaded or saved.
func (k *KeyStore) Save(ctx context.Context, keys tokens.Keys) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tokens == nil { // saved before any load: nothing is known stored
		k.tokens = map[int32]store.RouterToken{}
	}
	want := make(map[int32][]byte, len(keys.Delegation.Tokens))
	for _, t := range keys.Delegation.Tokens {
		seq, err := sequenceNumber(t)
		if err != nil {
			return err
		}
		data, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("router: encode token %d: %w", seq, err)
		}
		want[seq] = data
	}
	// Tokens the keys record held go to their records before the keys
	// record is written without them.
	for seq := range k.inline {
		if data, ok := want[seq]; ok {
			if err := k.putToken(ctx, seq, data); err != nil {
				return err
			}
		}
	}
	head, err := encodeHead(keys)
	if err != nil {
		return err
	}
	if k.keysHoldTokens || !bytes.Equal(head, k.head) {
		version, err := k.store.PutRouterKeys(ctx, head, k.version)
		if err != nil {
			return changed(err)
		}
		k.version, k.head, k.inline, k.keysHoldTokens = version, head, nil, false
	}
	for seq, data := range want {
		if r, ok := k.tokens[seq]; !ok || !bytes.Equal(r.Data, data) {
			if err := k.putToken(ctx, seq, data); err != nil {
				return err
			}
		}
	}
	for seq, r := range k.tokens {
		if _, ok := want[seq]; ok {
			continue
		}
		if err := k.store.DeleteRouterToken(ctx, seq, r.Version); err != nil {
			return changed(err)
		}
		delete(k.tokens, seq)
	}
	return nil
}

// putToken writes token seq's record over the version last read or
// written, with k.mu held.
func (k *KeyStore) putToken(ctx context.Context, seq int32, data []byte) error {
	r := store.RouterToken{SequenceNumber: seq, Data: data, Version: k.tokens[seq].Version}
	version, err := k.store.PutRouterToken(ctx, r)
	if err != nil {
		return changed(err)
	}
	r.Version = version
	k.tokens[seq] = r
	return nil
}

// changed is err, as tokens.ErrKeysChanged when another Router wrote
// first.
func changed(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %w", tokens.ErrKeysChanged, err)
	}
	return err
}

// encodeHead is the keys record of keys: everything but the tokens.
func encodeHead(keys tokens.Keys) ([]byte, error) {
	keys.Delegation.Tokens = nil
	return tokens.EncodeKeys(keys)
}

// sequenceNumber is a stored token's, its record's key.
func sequenceNumber(t tokens.StoredDelegationToken) (int32, error) {
	id, err := tokens.ParseDelegationTokenIdentifier(t.Identifier)
	if err != nil {
		return 0, fmt.Errorf("router: stored token: %w", err)
	}
	return id.SequenceNumber, nil
}
