package sparkshuffle

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// errClose ends a connection after its answer, as Spark closes the
// channel (auth engine failure, chunk limit, a body that cannot be sent).
var errClose = errors.New("sparkshuffle: connection closed by the server")

// conn is one client connection; only its own goroutine touches it.
type conn struct {
	s   *Service
	nc  net.Conn
	log *slog.Logger
	br  *bufio.Reader
	w   io.Writer // nc, or its encryption

	encrypted bool
	authed    bool
	// clientID is the application the connection authenticated for
	// (TransportClient.getClientId); "" without authentication.
	clientID string
	// saslMode: a crypto server fell back to SASL for this connection.
	saslMode bool
	sasl     *saslExchange

	streams map[int64]*stream
	copyBuf []byte
}

func (s *Service) serveConn(ctx context.Context, nc net.Conn) {
	c := &conn{
		s:       s,
		nc:      nc,
		log:     s.log.With("remote", nc.RemoteAddr().String()),
		br:      bufio.NewReaderSize(nc, 16<<10),
		w:       nc,
		authed:  !s.cfg.Authenticate,
		streams: map[int64]*stream{},
	}
	s.conns.Add(1)
	defer s.conns.Add(-1)
	for ctx.Err() == nil {
		nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		typ, p, err := readFrame(c.br, s.cfg.MaxFrameBytes)
		if err == nil {
			var q request
			if q, err = decodeRequest(typ, p); err == nil {
				err = c.handle(ctx, q)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				c.log.DebugContext(ctx, "connection closed", "err", err)
			}
			return
		}
	}
}

