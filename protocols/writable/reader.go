package writable

import (
	"bytes"
	"fmt"
	"io"
)

// Default limits of a Reader.
const (
	// DefaultMaxLength bounds one length-prefixed field; it is Hadoop's Text.DEFAULT_MAX_LEN.
	DefaultMaxLength = 1 << 20
	// DefaultMaxTotal bounds everything one Reader consumes.
	DefaultMaxTotal = 16 << 20
)

// directReadMax is the largest field read into a buffer allocated up front
// when the source cannot say how much it holds; longer fields grow with the
// bytes that actually arrive.
const directReadMax = 4 << 10

var _ io.ByteReader = (*Reader)(nil)

// Limits bound what a Reader accepts. Zero fields mean the defaults.
type Limits struct {
	// MaxLength is the largest length a Text or byte-array prefix may declare.
	MaxLength int
	// MaxTotal is the most bytes the Reader consumes before it fails with ErrTooLarge.
	MaxTotal int64
}

// Reader reads Writable primitives from a stream or a byte slice. It reads
// no further than each value it is asked for, so the source can be used
// again afterwards. A Reader is not safe for concurrent use.
type Reader struct {
	src       io.Reader
	off       int64 // bytes consumed so far
	maxLength int
	maxTotal  int64
	one       [1]byte
	vlong     [8]byte
}

// NewReader reads from r within lim. If r has a Len() int method (as
// bytes.Reader and strings.Reader do), lengths beyond it fail at once.
func NewReader(r io.Reader, lim Limits) *Reader {
	rd := &Reader{src: r}
	rd.setLimits(lim)
	return rd
}

// NewBytesReader reads from b within lim. Values it returns are copies;
// b is never modified or retained past the Reader.
func NewBytesReader(b []byte, lim Limits) *Reader {
	return NewReader(bytes.NewReader(b), lim)
}

func (r *Reader) setLimits(lim Limits) {
	r.maxLength = lim.MaxLength
	if r.maxLength <= 0 {
		r.maxLength = DefaultMaxLength
	}
	r.maxTotal = lim.MaxTotal
	if r.maxTotal <= 0 {
		r.maxTotal = DefaultMaxTotal
	}
}

// Offset is the number of bytes the Reader has consumed.
func (r *Reader) Offset() int64 { return r.off }

// ReadByte reads one byte; at the end of the input the error wraps io.EOF.
func (r *Reader) ReadByte() (byte, error) {
	b, err := r.readByte()
	if err != nil {
		return 0, fmt.Errorf("writable: read byte: %w", err)
	}
	return b, nil
}

// ReadVLong reads a zero-compressed VLong. At a clean end of input the
// error wraps io.EOF, in the middle of the value io.ErrUnexpectedEOF.
func (r *Reader) ReadVLong() (int64, error) {
	v, err := r.readVLong()
	if err != nil {
		return 0, fmt.Errorf("writable: read vlong: %w", err)
	}
	return v, nil
}

// ReadVInt reads a VLong that must fit in 32 bits, as WritableUtils.readVInt.
func (r *Reader) ReadVInt() (int32, error) {
	v, err := r.readVInt()
	if err != nil {
		return 0, fmt.Errorf("writable: read vint: %w", err)
	}
	return v, nil
}

// ReadText reads a Text: a VInt length within MaxLength, then that many
// bytes. The bytes are returned as they are, valid UTF-8 or not, so that
// writing the string back gives the same bytes.
func (r *Reader) ReadText() (string, error) {
	n, err := r.readLength()
	if err != nil {
		return "", fmt.Errorf("writable: read text length: %w", err)
	}
	b, err := r.readN(n)
	if err != nil {
		return "", fmt.Errorf("writable: read text: %w", err)
	}
	return string(b), nil
}

// ReadBytes reads a VInt length within MaxLength, then that many bytes,
// into a new slice (non-nil, even when empty).
func (r *Reader) ReadBytes() ([]byte, error) {
	n, err := r.readLength()
	if err != nil {
		return nil, fmt.Errorf("writable: read bytes length: %w", err)
	}
	b, err := r.readN(n)
	if err != nil {
		return nil, fmt.Errorf("writable: read bytes: %w", err)
	}
	return b, nil
}

// ReadRaw reads exactly n bytes with no prefix into a new slice. n is
// bounded only by what is left of MaxTotal, so a caller that took n from the
// stream should check it against its own limit first.
func (r *Reader) ReadRaw(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("writable: read raw: %d: %w", n, ErrNegativeLength)
	}
	b, err := r.readN(n)
	if err != nil {
		return nil, fmt.Errorf("writable: read raw: %w", err)
	}
	return b, nil
}

// reserve fails if consuming n more bytes would pass MaxTotal.
func (r *Reader) reserve(n int) error {
	if int64(n) > r.maxTotal-r.off {
		return fmt.Errorf("input longer than %d bytes: %w", r.maxTotal, ErrTooLarge)
	}
	return nil
}

func (r *Reader) readByte() (byte, error) {
	if err := r.reserve(1); err != nil {
		return 0, err
	}
	if br, ok := r.src.(io.ByteReader); ok {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		r.off++
		return b, nil
	}
	if _, err := io.ReadFull(r.src, r.one[:]); err != nil {
		return 0, err
	}
	r.off++
	return r.one[0], nil
}

func (r *Reader) readVLong() (int64, error) {
	first, err := r.readByte()
	if err != nil {
		return 0, err
	}
	rest := r.vlong[:DecodeVIntSize(first)-1]
	if err := r.fill(rest); err != nil {
		return 0, err
	}
	return vlongValue(first, rest), nil
}

func (r *Reader) readVInt() (int32, error) {
	v, err := r.readVLong()
	if err != nil {
		return 0, err
	}
	return toVInt(v)
}

// readLength reads a VInt length prefix and checks it against MaxLength.
func (r *Reader) readLength() (int, error) {
	n, err := r.readVInt()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("%d: %w", n, ErrNegativeLength)
	}
	if int(n) > r.maxLength {
		return 0, fmt.Errorf("%d above %d: %w", n, r.maxLength, ErrTooLarge)
	}
	return int(n), nil
}

// fill reads exactly len(p) bytes into p; p is small (at most 8 bytes).
func (r *Reader) fill(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if err := r.reserve(len(p)); err != nil {
		return err
	}
	n, err := io.ReadFull(r.src, p)
	r.off += int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readN reads exactly n >= 0 bytes into a new slice, allocating no more
// than the bytes that are really there.
func (r *Reader) readN(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	if err := r.reserve(n); err != nil {
		return nil, err
	}
	// A source that knows its length (a slice) refuses an impossible
	// length before anything is allocated.
	if l, ok := r.src.(interface{ Len() int }); ok {
		if left := l.Len(); n > left {
			return nil, fmt.Errorf("%d bytes declared, %d left: %w", n, left, io.ErrUnexpectedEOF)
		}
	}
	if n <= directReadMax {
		b := make([]byte, n)
		got, err := io.ReadFull(r.src, b)
		r.off += int64(got)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%d bytes declared, %d read: %w", n, got, err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r.src, int64(n))
	r.off += got
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%d bytes declared, %d read: %w", n, got, err)
	}
	return buf.Bytes(), nil
}
