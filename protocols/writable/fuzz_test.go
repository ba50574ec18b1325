package writable

import (
	"bytes"
	"testing"
	"testing/iotest"
)

func FuzzReadVLong(f *testing.F) {
	for _, tc := range vlongVectors {
		f.Add(unhex(f, tc.hex))
	}
	for _, seed := range []string{"", "8e", "8f05", "8700", "880000000000000005", "8c7fffffff", "ff00"} {
		f.Add(unhex(f, seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, n, err := DecodeVLong(in)
		for name, r := range map[string]*Reader{
			"bytes":      NewBytesReader(in, Limits{}),
			"one-by-one": NewReader(iotest.OneByteReader(bytes.NewReader(in)), Limits{}),
		} {
			rv, rerr := r.ReadVLong()
			if (rerr == nil) != (err == nil) || rv != v {
				t.Fatalf("%s ReadVLong = %d, %v; DecodeVLong = %d, %v", name, rv, rerr, v, err)
			}
			if err == nil && r.Offset() != int64(n) {
				t.Fatalf("%s consumed %d bytes, DecodeVLong %d", name, r.Offset(), n)
			}
		}
		if err != nil {
			return
		}
		enc := AppendVLong(nil, v)
		if len(enc) > n || len(enc) != VLongSize(v) {
			t.Fatalf("%d re-encoded to %x, longer than the %d input bytes or VLongSize %d", v, enc, n, VLongSize(v))
		}
		back, m, err := DecodeVLong(enc)
		if err != nil || back != v || m != len(enc) {
			t.Fatalf("%d re-encoded to %x, decoded %d, %d, %v", v, enc, back, m, err)
		}
	})
}
