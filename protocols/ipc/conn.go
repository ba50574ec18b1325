package ipc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
)

var (
	errIdle      = errors.New("idle connection")
	errStopping  = errors.New("server stopping")
	errHandled   = errors.New("connection answered and closed")
	errConnEnded = errors.New("connection ended by a FATAL answer")
)

// conn is one client connection. Its serve goroutine alone reads and owns the
// connection's state (preamble, SASL, context); calls run on their own
// goroutines and share only the writer.
type conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
	log *slog.Logger

	ctx    context.Context // handlers' parent; ends with the connection
	cancel context.CancelFunc

	wmu     sync.Mutex
	bw      *bufio.Writer
	writers atomic.Int32 // senders queued on wmu: the last one out flushes
	ended   bool         // under wmu: a FATAL answer was written, nothing may follow

	calls    sync.WaitGroup
	inflight atomic.Int32
	slots    chan struct{} // one per call in flight, at most MaxConnInFlight
	stopping atomic.Bool

	// Owned by the serve goroutine.
	authProtocol byte
	sasl         saslState
	contextRead  bool
	caller       *Caller // immutable once the context is read
	frameBuf     []byte
	// A frame's two headers are decoded into these, reused from frame to
	// frame rather than allocated for each call.
	rpcHeader  commonpb.RpcRequestHeaderProto
	callHeader commonpb.RequestHeaderProto
}

func newConn(s *Server, nc net.Conn) *conn {
	base := s.baseCtx
	if s.cfg.ConnContext != nil {
		base = s.cfg.ConnContext(base, nc)
	}
	ctx, cancel := context.WithCancel(base)
	return &conn{
		srv:    s,
		nc:     nc,
		br:     bufio.NewReaderSize(nc, connBufSize),
		bw:     bufio.NewWriterSize(nc, connBufSize),
		log:    s.log.With("remote", nc.RemoteAddr().String()),
		ctx:    ctx,
		cancel: cancel,
		slots:  make(chan struct{}, s.cfg.MaxConnInFlight),
	}
}

// stopReading makes the serve loop stop taking new calls; the calls in flight
// still answer. It is how graceful shutdown reaches a connection.
func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// abort ends the connection now, cancelling the calls in flight.
func (c *conn) abort() {
	c.stopping.Store(true)
	c.cancel()
	_ = c.nc.Close()
}

func (c *conn) serve() {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("ipc connection panic", "panic", r, "stack", string(debug.Stack()))
			c.cancel()
		}
		c.calls.Wait()
		c.cancel()
		_ = c.nc.Close()
	}()

	if err := c.readPreamble(); err != nil {
		c.logEnd(err)
		return
	}
	for {
		frame, err := c.nextFrame()
		if err != nil {
			if !errors.Is(err, errStopping) {
				// The peer is gone or broke framing: its calls need not finish.
				c.cancel()
			}
			c.logEnd(err)
			return
		}
		if callID, retry, rerr := c.processFrame(frame); rerr != nil {
			c.sendFatal(callID, retry, rerr)
			c.cancel()
			c.logEnd(rerr)
			return
		}
	}
}

func (c *conn) logEnd(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, errStopping), errors.Is(err, errIdle), errors.Is(err, net.ErrClosed):
		c.log.Debug("ipc connection closed", "reason", err)
	default:
		c.log.Info("ipc connection closed", "reason", err)
	}
}

