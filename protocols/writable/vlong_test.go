package writable

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

// vlongVectors are WritableUtils.writeVLong's outputs, worked out from its
// algorithm: -112..127 in one byte; otherwise a first byte of -112-n
// (positive) or -120-n (negative, value one's-complemented), then n
// big-endian bytes.
var vlongVectors = []struct {
	v   int64
	hex string
}{
	{0, "00"},
	{1, "01"},
	{-1, "ff"},
	{127, "7f"},
	{-112, "90"},
	{-113, "8770"},
	{128, "8f80"},
	{255, "8fff"},
	{256, "8e0100"},
	{1000, "8e03e8"},
	{-129, "8780"},
	{-256, "87ff"},
	{-257, "860100"},
	{-1000, "8603e7"},
	{math.MaxInt32, "8c7fffffff"},
	{math.MinInt32, "847fffffff"},
	{1 << 32, "8b0100000000"},
	{math.MaxInt64, "887fffffffffffffff"},
	{math.MinInt64, "807fffffffffffffff"},
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestAppendVLongWritesHadoopBytes(t *testing.T) {
	for _, tc := range vlongVectors {
		want := unhex(t, tc.hex)
		if got := AppendVLong(nil, tc.v); !bytes.Equal(got, want) {
			t.Errorf("AppendVLong(%d) = %x, want %x", tc.v, got, want)
		}
		if got := VLongSize(tc.v); got != len(want) {
			t.Errorf("VLongSize(%d) = %d, want %d", tc.v, got, len(want))
		}
		if got := DecodeVIntSize(want[0]); got != len(want) {
			t.Errorf("DecodeVIntSize(%#x) = %d, want %d", want[0], got, len(want))
		}
		if got := IsNegativeVInt(want[0]); got != (tc.v < 0) {
			t.Errorf("IsNegativeVInt(%#x) = %v for %d", want[0], got, tc.v)
		}
	}
}

func TestAppendVLongAppendsAfterExistingBytes(t *testing.T) {
	got := AppendVLong([]byte{0xaa}, 256)
	if want := unhex(t, "aa8e0100"); !bytes.Equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
}

func TestVLongVectorsDecodeToTheirValue(t *testing.T) {
	for _, tc := range vlongVectors {
		in := unhex(t, tc.hex)
		v, n, err := DecodeVLong(append(in, 0xee)) // a trailing byte must be left alone
		if err != nil || v != tc.v || n != len(in) {
			t.Errorf("DecodeVLong(%s) = %d, %d, %v; want %d, %d", tc.hex, v, n, err, tc.v, len(in))
		}
		for name, r := range readersOver(in) {
			got, err := r.ReadVLong()
			if err != nil || got != tc.v {
				t.Errorf("%s ReadVLong(%s) = %d, %v; want %d", name, tc.hex, got, err, tc.v)
			}
			if r.Offset() != int64(len(in)) {
				t.Errorf("%s Offset after %s = %d, want %d", name, tc.hex, r.Offset(), len(in))
			}
		}
	}
}

func TestEveryInt16RoundTrips(t *testing.T) {
	for v := int64(math.MinInt16); v <= math.MaxInt16; v++ {
		enc := AppendVLong(nil, v)
		got, n, err := DecodeVLong(enc)
		if err != nil || got != v || n != len(enc) {
			t.Fatalf("%d: encoded %x, decoded %d, %d, %v", v, enc, got, n, err)
		}
	}
}

func TestPowersOfTwoAndNeighboursRoundTrip(t *testing.T) {
	for shift := 0; shift < 63; shift++ {
		for _, v := range []int64{1 << shift, 1<<shift - 1, 1<<shift + 1, -(1 << shift), -(1 << shift) - 1, -(1 << shift) + 1} {
			enc := AppendVLong(nil, v)
			got, _, err := DecodeVLong(enc)
			if err != nil || got != v {
				t.Fatalf("%d: encoded %x, decoded %d, %v", v, enc, got, err)
			}
			if len(enc) != VLongSize(v) {
				t.Fatalf("%d: VLongSize %d, encoded %d bytes", v, VLongSize(v), len(enc))
			}
		}
	}
}

func TestDecodeVIntSizeFollowsFirstByte(t *testing.T) {
	tests := []struct {
		first byte
		want  int
	}{
		{0x00, 1}, {0x7f, 1}, {0x90, 1}, {0xff, 1},
		{0x8f, 2}, {0x8e, 3}, {0x89, 8}, {0x88, 9},
		{0x87, 2}, {0x86, 3}, {0x81, 8}, {0x80, 9},
	}
	for _, tc := range tests {
		if got := DecodeVIntSize(tc.first); got != tc.want {
			t.Errorf("DecodeVIntSize(%#x) = %d, want %d", tc.first, got, tc.want)
		}
	}
}

func TestReadVLongAcceptsNonMinimalFormsAsHadoopDoes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"8f05", 5},
		{"8e0005", 5},
		{"880000000000000005", 5},
		{"8700", -1},
		{"8f00", 0},
	}
	for _, tc := range tests {
		got, n, err := DecodeVLong(unhex(t, tc.in))
		if err != nil || got != tc.want || n != len(tc.in)/2 {
			t.Errorf("DecodeVLong(%s) = %d, %d, %v; want %d", tc.in, got, n, err, tc.want)
		}
	}
}

