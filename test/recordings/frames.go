package recordings

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Frames cuts a recorded Hadoop RPC stream, past its preamble, into the
// bodies of its 4-byte length-prefixed frames.
func Frames(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("recordings: %d trailing bytes", len(b))
		}
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			return nil, fmt.Errorf("recordings: frame of %d bytes cut short", n)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out, nil
}

// Delimited reads the varint-delimited message at the start of b into m
// and returns what follows it.
func Delimited(b []byte, m proto.Message) ([]byte, error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 || uint64(len(b)-k) < n {
		return nil, fmt.Errorf("recordings: bad delimited message")
	}
	if err := proto.Unmarshal(b[k:k+int(n)], m); err != nil {
		return nil, fmt.Errorf("recordings: %w", err)
	}
	return b[k+int(n):], nil
}
