package aggregated

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// errCorrupt is wrapped by every error a reader returns for bytes that do
// not follow the format.
var errCorrupt = errors.New("corrupt aggregated log")

// ErrCorrupt reports whether err comes from bytes that break the format.
func ErrCorrupt(err error) bool { return errors.Is(err, errCorrupt) }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
}

// appendVLong appends n in TFile's variable-length encoding
// (org.apache.hadoop.io.file.tfile.Utils.writeVLong), which differs from
// WritableUtils' vlong.
func appendVLong(b []byte, n int64) []byte {
	if n < 128 && n >= -32 {
		return append(b, byte(n))
	}
	un := n
	if n < 0 {
		un = ^n
	}
	bits := 64
	for bits > 0 && un>>(bits-1)&1 == 0 {
		bits--
	}
	size := bits/8 + 1
	first := n >> ((size - 1) * 8)
	switch size {
	case 1:
		first >>= 8
		fallthrough
	case 2:
		if first < 20 && first >= -20 {
			return append(b, byte(first-52), byte(n))
		}
		first >>= 8
		fallthrough
	case 3:
		if first < 16 && first >= -16 {
			return append(b, byte(first-88), byte(n>>8), byte(n))
		}
		first >>= 8
		fallthrough
	case 4:
		if first < 8 && first >= -8 {
			return append(b, byte(first-112), byte(n>>16), byte(n>>8), byte(n))
		}
		b = append(b, byte(size-129))
		return binary.BigEndian.AppendUint32(b, uint32(n))
	}
	b = append(b, byte(size-129))
	for i := size - 1; i >= 0; i-- {
		b = append(b, byte(n>>(8*i)))
	}
	return b
}

// readVLong reads one TFile vlong.
func readVLong(r io.ByteReader) (int64, error) {
	fb, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	first := int64(int8(fb))
	if first >= -32 {
		return first, nil
	}
	next := func(n int) (int64, error) {
		var v int64
		for i := 0; i < n; i++ {
			c, err := r.ReadByte()
			if err != nil {
				return 0, noEOF(err)
			}
			v = v<<8 | int64(c)
		}
		return v, nil
	}
	switch (first + 128) / 8 {
	case 11, 10, 9, 8, 7:
		v, err := next(1)
		return (first+52)<<8 | v, err
	case 6, 5, 4, 3:
		v, err := next(2)
		return (first+88)<<16 | v, err
	case 2, 1:
		v, err := next(3)
		return (first+112)<<24 | v, err
	}
	size := int(first + 129)
	if size < 4 || size > 8 {
		return 0, corruptf("vlong of %d bytes", size)
	}
	v, err := next(size)
	if err != nil {
		return 0, err
	}
	// Sign-extend from size bytes.
	shift := uint(64 - 8*size)
	return v << shift >> shift, nil
}

// readVInt reads a vlong that must fit an int32.
func readVInt(r io.ByteReader) (int, error) {
	v, err := readVLong(r)
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, corruptf("vint out of range: %d", v)
	}
	return int(v), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