func TestReadVLongReportsWhereInputEnds(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty input is EOF", "", io.EOF},
		{"cut after the first byte", "8e", io.ErrUnexpectedEOF},
		{"cut inside the value", "8e01", io.ErrUnexpectedEOF},
		{"cut eight-byte value", "887fffffffffffff", io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := unhex(t, tc.in)
			if _, _, err := DecodeVLong(in); !errors.Is(err, tc.want) {
				t.Errorf("DecodeVLong: err %v, want %v", err, tc.want)
			}
			for name, r := range readersOver(in) {
				_, err := r.ReadVLong()
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: err %v, want %v", name, err, tc.want)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "writable: read vlong: ") {
					t.Errorf("%s: error %q does not say where", name, err)
				}
				if err == nil {
					continue
				}
				if tc.want == io.EOF && errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("%s: clean end reported as unexpected: %v", name, err)
				}
			}
		})
	}
}

func TestReadVIntRejectsValuesBeyond32Bits(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int32
		wantErr error
	}{
		{"max int32", "8c7fffffff", math.MaxInt32, nil},
		{"min int32", "847fffffff", math.MinInt32, nil},
		{"2^31", "8c80000000", 0, ErrVIntRange},
		{"-2^31-1", "8480000000", 0, ErrVIntRange},
		{"2^32", "8b0100000000", 0, ErrVIntRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := unhex(t, tc.in)
			got, _, err := DecodeVInt(in)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("DecodeVInt = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
			got, err = NewBytesReader(in, Limits{}).ReadVInt()
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("ReadVInt = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestAppendVIntMatchesAppendVLong(t *testing.T) {
	for _, v := range []int32{0, -112, -113, 127, 128, math.MaxInt32, math.MinInt32} {
		if a, b := AppendVInt(nil, v), AppendVLong(nil, int64(v)); !bytes.Equal(a, b) {
			t.Errorf("AppendVInt(%d) = %x, AppendVLong = %x", v, a, b)
		}
	}
}

// readersOver gives a Reader of each kind over in: the slice reader, a
// stream reader over a source with Len, and one over a bare io.Reader that
// returns a byte at a time.
func readersOver(in []byte) map[string]*Reader {
	return map[string]*Reader{
		"bytes":      NewBytesReader(in, Limits{}),
		"stream":     NewReader(bytes.NewReader(in), Limits{}),
		"one-by-one": NewReader(iotest.OneByteReader(bytes.NewReader(in)), Limits{}),
	}
}
