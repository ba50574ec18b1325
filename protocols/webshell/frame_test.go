package webshell

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFramesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame Frame
		wire  []byte
	}{
		{"stdin carries bytes", Frame{Type: Stdin, Data: []byte("ls\r")}, []byte("\x01ls\r")},
		{"resize carries cols then rows", Frame{Type: Resize, Size: Size{Cols: 120, Rows: 40}}, []byte{0x02, 0, 120, 0, 40}},
		{"close-stdin is one byte", Frame{Type: CloseStdin}, []byte{0x03}},
		{"stdout carries bytes", Frame{Type: Stdout, Data: []byte("hi\n")}, []byte("\x10hi\n")},
		{"stderr carries bytes", Frame{Type: Stderr, Data: []byte("oops")}, []byte("\x11oops")},
		{"exit carries a negative code and a reason", Frame{Type: Exit, Code: -1, Reason: "gone"}, []byte("\x12\xff\xff\xff\xffgone")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.frame.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, tc.wire) {
				t.Fatalf("encoded % x, want % x", b, tc.wire)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.frame, got); diff != "" {
				t.Fatalf("decoded frame differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRefusesMalformedFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"empty message", nil},
		{"unknown type", []byte{0x7f, 1}},
		{"oversized stdin", append([]byte{0x01}, make([]byte, MaxData+1)...)},
		{"short resize", []byte{0x02, 0, 80, 0}},
		{"zero-width resize", []byte{0x02, 0, 0, 0, 24}},
		{"huge resize", []byte{0x02, 0xff, 0xff, 0, 24}},
		{"close-stdin with payload", []byte{0x03, 'x'}},
		{"short exit", []byte{0x12, 0, 0}},
		{"exit reason not UTF-8", []byte{0x12, 0, 0, 0, 1, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.msg); !errors.Is(err, ErrFrame) {
				t.Fatalf("Decode = %v, want ErrFrame", err)
			}
		})
	}
}

func TestStartQuery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		query   string
		want    Start
		wantErr string
	}{
		{"nothing asks for the login shell without a terminal", "", Start{}, ""},
		{"a terminal without a size is 80x24", "tty=true", Start{TTY: true, Size: Size{80, 24}}, ""},
		{"a command keeps its words in order", "command=sh&command=-c&command=exit+3", Start{Command: []string{"sh", "-c", "exit 3"}}, ""},
		{"a terminal takes its size", "tty=true&cols=132&rows=50", Start{TTY: true, Size: Size{132, 50}}, ""},
		{"tty must be a boolean", "tty=yes", Start{}, "neither true nor false"},
		{"cols must be a number", "tty=true&cols=wide", Start{}, "not a number"},
		{"rows are bounded", "tty=true&rows=9999", Start{}, "outside"},
		{"words may not hold NUL", "command=a%00b", Start{}, "without NUL"},
		{"too many words", strings.Repeat("command=x&", MaxArgs+1), Start{}, "words is over"},
		{"too many bytes", "command=" + strings.Repeat("x", MaxCommandBytes+1), Start{}, "bytes is over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStart(q)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseStart = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			back := url.Values{}
			got.Encode(back)
			again, err := ParseStart(back)
			if err != nil || !cmp.Equal(got, again) {
				t.Fatalf("Encode then ParseStart = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}
