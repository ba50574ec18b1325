package aggregated

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// The keys AggregatedLogFormat reserves; every other key is a container id.
const (
	keyVersion = "VERSION"
	keyACL     = "APPLICATION_ACL"
	keyOwner   = "APPLICATION_OWNER"
	// tfileLogVersion is AggregatedLogFormat's VERSION value.
	tfileLogVersion = 1
)

// TFileReader reads an aggregated file in the TFile format.
type TFileReader struct {
	t       *tfileReader
	header  Header
	modTime time.Time
}

var _ Reader = (*TFileReader)(nil)

var errStop = errors.New("stop")

// OpenTFile reads the indexes and the header entries of a TFile-format
// aggregated file of size bytes. modTime is the file's modification time,
// which `yarn logs` prints as every log's LogLastModifiedTime.
func OpenTFile(r io.ReaderAt, size int64, modTime time.Time) (*TFileReader, error) {
	t, err := openTFile(r, size)
	if err != nil {
		return nil, err
	}
	tr := &TFileReader{t: t, modTime: modTime}
	err = t.scan(func(key []byte, value io.Reader) error {
		name, err := decodeKey(key)
		if err != nil {
			return err
		}
		br := bufio.NewReader(value)
		switch name {
		case keyVersion:
			var v [4]byte
			if _, err := io.ReadFull(br, v[:]); err != nil {
				return fmt.Errorf("VERSION: %w", noEOF(err))
			}
			if n := binary.BigEndian.Uint32(v[:]); n != tfileLogVersion {
				return corruptf("aggregated log version %d", n)
			}
		case keyACL:
			for {
				typ, err := readUTF(br)
				if err == io.EOF {
					break
				}
				if err != nil {
					return fmt.Errorf("APPLICATION_ACL: %w", noEOF(err))
				}
				acl, err := readUTF(br)
				if err != nil {
					return fmt.Errorf("APPLICATION_ACL: %w", noEOF(err))
				}
				tr.header.ACLs = append(tr.header.ACLs, ACL{Type: typ, Value: acl})
			}
		case keyOwner:
			if tr.header.Owner, err = readUTF(br); err != nil {
				return fmt.Errorf("APPLICATION_OWNER: %w", noEOF(err))
			}
		default:
			return errStop
		}
		return nil
	})
	if err != nil && err != errStop {
		return nil, err
	}
	return tr, nil
}

func decodeKey(key []byte) (string, error) {
	if len(key) < 2 || int(binary.BigEndian.Uint16(key)) != len(key)-2 {
		return "", corruptf("key %q is not a writeUTF string", key)
	}
	return decodeModifiedUTF8(key[2:])
}

// Header returns the owner and ACLs.
func (r *TFileReader) Header() Header { return r.header }

// Walk visits the containers in file order and each container's files in
// the order they were written.
func (r *TFileReader) Walk(fn func(f LogFile, content io.Reader) error) error {
	return r.t.scan(func(key []byte, value io.Reader) error {
		id, err := decodeKey(key)
		if err != nil {
			return err
		}
		if id == keyVersion || id == keyACL || id == keyOwner {
			return nil
		}
		br := bufio.NewReader(value)
		for {
			name, err := readUTF(br)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("container %s: %w", id, noEOF(err))
			}
			ls, err := readUTF(br)
			if err != nil {
				return fmt.Errorf("container %s, %s: %w", id, name, noEOF(err))
			}
			n, err := strconv.ParseInt(ls, 10, 64)
			if err != nil || n < 0 {
				return corruptf("container %s, %s: length %q", id, name, ls)
			}
			lr := &io.LimitedReader{R: br, N: n}
			if err := fn(LogFile{ContainerID: id, Name: name, Length: n, ModTime: r.modTime}, &strictReader{lr}); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, lr); err != nil {
				return fmt.Errorf("container %s, %s: %w", id, name, err)
			}
			if lr.N > 0 {
				return corruptf("container %s, %s: %d bytes missing", id, name, lr.N)
			}
		}
	})
}

// strictReader turns a short LimitedReader into io.ErrUnexpectedEOF.
type strictReader struct{ lr *io.LimitedReader }

func (s *strictReader) Read(p []byte) (int, error) {
	n, err := s.lr.Read(p)
	if err == io.EOF && s.lr.N > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// TFileWriter writes an aggregated file in the TFile format, as
// AggregatedLogFormat.LogWriter does: VERSION, APPLICATION_ACL,
// APPLICATION_OWNER, then one entry per container.
type TFileWriter struct {
	t   *tfileWriter
	buf []byte
}

var _ Writer = (*TFileWriter)(nil)

// NewTFileWriter starts a TFile-format file on w with its header entries.
func NewTFileWriter(w io.Writer, h Header) (*TFileWriter, error) {
	tw := &TFileWriter{t: newTFileWriter(w), buf: make([]byte, 65535)}
	if err := tw.appendKV(keyVersion, binary.BigEndian.AppendUint32(nil, tfileLogVersion)); err != nil {
		return nil, err
	}
	var acl []byte
	for _, a := range h.ACLs {
		var err error
		if acl, err = appendUTF(acl, a.Type); err != nil {
			return nil, err
		}
		if acl, err = appendUTF(acl, a.Value); err != nil {
			return nil, err
		}
	}
	if err := tw.appendKV(keyACL, acl); err != nil {
		return nil, err
	}
	owner, err := appendUTF(nil, h.Owner)
	if err != nil {
		return nil, err
	}
	if err := tw.appendKV(keyOwner, owner); err != nil {
		return nil, err
	}
	return tw, nil
}

func (w *TFileWriter) appendKV(key string, value []byte) error {
	k, err := appendUTF(nil, key)
	if err != nil {
		return err
	}
	return w.t.append(k, func(vw io.Writer) error {
		_, err := vw.Write(value)
		return err
	})
}

// WriteContainer appends the container's entry: for each file its name,
// its decimal length and its bytes.
func (w *TFileWriter) WriteContainer(containerID string, files []SourceFile) error {
	k, err := appendUTF(nil, containerID)
	if err != nil {
		return err
	}
	return w.t.append(k, func(vw io.Writer) error {
		for _, f := range files {
			var hdr []byte
			if hdr, err = appendUTF(hdr, f.Name); err != nil {
				return err
			}
			if hdr, err = appendUTF(hdr, strconv.FormatInt(f.Size, 10)); err != nil {
				return err
			}
			if _, err := vw.Write(hdr); err != nil {
				return err
			}
			if err := copySource(&pieceWriter{w: destWriter{vw}}, f, w.buf); err != nil {
				return fmt.Errorf("container %s: %w", containerID, err)
			}
		}
		return nil
	})
}

// pieceWriter hands the destination writes of at most 65535 bytes, the
// NodeManager's copy buffer, so chunking matches its files.
type pieceWriter struct{ w io.Writer }

func (p *pieceWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		c := min(len(b), 65535)
		m, err := p.w.Write(b[:c])
		n += m
		if err != nil {
			return n, err
		}
		b = b[c:]
	}
	return n, nil
}

// Close writes the TFile's indexes and trailer.
func (w *TFileWriter) Close() error { return w.t.close() }
