package webshell

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Subprotocol is the WebSocket subprotocol of this format; a later,
// incompatible format takes another name.
const Subprotocol = "v1.shell.knit.io"

// Limits on what a decoder accepts.
const (
	// MaxData is the largest Stdin, Stdout or Stderr payload.
	MaxData = 32 << 10
	// MaxReason is the largest Exit reason, in bytes.
	MaxReason = 1024
	// MaxDimension is the largest terminal width or height.
	MaxDimension = 4096
	// MaxFrame is the largest frame: a type byte and the largest payload.
	MaxFrame = 1 + MaxData
)

// Type is a frame's first byte.
type Type byte

// Frame types. Client frames are below 0x10, server frames from 0x10.
const (
	Stdin      Type = 0x01
	Resize     Type = 0x02
	CloseStdin Type = 0x03
	Stdout     Type = 0x10
	Stderr     Type = 0x11
	Exit       Type = 0x12
)

func (t Type) String() string {
	switch t {
	case Stdin:
		return "stdin"
	case Resize:
		return "resize"
	case CloseStdin:
		return "close-stdin"
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case Exit:
		return "exit"
	}
	return fmt.Sprintf("type 0x%02x", byte(t))
}

// FromClient reports whether the client sends frames of type t.
func (t Type) FromClient() bool { return t == Stdin || t == Resize || t == CloseStdin }

// ExitClosed is the Exit code of a session the server ended before the
// command did (kubectl's convention for a terminated stream is not an exit
// code; 255 keeps clear of the shell's 0-128 and 128+signal).
const ExitClosed = 255

// Size is a terminal's size in character cells.
type Size struct{ Cols, Rows uint16 }

// Validate refuses a zero or oversized dimension.
func (s Size) Validate() error {
	if s.Cols == 0 || s.Rows == 0 || s.Cols > MaxDimension || s.Rows > MaxDimension {
		return fmt.Errorf("webshell: terminal size %dx%d is outside 1x1..%dx%d", s.Cols, s.Rows, MaxDimension, MaxDimension)
	}
	return nil
}

// Frame is one message. Which fields count depends on Type: Data for
// Stdin, Stdout and Stderr; Size for Resize; Code and Reason for Exit.
type Frame struct {
	Type   Type
	Data   []byte
	Size   Size
	Code   int32
	Reason string
}

// ErrFrame is wrapped by every decoding error.
var ErrFrame = errors.New("webshell: bad frame")

// Append appends the encoded frame to b. It refuses what Decode would.
func (f Frame) Append(b []byte) ([]byte, error) {
	switch f.Type {
	case Stdin, Stdout, Stderr:
		if len(f.Data) > MaxData {
			return b, fmt.Errorf("%w: %s payload of %d bytes is over %d", ErrFrame, f.Type, len(f.Data), MaxData)
		}
		b = append(b, byte(f.Type))
		return append(b, f.Data...), nil
	case Resize:
		if err := f.Size.Validate(); err != nil {
			return b, err
		}
		b = append(b, byte(f.Type))
		b = binary.BigEndian.AppendUint16(b, f.Size.Cols)
		return binary.BigEndian.AppendUint16(b, f.Size.Rows), nil
	case CloseStdin:
		return append(b, byte(f.Type)), nil
	case Exit:
		if len(f.Reason) > MaxReason || !utf8.ValidString(f.Reason) {
			return b, fmt.Errorf("%w: exit reason is not UTF-8 of at most %d bytes", ErrFrame, MaxReason)
		}
		b = append(b, byte(f.Type))
		b = binary.BigEndian.AppendUint32(b, uint32(f.Code))
		return append(b, f.Reason...), nil
	}
	return b, fmt.Errorf("%w: unknown %s", ErrFrame, f.Type)
}

// Decode reads one frame. Data aliases msg: the caller that keeps it past
// the next read copies it.
func Decode(msg []byte) (Frame, error) {
	if len(msg) == 0 {
		return Frame{}, fmt.Errorf("%w: empty message", ErrFrame)
	}
	if len(msg) > MaxFrame {
		return Frame{}, fmt.Errorf("%w: %d bytes is over the limit of %d", ErrFrame, len(msg), MaxFrame)
	}
	f := Frame{Type: Type(msg[0])}
	p := msg[1:]
	switch f.Type {
	case Stdin, Stdout, Stderr:
		f.Data = p
	case Resize:
		if len(p) != 4 {
			return Frame{}, fmt.Errorf("%w: resize payload of %d bytes, not 4", ErrFrame, len(p))
		}
		f.Size = Size{Cols: binary.BigEndian.Uint16(p), Rows: binary.BigEndian.Uint16(p[2:])}
		if err := f.Size.Validate(); err != nil {
			return Frame{}, fmt.Errorf("%w: %w", ErrFrame, err)
		}
	case CloseStdin:
		if len(p) != 0 {
			return Frame{}, fmt.Errorf("%w: close-stdin with a payload of %d bytes", ErrFrame, len(p))
		}
	case Exit:
		if len(p) < 4 {
			return Frame{}, fmt.Errorf("%w: exit payload of %d bytes, under 4", ErrFrame, len(p))
		}
		f.Code = int32(binary.BigEndian.Uint32(p))
		r := p[4:]
		if len(r) > MaxReason || !utf8.Valid(r) {
			return Frame{}, fmt.Errorf("%w: exit reason is not UTF-8 of at most %d bytes", ErrFrame, MaxReason)
		}
		f.Reason = string(r)
	default:
		return Frame{}, fmt.Errorf("%w: unknown %s", ErrFrame, f.Type)
	}
	return f, nil
}