// readPreamble reads "hrpc", the version, the service class and the auth
// protocol, answering a bad one as Hadoop does.
func (c *conn) readPreamble() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
	var p [preambleLen]byte
	if _, err := io.ReadFull(c.br, p[:]); err != nil {
		return fmt.Errorf("read preamble: %w", err)
	}
	if string(p[:4]) == "GET " {
		c.writeRaw([]byte(httpGetResponse))
		return fmt.Errorf("http request on ipc port: %w", errHandled)
	}
	version := int(int8(p[4]))
	if string(p[:4]) != preambleMagic || version != currentVersion {
		c.sendBadVersion(version)
		return fmt.Errorf("bad preamble %q version %d: %w", p[:4], version, errHandled)
	}
	switch auth := p[6]; auth {
	case authProtocolNone:
		if !c.srv.cfg.Simple {
			c.sendFatal(callIDAuthFailed, -1, fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED,
				ClassAccessControl, "SIMPLE authentication is not enabled.  Available:%s", c.srv.enabledMethods()))
			return fmt.Errorf("simple auth refused: %w", errHandled)
		}
		c.authProtocol = authProtocolNone
	case authProtocolSASL:
		c.authProtocol = authProtocolSASL
	default:
		c.sendFatal(callIDAuthFailed, -1, fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED,
			ClassIPCException, "Unknown auth protocol:%d", int8(auth)))
		return fmt.Errorf("unknown auth protocol %d: %w", auth, errHandled)
	}
	return nil
}

// sendBadVersion answers a client of another IPC version in a form that
// version can read, as Hadoop's setupBadVersionResponse does.
func (c *conn) sendBadVersion(clientVersion int) {
	msg := fmt.Sprintf("Server IPC version %d cannot communicate with client version %d", currentVersion, clientVersion)
	writeString := func(b []byte, s string) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	switch {
	case clientVersion >= currentVersion:
		c.sendFatal(callIDAuthFailed, -1, fatal(commonpb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH, ClassVersionMismatch, "%s", msg))
	case clientVersion >= 3:
		// Versions 3 to 8: int callId, int status -1, then two Writable strings.
		b := binary.BigEndian.AppendUint32(nil, uint32(0xFFFFFFFF))
		b = binary.BigEndian.AppendUint32(b, uint32(0xFFFFFFFF))
		b = writeString(b, ClassVersionMismatch)
		c.writeRaw(writeString(b, msg))
	case clientVersion == 2:
		b := binary.BigEndian.AppendUint32(nil, 0)
		b = append(b, 1)
		b = writeString(b, ClassVersionMismatch)
		c.writeRaw(writeString(b, msg))
	}
}

func (c *conn) writeRaw(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
	_, _ = c.bw.Write(b)
	_ = c.bw.Flush()
}