func (c *conn) write(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func (c *conn) handle(ctx context.Context, q request) error {
	switch q.typ {
	case typeChunkFetchRequest:
		return c.fetchChunk(ctx, q.streamID, q.chunkIndex)
	case typeStreamRequest:
		return c.openStream(ctx, q.streamName)
	case typeRPCRequest:
		if !c.authed {
			return c.authenticate(ctx, q)
		}
		resp, err := c.handleMessage(ctx, q.body)
		if err != nil {
			return c.write(rpcFailureFrame(q.requestID, javaText(err)))
		}
		return c.write(rpcResponseFrame(q.requestID, resp))
	case typeOneWayMessage:
		if !c.authed {
			c.log.DebugContext(ctx, "unauthenticated one-way message ignored")
			return nil
		}
		if _, err := c.handleMessage(ctx, q.body); err != nil {
			c.log.DebugContext(ctx, "one-way message", "err", err)
		}
		return nil
	case typeUploadStream:
		// Push-based shuffle: refused with merging off, and the channel
		// closed since the stream's bytes follow (processStreamUpload).
		err := c.receiveStream(q.body)
		if werr := c.write(rpcFailureFrame(q.requestID, javaText(err))); werr != nil {
			return werr
		}
		return errClose
	case typeMergedBlockMetaRequest:
		err := c.checkAuth(q.appID)
		if err == nil {
			err = errMergingOff
		}
		return c.write(rpcFailureFrame(q.requestID, javaText(err)))
	}
	// Responses a client sends are not answers to anything the server
	// asked: ignored, as TransportResponseHandler ignores them.
	return nil
}

func (c *conn) receiveStream(meta []byte) error {
	if !c.authed {
		return &JavaError{Class: "java.lang.SecurityException", Message: "Unauthenticated call to receiveStream()."}
	}
	m, err := decodeMessage(meta)
	if err != nil {
		return err
	}
	if p, ok := m.(*pushBlockStream); ok {
		if err := c.checkAuth(p.AppID); err != nil {
			return err
		}
		return errMergingOff
	}
	return unsupported("Unexpected message with #receiveStream: " + messageName(m))
}

// authenticate handles an RPC before the connection is authenticated: the
// auth engine's AuthMessage on a crypto server, else SASL.
func (c *conn) authenticate(ctx context.Context, q request) error {
	if c.s.cfg.CryptoEnabled && !c.saslMode {
		m, err := decodeAuthMessage(q.body)
		if err == nil {
			return c.authEngine(ctx, q.requestID, m)
		}
		if c.s.cfg.NoSaslFallback {
			if err := c.write(rpcFailureFrame(q.requestID, javaText(illegalArgument("Unknown challenge message.")))); err != nil {
				return err
			}
			return errClose
		}
		c.log.WarnContext(ctx, "Failed to parse new auth challenge, reverting to SASL")
		c.saslMode = true
	}
	m, err := decodeSaslMessage(q.body)
	if err != nil {
		return c.write(rpcFailureFrame(q.requestID, javaText(err)))
	}
	if c.sasl == nil {
		if c.sasl, err = newSaslExchange(m.appID, c.s.secretOf); err != nil {
			return err
		}
	}
	resp, done, err := c.sasl.respond(m.token)
	if err != nil {
		// Spark leaves the connection to the client, which closes it; the
		// exchange is spent, so the connection cannot try again.
		c.s.authFailures.Add(1)
		c.log.InfoContext(ctx, "SASL authentication failed", "app", c.sasl.app, "err", err)
		return c.write(rpcFailureFrame(q.requestID, javaText(err)))
	}
	if err := c.write(rpcResponseFrame(q.requestID, resp)); err != nil {
		return err
	}
	if done {
		c.authed, c.clientID = true, c.sasl.app
		c.log = c.log.With("app", c.clientID)
		c.log.DebugContext(ctx, "SASL authentication successful")
	}
	return nil
}

// authEngine runs the server side of the auth engine, answers, and from
// then on encrypts and decrypts the connection.
func (c *conn) authEngine(ctx context.Context, requestID int64, m *authMessage) error {
	secret := c.s.secretOf(m.appID)
	var (
		resp *authMessage
		keys sessionKeys
		err  = errNoSecret
	)
	if secret != nil {
		resp, keys, err = authServerRespond(c.s.rand, c.s.cfg.AuthEngineVersion, secret, m)
	}
	if err != nil {
		c.s.authFailures.Add(1)
		c.log.InfoContext(ctx, "authentication failed", "app", m.appID, "err", err)
		if werr := c.write(rpcFailureFrame(requestID, javaText(errAuthFailed))); werr != nil {
			return werr
		}
		return errClose
	}
	if err := c.write(rpcResponseFrame(requestID, resp.encode())); err != nil {
		return err
	}
	in, out, err := keys.streams(true)
	if err != nil {
		return err
	}
	// Bytes already buffered follow the AuthMessage: they are ciphertext.
	pending, _ := c.br.Peek(c.br.Buffered())
	pending = bytes.Clone(pending)
	in.XORKeyStream(pending, pending)
	c.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(pending), &cryptReader{s: in, r: c.nc}), 16<<10)
	c.w = &cryptWriter{s: out, w: c.nc}
	c.encrypted, c.authed, c.clientID = true, true, m.appID
	c.log = c.log.With("app", c.clientID)
	return nil
}

// checkAuth refuses a message for another application than the one the
// connection authenticated for (ExternalBlockHandler.checkAuth).
func (c *conn) checkAuth(appID string) error {
	if c.clientID != "" && c.clientID != appID {
		return &JavaError{Class: "java.lang.SecurityException",
			Message: fmt.Sprintf("Client for %s not authorized for application %s.", c.clientID, appID)}
	}
	return nil
}

