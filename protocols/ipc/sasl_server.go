package ipc

import (
	"encoding/base64"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/digestmd5"
)

// SASL names as Hadoop puts them on the wire (SaslRpcServer.AuthMethod).
const (
	saslMethodSimple = "SIMPLE"
	saslMethodToken  = "TOKEN"
	mechanismDigest  = "DIGEST-MD5"
	saslServerID     = digestmd5.DefaultServerName
)

// saslState is the server side of one connection's SASL negotiation.
type saslState struct {
	sentNegotiate bool
	mech          *digestmd5.Server
	done          bool
	identifier    []byte
	secret        Secret
}

// advertised is what the server offers, in Hadoop's order: TOKEN first (its
// challenge rides in the NEGOTIATE answer), then SIMPLE.
func (s *Server) advertised() []*commonpb.RpcSaslProto_SaslAuth {
	var auths []*commonpb.RpcSaslProto_SaslAuth
	if s.cfg.Tokens != nil {
		auths = append(auths, &commonpb.RpcSaslProto_SaslAuth{
			Method:    proto.String(saslMethodToken),
			Mechanism: proto.String(mechanismDigest),
			Protocol:  proto.String(""),
			ServerId:  proto.String(saslServerID),
		})
	}
	if s.cfg.Simple {
		auths = append(auths, &commonpb.RpcSaslProto_SaslAuth{
			Method:    proto.String(saslMethodSimple),
			Mechanism: proto.String(""),
		})
	}
	return auths
}

// enabledMethods renders the methods as Java's List.toString does.
func (s *Server) enabledMethods() string {
	var names []string
	for _, a := range s.advertised() {
		names = append(names, a.GetMethod())
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func saslFatal(className, format string, args ...any) *RemoteError {
	return fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, className, format, args...)
}

// processSASL runs one step of the negotiation, following Hadoop's
// Server.saslProcess: NEGOTIATE once, then INITIATE (and RESPONSE while the
// mechanism wants more), each failure fatal to the connection.
func (c *conn) processSASL(rest []byte) *RemoteError {
	var msg commonpb.RpcSaslProto
	if _, err := unmarshalDelimited(rest, &msg); err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "Error decoding RpcSaslProto: %v", err)
	}
	if c.sasl.done {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, ClassSaslException, "Negotiation is already complete")
	}
	switch state := msg.GetState(); state {
	case commonpb.RpcSaslProto_WRAP:
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, ClassSaslException, "Server is not wrapping data")
	case commonpb.RpcSaslProto_NEGOTIATE:
		if c.sasl.sentNegotiate {
			return saslFatal(ClassAccessControl, "Client already attempted negotiation")
		}
		return c.sendNegotiate()
	case commonpb.RpcSaslProto_INITIATE:
		if len(msg.GetAuths()) != 1 {
			return saslFatal(ClassSaslException, "Client mechanism is malformed")
		}
		chosen := msg.GetAuths()[0]
		if !c.srv.offers(chosen) {
			if c.sasl.sentNegotiate {
				return saslFatal(ClassAccessControl, "%s authentication is not enabled.  Available:%s",
					chosen.GetMethod(), c.srv.enabledMethods())
			}
			return c.sendNegotiate()
		}
		if chosen.GetMethod() == saslMethodSimple {
			// Hadoop answers nothing: the next frame is the connection context.
			c.authProtocol = authProtocolNone
			return nil
		}
		if c.sasl.mech == nil {
			if rerr := c.newDigestServer(); rerr != nil {
				return rerr
			}
			if _, err := c.sasl.mech.Challenge(); err != nil {
				return saslFatal(ClassSaslException, "DIGEST-MD5: %v", err)
			}
		}
		return c.evaluateToken(&msg)
	case commonpb.RpcSaslProto_RESPONSE:
		if c.sasl.mech == nil {
			return saslFatal(ClassSaslException, "Client sent RESPONSE before INITIATE")
		}
		return c.evaluateToken(&msg)
	default:
		return saslFatal(ClassSaslException, "Client sent unsupported state %s", state)
	}
}