// nextFrame waits for the next frame. Silence is fine while calls are in
// flight (the client waits for them); otherwise it ends an idle connection.
func (c *conn) nextFrame() ([]byte, error) {
	for {
		if c.stopping.Load() {
			return nil, errStopping
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		if c.stopping.Load() {
			// stopReading ran between the check above and the deadline we
			// just set, which undid its "stop now" deadline.
			return nil, errStopping
		}
		_, err := c.br.Peek(1)
		if err == nil {
			break
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		if c.stopping.Load() {
			return nil, errStopping
		}
		if c.inflight.Load() == 0 {
			return nil, errIdle
		}
	}
	frame, err := readFrame(c.br, c.srv.cfg.MaxDataLength, c.frameBuf)
	if err != nil {
		if c.stopping.Load() {
			return nil, errStopping
		}
		return nil, fmt.Errorf("read frame: %w", err)
	}
	if cap(frame) <= smallFrame {
		c.frameBuf = frame[:0]
	}
	return frame, nil
}

// processFrame handles one request frame. A non-nil error is fatal: it is
// answered with the returned call id and retry count and the connection ends.
func (c *conn) processFrame(frame []byte) (callID, retry int32, _ *RemoteError) {
	hdr := &c.rpcHeader
	rest, err := unmarshalDelimited(frame, hdr)
	if err != nil {
		return callIDAuthFailed, -1, fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "Error decoding RpcRequestHeaderProto: %v", err)
	}
	callID, retry = hdr.GetCallId(), hdr.GetRetryCount()
	switch {
	case hdr.RpcOp == nil:
		return callID, retry, fatalHeader(" IPC Server: No rpc op in rpcRequestHeader")
	case hdr.GetRpcOp() != commonpb.RpcRequestHeaderProto_RPC_FINAL_PACKET:
		return callID, retry, fatalHeader("IPC Server does not implement rpc header operation%s", hdr.GetRpcOp())
	case hdr.RpcKind == nil:
		return callID, retry, fatalHeader(" IPC Server: No rpc kind in rpcRequestHeader")
	}
	if callID < 0 {
		return callID, retry, c.processOutOfBand(callID, rest)
	}
	if !c.contextRead {
		return callID, retry, fatalHeader("Connection context not established")
	}
	return callID, retry, c.processCall(hdr, rest)
}

func (c *conn) processOutOfBand(callID int32, rest []byte) *RemoteError {
	switch callID {
	case callIDConnectionContext:
		if c.authProtocol == authProtocolSASL && !c.sasl.done {
			return fatalHeader("Connection header sent during SASL negotiation")
		}
		return c.processContext(rest)
	case callIDSASL:
		if c.authProtocol != authProtocolSASL {
			return fatalHeader("SASL protocol not requested by client")
		}
		return c.processSASL(rest)
	case callIDPing:
		return nil
	}
	return fatalHeader("Unknown out of band call #%d", callID)
}

func (c *conn) processContext(rest []byte) *RemoteError {
	if c.contextRead {
		return fatalHeader("Connection context already processed")
	}
	var cc commonpb.IpcConnectionContextProto
	if _, err := unmarshalDelimited(rest, &cc); err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "Error decoding IpcConnectionContextProto: %v", err)
	}
	caller := &Caller{Protocol: cc.GetProtocol(), RemoteAddr: c.nc.RemoteAddr()}
	claimed := cc.GetUserInfo().GetEffectiveUser()
	if c.sasl.done {
		caller.Auth = AuthToken
		caller.User = c.sasl.secret.User
		caller.RealUser = c.sasl.secret.RealUser
		caller.TokenIdentifier = c.sasl.identifier
		caller.TokenIdentity = c.sasl.secret.Identity
		// A token speaks for one user: no proxying under TOKEN auth.
		if claimed != "" && claimed != caller.User {
			return fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, ClassAccessControl,
				"Authenticated user (%s (auth:TOKEN)) doesn't match what the client claims to be (%s)", caller.User, claimed)
		}
	} else {
		caller.Auth = AuthSimple
		caller.User = claimed
		caller.RealUser = cc.GetUserInfo().GetRealUser()
		if caller.User == "" {
			return fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, ClassAccessControl,
				"SIMPLE authentication needs a user in the connection context")
		}
	}
	if authz := c.srv.cfg.AuthorizeConnection; authz != nil {
		if err := authz(c.ctx, *caller); err != nil {
			re := remoteErrorFor(err)
			return fatal(commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, re.ClassName, "%s", re.Message)
		}
	}
	c.caller = caller
	c.contextRead = true
	return nil
}