func messageName(m any) string {
	switch m := m.(type) {
	case *unservedMessage:
		return msgName(m.typ)
	case *pushBlockStream:
		return msgName(msgPushBlockStream)
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", m), "*sparkshuffle.")
}

// handleMessage answers one BlockTransferMessage (ExternalBlockHandler
// .handleMessage): the response body, or an error for an RpcFailure.
func (c *conn) handleMessage(ctx context.Context, body []byte) ([]byte, error) {
	msg, err := decodeMessage(body)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *OpenBlocks:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		refs, err := openBlocksRefs(m)
		if err != nil {
			return nil, err
		}
		return c.newStream(m.AppID, refs, int32(len(m.BlockIDs)))
	case *FetchShuffleBlocks:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		refs, n := fetchShuffleRefs(m)
		return c.newStream(m.AppID, refs, n)
	case *FetchShuffleBlockChunks:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		var n int32
		for _, ids := range m.ChunkIDs {
			n += int32(len(ids))
		}
		refs := make([]blockRef, 0, min(n, 1))
		if n > 0 {
			refs = append(refs, blockRef{err: errMergingOff})
		}
		return c.newStream(m.AppID, refs, n)
	case *RegisterExecutor:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		if err := c.s.registerExecutor(ctx, m); err != nil {
			return nil, err
		}
		return []byte{}, nil
	case *RemoveBlocks:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		n, err := c.s.removeBlocks(ctx, m)
		if err != nil {
			return nil, err
		}
		return encodeMessage(&BlocksRemoved{NumRemoved: n}), nil
	case *GetLocalDirsForExecutors:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		dirs, err := c.s.localDirs(m)
		if err != nil {
			return nil, err
		}
		return encodeMessage(dirs), nil
	case *mergeMessage:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		return nil, errMergingOff
	case *DiagnoseCorruption:
		if err := c.checkAuth(m.AppID); err != nil {
			return nil, err
		}
		cause, err := c.s.diagnose(ctx, m)
		if err != nil {
			return nil, err
		}
		return encodeMessage(&CorruptionCause{Cause: cause}), nil
	}
	return nil, unsupported("Unexpected message: " + messageName(msg))
}

// blockRef is one block of a stream, resolved when its chunk is fetched:
// Spark reports missing executors and files lazily, on the chunk.
type blockRef struct {
	app, exec  string
	rdd        bool
	shuffle    int32 // or the rdd id
	mapID      int64 // or the split index
	start, end int32 // reduce range [start, end)
	err        error // the block fails with this
}

// stream is an open stream of one connection (OneForOneStreamManager's
// StreamState). A chunk that fails does not advance the iterator, as in
// Spark: the next chunk retries the same block.
type stream struct {
	app  string
	refs []blockRef
	cur  int32
	pos  int
}

func (c *conn) newStream(app string, refs []blockRef, numChunks int32) ([]byte, error) {
	if len(c.streams) >= c.s.cfg.MaxStreamsPerConn {
		return nil, illegalState(fmt.Sprintf("Too many open streams on this connection (%d)", len(c.streams)))
	}
	id := c.s.nextStream.Add(1) - 1
	if len(refs) > 0 {
		c.streams[id] = &stream{app: app, refs: refs}
	}
	return encodeMessage(&StreamHandle{StreamID: id, NumChunks: numChunks}), nil
}

// javaSplit is Java's String.split("_"): trailing empty strings dropped.
func javaSplit(s string) []string {
	parts := strings.Split(s, "_")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func parseJavaInt(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, numberFormat(s)
	}
	return int32(n), nil
}

func parseJavaLong(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, numberFormat(s)
	}
	return n, nil
}

func numberFormat(s string) error {
	return &JavaError{Class: "java.lang.NumberFormatException", Message: fmt.Sprintf("For input string: %q", s)}
}

