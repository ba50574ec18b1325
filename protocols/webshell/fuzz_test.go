package webshell

import (
	"bytes"
	"net/url"
	"testing"
)

// FuzzDecode: whatever a peer sends, Decode either refuses it or returns
// a frame that encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, seed := range [][]byte{
		[]byte("\x01ls -l\r"), {0x02, 0, 80, 0, 24}, {0x03}, []byte("\x10out"), []byte("\x11err"),
		[]byte("\x12\x00\x00\x00\x02container ended"), {0x02, 0, 0, 0, 0}, {0xff},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		fr, err := Decode(msg)
		if err != nil {
			return
		}
		b, err := fr.Append(nil)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", fr, err)
		}
		if !bytes.Equal(b, msg) {
			t.Fatalf("re-encoded % x, read % x", b, msg)
		}
	})
}

// FuzzParseStart: a query either is refused or gives a Start within the
// limits that survives its own encoding.
func FuzzParseStart(f *testing.F) {
	for _, seed := range []string{"", "tty=true&cols=80&rows=24", "command=sh&command=-c&command=id", "tty=1", "cols=-1&tty=true"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		s, err := ParseStart(q)
		if err != nil {
			return
		}
		if len(s.Command) > MaxArgs || (s.TTY && s.Size.Validate() != nil) {
			t.Fatalf("ParseStart accepted %+v", s)
		}
		back := url.Values{}
		s.Encode(back)
		if _, err := ParseStart(back); err != nil {
			t.Fatalf("a parsed Start does not parse again: %v", err)
		}
	})
}
