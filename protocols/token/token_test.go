package token

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/writable"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestTokenWritableFormIsLengthPrefixedFieldsInOrder(t *testing.T) {
	tests := []struct {
		name  string
		token Token
		want  string
	}{
		{"empty token is four zero lengths", Token{}, "00 00 00 00"},
		{
			"fields in order identifier, password, kind, service",
			Token{Identifier: []byte{0xaa}, Password: []byte{0xbb, 0xcc}, Kind: "K", Service: "127.0.0.1:8030"},
			"01aa 02bbcc 014b 0e" + hex.EncodeToString([]byte("127.0.0.1:8030")),
		},
		{
			"identifier longer than 127 bytes takes a two-byte length",
			Token{Identifier: bytes.Repeat([]byte{1}, 128)},
			"8f80" + strings.Repeat("01", 128) + "000000",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.want)
			got := tc.token.AppendWritable(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendWritable = %x, want %x", got, want)
			}
			back, err := ReadToken(writable.NewBytesReader(got, writable.Limits{}))
			if err != nil || !back.Equal(tc.token) {
				t.Fatalf("ReadToken = %v, %v; want %v", back, err, tc.token)
			}
		})
	}
}

func TestReadTokenSaysWhichFieldIsBroken(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		lim     writable.Limits
		wantErr error
		wantMsg string
	}{
		{"nothing", "", writable.Limits{}, io.EOF, "token: read identifier: writable: read bytes length: EOF"},
		{"negative identifier length", "ff", writable.Limits{}, writable.ErrNegativeLength, "token: read identifier: writable: read bytes length: -1: negative length"},
		{"identifier above the limit", "8c7fffffff", writable.Limits{}, writable.ErrTooLarge, "token: read identifier: writable: read bytes length: 2147483647 above 1048576: exceeds limit"},
		{"identifier above the caller's limit", "05 0102030405", writable.Limits{MaxLength: 4}, writable.ErrTooLarge, "token: read identifier:"},
		{"identifier cut short", "05 0102", writable.Limits{}, io.ErrUnexpectedEOF, "token: read identifier: writable: read bytes: 5 bytes declared, 2 left: unexpected EOF"},
		{"password missing", "01aa", writable.Limits{}, io.EOF, "token: read password:"},
		{"password length cut", "01aa 8e01", writable.Limits{}, io.ErrUnexpectedEOF, "token: read password:"},
		{"kind negative", "00 00 9f", writable.Limits{}, writable.ErrNegativeLength, "token: read kind:"},
		{"service missing", "00 00 00", writable.Limits{}, io.EOF, "token: read service:"},
		{"service cut short", "00 00 00 0341", writable.Limits{}, io.ErrUnexpectedEOF, "token: read service:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadToken(writable.NewBytesReader(unhex(t, tc.in), tc.lim))
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), tc.wantMsg) {
				t.Errorf("err %q, want it to start %q", err, tc.wantMsg)
			}
		})
	}
}

func TestTokenProtoSetsEveryRequiredField(t *testing.T) {
	for _, tok := range []Token{{}, {Identifier: []byte{1}, Password: []byte{2}, Kind: "k", Service: "s"}} {
		p := tok.Proto()
		b, err := proto.Marshal(p) // fails if a required field is unset
		if err != nil {
			t.Fatalf("Marshal(%v.Proto()): %v", tok, err)
		}
		var back commonpb.TokenProto
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		if got := FromProto(&back); !got.Equal(tok) {
			t.Errorf("round trip %v, want %v", got, tok)
		}
	}
}

func TestTokenProtoSharesNoMemory(t *testing.T) {
	tok := Token{Identifier: []byte{1}, Password: []byte{2}}
	p := tok.Proto()
	p.Identifier[0], p.Password[0] = 9, 9
	back := FromProto(p)
	p.Identifier[0] = 8
	if tok.Identifier[0] != 1 || tok.Password[0] != 2 || back.Identifier[0] != 9 {
		t.Errorf("Proto/FromProto share memory: token %v, back %v", tok, back)
	}
}

func TestFromProtoReadsMissingFieldsAsEmpty(t *testing.T) {
	if got := FromProto(nil); !got.Equal(Token{}) {
		t.Errorf("FromProto(nil) = %v", got)
	}
	got := FromProto(&commonpb.TokenProto{Kind: proto.String("k")})
	if !got.Equal(Token{Kind: "k"}) || got.Identifier == nil || got.Password == nil {
		t.Errorf("FromProto(kind only) = %#v", got)
	}
}

func TestTokenEqualTreatsNilAndEmptyAlike(t *testing.T) {
	if !(Token{Identifier: nil}).Equal(Token{Identifier: []byte{}}) {
		t.Error("nil and empty identifiers differ")
	}
	if (Token{Kind: "a"}).Equal(Token{Kind: "b"}) {
		t.Error("different kinds are equal")
	}
}

func TestTokenStringHidesThePassword(t *testing.T) {
	tok := Token{Identifier: []byte{0xab}, Password: []byte("hunter2"), Kind: "YARN_AM_RM_TOKEN", Service: "rm:8030"}
	s := tok.String()
	want := `Token{Kind: "YARN_AM_RM_TOKEN", Service: "rm:8030", Identifier: ab, Password: 7 bytes}`
	if s != want {
		t.Errorf("String() = %s, want %s", s, want)
	}
}
