package token

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/writable"
)

// seedStreams are the real container_tokens files that are present, the
// Java client's stream, and hand-made edge cases, in both formats.
func seedStreams(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, tc := range realContainerTokens {
		if b, err := os.ReadFile(tc.path); err == nil {
			seeds = append(seeds, b, append(bytes.Clone(b), make([]byte, 64)...))
		} else if !errors.Is(err, os.ErrNotExist) {
			f.Fatalf("read seed %s: %v", tc.path, err)
		}
	}
	seeds = append(seeds, []byte(javaClientCredentials))
	for _, c := range []*Credentials{sample(), {}} {
		for _, format := range []Format{FormatWritable, FormatProtobuf} {
			b, err := c.Marshal(format)
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	for _, s := range []string{
		"", "HDTS", "HDTX\x00", "HDTS\x02", "HDTS\x00\xff", "HDTS\x00\x00\xff",
		"HDTS\x00\x8c\x7f\xff\xff\xff", "HDTS\x00\x01\x00\x8c\x7f\xff\xff\xff",
		"HDTS\x00\x02\x01a\x00\x00\x00\x00\x01a\x00\x00\x01k\x00\x00",
		"HDTS\x01\x80", "HDTS\x01\xff\xff\xff\xff\x0f", "HDTS\x01\x04\x12\x02\x1a\x00",
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

func FuzzReadCredentials(f *testing.F) {
	for _, s := range seedStreams(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ParseCredentials(in)
		streamed, serr := ReadCredentials(writable.NewReader(iotest.OneByteReader(bytes.NewReader(in)), writable.Limits{}))
		if (err == nil) != (serr == nil) || !c.Equal(streamed) {
			t.Fatalf("slice and stream readers disagree: %v, %v / %v, %v", dump(c), err, dump(streamed), serr)
		}
		if err != nil {
			if c != nil {
				t.Fatalf("error %v came with credentials %v", err, dump(c))
			}
			return
		}
		var first []byte
		for _, format := range []Format{FormatWritable, FormatProtobuf} {
			b, err := c.Marshal(format)
			if err != nil {
				t.Fatalf("Marshal(%v): %v", format, err)
			}
			back, err := ParseCredentials(b)
			if err != nil {
				t.Fatalf("%v re-encoding %x does not decode: %v", format, b, err)
			}
			if !back.Equal(c) {
				t.Fatalf("%v round trip %v, want %v", format, dump(back), dump(c))
			}
			if format == FormatWritable {
				first = b
			}
			if again, _ := back.Marshal(FormatWritable); !bytes.Equal(again, first) {
				t.Fatalf("WRITABLE encoding not stable: %x then %x", first, again)
			}
		}
	})
}

func FuzzReadToken(f *testing.F) {
	for _, s := range seedStreams(f) {
		if len(s) > 7 && s[4] == byte(FormatWritable) {
			f.Add(s[7:]) // past magic, format, count and the one-byte alias length
		}
	}
	for _, tok := range []Token{{}, {Identifier: []byte{1}, Password: bytes.Repeat([]byte{2}, 200), Kind: "k", Service: "\xff"}} {
		f.Add(tok.AppendWritable(nil))
	}
	for _, s := range []string{"", "\xff", "\x8c\x7f\xff\xff\xff", "\x05ab", "\x00\x00\x00", "\x8f\x05\x00\x00\x00\x00\x00\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := writable.NewBytesReader(in, writable.Limits{})
		tok, err := ReadToken(r)
		if err != nil {
			return
		}
		enc := tok.AppendWritable(nil)
		if int64(len(enc)) > r.Offset() {
			t.Fatalf("re-encoding %x is longer than the %d bytes read", enc, r.Offset())
		}
		r = writable.NewBytesReader(enc, writable.Limits{})
		back, err := ReadToken(r)
		if err != nil || !back.Equal(tok) || r.Offset() != int64(len(enc)) {
			t.Fatalf("round trip %v, %v after %d of %d bytes; want %v", back, err, r.Offset(), len(enc), tok)
		}
		b, err := proto.Marshal(tok.Proto())
		if err != nil {
			t.Fatalf("marshal proto: %v", err)
		}
		var p commonpb.TokenProto
		if err := proto.Unmarshal(b, &p); err != nil {
			t.Fatalf("unmarshal proto: %v", err)
		}
		if got := FromProto(&p); !got.Equal(tok) {
			t.Fatalf("proto round trip %v, want %v", got, tok)
		}
	})
}
