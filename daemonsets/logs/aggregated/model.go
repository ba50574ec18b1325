package aggregated

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf16"
)

// ACL is one entry of an application's ACL map (ApplicationAccessType name
// such as VIEW_APP or MODIFY_APP, and the ACL string).
type ACL struct {
	Type  string
	Value string
}

// Header is what an aggregated file says about its application.
type Header struct {
	Owner string
	ACLs  []ACL
	// NodeID is the NodeId string the Indexed format records
	// ("host:port"); the TFile format has none.
	NodeID string
}

// LogFile describes one log file of one container in an aggregated file.
type LogFile struct {
	ContainerID string
	Name        string
	Length      int64
	// ModTime is the file's modification time as `yarn logs` prints it:
	// recorded per file by the Indexed format, the aggregated file's own
	// modification time for the TFile format.
	ModTime time.Time
}

// Reader is an open aggregated file of either format.
type Reader interface {
	Header() Header
	// Walk calls fn for each log file in the order `yarn logs` prints
	// them. content yields exactly f.Length bytes and is valid only during
	// the call; what fn leaves unread is skipped. An error from fn stops
	// the walk and is returned as is.
	Walk(fn func(f LogFile, content io.Reader) error) error
}

// Open opens an aggregated file of format f and size bytes. modTime is the
// file's modification time, which the TFile format gives every log (see
// OpenTFile); the Indexed format records its own.
func Open(f Format, r io.ReaderAt, size int64, modTime time.Time) (Reader, error) {
	var rd Reader
	var err error
	if f == FormatIndexed {
		rd, err = OpenIndexed(r, size)
	} else {
		rd, err = OpenTFile(r, size, modTime)
	}
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// SourceFile is one local log file handed to a Writer.
type SourceFile struct {
	Name    string
	Size    int64
	ModTime time.Time
	// Open opens the file; at most Size bytes are read from it, and a file
	// that has shrunk is padded with zero bytes so the entry keeps the
	// length it declared, as the NodeManager takes the length first.
	Open func() (io.ReadCloser, error)
}

// Writer writes one node's aggregated file for one application.
type Writer interface {
	// WriteContainer appends one container's files in the given order.
	WriteContainer(containerID string, files []SourceFile) error
	// Close ends the file (index, trailer); it does not close the
	// underlying io.Writer.
	Close() error
}

// Format names one of the two aggregated formats, as
// yarn.log-aggregation.file-formats names them.
type Format string

const (
	FormatTFile   Format = "TFile"
	FormatIndexed Format = "IndexedFormat"
)

// copySource copies exactly f.Size bytes of f into w; a file that cannot
// be opened is replaced by the NodeManager's error text.
func copySource(w io.Writer, f SourceFile, buf []byte) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("open %s: %w", f.Name, err)
	}
	defer rc.Close()
	n, err := io.CopyBuffer(w, io.LimitReader(rc, f.Size), buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		var we *writeError
		if errors.As(err, &we) {
			return we.err
		}
		// A read error: pad as for a shrunk file.
		_ = err
	}
	for n < f.Size {
		chunk := min(f.Size-n, int64(len(buf)))
		clear(buf[:chunk])
		if _, err := w.Write(buf[:chunk]); err != nil {
			return err
		}
		n += chunk
	}
	return nil
}

// writeError marks an error of the destination, as opposed to the source.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// destWriter wraps destination errors so copySource can tell them apart.
type destWriter struct{ w io.Writer }

func (d destWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

// appendUTF appends Java's DataOutput.writeUTF encoding of s: a big-endian
// uint16 length and modified UTF-8.
func appendUTF(b []byte, s string) ([]byte, error) {
	enc := modifiedUTF8(s)
	if len(enc) > 0xffff {
		return b, fmt.Errorf("string of %d bytes is too long for writeUTF", len(enc))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(enc)))
	return append(b, enc...), nil
}

func modifiedUTF8(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, c := range utf16.Encode([]rune(s)) {
		switch {
		case c >= 1 && c <= 0x7f:
			out = append(out, byte(c))
		case c <= 0x7ff:
			out = append(out, 0xc0|byte(c>>6), 0x80|byte(c&0x3f))
		default:
			out = append(out, 0xe0|byte(c>>12), 0x80|byte(c>>6&0x3f), 0x80|byte(c&0x3f))
		}
	}
	return out
}

// decodeModifiedUTF8 decodes Java's modified UTF-8.
func decodeModifiedUTF8(b []byte) (string, error) {
	u := make([]uint16, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < 0x80:
			u = append(u, uint16(c))
			i++
		case c&0xe0 == 0xc0 && i+1 < len(b) && b[i+1]&0xc0 == 0x80:
			u = append(u, uint16(c&0x1f)<<6|uint16(b[i+1]&0x3f))
			i += 2
		case c&0xf0 == 0xe0 && i+2 < len(b) && b[i+1]&0xc0 == 0x80 && b[i+2]&0xc0 == 0x80:
			u = append(u, uint16(c&0x0f)<<12|uint16(b[i+1]&0x3f)<<6|uint16(b[i+2]&0x3f))
			i += 3
		default:
			return "", corruptf("bad modified UTF-8 at byte %d", i)
		}
	}
	return string(utf16.Decode(u)), nil
}

// readUTF reads Java's DataInput.readUTF.
func readUTF(r *bufio.Reader) (string, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return "", noEOF(err)
	}
	return decodeModifiedUTF8(b)
}

func modifiedUTF16(s string) []uint16 { return utf16.Encode([]rune(s)) }
