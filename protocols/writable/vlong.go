package writable

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// Errors a decoder reports; each comes wrapped with where it happened.
var (
	// ErrNegativeLength is a length prefix below zero.
	ErrNegativeLength = errors.New("negative length")
	// ErrTooLarge is a length above the Reader's limit, or a stream longer than its total limit.
	ErrTooLarge = errors.New("exceeds limit")
	// ErrVIntRange is a VInt whose value does not fit in 32 bits.
	ErrVIntRange = errors.New("value too long to fit in integer")
)

// AppendVLong appends v in WritableUtils.writeVLong's zero-compressed form:
// one byte for -112..127, else a length-and-sign byte and 1–8 big-endian
// value bytes (one's-complemented for negative v).
func AppendVLong(dst []byte, v int64) []byte {
	if v >= -112 && v <= 127 {
		return append(dst, byte(v))
	}
	first := int8(-112)
	u := uint64(v)
	if v < 0 {
		u = ^u
		first = -120
	}
	n := (bits.Len64(u) + 7) / 8
	dst = append(dst, byte(first-int8(n)))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(u>>(8*i)))
	}
	return dst
}

// AppendVInt appends v as WritableUtils.writeVInt does (the VLong form).
func AppendVInt(dst []byte, v int32) []byte {
	return AppendVLong(dst, int64(v))
}

// VLongSize is the number of bytes AppendVLong writes for v
// (WritableUtils.getVIntSize).
func VLongSize(v int64) int {
	if v >= -112 && v <= 127 {
		return 1
	}
	u := uint64(v)
	if v < 0 {
		u = ^u
	}
	return 1 + (bits.Len64(u)+7)/8
}

// DecodeVIntSize is the total length, first byte included, of the VLong
// that starts with first (WritableUtils.decodeVIntSize).
func DecodeVIntSize(first byte) int {
	v := int8(first)
	switch {
	case v >= -112:
		return 1
	case v < -120:
		return -119 - int(v)
	default:
		return -111 - int(v)
	}
}

// IsNegativeVInt reports whether the VLong that starts with first is
// negative (WritableUtils.isNegativeVInt).
func IsNegativeVInt(first byte) bool {
	v := int8(first)
	return v < -120 || (v >= -112 && v < 0)
}

// DecodeVLong decodes the VLong at the start of b and returns it with the
// number of bytes it took. Like WritableUtils.readVLong it also accepts
// non-minimal forms. An empty b gives io.EOF, a cut-off one
// io.ErrUnexpectedEOF, both wrapped.
func DecodeVLong(b []byte) (int64, int, error) {
	if len(b) == 0 {
		return 0, 0, fmt.Errorf("writable: decode vlong: %w", io.EOF)
	}
	n := DecodeVIntSize(b[0])
	if len(b) < n {
		return 0, 0, fmt.Errorf("writable: decode vlong: need %d bytes, have %d: %w", n, len(b), io.ErrUnexpectedEOF)
	}
	return vlongValue(b[0], b[1:n]), n, nil
}

// DecodeVInt is DecodeVLong for a value that must fit in 32 bits
// (WritableUtils.readVInt).
func DecodeVInt(b []byte) (int32, int, error) {
	v, n, err := DecodeVLong(b)
	if err != nil {
		return 0, 0, err
	}
	i, err := toVInt(v)
	if err != nil {
		return 0, 0, fmt.Errorf("writable: decode vint: %w", err)
	}
	return i, n, nil
}

// toVInt narrows a VLong to the 32 bits a VInt must fit in.
func toVInt(v int64) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%d: %w", v, ErrVIntRange)
	}
	return int32(v), nil
}

// vlongValue is readVLong's arithmetic: rest holds the DecodeVIntSize(first)-1
// bytes after first.
func vlongValue(first byte, rest []byte) int64 {
	if len(rest) == 0 {
		return int64(int8(first))
	}
	var u uint64
	for _, b := range rest {
		u = u<<8 | uint64(b)
	}
	if IsNegativeVInt(first) {
		u = ^u
	}
	return int64(u)
}
