package shuffle

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/writable"
)

// Shuffle protocol constants (ShuffleHeader, SecureShuffleUtils, ShuffleHandler).
const (
	httpHeaderName      = "mapreduce"
	httpHeaderVersion   = "1.0.0"
	headerURLHash       = "UrlHash"
	retryAfterMillis    = "1000" // ShuffleHandler.FETCH_RETRY_DELAY
	statusTooManyReqs   = 429
	sendChunkBytes      = 8 << 20 // one sendfile run between write deadlines
	lingerAfterError    = time.Second
	lingerDrainMaxBytes = 64 << 10
)

// Answers to bad requests, as ShuffleChannelHandler words them.
const (
	msgIncompatible  = "Incompatible shuffle request version"
	msgRequired      = "Required param job, map and reduce"
	msgTooMany       = "Too many job/reduce parameters"
	msgBadReduce     = "Bad reduce parameter"
	msgNoHash        = "fetcher cannot be authenticated"
	msgHashFailed    = "Verification of the hashReply failed"
	msgNoTokenFormat = "Can't find job token for job %s !!"
)

// statusText holds the reason phrases Netty sends.
var statusText = map[int]string{
	200:               "OK",
	400:               "Bad Request",
	401:               "Unauthorized",
	403:               "Forbidden",
	405:               "Method Not Allowed",
	413:               "Request Entity Too Large",
	statusTooManyReqs: "TOO MANY REQUESTS",
	500:               "Internal Server Error",
}

// answerError is a failure answered with a status and a message.
type answerError struct {
	status int
	msg    string
}

