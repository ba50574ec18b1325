package tokens

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// KindClientToAM is the kind of ClientToAM tokens
// (ClientToAMTokenIdentifier.KIND_NAME).
const KindClientToAM = "YARN_CLIENT_TOKEN"

// clientToAMLabel separates ClientToAM key derivation from any other use of
// the root secret.
const clientToAMLabel = "knit client-to-am master key\x00"

// ClientToAMTokens is the ClientToAM token secret manager
// (ClientToAMTokenSecretManagerInRM). Each attempt has its own master key,
// sent to the AM in RegisterApplicationMasterResponseProto's
// client_to_am_token_master_key; the RM signs tokens with it for clients
// (ApplicationReportProto.client_to_am_token), and the AM checks them.
//
// Hadoop draws a random key per attempt and stores it with the attempt.
// Here the key is HMAC-SHA1(root, label ‖ attempt id string): the AM cannot
// tell the difference, nothing per attempt needs storing, and knowing one
// attempt's key tells nothing of another's or of the root.
type ClientToAMTokens struct{ m *Manager }

// ClientToAM returns the ClientToAM token secret manager.
func (m *Manager) ClientToAM() ClientToAMTokens { return ClientToAMTokens{m} }

// MasterKey returns the attempt's master key, the raw bytes Java's
// ClientToAMTokenSecretManager turns into its HmacSHA1 key.
func (c ClientToAMTokens) MasterKey(attempt *yarnpb.ApplicationAttemptIdProto) []byte {
	return password(c.m.snap.Load().keys.ClientToAMRoot, []byte(clientToAMLabel+AttemptString(attempt)))
}

// Create signs a token for client (the user asking for the application
// report) to use with the attempt's AM. Its service is empty: the client
// sets the AM's address itself.
func (c ClientToAMTokens) Create(attempt *yarnpb.ApplicationAttemptIdProto, client string) token.Token {
	id := &yarnpb.ClientToAMTokenIdentifierProto{AppAttemptId: attemptProto(attempt), ClientName: proto.String(client)}
	raw := marshal(id)
	return token.Token{Identifier: raw, Password: password(c.MasterKey(attempt), raw), Kind: KindClientToAM, Service: ""}
}

// RetrievePassword is BaseClientToAMTokenSecretManager.retrievePassword, for
// an AM Knit runs itself: the attempt must be live.
func (c ClientToAMTokens) RetrievePassword(ctx context.Context, identifier []byte) (*yarnpb.ClientToAMTokenIdentifierProto, []byte, error) {
	var id yarnpb.ClientToAMTokenIdentifierProto
	if err := proto.Unmarshal(identifier, &id); err != nil || id.GetAppAttemptId().GetApplicationId() == nil {
		return nil, nil, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	if !c.m.cfg.AttemptValid(ctx, id.GetAppAttemptId()) {
		return &id, nil, yarnerr.InvalidToken.Errorf("Illegal client-token!")
	}
	return &id, password(c.MasterKey(id.GetAppAttemptId()), identifier), nil
}

// SecretLookup returns the check an AM's ipc.Server runs for its clients.
// The caller's user is the token's client name.
func (c ClientToAMTokens) SecretLookup() ipc.SecretLookup {
	return func(ctx context.Context, identifier []byte) (ipc.Secret, error) {
		id, pw, err := c.RetrievePassword(ctx, identifier)
		if err != nil {
			return ipc.Secret{}, err
		}
		return ipc.Secret{Password: pw, User: id.GetClientName(), Identity: id}, nil
	}
}
