package writable

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestAppendTextWritesLengthThenBytes(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want string
	}{
		{"empty", "", "00"},
		{"token kind", "YARN_AM_RM_TOKEN", "10" + "5941524e5f414d5f524d5f544f4b454e"},
		{"utf-8 counts bytes not runes", "é", "02c3a9"},
		{"length above 127 takes a vlong", strings.Repeat("a", 200), "8fc8" + strings.Repeat("61", 200)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendText(nil, tc.s)
			if want := unhex(t, tc.want); !bytes.Equal(got, want) {
				t.Fatalf("AppendText = %x, want %x", got, want)
			}
			for name, r := range readersOver(got) {
				s, err := r.ReadText()
				if err != nil || s != tc.s {
					t.Errorf("%s ReadText = %q, %v; want %q", name, s, err, tc.s)
				}
			}
		})
	}
}

func TestAppendBytesWritesLengthThenBytes(t *testing.T) {
	got := AppendBytes([]byte{0x01}, []byte{0xb1, 0xaa})
	if want := unhex(t, "0102b1aa"); !bytes.Equal(got, want) {
		t.Errorf("AppendBytes = %x, want %x", got, want)
	}
}

func TestReadTextKeepsInvalidUTF8Bytes(t *testing.T) {
	in := unhex(t, "02ff fe")
	s, err := NewBytesReader(in, Limits{}).ReadText()
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendText(nil, s); !bytes.Equal(got, in) {
		t.Errorf("re-encoded %x, want %x", got, in)
	}
}

func TestReadBytesGivesAFreshNonNilSlice(t *testing.T) {
	in := unhex(t, "00 02abcd")
	r := NewBytesReader(in, Limits{})
	empty, err := r.ReadBytes()
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("empty field = %#v, %v; want non-nil empty", empty, err)
	}
	b, err := r.ReadBytes()
	if err != nil || !bytes.Equal(b, []byte{0xab, 0xcd}) {
		t.Fatalf("ReadBytes = %x, %v", b, err)
	}
	b[0] = 0
	if in[2] != 0xab {
		t.Error("ReadBytes aliases the input slice")
	}
}

func TestLengthPrefixedReadsRejectBadLengths(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		lim     Limits
		wantErr error
		wantMsg string
	}{
		{"negative length", "ff", Limits{}, ErrNegativeLength, "length: -1: negative length"},
		{"large negative length", "847fffffff", Limits{}, ErrNegativeLength, "length: -2147483648: negative length"},
		{"length above the caller's limit", "0a" + strings.Repeat("00", 10), Limits{MaxLength: 9}, ErrTooLarge, "length: 10 above 9: exceeds limit"},
		{"length above the default limit", "8c7fffffff", Limits{}, ErrTooLarge, "length: 2147483647 above 1048576: exceeds limit"},
		{"length beyond 32 bits", "8b0100000000", Limits{}, ErrVIntRange, "length: 4294967296: value too long to fit in integer"},
		{"length beyond the input", "05abcd", Limits{}, io.ErrUnexpectedEOF, "unexpected EOF"},
		{"huge length beyond the input", "8c7fffffff00", Limits{MaxLength: math.MaxInt32, MaxTotal: math.MaxInt64}, io.ErrUnexpectedEOF, "unexpected EOF"},
		{"length beyond the total limit", "0a" + strings.Repeat("00", 10), Limits{MaxTotal: 8}, ErrTooLarge, "input longer than 8 bytes: exceeds limit"},
		{"missing length", "", Limits{}, io.EOF, "length: EOF"},
		{"cut length", "8e01", Limits{}, io.ErrUnexpectedEOF, "length: unexpected EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := unhex(t, tc.in)
			readers := map[string]*Reader{
				"bytes":      NewBytesReader(in, tc.lim),
				"stream":     NewReader(bytes.NewReader(in), tc.lim),
				"one-by-one": NewReader(iotest.OneByteReader(bytes.NewReader(in)), tc.lim),
			}
			for name, r := range readers {
				_, err := r.ReadText()
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("%s ReadText err %v; want %v containing %q", name, err, tc.wantErr, tc.wantMsg)
				}
				if !strings.HasPrefix(err.Error(), "writable: read text") {
					t.Errorf("%s ReadText err %q does not say where", name, err)
				}
			}
			_, err := NewBytesReader(in, tc.lim).ReadBytes()
			if !errors.Is(err, tc.wantErr) || !strings.HasPrefix(err.Error(), "writable: read bytes") {
				t.Errorf("ReadBytes err %v; want %v", err, tc.wantErr)
			}
		})
	}
}