func (e *answerError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

// serveConn answers the requests of one connection until it closes, an
// answer closes it, or ctx ends (Serve closes the connection then).
func (s *Service) serveConn(ctx context.Context, raw net.Conn) {
	n := s.active.Add(1)
	defer s.active.Add(-1)
	log := s.log.With("remote", raw.RemoteAddr().String())

	conn := raw
	if s.cfg.TLS != nil {
		tc := tls.Server(raw, s.cfg.TLS)
		raw.SetDeadline(time.Now().Add(s.cfg.ReadHeaderTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			log.DebugContext(ctx, "tls handshake", "err", err)
			return
		}
		raw.SetDeadline(time.Time{})
		conn = tc
	}
	bufSize := max(s.cfg.MaxRequestLineBytes, 4096)
	br := bufio.NewReaderSize(conn, bufSize)
	bw := bufio.NewWriterSize(conn, 4096)

	if limit := s.cfg.MaxConnections; limit > 0 && n > int64(limit) {
		log.InfoContext(ctx, "too many connections", "open", n, "max", limit)
		s.writeError(conn, bw, statusTooManyReqs, "", true)
		s.lingerClose(raw, br)
		return
	}
	for first := true; ; first = false {
		wait := s.cfg.KeepAliveTimeout
		if first {
			wait = s.cfg.ReadHeaderTimeout
		}
		conn.SetReadDeadline(time.Now().Add(wait))
		req, err := readRequest(br, s.cfg.MaxRequestLineBytes, s.cfg.MaxHeaderBytes)
		if err != nil {
			if errors.Is(err, errHeadTooLarge) || errors.Is(err, errMalformed) {
				log.InfoContext(ctx, "bad request", "err", err)
				s.writeError(conn, bw, 400, "", false)
				s.lingerClose(raw, br)
			}
			return
		}
		conn.SetReadDeadline(time.Time{})
		if req.contentLength > maxBodyBytes {
			s.writeError(conn, bw, 413, "", false)
			s.lingerClose(raw, br)
			return
		}
		if req.contentLength > 0 {
			conn.SetReadDeadline(time.Now().Add(s.cfg.ReadHeaderTimeout))
			if _, err := io.CopyN(io.Discard, br, req.contentLength); err != nil {
				return
			}
			conn.SetReadDeadline(time.Time{})
		}
		keep, err := s.answer(ctx, conn, bw, req, log)
		if err != nil {
			var ae *answerError
			if errors.As(err, &ae) {
				s.writeError(conn, bw, ae.status, ae.msg, ae.status == statusTooManyReqs)
				s.lingerClose(raw, br)
				return
			}
			log.InfoContext(ctx, "transfer cut", "err", err)
			return
		}
		if !keep {
			return
		}
	}
}

// answer answers one request. A nil error with keep false means the
// connection closes after a complete answer; an *answerError is to be
// answered as an error; any other error means the answer was cut short.
func (s *Service) answer(ctx context.Context, conn net.Conn, bw *bufio.Writer, req *request, log *slog.Logger) (keep bool, err error) {
	if req.method != "GET" {
		return false, &answerError{405, ""}
	}
	name, _ := req.header("name")
	version, _ := req.header("version")
	if name != httpHeaderName || version != httpHeaderVersion {
		return false, &answerError{400, msgIncompatible}
	}
	q, err := parseQuery(req.uri)
	if err != nil {
		log.InfoContext(ctx, "bad query", "err", err)
		return false, &answerError{500, ""}
	}
	keepAlive := s.cfg.KeepAliveEnabled
	if ka := q["keepAlive"]; len(ka) == 1 && strings.EqualFold(ka[0], "true") {
		keepAlive = true
	}
	mapIDs, reduceQ, jobQ := splitMaps(q["map"]), q["reduce"], q["job"]
	if mapIDs == nil || reduceQ == nil || jobQ == nil {
		return false, &answerError{400, msgRequired}
	}
	if len(reduceQ) != 1 || len(jobQ) != 1 {
		return false, &answerError{400, msgTooMany}
	}
	reduce, err := parseJavaInt(reduceQ[0])
	if err != nil {
		return false, &answerError{400, msgBadReduce}
	}
	jobName := jobQ[0]
	log = log.With("job", jobName, "reduce", reduce)

	j, ok := s.lookupJob(jobName)
	if !ok {
		log.InfoContext(ctx, "request for an unknown job")
		return false, &answerError{401, fmt.Sprintf(msgNoTokenFormat, jobName)}
	}
	urlHash, ok := req.header(headerURLHash)
	if !ok {
		log.InfoContext(ctx, "request without UrlHash")
		return false, &answerError{401, msgNoHash}
	}
	if !verifyShuffleHash(j.secret, []byte(hashMessage(s.port, req.uri)), urlHash) {
		log.InfoContext(ctx, "request with a bad UrlHash")
		return false, &answerError{401, msgHashFailed}
	}
	reply := shuffleHash(j.secret, []byte(urlHash))

	rk := reducerKey{jobName, reduce}
	if !s.acquireTransfer(rk) {
		log.InfoContext(ctx, "too many transfers for the reducer", "max", s.cfg.MaxTransfersPerReducer)
		return false, &answerError{statusTooManyReqs, ""}
	}
	defer s.releaseTransfer(rk)

	outs, err := s.prepare(ctx, j, jobName, reduce, mapIDs)
	defer closeOutputs(s, outs)
	if err != nil {
		log.WarnContext(ctx, "shuffle error", "err", err)
		var ae *answerError
		if errors.As(err, &ae) {
			return false, err
		}
		return false, &answerError{500, err.Error()}
	}
	var length int64
	for _, o := range outs {
		length += int64(len(o.header)) + o.rec.part
	}
	bw.Write(appendOKHead(nil, reply, keepAlive, s.keepAliveSeconds(), length))
	for i := range outs {
		o := &outs[i]
		bw.Write(o.header)
		if o.f == nil {
			f, err := s.roots.openIn(o.dir, mapOutputBase(j), o.rel)
			if err != nil {
				return false, fmt.Errorf("reopen %s: %w", o.rel, err)
			}
			o.f = f
			s.fileOpened()
		}
		if err := s.sendBody(conn, bw, o.f, o.rec.start, o.rec.part); err != nil {
			return false, fmt.Errorf("send %s: %w", o.mapID, err)
		}
		o.f.Close()
		o.f = nil
		s.fileClosed()
	}
	conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteIdleTimeout))
	if err := bw.Flush(); err != nil {
		return false, fmt.Errorf("flush: %w", err)
	}
	log.DebugContext(ctx, "served", "maps", len(outs), "bytes", length)
	return keepAlive, nil
}

