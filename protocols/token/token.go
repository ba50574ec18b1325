package token

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/writable"
)

var _ fmt.Stringer = Token{}

// Token is a Hadoop security token (org.apache.hadoop.security.token.Token).
// Identifier is the serialized identifier the Kind names; Password is its
// HMAC under the issuer's master key. Kind and Service are Hadoop Text,
// kept as the bytes that were read.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// ReadToken reads a Token in its Writable form: VInt identifier length,
// identifier, VInt password length, password, Text kind, Text service.
func ReadToken(r *writable.Reader) (Token, error) {
	var t Token
	var err error
	if t.Identifier, err = r.ReadBytes(); err != nil {
		return Token{}, fmt.Errorf("token: read identifier: %w", err)
	}
	if t.Password, err = r.ReadBytes(); err != nil {
		return Token{}, fmt.Errorf("token: read password: %w", err)
	}
	if t.Kind, err = r.ReadText(); err != nil {
		return Token{}, fmt.Errorf("token: read kind: %w", err)
	}
	if t.Service, err = r.ReadText(); err != nil {
		return Token{}, fmt.Errorf("token: read service: %w", err)
	}
	return t, nil
}

// AppendWritable appends t in its Writable form (Token.write).
func (t Token) AppendWritable(dst []byte) []byte {
	dst = writable.AppendBytes(dst, t.Identifier)
	dst = writable.AppendBytes(dst, t.Password)
	dst = writable.AppendText(dst, t.Kind)
	return writable.AppendText(dst, t.Service)
}

// Proto returns t as a TokenProto with all four required fields set. The
// proto shares no memory with t.
func (t Token) Proto() *commonpb.TokenProto {
	return &commonpb.TokenProto{
		Identifier: cloneNonNil(t.Identifier),
		Password:   cloneNonNil(t.Password),
		Kind:       proto.String(t.Kind),
		Service:    proto.String(t.Service),
	}
}

// FromProto returns the Token p holds; missing fields read as empty, as
// Hadoop's Token(TokenProto) constructor reads them. A nil p is the zero Token.
func FromProto(p *commonpb.TokenProto) Token {
	return Token{
		Identifier: cloneNonNil(p.GetIdentifier()),
		Password:   cloneNonNil(p.GetPassword()),
		Kind:       p.GetKind(),
		Service:    p.GetService(),
	}
}

// Equal reports whether t and u hold the same bytes; a nil and an empty
// slice are equal.
func (t Token) Equal(u Token) bool {
	return bytes.Equal(t.Identifier, u.Identifier) && bytes.Equal(t.Password, u.Password) &&
		t.Kind == u.Kind && t.Service == u.Service
}

// Clone returns a copy of t that shares no memory with it.
func (t Token) Clone() Token {
	return Token{
		Identifier: bytes.Clone(t.Identifier),
		Password:   bytes.Clone(t.Password),
		Kind:       t.Kind,
		Service:    t.Service,
	}
}

// String describes t for logs: kind, service and identifier in hex, and
// only the length of the password.
func (t Token) String() string {
	return fmt.Sprintf("Token{Kind: %q, Service: %q, Identifier: %x, Password: %d bytes}",
		t.Kind, t.Service, t.Identifier, len(t.Password))
}

// cloneNonNil copies b into a non-nil slice: protobuf-go marks a proto2
// bytes field as set only when the slice is non-nil.
func cloneNonNil(b []byte) []byte {
	return append([]byte{}, b...)
}
