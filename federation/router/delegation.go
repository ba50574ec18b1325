package router

import (
	"context"
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
// goes on to the sub-clusters as the token's owner.
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
// store's RouterKeys: it remembers the version it last read or wrote and
// saves over that version alone, so that a Router whose keys are stale
// gets tokens.ErrKeysChanged and redoes its change on the stored ones.
// Give it to a tokens.Manager with Config.Shared.
type KeyStore struct {
	store store.RouterKeys

	mu      sync.Mutex
	version string
}

var _ tokens.KeyStore = (*KeyStore)(nil)

// NewKeyStore returns the KeyStore over s.
func NewKeyStore(s store.RouterKeys) *KeyStore { return &KeyStore{store: s} }

// Load reads the stored keys; none stored is the zero Keys.
func (k *KeyStore) Load(ctx context.Context) (tokens.Keys, error) {
	data, version, err := k.store.GetRouterKeys(ctx)
	if err != nil {
		return tokens.Keys{}, err
	}
	keys, err := tokens.DecodeKeys(data)
	if err != nil {
		return tokens.Keys{}, err
	}
	k.mu.Lock()
	k.version = version
	k.mu.Unlock()
	return keys, nil
}

// Save replaces the keys last loaded or saved.
func (k *KeyStore) Save(ctx context.Context, keys tokens.Keys) error {
	data, err := tokens.EncodeKeys(keys)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	version, err := k.store.PutRouterKeys(ctx, data, k.version)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %w", tokens.ErrKeysChanged, err)
	}
	if err != nil {
		return err
	}
	k.version = version
	return nil
}