// mapOutput is one map's part of an answer.
type mapOutput struct {
	mapID  string
	rec    indexRecord
	header []byte // the ShuffleHeader Writable
	dir    int    // the local dir holding file.out
	rel    string // file.out relative to the job's output folder
	f      *os.File
}

// prepare finds every map's index record and data file before anything is
// sent, as populateHeaders does, so that a missing map is answered 500. It
// opens and keeps the first MaxSessionOpenFiles-1 data files for the send
// and only looks up the others, which the send opens one at a time; the
// outputs it returns hold their open files even on error, for
// closeOutputs.
func (s *Service) prepare(ctx context.Context, j job, jobName string, reduce int32, mapIDs []string) ([]mapOutput, error) {
	base := mapOutputBase(j)
	outs := make([]mapOutput, 0, len(mapIDs))
	for i, m := range mapIDs {
		indexRel := m + "/" + indexFileName
		if !isPathElement(m) {
			return outs, &answerError{500, (&errNotFound{rel: base + "/" + indexRel}).Error()}
		}
		recs, err := s.index.Get(ctx, indexKey{jobName, m}, func() ([]indexRecord, int64, error) {
			recs, err := s.roots.readIndexFile(base, indexRel)
			return recs, int64(len(recs)) * indexRecordBytes, err
		})
		if err != nil {
			return outs, indexAnswer(err, base+"/"+indexRel)
		}
		if reduce < 0 || int(reduce) >= len(recs) {
			return outs, &answerError{500, fmt.Sprintf("Invalid request  Map Id = %s Reducer = %d Index Info Length = %d", m, reduce, len(recs))}
		}
		o := mapOutput{mapID: m, rec: recs[reduce], rel: m + "/" + dataFileName}
		o.header = appendShuffleHeader(nil, m, o.rec.part, o.rec.raw, reduce)
		// Within the open-files budget the file is opened now and kept;
		// beyond it, found and checked now, opened when its turn comes.
		var st os.FileInfo
		if i < s.cfg.MaxSessionOpenFiles-1 {
			f, d, err := s.roots.open(base, o.rel)
			if err != nil {
				return outs, &answerError{500, err.Error()}
			}
			s.fileOpened()
			o.f, o.dir = f, d
			st, err = f.Stat()
			if err != nil {
				f.Close()
				s.fileClosed()
				return outs, &answerError{500, err.Error()}
			}
		} else {
			if st, o.dir, err = s.roots.stat(base, o.rel); err != nil {
				return outs, &answerError{500, err.Error()}
			}
		}
		outs = append(outs, o)
		if !st.Mode().IsRegular() || o.rec.start > st.Size() || o.rec.part > st.Size()-o.rec.start {
			return outs, &answerError{500, fmt.Sprintf("map output %s/%s is shorter than its index says", base, o.rel)}
		}
	}
	return outs, nil
}

// indexAnswer words an index failure as Hadoop does.
func indexAnswer(err error, rel string) error {
	var nf *errNotFound
	switch {
	case errors.As(err, &nf):
		return &answerError{500, nf.Error()}
	case errors.Is(err, errIndexChecksum):
		return &answerError{500, "Checksum error reading spill index: " + rel}
	case errors.Is(err, errIndexMalformed):
		return &answerError{500, "Malformed spill index: " + rel}
	}
	return &answerError{500, err.Error()}
}

// closeOutputs closes the data files prepare kept open.
func closeOutputs(s *Service, outs []mapOutput) {
	for i := range outs {
		if outs[i].f != nil {
			outs[i].f.Close()
			outs[i].f = nil
			s.fileClosed()
		}
	}
}