func TestReadRawRejectsNegativeAndShortCounts(t *testing.T) {
	r := NewBytesReader([]byte{1, 2, 3}, Limits{})
	if _, err := r.ReadRaw(-1); !errors.Is(err, ErrNegativeLength) {
		t.Errorf("ReadRaw(-1) err %v", err)
	}
	if _, err := r.ReadRaw(4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadRaw(4) err %v", err)
	}
	if b, err := r.ReadRaw(3); err != nil || !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("ReadRaw(3) = %x, %v", b, err)
	}
	if b, err := r.ReadRaw(0); err != nil || len(b) != 0 {
		t.Errorf("ReadRaw(0) at the end = %x, %v", b, err)
	}
}

// endlessZeros is a stream that never ends and has no Len.
type endlessZeros struct{}

func (endlessZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestEndlessStreamStopsAtTheTotalLimit(t *testing.T) {
	r := NewReader(endlessZeros{}, Limits{MaxTotal: 100})
	var err error
	reads := 0
	for err == nil && reads < 1000 {
		_, err = r.ReadVLong()
		reads++
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("after %d reads err %v, want ErrTooLarge", reads, err)
	}
	if r.Offset() != 100 {
		t.Errorf("Offset = %d, want 100", r.Offset())
	}
}

// fewBytes is a stream of n zero bytes with no Len method.
type fewBytes struct{ n int }

func (f *fewBytes) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

func TestHugeDeclaredLengthAllocatesOnlyWhatArrives(t *testing.T) {
	const arriving = 200 << 10
	in := AppendVInt(nil, math.MaxInt32)
	src := io.MultiReader(bytes.NewReader(in), &fewBytes{n: arriving})
	r := NewReader(src, Limits{MaxLength: math.MaxInt32, MaxTotal: math.MaxInt64})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.ReadBytes()
	runtime.ReadMemStats(&after)

	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want unexpected EOF", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8*arriving {
		t.Errorf("allocated %d bytes for %d arriving bytes", allocated, arriving)
	}
	if r.Offset() != int64(len(in)+arriving) {
		t.Errorf("Offset = %d, want %d", r.Offset(), len(in)+arriving)
	}
}

func TestLongFieldFromAStreamArrivesWhole(t *testing.T) {
	payload := bytes.Repeat([]byte("knit"), 100<<10) // above the direct-read size
	in := AppendBytes(nil, payload)
	r := NewReader(iotest.HalfReader(bytes.NewReader(in)), Limits{MaxLength: len(payload)})
	got, err := r.ReadBytes()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("ReadBytes: %d bytes, %v", len(got), err)
	}
}

func TestStreamReaderLeavesTheRestUnread(t *testing.T) {
	src := bytes.NewReader(unhex(t, "03616263 ffee"))
	r := NewReader(src, Limits{})
	if s, err := r.ReadText(); err != nil || s != "abc" {
		t.Fatalf("ReadText = %q, %v", s, err)
	}
	if src.Len() != 2 {
		t.Errorf("source has %d bytes left, want 2", src.Len())
	}
}

func TestReadErrorsFromTheSourceAreKept(t *testing.T) {
	boom := errors.New("disk on fire")
	r := NewReader(io.MultiReader(bytes.NewReader([]byte{0x8e, 0x01}), iotest.ErrReader(boom)), Limits{})
	if _, err := r.ReadVLong(); !errors.Is(err, boom) {
		t.Errorf("ReadVLong err %v, want %v", err, boom)
	}
	r = NewReader(io.MultiReader(bytes.NewReader([]byte{0x05, 'a'}), iotest.ErrReader(boom)), Limits{})
	if _, err := r.ReadText(); !errors.Is(err, boom) {
		t.Errorf("ReadText err %v, want %v", err, boom)
	}
}

func TestReadByteImplementsByteReader(t *testing.T) {
	var _ io.ByteReader = (*Reader)(nil)
	r := NewBytesReader([]byte{7}, Limits{})
	if b, err := r.ReadByte(); err != nil || b != 7 {
		t.Fatalf("ReadByte = %d, %v", b, err)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("ReadByte at end err %v, want EOF", err)
	}
}