// openBlocksRefs parses OpenBlocks' ids eagerly, as ManagedBufferIterator's
// constructor does: all shuffle blocks of one shuffle, or all rdd blocks.
func openBlocksRefs(m *OpenBlocks) ([]blockRef, error) {
	if len(m.BlockIDs) == 0 {
		return nil, &JavaError{Class: "java.lang.ArrayIndexOutOfBoundsException", Message: "Index 0 out of bounds for length 0"}
	}
	first := javaSplit(m.BlockIDs[0])
	refs := make([]blockRef, 0, len(m.BlockIDs))
	switch {
	case len(first) == 4 && first[0] == "shuffle":
		shuffle, err := parseJavaInt(first[1])
		if err != nil {
			return nil, err
		}
		for _, id := range m.BlockIDs {
			p := javaSplit(id)
			if len(p) != 4 || p[0] != "shuffle" {
				return nil, illegalArgument("Unexpected shuffle block id format: " + id)
			}
			s, err := parseJavaInt(p[1])
			if err != nil {
				return nil, err
			}
			if s != shuffle {
				return nil, illegalArgument(fmt.Sprintf("Expected shuffleId=%d, got:%s", shuffle, id))
			}
			mapID, err := parseJavaInt(p[2])
			if err != nil {
				return nil, err
			}
			reduce, err := parseJavaInt(p[3])
			if err != nil {
				return nil, err
			}
			refs = append(refs, blockRef{app: m.AppID, exec: m.ExecID, shuffle: shuffle, mapID: int64(mapID), start: reduce, end: reduce + 1})
		}
	case len(first) == 3 && first[0] == "rdd":
		for _, id := range m.BlockIDs {
			p := javaSplit(id)
			if len(p) != 3 || p[0] != "rdd" {
				return nil, illegalArgument("Unexpected RDD block id format: " + id)
			}
			rdd, err := parseJavaInt(p[1])
			if err != nil {
				return nil, err
			}
			split, err := parseJavaInt(p[2])
			if err != nil {
				return nil, err
			}
			refs = append(refs, blockRef{app: m.AppID, exec: m.ExecID, rdd: true, shuffle: rdd, mapID: int64(split)})
		}
	default:
		return nil, illegalArgument("Unexpected block id format: " + m.BlockIDs[0])
	}
	return refs, nil
}

// fetchShuffleRefs walks FetchShuffleBlocks as ShuffleManagedBufferIterator
// does, and counts its chunks as getNumBlocks does.
func fetchShuffleRefs(m *FetchShuffleBlocks) ([]blockRef, int32) {
	var n int32
	if m.BatchFetch {
		n = int32(len(m.MapIDs))
	} else {
		for _, r := range m.ReduceIDs {
			n += int32(len(r))
		}
	}
	var refs []blockRef
	for i, mapID := range m.MapIDs {
		if i >= len(m.ReduceIDs) {
			refs = append(refs, blockRef{err: &JavaError{Class: "java.lang.ArrayIndexOutOfBoundsException",
				Message: fmt.Sprintf("Index %d out of bounds for length %d", i, len(m.ReduceIDs))}})
			break
		}
		rs := m.ReduceIDs[i]
		if len(rs) == 0 {
			break
		}
		ref := blockRef{app: m.AppID, exec: m.ExecID, shuffle: m.ShuffleID, mapID: mapID}
		if m.BatchFetch {
			if len(rs) < 2 {
				ref.err = &JavaError{Class: "java.lang.ArrayIndexOutOfBoundsException", Message: "Index 1 out of bounds for length 1"}
			} else {
				ref.start, ref.end = rs[0], rs[1]
			}
			refs = append(refs, ref)
			continue
		}
		for _, r := range rs {
			ref.start, ref.end = r, r+1
			refs = append(refs, ref)
		}
	}
	return refs, n
}

// errChunkNotFound: the block is an rdd block whose file is gone.
var errChunkNotFound = errors.New("chunk not found")

// chunk is a byte range of a file to send.
type chunk struct {
	root, rel string
	off, n    int64
}

// resolve finds a block's bytes (ExternalShuffleBlockResolver
// .getContinuousBlocksData and getRddBlockData).
func (s *Service) resolve(ctx context.Context, ref blockRef) (chunk, error) {
	if ref.err != nil {
		return chunk{}, ref.err
	}
	e, ok := s.executor(ref.app, ref.exec)
	if !ok {
		return chunk{}, notRegistered(ref.app, ref.exec)
	}
	if ref.rdd {
		_, root, rel := e.file(fmt.Sprintf("rdd_%d_%d", ref.shuffle, ref.mapID))
		r, err := s.roots.get(root)
		if err != nil {
			return chunk{}, errChunkNotFound
		}
		fi, err := r.Stat(rel)
		if err != nil || !fi.Mode().IsRegular() {
			return chunk{}, errChunkNotFound
		}
		return chunk{root: root, rel: rel, n: fi.Size()}, nil
	}
	full, root, rel := e.file(fmt.Sprintf("shuffle_%d_%d_0.index", ref.shuffle, ref.mapID))
	offs, err := s.index.Get(ctx, indexKey{app: ref.app, path: full}, func() ([]int64, int64, error) {
		offs, err := readIndex(s.roots, root, rel)
		return offs, int64(len(offs))*8 + int64(len(full)) + 64, err
	})
	if err != nil {
		return chunk{}, runtimeErr("Failed to open file: " + full)
	}
	if ref.start < 0 || int(ref.start) >= len(offs) || ref.end < 0 || int(ref.end) >= len(offs) {
		return chunk{}, &JavaError{Class: "java.lang.IndexOutOfBoundsException"}
	}
	off, next := offs[ref.start], offs[ref.end]
	if off < 0 || next < off {
		return chunk{}, runtimeErr(fmt.Sprintf("index %s has offsets out of order (%d, %d)", full, off, next))
	}
	_, root, rel = e.file(fmt.Sprintf("shuffle_%d_%d_0.data", ref.shuffle, ref.mapID))
	return chunk{root: root, rel: rel, off: off, n: next - off}, nil
}