func (s *Service) fileOpened() {
	n := s.openFiles.Add(1)
	for {
		m := s.maxOpenFiles.Load()
		if n <= m || s.maxOpenFiles.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *Service) fileClosed() { s.openFiles.Add(-1) }

// sendBody flushes bw, then sends n bytes of f from start. On a plain TCP
// connection the bytes go by sendfile (TCPConn.ReadFrom of a LimitedReader
// over the *os.File), in runs of sendChunkBytes, each with a fresh write
// deadline; otherwise through a buffer of TLSBufferBytes.
func (s *Service) sendBody(conn net.Conn, bw *bufio.Writer, f *os.File, start, n int64) error {
	conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteIdleTimeout))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seek: %w", err)
	}
	var buf []byte
	tcp, zeroCopy := conn.(*net.TCPConn)
	if !zeroCopy {
		s.bufferedCopies.Add(1)
		buf = make([]byte, s.cfg.TLSBufferBytes)
	}
	for n > 0 {
		chunk := min(n, sendChunkBytes)
		conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteIdleTimeout))
		src := &io.LimitedReader{R: f, N: chunk}
		var w int64
		var err error
		if zeroCopy {
			w, err = tcp.ReadFrom(src)
		} else {
			w, err = io.CopyBuffer(onlyWriter{conn}, src, buf)
		}
		n -= w
		if err != nil {
			return err
		}
		if w < chunk {
			return io.ErrUnexpectedEOF
		}
	}
	return nil
}

// onlyWriter hides every method but Write, so io.CopyBuffer uses the buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// keepAliveSeconds is the Keep-Alive header's timeout: whole seconds,
// rounded up.
func (s *Service) keepAliveSeconds() int {
	return int((s.cfg.KeepAliveTimeout + time.Second - 1) / time.Second)
}

// writeError sends an error answer as ShuffleChannelHandler.sendError
// does: content-type, name, version, Retry-After for 429, content-length.
func (s *Service) writeError(conn net.Conn, bw *bufio.Writer, status int, msg string, retryAfter bool) {
	conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteIdleTimeout))
	bw.Write(appendErrorHead(nil, status, msg, retryAfter))
	bw.WriteString(msg)
	bw.Flush()
}

// lingerClose ends an error answer without losing it: it half-closes a TCP
// connection, then reads and drops what the peer still sends for a moment,
// so that unread request bytes do not turn the close into a reset that
// discards the answer before the peer reads it.
func (s *Service) lingerClose(raw net.Conn, br *bufio.Reader) {
	tcp, ok := raw.(*net.TCPConn)
	if !ok || s.cfg.TLS != nil {
		return
	}
	if err := tcp.CloseWrite(); err != nil {
		return
	}
	tcp.SetReadDeadline(time.Now().Add(lingerAfterError))
	io.CopyN(io.Discard, br, lingerDrainMaxBytes)
}

// appendShuffleHeader appends ShuffleHeader.write: Text map id, VLong
// compressed length, VLong raw length, VInt reduce.
func appendShuffleHeader(b []byte, mapID string, part, raw int64, reduce int32) []byte {
	b = writable.AppendText(b, mapID)
	b = writable.AppendVLong(b, part)
	b = writable.AppendVLong(b, raw)
	return writable.AppendVInt(b, reduce)
}

// appendOKHead appends the head of a 200 answer in ShuffleHandler's order
// and case.
func appendOKHead(b []byte, reply string, keepAlive bool, timeoutSeconds int, length int64) []byte {
	b = append(b, "HTTP/1.1 200 OK\r\nReplyHash: "...)
	b = append(b, reply...)
	b = append(b, "\r\nname: "+httpHeaderName+"\r\nversion: "+httpHeaderVersion+"\r\n"...)
	if keepAlive {
		b = append(b, "Connection: Keep-Alive\r\nKeep-Alive: timeout="...)
		b = strconv.AppendInt(b, int64(timeoutSeconds), 10)
		b = append(b, "\r\n"...)
	} else {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "content-length: "...)
	b = strconv.AppendInt(b, length, 10)
	return append(b, "\r\n\r\n"...)
}

// appendErrorHead appends the head of an error answer.
func appendErrorHead(b []byte, status int, msg string, retryAfter bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, statusText[status]...)
	b = append(b, "\r\ncontent-type: text/plain; charset=UTF-8\r\nname: "+httpHeaderName+"\r\nversion: "+httpHeaderVersion+"\r\n"...)
	if retryAfter {
		b = append(b, "Retry-After: "+retryAfterMillis+"\r\n"...)
	}
	b = append(b, "content-length: "...)
	b = strconv.AppendInt(b, int64(len(msg)), 10)
	return append(b, "\r\n\r\n"...)
}
