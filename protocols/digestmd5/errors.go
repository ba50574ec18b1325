package digestmd5

import "errors"

// Errors returned by Server and Client, always wrapped with details. The RPC
// layer answers every one of them with a fatal SaslException; they are told
// apart for logs and tests.
var (
	// ErrTooLong reports input longer than the limit the JDK also applies
	// (4096 bytes for a response, 2048 for a challenge or final message).
	ErrTooLong = errors.New("digestmd5: message too long")
	// ErrMalformed reports a syntax error, a missing or repeated directive,
	// or a value of the wrong form.
	ErrMalformed = errors.New("digestmd5: malformed message")
	// ErrUnsupported reports a well-formed request for something this
	// implementation does not do, such as qop auth-int or auth-conf.
	ErrUnsupported = errors.New("digestmd5: unsupported")
	// ErrInvalidResponse reports a response that does not answer this
	// server's challenge: another nonce (a replay), realm or digest-uri, a
	// nonce count other than 1, or an authzid other than the username.
	ErrInvalidResponse = errors.New("digestmd5: invalid response")
	// ErrAuthFailed reports a digest that does not match: a wrong password
	// on the server, a wrong rspauth on the client.
	ErrAuthFailed = errors.New("digestmd5: authentication failed")
	// ErrState reports a call out of order, or a second use of a Server or
	// Client, which each serve exactly one exchange.
	ErrState = errors.New("digestmd5: call out of order")
)
