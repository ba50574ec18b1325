package procnode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// A run's log is in the CRI logging format container runtimes write under
// /var/log/pods, one record per line:
//
//	2016-10-06T00:17:09.669794202Z stdout F the line's content
//
// the time the runtime read it (RFC 3339, nanoseconds), the stream, the
// tag (F: the record ends a line; P: a part of a longer line, continued by
// the next record), and the content without its newline. The shim writes
// it; the kubelet API reads it back for containerLogs, with the times its
// timestamps and sinceSeconds need.

const (
	streamStdout = "stdout"
	streamStderr = "stderr"
	tagFull      = "F"
	tagPartial   = "P"
	// maxLogLine is containerd's: a longer line is split into P records.
	maxLogLine = 16 << 10
	// criTimeFormat is the runtime's; the kubelet writes times the same way.
	criTimeFormat = time.RFC3339Nano
)

// criLogWriter appends the records of a run's streams to its log; it is
// safe for the two stream copiers at once.
type criLogWriter struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// copyStream reads r to its end and appends each line to the log as
// records of stream, as containerd's CRI plugin does: a line longer than
// maxLogLine is cut into P records, and a last line without a newline is
// written as a full one.
func (l *criLogWriter) copyStream(r io.Reader, stream string) error {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		tag := tagFull
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			tag = tagPartial
		case len(line) > 0 && line[len(line)-1] == '\n':
			line = line[:len(line)-1]
		}
		if len(line) > 0 || (err == nil) {
			if werr := l.write(stream, tag, line); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

func (l *criLogWriter) write(stream, tag string, content []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := make([]byte, 0, len(criTimeFormat)+len(stream)+len(content)+8)
	rec = l.now().UTC().AppendFormat(rec, criTimeFormat)
	rec = append(rec, ' ')
	rec = append(rec, stream...)
	rec = append(rec, ' ')
	rec = append(rec, tag...)
	rec = append(rec, ' ')
	rec = append(rec, content...)
	rec = append(rec, '\n')
	_, err := l.w.Write(rec)
	return err
}

// criRecord is one decoded record.
type criRecord struct {
	Time    time.Time
	Stream  string
	Partial bool
	Content []byte // without the newline; aliases the decoded line
}

// errBadRecord is any line that is not a CRI log record.
var errBadRecord = errors.New("malformed CRI log record")

// parseCRIRecord decodes one line of a log, without its newline. Tags may
// be several, ':'-separated (the format allows for more); the first says
// full or partial, as the kubelet reads it.
func parseCRIRecord(line []byte) (criRecord, error) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return criRecord{}, fmt.Errorf("%w: no time", errBadRecord)
	}
	t, err := time.Parse(criTimeFormat, string(ts))
	if err != nil {
		return criRecord{}, fmt.Errorf("%w: time: %w", errBadRecord, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return criRecord{}, fmt.Errorf("%w: no stream", errBadRecord)
	}
	rec := criRecord{Time: t}
	switch string(stream) {
	case streamStdout, streamStderr:
		rec.Stream = string(stream)
	default:
		return criRecord{}, fmt.Errorf("%w: stream %q", errBadRecord, stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return criRecord{}, fmt.Errorf("%w: no tag", errBadRecord)
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(first) {
	case tagFull:
	case tagPartial:
		rec.Partial = true
	default:
		return criRecord{}, fmt.Errorf("%w: tag %q", errBadRecord, tags)
	}
	rec.Content = content
	return rec, nil
}

// criContent is the output a log holds, records joined back into lines;
// a first line cut by whoever read a tail of the file, and lines that are
// no record, are skipped.
func criContent(data []byte) []byte {
	var out []byte
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !found {
			break // a record still being written
		}
		rec, err := parseCRIRecord(line)
		if err != nil {
			continue
		}
		out = append(out, rec.Content...)
		if !rec.Partial {
			out = append(out, '\n')
		}
	}
	return out
}

// logTailBytes is how much of a log's end is read to find the last lines
// of its output for a termination message: the kubelet's 80 lines and
// 2048 bytes, with room for each record's time, stream and tag.
const logTailBytes = 64 << 10

// readLogOutput is the output held in the last limit bytes of the log at p.
func readLogOutput(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := max(st.Size()-limit, 0)
	data := make([]byte, st.Size()-start)
	if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if start > 0 {
		// The read began inside a record: drop it.
		_, data, _ = bytes.Cut(data, []byte{'\n'})
	}
	return criContent(data), nil
}

// ReadLog is the output, stdout and stderr in the order written, that the
// run log at path (see LogPath) holds.
func ReadLog(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return criContent(data), nil
}
