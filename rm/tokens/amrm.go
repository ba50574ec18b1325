package tokens

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// KindAMRM is the kind of AMRMTokens (AMRMTokenIdentifier.KIND_NAME).
const KindAMRM = "YARN_AM_RM_TOKEN"

// AMRMTokens is the AMRMToken secret manager (AMRMTokenSecretManager): one
// token per application attempt, presented over SASL on the scheduler port.
type AMRMTokens struct{ m *Manager }

// AMRM returns the AMRMToken secret manager.
func (m *Manager) AMRM() AMRMTokens { return AMRMTokens{m} }

// Create signs an AMRMToken for attempt under the next key if one is
// pending, else the current key, so a token handed out during a roll stays
// valid after activation. Its service is empty, as the RM's AMLauncher
// writes it into the AM's credentials; the AM's client sets the scheduler
// address itself.
func (a AMRMTokens) Create(attempt *yarnpb.ApplicationAttemptIdProto) token.Token {
	r := &a.m.snap.Load().keys.AMRM
	key := r.Next
	if key == nil {
		key = r.Current
	}
	return a.sign(attempt, key)
}

// Refresh answers ApplicationMasterService.allocate's key check: while a
// next key is pending, an AM whose token is under another key gets a new
// token (put it in AllocateResponseProto.am_rm_token); ok is false when the
// AM's token is already under the newest key.
func (a AMRMTokens) Refresh(presented *yarnpb.AMRMTokenIdentifierProto) (tok token.Token, ok bool) {
	next := a.m.snap.Load().keys.AMRM.Next
	if next == nil || presented.GetKeyId() == next.ID {
		return token.Token{}, false
	}
	return a.sign(presented.GetAppAttemptId(), next), true
}

func (a AMRMTokens) sign(attempt *yarnpb.ApplicationAttemptIdProto, key *MasterKey) token.Token {
	id := &yarnpb.AMRMTokenIdentifierProto{AppAttemptId: attemptProto(attempt), KeyId: proto.Int32(key.ID)}
	raw := marshal(id)
	return token.Token{Identifier: raw, Password: password(key.Secret, raw), Kind: KindAMRM, Service: ""}
}

// RetrievePassword is AMRMTokenSecretManager.retrievePassword: the attempt
// must be live (Config.AttemptValid) and the token under the current or the
// next key.
func (a AMRMTokens) RetrievePassword(ctx context.Context, identifier []byte) (*yarnpb.AMRMTokenIdentifierProto, []byte, error) {
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(identifier, &id); err != nil || id.GetAppAttemptId().GetApplicationId() == nil {
		return nil, nil, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	if !a.m.cfg.AttemptValid(ctx, id.GetAppAttemptId()) {
		return &id, nil, yarnerr.InvalidToken.Errorf("%s not found in AMRMTokenSecretManager.", AttemptString(id.GetAppAttemptId()))
	}
	snap := a.m.snap.Load()
	key := snap.keys.AMRM.find(id.GetKeyId(), a.m.cfg.Clock.Now(), false, nil)
	if key == nil {
		return &id, nil, yarnerr.InvalidToken.Errorf("Invalid AMRMToken from %s", AttemptString(id.GetAppAttemptId()))
	}
	return &id, password(key.Secret, identifier), nil
}

// SecretLookup returns the check the scheduler port's ipc.Server runs. The
// caller's user is the attempt id string; the identity is the
// *yarnpb.AMRMTokenIdentifierProto, from which the AM service finds the
// attempt (and which it passes to Refresh).
func (a AMRMTokens) SecretLookup() ipc.SecretLookup {
	return func(ctx context.Context, identifier []byte) (ipc.Secret, error) {
		id, pw, err := a.RetrievePassword(ctx, identifier)
		if err != nil {
			return ipc.Secret{}, err
		}
		return ipc.Secret{Password: pw, User: AttemptString(id.GetAppAttemptId()), Identity: id}, nil
	}
}

// marshal writes an identifier proto as Java's toByteArray does: fields in
// number order, set fields only.
func marshal(m proto.Message) []byte {
	// The identifier messages have no required fields, so this cannot fail.
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return b
}
