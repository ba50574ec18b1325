package mapred

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/knitdev/knit/protocols/writable"
)

// ChecksumSize is the length of the CRC32 that ends an IFile segment
// (IFileOutputStream with DataChecksum.Type.CRC32).
const ChecksumSize = 4

// eofMarker is IFile.EOF_MARKER, written as a VInt twice (key and value
// lengths) after the last record.
const eofMarker = -1

// Errors of ParseSegment.
var (
	// ErrChecksum is a segment whose CRC32 does not match its bytes, as
	// IFileInputStream reports it ("Checksum Error").
	ErrChecksum = errors.New("mapred: IFile checksum error")
	// ErrTruncated is a segment that ends before its EOF marker.
	ErrTruncated = errors.New("mapred: IFile segment truncated")
)

// Record is one key and value of a segment, as their serialized bytes (a
// Text key is its VInt length and UTF-8 bytes).
type Record struct {
	Key, Value []byte
}

// SegmentWriter writes one IFile segment (IFile.Writer without a codec) into
// a buffer: Append each record in the order the reducer should read them
// (sorted), then Close. Its zero value is ready to use.
type SegmentWriter struct {
	buf    []byte
	closed bool
}

// Append adds a record.
func (w *SegmentWriter) Append(key, value []byte) {
	w.buf = writable.AppendVInt(w.buf, int32(len(key)))
	w.buf = writable.AppendVInt(w.buf, int32(len(value)))
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, value...)
}

// Close ends the segment with the EOF marker and the checksum and returns
// its bytes and raw length (everything before the checksum, the index's
// rawLength); the part length (the index's partLength) is len(segment).
func (w *SegmentWriter) Close() (segment []byte, rawLength int64) {
	if !w.closed {
		w.buf = writable.AppendVInt(w.buf, eofMarker)
		w.buf = writable.AppendVInt(w.buf, eofMarker)
		raw := len(w.buf)
		w.buf = binary.BigEndian.AppendUint32(w.buf, crc32.ChecksumIEEE(w.buf))
		w.closed = true
		return w.buf, int64(raw)
	}
	return w.buf, int64(len(w.buf) - ChecksumSize)
}

// ParseSegment reads an IFile segment as IFile.Reader over IFileInputStream
// does: it checks the trailing CRC32 over the rest, then reads records up
// to the EOF marker. The records' bytes are sub-slices of segment. Bytes
// between the EOF marker and the checksum are an error.
func ParseSegment(segment []byte) ([]Record, error) {
	if len(segment) < ChecksumSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than its checksum", ErrTruncated, len(segment))
	}
	data := segment[:len(segment)-ChecksumSize]
	if got, want := crc32.ChecksumIEEE(data), binary.BigEndian.Uint32(segment[len(data):]); got != want {
		return nil, fmt.Errorf("%w: computed %08x, stored %08x", ErrChecksum, got, want)
	}
	var records []Record
	rest := data
	for {
		keyLen, n, err := writable.DecodeVInt(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: key length: %v", ErrTruncated, err)
		}
		rest = rest[n:]
		valueLen, n, err := writable.DecodeVInt(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: value length: %v", ErrTruncated, err)
		}
		rest = rest[n:]
		if keyLen == eofMarker && valueLen == eofMarker {
			break
		}
		if keyLen < 0 || valueLen < 0 {
			return nil, fmt.Errorf("mapred: IFile: negative key length %d or value length %d", keyLen, valueLen)
		}
		if int64(keyLen)+int64(valueLen) > int64(len(rest)) {
			return nil, fmt.Errorf("%w: record of %d+%d bytes with %d left", ErrTruncated, keyLen, valueLen, len(rest))
		}
		records = append(records, Record{Key: rest[:keyLen:keyLen], Value: rest[keyLen : keyLen+valueLen : keyLen+valueLen]})
		rest = rest[keyLen+valueLen:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("mapred: IFile: %d bytes after the EOF marker", len(rest))
	}
	return records, nil
}

// AppendText appends s as a Text key: VInt byte length, then the bytes.
func AppendText(dst []byte, s string) []byte { return writable.AppendText(dst, s) }

// ParseText reads a Text key that fills b.
func ParseText(b []byte) (string, error) {
	n, size, err := writable.DecodeVInt(b)
	if err != nil {
		return "", fmt.Errorf("mapred: Text length: %w", err)
	}
	if n < 0 || int(n) != len(b)-size {
		return "", fmt.Errorf("mapred: Text of %d bytes in a key of %d", n, len(b)-size)
	}
	return string(b[size:]), nil
}

// CompareText orders two Text keys as Text.Comparator does: by their
// bytes after the length, unsigned, shorter first on a common prefix.
func CompareText(a, b []byte) int {
	return bytes.Compare(textBytes(a), textBytes(b))
}

func textBytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	return b[writable.DecodeVIntSize(b[0]):]
}

// AppendInt appends v as an IntWritable: 4 bytes, big-endian.
func AppendInt(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }

// ParseInt reads an IntWritable.
func ParseInt(b []byte) (int32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("mapred: IntWritable of %d bytes", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// TextHashCode is Text.hashCode (WritableComparator.hashBytes over the
// UTF-8 bytes): 31*h + signed byte, from 1.
func TextHashCode(s string) int32 {
	h := int32(1)
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(int8(s[i]))
	}
	return h
}

// Partition is HashPartitioner.getPartition for a Text key:
// (hashCode & Integer.MAX_VALUE) % reduces.
func Partition(key string, reduces int) int {
	return int(TextHashCode(key)&0x7fffffff) % reduces
}
