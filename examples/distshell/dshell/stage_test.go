package dshell

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestJavaUTF(t *testing.T) {
	tests := []struct {
		name string
		text string
		java []byte // DataOutputStream.writeUTF's bytes
	}{
		{"ASCII is itself after the length", "echo", []byte{0, 4, 'e', 'c', 'h', 'o'}},
		{"the empty string is its length", "", []byte{0, 0}},
		{"NUL takes two bytes", "a\x00", []byte{0, 3, 'a', 0xc0, 0x80}},
		{"two- and three-byte characters", "é€", []byte{0, 5, 0xc3, 0xa9, 0xe2, 0x82, 0xac}},
		{"a character beyond the BMP is its two surrogates", "😀", []byte{0, 6, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80}},
		{"quotes, dollars and newlines are plain bytes", "'$X'\n\"", []byte{0, 6, '\'', '$', 'X', '\'', '\n', '"'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := appendJavaUTF(nil, tt.text)
			if err != nil || !bytes.Equal(b, tt.java) {
				t.Fatalf("appendJavaUTF = % x, %v, want % x", b, err, tt.java)
			}
			if got, err := readJavaUTF(b); got != tt.text || err != nil {
				t.Errorf("readJavaUTF = %q, %v, want %q", got, err, tt.text)
			}
		})
	}
}

func TestJavaUTFRefuses(t *testing.T) {
	if _, err := appendJavaUTF(nil, strings.Repeat("é", 1<<15)); err == nil || err.Error() != "65536 bytes in Java's modified UTF-8, over writeUTF's 65535" {
		t.Errorf("appendJavaUTF of 64 KiB = %v, want writeUTF's limit", err)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"no length", []byte{0}, "malformed Java modified UTF-8: unexpected EOF"},
		{"fewer bytes than the length", []byte{0, 3, 'a'}, "malformed Java modified UTF-8: 1 bytes of 3"},
		{"a lone continuation byte", []byte{0, 1, 0x80}, "malformed Java modified UTF-8: byte 0x80"},
		{"a sequence cut by the length", []byte{0, 1, 0xc3, 0xa9}, "malformed Java modified UTF-8: byte 0xc3"},
		{"a four-byte UTF-8 sequence", []byte{0, 4, 0xf0, 0x9f, 0x98, 0x80}, "malformed Java modified UTF-8: byte 0xf0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readJavaUTF(tt.in); !errors.Is(err, errBadJavaUTF) || err.Error() != tt.want {
				t.Errorf("readJavaUTF(% x) = %v, want %s", tt.in, err, tt.want)
			}
		})
	}
}

// FuzzJavaUTF checks that any text comes back as written (with bytes that
// are not UTF-8 as U+FFFD, as Java decodes them), and that the AM reads
// any file without panicking.
func FuzzJavaUTF(f *testing.F) {
	f.Add("echo \"$X\"\n", []byte{0, 4, 'e', 'c', 'h', 'o'})
	f.Add("a\x00😀\xff", []byte{0, 6, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80})
	f.Add("", []byte{0, 3, 0xed, 0xa0, 0xbd})
	f.Fuzz(func(t *testing.T, text string, file []byte) {
		_, _ = readJavaUTF(file)
		b, err := appendJavaUTF(nil, text)
		if err != nil {
			return // over writeUTF's limit
		}
		got, err := readJavaUTF(b)
		if want := string([]rune(text)); got != want || err != nil {
			t.Fatalf("read back %q, %v, want %q", got, err, want)
		}
	})
}