// getChunk is OneForOneStreamManager.getChunk over the connection's streams.
func (c *conn) getChunk(ctx context.Context, id int64, index int32) (chunk, error) {
	st, ok := c.streams[id]
	if !ok {
		return chunk{}, illegalState(fmt.Sprintf("Requested chunk not available since streamId %d is closed", id))
	}
	if index != st.cur {
		return chunk{}, illegalState(fmt.Sprintf("Received out-of-order chunk index %d (expected %d)", index, st.cur))
	}
	if st.pos >= len(st.refs) {
		return chunk{}, illegalState(fmt.Sprintf("Requested chunk index beyond end %d", index))
	}
	st.cur++
	ch, err := c.s.resolve(ctx, st.refs[st.pos])
	if err != nil {
		return chunk{}, err
	}
	if st.pos++; st.pos >= len(st.refs) {
		delete(c.streams, id)
	}
	return ch, nil
}

// overChunkLimit reports whether the service sends as many chunks as
// spark.shuffle.maxChunksBeingTransferred allows; Spark then closes the
// requesting channel.
func (c *conn) overChunkLimit(ctx context.Context) bool {
	max := c.s.cfg.MaxChunksBeingTransferred
	if max > 0 && c.s.chunksInFlight.Load() >= max {
		c.log.WarnContext(ctx, "too many chunks being transferred, closing the connection", "max", max)
		return true
	}
	return false
}

func (c *conn) fetchChunk(ctx context.Context, id int64, index int32) error {
	if c.overChunkLimit(ctx) {
		return errClose
	}
	ch, err := c.getChunk(ctx, id, index)
	if errors.Is(err, errChunkNotFound) {
		err = illegalState("Chunk was not found")
	}
	if err != nil {
		return c.write(chunkFailureFrame(id, index, javaText(err)))
	}
	return c.send(chunkSuccessHeader(id, index, ch.n), ch)
}

// openStream answers a StreamRequest for "<stream>_<chunk>", the way a
// client fetches a block too large for memory.
func (c *conn) openStream(ctx context.Context, name string) error {
	if c.overChunkLimit(ctx) {
		return errClose
	}
	ch, err := c.streamChunk(ctx, name)
	if errors.Is(err, errChunkNotFound) {
		return c.write(streamFailureFrame(name, fmt.Sprintf("Stream '%s' was not found.", name)))
	}
	if err != nil {
		return c.write(streamFailureFrame(name, javaText(err)))
	}
	return c.send(streamResponseHeader(name, ch.n), ch)
}

func (c *conn) streamChunk(ctx context.Context, name string) (chunk, error) {
	p := javaSplit(name)
	if len(p) == 0 {
		return chunk{}, &JavaError{Class: "java.lang.ArrayIndexOutOfBoundsException", Message: "Index 0 out of bounds for length 0"}
	}
	id, err := parseJavaLong(p[0])
	if err != nil {
		return chunk{}, err
	}
	if len(p) < 2 {
		return chunk{}, &JavaError{Class: "java.lang.ArrayIndexOutOfBoundsException", Message: "Index 1 out of bounds for length 1"}
	}
	index, err := parseJavaInt(p[1])
	if err != nil {
		return chunk{}, err
	}
	return c.getChunk(ctx, id, index)
}

