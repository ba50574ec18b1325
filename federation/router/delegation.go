package router

import (
	"context"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// YARN's Router issues, renews and cancels RM delegation tokens itself,
// signed by its RouterDelegationTokenSecretManager, whose keys and tokens
// it keeps in the federation store; no sub-cluster sees the call. The
// Router has no such secret manager (nor a port that would take a token
// for authentication), so it answers as YARN's Router does a caller it
// may not give tokens to (RouterServerUtil.isAllowedDelegationTokenOp
// false): a YarnException caused by an IOException, as a knit-rm without
// a token manager answers too.

// delegationRefused is the Router's YarnException for a delegation token
// call, verb being "issued", "renewed" or "cancelled", with the message
// of FederationClientInterceptor's IOException for each.
func delegationRefused(verb string) error {
	msg := "Delegation Token can be " + verb + " only with kerberos authentication"
	if verb == "issued" {
		msg += "."
	}
	return yarnerr.YarnException.Wrap(yarnerr.IOException.New(msg))
}

// GetDelegationToken refuses; see delegationRefused.
func (r *Router) GetDelegationToken(context.Context, *commonpb.GetDelegationTokenRequestProto) (*commonpb.GetDelegationTokenResponseProto, error) {
	return nil, delegationRefused("issued")
}

// RenewDelegationToken refuses; see delegationRefused.
func (r *Router) RenewDelegationToken(context.Context, *commonpb.RenewDelegationTokenRequestProto) (*commonpb.RenewDelegationTokenResponseProto, error) {
	return nil, delegationRefused("renewed")
}

// CancelDelegationToken refuses; see delegationRefused.
func (r *Router) CancelDelegationToken(context.Context, *commonpb.CancelDelegationTokenRequestProto) (*commonpb.CancelDelegationTokenResponseProto, error) {
	return nil, delegationRefused("cancelled")
}