func (c *conn) processCall(hdr *commonpb.RpcRequestHeaderProto, rest []byte) *RemoteError {
	if hdr.GetRpcKind() != commonpb.RpcKindProto_RPC_PROTOCOL_BUFFER {
		return fatalHeader("Unknown rpc kind in rpc header%s", hdr.GetRpcKind())
	}
	rh, rest, err := c.readRequestHeader(rest)
	if err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "IPC server unable to read call parameters: %v", err)
	}
	payload, _, err := nextDelimited(rest)
	if err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "IPC server unable to read call parameters: %v", err)
	}
	reply := callReply{id: hdr.GetCallId(), retry: hdr.GetRetryCount(), clientID: hdr.GetClientId()}

	// Indexing with string(bytes) makes no string.
	svc := (*c.srv.services.Load())[string(rh.protocol)]
	if svc == nil || svc.methods[string(rh.method)].call == nil {
		// A server that refuses calls (a standby) refuses those it does not
		// serve too, so a client fails over instead of failing.
		if re := c.refuseUnserved(string(rh.protocol), string(rh.method), reply); re {
			return nil
		}
	}
	if svc == nil {
		c.sendError(reply, &RemoteError{ClassName: ClassNoSuchProtocol, Code: commonpb.RpcResponseHeaderProto_ERROR_NO_SUCH_PROTOCOL,
			Message: "Unknown protocol: " + string(rh.protocol)})
		return nil
	}
	if v := rh.version; v != svc.version {
		c.sendError(reply, &RemoteError{ClassName: ClassVersionMismatch, Code: commonpb.RpcResponseHeaderProto_ERROR_RPC_VERSION_MISMATCH,
			Message: fmt.Sprintf("Protocol %s version mismatch. (client = %d, server = %d)", svc.name, v, svc.version)})
		return nil
	}
	m, ok := svc.methods[string(rh.method)]
	if !ok {
		c.sendError(reply, &RemoteError{ClassName: ClassNoSuchMethod, Code: commonpb.RpcResponseHeaderProto_ERROR_NO_SUCH_METHOD,
			Message: fmt.Sprintf("Unknown method %s called on %s protocol.", rh.method, svc.name)})
		return nil
	}
	req := m.newRequest()
	if err := proto.Unmarshal(payload, req); err != nil {
		return fatal(commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST,
			ClassFatalRPCServer, "IPC server unable to read call parameters: %v", err)
	}
	var encoded []byte
	if m.keepRequest {
		// The frame's buffer is the next frame's once this returns.
		encoded = bytes.Clone(payload)
		if encoded == nil {
			encoded = []byte{}
		}
	}

	// A full connection, then a full server, stops reading here:
	// back-pressure instead of a queue.
	received := time.Now()
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		return nil
	}
	select {
	case c.srv.inFlight <- struct{}{}:
	case <-c.ctx.Done():
		<-c.slots
		return nil
	}
	c.calls.Add(1)
	c.inflight.Add(1)
	sc := c.srv.calls.get()
	sc.c, sc.reply, sc.protocol, sc.m, sc.req, sc.encoded, sc.received = c, reply, svc.name, m, req, encoded, received
	c.srv.dispatch(sc)
	return nil
}

// callNames is a call's RequestHeaderProto, its names bytes of the
// frame it came in (valid until the next frame is read).
type callNames struct {
	method, protocol []byte
	version          uint64
}

// readRequestHeader reads the varint-delimited RequestHeaderProto at the
// start of b and returns what follows it. Its names stay bytes of b: the
// server looks them up without making strings of them, since every call
// names one of a few. A header scanRequestHeader cannot take (a required
// field missing, bad bytes) goes to proto, for proto's answer and error.
func (c *conn) readRequestHeader(b []byte) (callNames, []byte, error) {
	msg, rest, err := nextDelimited(b)
	if err != nil {
		return callNames{}, nil, err
	}
	if h, ok := scanRequestHeader(msg); ok {
		return h, rest, nil
	}
	rh := &c.callHeader
	if err := proto.Unmarshal(msg, rh); err != nil {
		return callNames{}, nil, err
	}
	return callNames{method: []byte(rh.GetMethodName()), protocol: []byte(rh.GetDeclaringClassProtocolName()),
		version: rh.GetClientProtocolVersion()}, rest, nil
}

// scanRequestHeader reads a RequestHeaderProto's three fields, all
// required, as proto would (the last of a repeated field wins; a field of
// another number or wire type is skipped); ok is false unless all three
// are there and the bytes are well formed.
func scanRequestHeader(b []byte) (h callNames, ok bool) {
	const (
		methodName                 = 1
		declaringClassProtocolName = 2
		clientProtocolVersion      = 3
	)
	var seen uint8
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return h, false
		}
		b = b[n:]
		switch {
		case num == methodName && typ == protowire.BytesType:
			h.method, n = protowire.ConsumeBytes(b)
			seen |= 1
		case num == declaringClassProtocolName && typ == protowire.BytesType:
			h.protocol, n = protowire.ConsumeBytes(b)
			seen |= 2
		case num == clientProtocolVersion && typ == protowire.VarintType:
			h.version, n = protowire.ConsumeVarint(b)
			seen |= 4
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return h, false
		}
		b = b[n:]
	}
	return h, seen == 7
}