// sendPiece bounds one sendfile call, so the write deadline measures
// progress rather than the whole body.
const sendPiece = 4 << 20

// send writes a frame header and the chunk's bytes: with sendfile on a
// plain connection, through a buffer and the cipher on an encrypted one. As
// in Spark, the header goes first; a body that cannot be sent whole then
// closes the connection.
func (c *conn) send(header []byte, ch chunk) error {
	c.s.chunksInFlight.Add(1)
	defer c.s.chunksInFlight.Add(-1)
	if err := c.write(header); err != nil {
		return err
	}
	if ch.n == 0 {
		c.s.blocksSent.Add(1)
		return nil
	}
	f, err := c.s.roots.open(ch.root, ch.rel)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errClose, ch.rel, err)
	}
	defer f.Close()
	if _, err := f.Seek(ch.off, io.SeekStart); err != nil {
		return fmt.Errorf("%w: %w", errClose, err)
	}
	for left := ch.n; left > 0; {
		piece := min(left, sendPiece)
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		var n int64
		if c.encrypted {
			if c.copyBuf == nil {
				c.copyBuf = make([]byte, 64<<10)
			}
			c.s.bufferedCopies.Add(1)
			n, err = io.CopyBuffer(c.w, io.LimitReader(f, piece), c.copyBuf)
		} else {
			// net.TCPConn.ReadFrom of an *io.LimitedReader over an
			// *os.File is sendfile(2).
			n, err = io.Copy(c.nc, &io.LimitedReader{R: f, N: piece})
		}
		if err != nil {
			return fmt.Errorf("%w: send %s: %w", errClose, ch.rel, err)
		}
		if n < piece {
			return fmt.Errorf("%w: %s is shorter than its index says", errClose, ch.rel)
		}
		left -= n
	}
	c.s.blocksSent.Add(1)
	c.s.bytesSent.Add(ch.n)
	return nil
}

// diagnose answers DiagnoseCorruption as ShuffleChecksumHelper
// .diagnoseCorruption does: recompute the partition's checksum and compare
// it with the writer's and the reader's.
func (s *Service) diagnose(ctx context.Context, m *DiagnoseCorruption) (int8, error) {
	e, ok := s.executor(m.AppID, m.ExecID)
	if !ok {
		return 0, notRegistered(m.AppID, m.ExecID)
	}
	ch, err := s.resolve(ctx, blockRef{app: m.AppID, exec: m.ExecID, shuffle: m.ShuffleID, mapID: m.MapID, start: m.ReduceID, end: m.ReduceID + 1})
	if err != nil {
		return 0, err
	}
	var h hash.Hash32
	switch m.Algorithm {
	case "ADLER32":
		h = adler32.New()
	case "CRC32":
		h = crc32.NewIEEE()
	case "CRC32C":
		h = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	default:
		return CauseUnsupportedChecksumAlgorithm, nil
	}
	if !isPathElement(m.Algorithm) {
		return CauseUnsupportedChecksumAlgorithm, nil
	}
	_, root, rel := e.file(fmt.Sprintf("shuffle_%d_%d_0.checksum.%s", m.ShuffleID, m.MapID, m.Algorithm))
	sums, err := readIndex(s.roots, root, rel)
	if err != nil || m.ReduceID < 0 || int(m.ReduceID) >= len(sums) {
		return CauseUnknownIssue, nil
	}
	f, err := s.roots.open(ch.root, ch.rel)
	if err != nil {
		return CauseUnknownIssue, nil
	}
	defer f.Close()
	if _, err := io.Copy(h, io.NewSectionReader(f, ch.off, ch.n)); err != nil {
		return CauseUnknownIssue, nil
	}
	byWriter, recomputed := sums[m.ReduceID], int64(h.Sum32())
	switch {
	case byWriter != recomputed:
		return CauseDiskIssue, nil
	case byWriter != m.Checksum:
		return CauseNetworkIssue, nil
	}
	return CauseChecksumVerifyPass, nil
}