// offers reports whether a client's chosen auth is one advertised, compared
// whole but for the challenge, as Java's List.contains does.
func (s *Server) offers(chosen *commonpb.RpcSaslProto_SaslAuth) bool {
	c := proto.Clone(chosen).(*commonpb.RpcSaslProto_SaslAuth)
	c.Challenge = nil
	for _, a := range s.advertised() {
		if proto.Equal(a, c) {
			return true
		}
	}
	return false
}

func (c *conn) sendNegotiate() *RemoteError {
	c.sasl.sentNegotiate = true
	auths := c.srv.advertised()
	if c.srv.cfg.Tokens == nil {
		// A SIMPLE-only server answers SUCCESS, which tells the client to go on
		// without SASL.
		c.authProtocol = authProtocolNone
		return c.sendSASL(&commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_SUCCESS.Enum()})
	}
	if rerr := c.newDigestServer(); rerr != nil {
		return rerr
	}
	challenge, err := c.sasl.mech.Challenge()
	if err != nil {
		return saslFatal(ClassSaslException, "DIGEST-MD5: %v", err)
	}
	auths[0].Challenge = challenge
	return c.sendSASL(&commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum(), Auths: auths})
}

func (c *conn) newDigestServer() *RemoteError {
	mech, err := digestmd5.NewServer(digestmd5.ServerConfig{Lookup: c.lookupPassword, Nonce: c.srv.nonce})
	if err != nil {
		return saslFatal(ClassSaslException, "DIGEST-MD5: %v", err)
	}
	c.sasl.mech = mech
	return nil
}

// lookupPassword turns a DIGEST-MD5 username back into the token identifier
// and returns the base64 of its password, the string Hadoop's clients use as
// the DIGEST password.
func (c *conn) lookupPassword(username string) (string, error) {
	id, err := base64.StdEncoding.DecodeString(username)
	if err != nil {
		return "", Errorf(ClassInvalidToken, "token identifier is not base64: %v", err)
	}
	secret, err := c.srv.cfg.Tokens(c.ctx, id)
	if err != nil {
		return "", err
	}
	c.sasl.identifier = id
	c.sasl.secret = secret
	return base64.StdEncoding.EncodeToString(secret.Password), nil
}

func (c *conn) evaluateToken(msg *commonpb.RpcSaslProto) *RemoteError {
	if msg.Token == nil {
		return saslFatal(ClassSaslException, "Client did not send a token")
	}
	final, err := c.sasl.mech.Evaluate(msg.GetToken())
	if err != nil {
		// The lookup's own verdict (InvalidToken, StandbyException, …) is the
		// true cause Hadoop reports; anything else is a SASL failure.
		var je JavaError
		if errors.As(err, &je) {
			return saslFatal(je.JavaClass(), "%s", je.JavaMessage())
		}
		return saslFatal(ClassSaslException, "%v", err)
	}
	c.sasl.done = true
	c.sasl.mech = nil
	return c.sendSASL(&commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_SUCCESS.Enum(), Token: final})
}

// sendSASL answers a SASL step: callId -33, an empty client id, no retry.
func (c *conn) sendSASL(msg *commonpb.RpcSaslProto) *RemoteError {
	hdr := &commonpb.RpcResponseHeaderProto{
		CallId:              wireCallID(callIDSASL),
		Status:              commonpb.RpcResponseHeaderProto_SUCCESS.Enum(),
		ServerIpcVersionNum: proto.Uint32(currentVersion),
		ClientId:            []byte{},
		RetryCount:          proto.Int32(-1),
	}
	if err := c.send(hdr, msg); err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_UNKNOWN, ClassIOException, "send SASL reply: %v", err)
	}
	return nil
}