// refuseUnserved asks AdmitCall about a call to a protocol or method the
// server does not serve, on the reading goroutine, and answers the call with
// its refusal; it reports whether it did.
func (c *conn) refuseUnserved(protocol, method string, reply callReply) bool {
	admit := c.srv.cfg.AdmitCall
	if admit == nil {
		return false
	}
	err := admit(withCallCaller(c.ctx, c.caller, reply), protocol, method)
	if err == nil {
		return false
	}
	if o := c.srv.cfg.Observer; o != nil {
		o.ObserveCall(protocol, method, 0, 0, err)
	}
	c.sendError(reply, remoteErrorFor(err))
	return true
}

// callReply is what a response needs of its request.
type callReply struct {
	id       int32
	retry    int32
	clientID []byte
}

// runCall runs sc's handler and answers it.
func (c *conn) runCall(sc *serverCall) {
	started := time.Now()
	defer func() {
		<-c.srv.inFlight
		<-c.slots
		c.inflight.Add(-1)
		c.calls.Done()
	}()
	reply, m := sc.reply, sc.m
	ctx := withCallCaller(c.ctx, c.caller, reply)

	resp, err := c.invoke(ctx, sc.protocol, m, sc.req, sc.encoded)
	if o := c.srv.cfg.Observer; o != nil {
		o.ObserveCall(sc.protocol, m.name, started.Sub(sc.received), time.Since(started), err)
	}
	if err != nil {
		c.sendError(reply, remoteErrorFor(err))
		return
	}
	if err := c.sendAnswer(sc.successHeader(), resp); err != nil {
		if errors.Is(err, errMarshal) {
			c.sendError(reply, &RemoteError{ClassName: ClassRPCServer, Code: commonpb.RpcResponseHeaderProto_ERROR_SERIALIZING_RESPONSE,
				Message: err.Error()})
		}
	}
}

// invoke admits the call and runs its handler, turning a panic into an
// error for that call alone.
func (c *conn) invoke(ctx context.Context, protocol string, m Method, req proto.Message, encoded []byte) (resp answer, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("ipc handler panic", "method", m.name, "panic", r, "stack", string(debug.Stack()))
			err = &RemoteError{ClassName: ClassRPCServer, Code: commonpb.RpcResponseHeaderProto_ERROR_RPC_SERVER,
				Message: fmt.Sprintf("internal error in %s", m.name)}
		}
	}()
	if admit := c.srv.cfg.AdmitCall; admit != nil {
		if err := admit(ctx, protocol, m.name); err != nil {
			return answer{}, err
		}
	}
	return m.call(ctx, req, encoded)
}

func (c *conn) sendError(reply callReply, re *RemoteError) {
	status := commonpb.RpcResponseHeaderProto_ERROR
	if re.Fatal {
		status = commonpb.RpcResponseHeaderProto_FATAL
	}
	_ = c.send(&commonpb.RpcResponseHeaderProto{
		CallId:              wireCallID(reply.id),
		Status:              status.Enum(),
		ServerIpcVersionNum: proto.Uint32(currentVersion),
		ExceptionClassName:  proto.String(re.ClassName),
		ErrorMsg:            proto.String(re.Message),
		ErrorDetail:         re.Code.Enum(),
		ClientId:            nonNil(reply.clientID),
		RetryCount:          proto.Int32(reply.retry),
	}, nil)
}

// sendFatal answers a connection-ending error; its call carries no client id.
func (c *conn) sendFatal(callID, retry int32, re *RemoteError) {
	re.Fatal = true
	c.sendError(callReply{id: callID, retry: retry}, re)
}

var errMarshal = errors.New("marshal response")

// framePool recycles the buffers frames are built in; the Server and the
// Client each own one.
type framePool struct{ p sync.Pool }

