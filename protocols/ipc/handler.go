package ipc

import (
	"context"
	"net"

	"google.golang.org/protobuf/proto"
)

// AuthMethod is how a connection's caller was authenticated.
type AuthMethod int

const (
	// AuthSimple trusts the user named in the connection context.
	AuthSimple AuthMethod = iota + 1
	// AuthToken proved possession of a token's password over SASL DIGEST-MD5.
	AuthToken
)

func (m AuthMethod) String() string {
	switch m {
	case AuthSimple:
		return "SIMPLE"
	case AuthToken:
		return "TOKEN"
	}
	return "UNKNOWN"
}

// Caller is what a handler knows of who is calling and on which connection.
type Caller struct {
	// User is the effective user: the context's user under SIMPLE auth, the
	// token's user (for example an application attempt id) under TOKEN auth.
	User string
	// RealUser is the authenticated user behind a proxy user, if any.
	RealUser string
	Auth     AuthMethod
	// TokenIdentifier is the raw identifier of the token used under TOKEN
	// auth, and TokenIdentity what the server's SecretLookup made of it.
	TokenIdentifier []byte
	TokenIdentity   any
	// Protocol is the protocol named in the connection context.
	Protocol   string
	RemoteAddr net.Addr
	ClientID   []byte
	CallID     int32
	RetryCount int32
}

type callerKey struct{}

// CallerFrom returns the caller of the RPC whose context ctx is.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	if !ok {
		return Caller{}, false
	}
	return *c, true
}

// WithCaller returns a context carrying c, for tests of handlers that read it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, &c)
}

// Method is one RPC handler, made by Handle or HandleRaw.
type Method struct {
	name       string
	newRequest func() proto.Message
	// keepRequest hands the handler the request's encoding too.
	keepRequest bool
	call        func(ctx context.Context, req proto.Message, encoded []byte) (answer, error)
}

// answer is a handler's response: a message the engine encodes, or (when
// encoded is not nil) a message encoded already.
type answer struct {
	msg     proto.Message
	encoded []byte
	// parts, when encoded is nil, is an encoded answer in pieces, sent one
	// after the other: one kept per element of a long repeated field.
	parts [][]byte
}

// encodedLen is the length of the answer's encoding given as bytes (encoded
// or parts), -1 when it has none.
func (a answer) encodedLen() int {
	switch {
	case a.encoded != nil:
		return len(a.encoded)
	case a.parts != nil:
		n := 0
		for _, p := range a.parts {
			n += len(p)
		}
		return n
	}
	return -1
}

// Name is the Hadoop method name the handler answers.
func (m Method) Name() string { return m.name }

// Handle makes the handler of a method from a typed function. The method
// name is the rpc name of the Hadoop service (for example "getNewApplication").
func Handle[Req, Resp proto.Message](name string, fn func(context.Context, Req) (Resp, error)) Method {
	var zero Req
	typ := zero.ProtoReflect().Type()
	return Method{
		name:       name,
		newRequest: func() proto.Message { return typ.New().Interface() },
		call: func(ctx context.Context, req proto.Message, _ []byte) (answer, error) {
			resp, err := fn(ctx, req.(Req))
			if err != nil {
				return answer{}, err
			}
			return answer{msg: resp}, nil
		},
	}
}

// HandleRaw makes the handler of a method that forwards its calls: fn gets
// the request decoded (the engine decodes every request, so one it cannot
// read is refused as any other method refuses it) and as the caller encoded
// it, and answers the response's encoding, which the engine sends as it is.
// A proxy forwards both encodings untouched and decodes only what routes
// the call. The request's bytes are fn's own; a nil answer is the empty
// message.
func HandleRaw[Req proto.Message](name string, fn func(ctx context.Context, req Req, encoded []byte) ([]byte, error)) Method {
	return rawMethod(name, func(ctx context.Context, req Req, encoded []byte) (answer, error) {
		resp, err := fn(ctx, req, encoded)
		if resp == nil {
			resp = []byte{}
		}
		return answer{encoded: resp}, err
	})
}

// rawMethod is a method whose requests are decoded and also kept as the
// caller encoded them, answered by call.
func rawMethod[Req proto.Message](name string, call func(ctx context.Context, req Req, encoded []byte) (answer, error)) Method {
	var zero Req
	typ := zero.ProtoReflect().Type()
	return Method{
		name:        name,
		newRequest:  func() proto.Message { return typ.New().Interface() },
		keepRequest: true,
		call: func(ctx context.Context, req proto.Message, encoded []byte) (answer, error) {
			a, err := call(ctx, req.(Req), encoded)
			if err != nil {
				return answer{}, err
			}
			return a, nil
		},
	}
}

// HandleRawParts is HandleRaw with the answer's encoding in parts, which
// the engine sends one after the other as one message: an answer made of
// kept encodings of its elements (a thousand nodes' reports) goes out
// without joining them first. A nil answer is the empty message.
func HandleRawParts[Req proto.Message](name string, fn func(ctx context.Context, req Req, encoded []byte) ([][]byte, error)) Method {
	return rawMethod(name, func(ctx context.Context, req Req, encoded []byte) (answer, error) {
		parts, err := fn(ctx, req, encoded)
		if parts == nil {
			parts = [][]byte{}
		}
		return answer{parts: parts}, err
	})
}