func (fp *framePool) get() *[]byte {
	if b, ok := fp.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 512)
	return &b
}

// put keeps b for reuse unless it grew past maxPooledFrame: a pool of
// buffers each once grown to a rare large answer holds that memory for as
// long as calls keep coming.
func (fp *framePool) put(b *[]byte) {
	if cap(*b) <= maxPooledFrame {
		fp.p.Put(b)
	}
}

// maxPooledFrame bounds the buffers the frame pool keeps; larger answers
// given encoded (node reports) are written from their own bytes, not
// copied (sendAnswer).
const maxPooledFrame = 64 << 10

// send writes one response frame. Writers batch: each appends under the lock
// and only the last one waiting flushes, so concurrent answers share writes.
func (c *conn) send(hdr *commonpb.RpcResponseHeaderProto, body proto.Message) error {
	return c.sendAnswer(hdr, answer{msg: body})
}

// sendAnswer is send of an answer that may come encoded already.
func (c *conn) sendAnswer(hdr *commonpb.RpcResponseHeaderProto, body answer) error {
	bp := c.srv.frames.get()
	defer c.srv.frames.put(bp)
	tailLen := body.encodedLen()
	b, err := appendFrameHead((*bp)[:0], tailLen, hdr, body.msg)
	tail := body.parts
	if body.encoded != nil {
		tail = [][]byte{body.encoded}
	}
	if err == nil && tailLen <= maxPooledFrame/2 {
		for _, p := range tail {
			b = append(b, p...)
		}
		tail = nil
	}
	*bp = b[:0]
	if err != nil {
		return fmt.Errorf("%w: %w", errMarshal, err)
	}
	c.writers.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.ended {
		// The answers of calls still in flight when a FATAL went out are
		// dropped: the client has failed them all already. The FATAL itself
		// may still wait here to be flushed.
		if c.writers.Add(-1) == 0 {
			_ = c.bw.Flush()
		}
		return errConnEnded
	}
	// A peer that stops reading must not hold this call's goroutine forever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
	if len(tail) == 0 {
		_, err = c.bw.Write(b)
	} else {
		err = c.writeVector(b, tail)
	}
	c.ended = hdr.GetStatus() == commonpb.RpcResponseHeaderProto_FATAL
	if c.writers.Add(-1) == 0 && err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		// A peer that does not read its answers is gone.
		c.abort()
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

// writeVector writes a frame's head and the parts of its large answer
// after what bw holds, in one writev: through bw, an answer of a thousand
// node reports of some 180 bytes each cost a system call per 8 KiB of
// them, twice what the same answer given whole cost. wmu is held.
func (c *conn) writeVector(head []byte, parts [][]byte) error {
	iov := c.srv.vectors.get()
	defer c.srv.vectors.put(iov)
	if c.bw.Buffered() > 0 {
		if _, err := c.bw.Write(head); err != nil {
			return err
		}
		if err := c.bw.Flush(); err != nil {
			return err
		}
	} else {
		*iov = append(*iov, head)
	}
	*iov = append(*iov, parts...)
	// WriteTo consumes its Buffers, so it gets a copy of the slice's
	// header: the pooled slice keeps its capacity.
	bufs := net.Buffers(*iov)
	_, err := bufs.WriteTo(c.nc)
	return err
}

// vectorPool recycles the slices writeVector gathers an answer's parts
// in; a Server owns one. A slice comes back emptied, its references to
// the parts cleared.
type vectorPool struct{ p sync.Pool }

func (vp *vectorPool) get() *[][]byte {
	if v, ok := vp.p.Get().(*[][]byte); ok {
		return v
	}
	return new([][]byte)
}

func (vp *vectorPool) put(v *[][]byte) {
	clear(*v)
	*v = (*v)[:0]
	vp.p.Put(v)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// wireCallID is a call id as a response header carries it: unsigned, so the
// negative ids of SASL and connection errors travel as two's complement.
func wireCallID(id int32) *uint32 { return proto.Uint32(uint32(id)) }
