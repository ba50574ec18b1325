package ipc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/digestmd5"
)

// ClientConfig holds a client's settings. The zero value of each field is
// documented; Protocol is required.
type ClientConfig struct {
	// Protocol is the Hadoop protocol name every call of this client names,
	// for example "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB".
	Protocol string
	// User is the user named under SIMPLE auth; RealUser, if set, is the
	// authenticated user acting for User (a proxy user).
	User, RealUser string
	// Token, if set, authenticates with SASL TOKEN over DIGEST-MD5, as an
	// application master (AMRMToken) or NodeManager client (NMToken) does.
	// The caller's identity then comes from the token alone.
	Token *commonpb.TokenProto
	// ClientID identifies this client on every connection; nil means a
	// random 16-byte id, as a Java client makes one per instance.
	ClientID []byte
	// MaxResponseLength bounds a response frame (ipc.maximum.response.length);
	// zero means DefaultMaxDataLength.
	MaxResponseLength int
	// PingInterval is how long the client waits on a silent connection with
	// calls outstanding before it pings (ipc.ping.interval); zero means 60s.
	PingInterval time.Duration
	// MaxIdleTime closes a connection with no calls for this long
	// (ipc.client.connection.maxidletime); the next call reconnects. Zero
	// means 10s.
	MaxIdleTime time.Duration
	// DialTimeout bounds one connection attempt; zero means 20s.
	DialTimeout time.Duration
	// Dial opens a connection to addr; nil means TCP (net.Dialer). Tests and
	// fuzz targets give an in-memory connection.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// NewBackOff paces connection attempts; nil means exponential backoff
	// from 100ms for at most 15s. Authentication failures are not retried.
	NewBackOff func() backoff.BackOff
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
	// Errors, if set, maps each error answer to a call to the error Call
	// returns (yarnerr.FromRemote gives YARN's typed errors); nil returns
	// the *RemoteError itself. Failures to connect are not mapped.
	Errors func(*RemoteError) error
}

// ErrClientClosed is returned by calls on a closed Client.
var ErrClientClosed = errors.New("ipc: client closed")

// Client calls one Hadoop protocol at one address. It opens its connection
// when first needed and again after it breaks or idles out; calls are
// multiplexed on it and may be made from many goroutines.
type Client struct {
	addr   string
	cfg    ClientConfig
	log    *slog.Logger
	nextID atomic.Int32
	frames framePool

	mu     sync.Mutex
	cur    *clientConn
	closed bool
}

// NewClient returns a client of addr; it connects on the first call.
func NewClient(addr string, cfg ClientConfig) (*Client, error) {
	if cfg.Protocol == "" {
		return nil, errors.New("ipc: new client: no protocol")
	}
	if cfg.Token == nil && cfg.User == "" {
		return nil, errors.New("ipc: new client: SIMPLE auth needs a user")
	}
	if cfg.ClientID == nil {
		cfg.ClientID = make([]byte, 16)
		if _, err := rand.Read(cfg.ClientID); err != nil {
			return nil, fmt.Errorf("ipc: new client id: %w", err)
		}
	}
	if cfg.MaxResponseLength <= 0 {
		cfg.MaxResponseLength = DefaultMaxDataLength
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 60 * time.Second
	}
	if cfg.MaxIdleTime <= 0 {
		cfg.MaxIdleTime = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 20 * time.Second
	}
	if cfg.NewBackOff == nil {
		cfg.NewBackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval = 100 * time.Millisecond
			b.MaxElapsedTime = 15 * time.Second
			return b
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{addr: addr, cfg: cfg, log: log.With("addr", addr, "protocol", cfg.Protocol)}, nil
}

// Dial returns a client of addr that is already connected and authenticated,
// so that a wrong address or token shows at once.
func Dial(ctx context.Context, addr string, cfg ClientConfig) (*Client, error) {
	c, err := NewClient(addr, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.conn(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Call invokes method with req and decodes the answer into resp. A Hadoop
// error answer comes back as a *RemoteError; ctx bounds the whole call.
func (c *Client) Call(ctx context.Context, method string, req, resp proto.Message) error {
	cc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	id := c.nextID.Add(1) - 1
	if err := cc.call(ctx, id, method, req, resp); err != nil {
		if re, ok := err.(*RemoteError); ok && c.cfg.Errors != nil {
			err = c.cfg.Errors(re)
		}
		return fmt.Errorf("ipc: call %s: %w", method, err)
	}
	return nil
}

// CallRaw invokes method with a request encoded already and returns the
// answer's encoding, undecoded: a proxy's forwarding of a call whose
// bytes it need not read. Errors are as Call's.
func (c *Client) CallRaw(ctx context.Context, method string, req []byte) ([]byte, error) {
	cc, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	if req == nil {
		req = []byte{}
	}
	id := c.nextID.Add(1) - 1
	var resp []byte
	if err := cc.callEncoded(ctx, id, method, nil, req, nil, &resp); err != nil {
		if re, ok := err.(*RemoteError); ok && c.cfg.Errors != nil {
			err = c.cfg.Errors(re)
		}
		return nil, fmt.Errorf("ipc: call %s: %w", method, err)
	}
	return resp, nil
}

// Close closes the connection; calls in flight fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cur != nil {
		c.cur.shutdown(ErrClientClosed)
		<-c.cur.readerDone
		c.cur = nil
	}
	return nil
}

// conn returns a usable connection, dialling a new one when there is none.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if c.cur != nil && c.cur.usable() {
		return c.cur, nil
	}
	if c.cur != nil {
		// A broken connection was shut down, which closed it: its reader is
		// ending. Waiting for it here means no reader outlives its
		// connection's replacement, and Close finds none behind.
		<-c.cur.readerDone
		c.cur = nil
	}
	var cc *clientConn
	op := func() error {
		var err error
		cc, err = c.connect(ctx)
		var re *RemoteError
		if errors.As(err, &re) {
			// The server refused us; asking again will not change its mind.
			return backoff.Permanent(err)
		}
		return err
	}
	notify := func(err error, wait time.Duration) {
		c.log.Info("ipc connect", "err", err, "retry_in", wait)
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(c.cfg.NewBackOff(), ctx), notify); err != nil {
		return nil, fmt.Errorf("ipc: connect %s: %w", c.addr, err)
	}
	c.cur = cc
	return cc, nil
}

// connect dials, writes the preamble, authenticates and sends the
// connection context, then starts the connection's reader.
func (c *Client) connect(ctx context.Context) (*clientConn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	dial := c.cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dial(dctx, c.addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
	}
	cc := &clientConn{
		client:     c,
		nc:         nc,
		br:         bufio.NewReaderSize(nc, connBufSize),
		bw:         bufio.NewWriterSize(nc, connBufSize),
		calls:      map[int32]*pendingCall{},
		readerDone: make(chan struct{}),
	}
	// The handshake reads under the deadline only; a cancelled ctx must end
	// it as well.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	err = cc.handshake()
	if !stop() && err == nil {
		err = errors.New("connection set-up interrupted")
	}
	if err != nil {
		_ = nc.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%w: %w", ctxErr, err)
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	cc.touch()
	go cc.readLoop()
	return cc, nil
}

// clientConn is one connection of a Client.
type clientConn struct {
	client *Client
	nc     net.Conn
	br     *bufio.Reader

	wmu     sync.Mutex
	bw      *bufio.Writer
	writers atomic.Int32

	mu         sync.Mutex
	calls      map[int32]*pendingCall
	err        error // set once: the connection is finished
	lastActive atomic.Int64
	readerDone chan struct{}
}

type pendingCall struct {
	resp proto.Message
	// encoded, when not nil, receives the answer undecoded instead.
	encoded *[]byte
	done    chan error // buffered: the reader never blocks on it
}

func (cc *clientConn) touch() { cc.lastActive.Store(time.Now().UnixNano()) }

func (cc *clientConn) usable() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err == nil
}

// shutdown finishes the connection with err, failing every pending call.
func (cc *clientConn) shutdown(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	calls := cc.calls
	cc.calls = nil
	cc.mu.Unlock()
	_ = cc.nc.Close()
	for _, p := range calls {
		p.done <- err
	}
}

// newRequestHeader is the header of every client frame: protobuf RPC kind,
// a final packet, and the caller's id, client id and retry count.
func newRequestHeader(callID int32, clientID []byte, retry int32) *commonpb.RpcRequestHeaderProto {
	return &commonpb.RpcRequestHeaderProto{
		RpcKind:    commonpb.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(),
		RpcOp:      commonpb.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(),
		CallId:     proto.Int32(callID),
		ClientId:   clientID,
		RetryCount: proto.Int32(retry),
	}
}

// handshake runs the connection set-up synchronously, before the reader
// starts: preamble, SASL if a token is configured, connection context.
func (cc *clientConn) handshake() error {
	cfg := &cc.client.cfg
	auth := byte(authProtocolNone)
	if cfg.Token != nil {
		auth = authProtocolSASL
	}
	if _, err := cc.bw.Write([]byte{'h', 'r', 'p', 'c', currentVersion, 0, auth}); err != nil {
		return err
	}
	userInfo := &commonpb.UserInformationProto{}
	if cfg.Token != nil {
		simple, err := cc.negotiateSASL()
		if err != nil {
			return err
		}
		if simple {
			userInfo.EffectiveUser = proto.String(cfg.User)
		}
	} else {
		userInfo.EffectiveUser = proto.String(cfg.User)
		if cfg.RealUser != "" {
			userInfo.RealUser = proto.String(cfg.RealUser)
		}
	}
	ctxMsg := &commonpb.IpcConnectionContextProto{UserInfo: userInfo, Protocol: proto.String(cfg.Protocol)}
	if err := cc.writeFrame(time.Time{}, newRequestHeader(callIDConnectionContext, cfg.ClientID, -1), ctxMsg); err != nil {
		return fmt.Errorf("send connection context: %w", err)
	}
	return nil
}

// negotiateSASL runs Hadoop's client side of SASL (SaslRpcClient.saslConnect)
// and reports whether the server switched the connection to SIMPLE.
func (cc *clientConn) negotiateSASL() (simple bool, err error) {
	cfg := &cc.client.cfg
	saslHeader := newRequestHeader(callIDSASL, []byte{}, -1)
	negotiate := &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()}
	if err := cc.writeFrame(time.Time{}, saslHeader, negotiate); err != nil {
		return false, fmt.Errorf("send SASL negotiate: %w", err)
	}
	var mech *digestmd5.Client
	for {
		reply, err := cc.readSASL()
		if err != nil {
			return false, err
		}
		switch reply.GetState() {
		case commonpb.RpcSaslProto_NEGOTIATE:
			var chosen *commonpb.RpcSaslProto_SaslAuth
			for _, a := range reply.GetAuths() {
				if a.GetMethod() == saslMethodToken && a.GetMechanism() == mechanismDigest {
					chosen = a
					break
				}
				if a.GetMethod() == saslMethodSimple && chosen == nil && cfg.User != "" {
					chosen = a
				}
			}
			if chosen == nil {
				return false, fmt.Errorf("client cannot authenticate via %v", authNames(reply.GetAuths()))
			}
			initiate := &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_INITIATE.Enum()}
			without := proto.Clone(chosen).(*commonpb.RpcSaslProto_SaslAuth)
			without.Challenge = nil
			initiate.Auths = []*commonpb.RpcSaslProto_SaslAuth{without}
			if chosen.GetMethod() == saslMethodSimple {
				return true, cc.writeFrame(time.Time{}, saslHeader, initiate)
			}
			mech = digestmd5.NewClient(digestmd5.ClientConfig{
				Username:   base64.StdEncoding.EncodeToString(cfg.Token.GetIdentifier()),
				Password:   base64.StdEncoding.EncodeToString(cfg.Token.GetPassword()),
				Protocol:   chosen.GetProtocol(),
				ServerName: chosen.GetServerId(),
			})
			resp, err := mech.Respond(chosen.GetChallenge())
			if err != nil {
				return false, fmt.Errorf("SASL DIGEST-MD5: %w", err)
			}
			initiate.Token = resp
			if err := cc.writeFrame(time.Time{}, saslHeader, initiate); err != nil {
				return false, fmt.Errorf("send SASL initiate: %w", err)
			}
		case commonpb.RpcSaslProto_SUCCESS:
			if mech == nil {
				return true, nil // a SIMPLE-only server
			}
			if err := mech.Verify(reply.GetToken()); err != nil {
				return false, fmt.Errorf("SASL DIGEST-MD5: %w", err)
			}
			return false, nil
		default:
			return false, fmt.Errorf("SASL: unexpected server state %s", reply.GetState())
		}
	}
}

func authNames(auths []*commonpb.RpcSaslProto_SaslAuth) []string {
	var names []string
	for _, a := range auths {
		names = append(names, a.GetMethod()+"/"+a.GetMechanism())
	}
	return names
}

// readSASL reads one SASL reply; an error answer comes back as a RemoteError.
func (cc *clientConn) readSASL() (*commonpb.RpcSaslProto, error) {
	frame, err := readFrame(cc.br, cc.client.cfg.MaxResponseLength, nil)
	if err != nil {
		return nil, fmt.Errorf("read SASL reply: %w", err)
	}
	var hdr commonpb.RpcResponseHeaderProto
	rest, err := unmarshalDelimited(frame, &hdr)
	if err != nil {
		return nil, fmt.Errorf("decode SASL reply header: %w", err)
	}
	if hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS {
		return nil, remoteErrorFromHeader(&hdr)
	}
	if int32(hdr.GetCallId()) != callIDSASL {
		return nil, fmt.Errorf("SASL reply has call id %d", int32(hdr.GetCallId()))
	}
	var msg commonpb.RpcSaslProto
	if _, err := unmarshalDelimited(rest, &msg); err != nil {
		return nil, fmt.Errorf("decode SASL reply: %w", err)
	}
	return &msg, nil
}

func remoteErrorFromHeader(hdr *commonpb.RpcResponseHeaderProto) *RemoteError {
	re := &RemoteError{
		ClassName: hdr.GetExceptionClassName(),
		Message:   hdr.GetErrorMsg(),
		Code:      hdr.GetErrorDetail(),
		Fatal:     hdr.GetStatus() == commonpb.RpcResponseHeaderProto_FATAL,
	}
	if hdr.ExceptionClassName == nil {
		re.ClassName = ClassServerDidNotSetClass
	}
	if hdr.ErrorMsg == nil {
		re.Message = ClassServerDidNotSetMessage
	}
	return re
}

// writeFrame writes one frame. A non-zero deadline bounds the write, so a
// server that stops reading cannot hold a caller forever; the handshake
// passes zero and runs under the connection's set-up deadline.
func (cc *clientConn) writeFrame(deadline time.Time, msgs ...proto.Message) error {
	return cc.writeFrameEncoded(deadline, nil, msgs...)
}

// writeFrameEncoded is writeFrame with a last message encoded already
// (appendFrameEncoded).
func (cc *clientConn) writeFrameEncoded(deadline time.Time, encoded []byte, msgs ...proto.Message) error {
	bp := cc.client.frames.get()
	defer cc.client.frames.put(bp)
	b, err := appendFrameEncoded((*bp)[:0], encoded, msgs...)
	*bp = b[:0]
	if err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	cc.writers.Add(1)
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	if !deadline.IsZero() {
		_ = cc.nc.SetWriteDeadline(deadline)
	}
	_, err = cc.bw.Write(b)
	if cc.writers.Add(-1) == 0 && err == nil {
		err = cc.bw.Flush()
	}
	return err
}

func (cc *clientConn) call(ctx context.Context, id int32, method string, req, resp proto.Message) error {
	return cc.callEncoded(ctx, id, method, req, nil, resp, nil)
}

// callEncoded makes a call whose request is req, or reqEncoded when that
// is not nil, and whose answer goes into resp, or undecoded into
// respEncoded when that is not nil.
func (cc *clientConn) callEncoded(ctx context.Context, id int32, method string, req proto.Message, reqEncoded []byte, resp proto.Message, respEncoded *[]byte) error {
	p := &pendingCall{resp: resp, encoded: respEncoded, done: make(chan error, 1)}
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		return err
	}
	cc.calls[id] = p
	cc.mu.Unlock()
	cc.touch()

	cfg := &cc.client.cfg
	reqHeader := &commonpb.RequestHeaderProto{
		MethodName:                 proto.String(method),
		DeclaringClassProtocolName: proto.String(cfg.Protocol),
		ClientProtocolVersion:      proto.Uint64(ProtocolVersion),
	}
	// As with reading, a server that takes nothing for two ping intervals is
	// gone. The caller's own deadline is not used here: a frame cut off
	// mid-write breaks the connection for every call on it.
	if err := cc.writeFrameEncoded(time.Now().Add(2*cfg.PingInterval), reqEncoded, newRequestHeader(id, cfg.ClientID, 0), reqHeader, req); err != nil {
		cc.shutdown(fmt.Errorf("send call: %w", err))
		return <-p.done
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		cc.mu.Lock()
		_, waiting := cc.calls[id]
		delete(cc.calls, id)
		cc.mu.Unlock()
		if !waiting {
			// The reader already holds the answer and is decoding into resp:
			// wait for it so resp is not written after we return.
			<-p.done
		}
		return ctx.Err()
	}
}

var errIdleClosed = errors.New("ipc: connection closed after being idle")

// readLoop reads answers and hands each to its call. It pings a silent
// server while calls wait and closes the connection once it idles out.
func (cc *clientConn) readLoop() {
	defer close(cc.readerDone)
	cfg := &cc.client.cfg
	tick := min(cfg.PingInterval, cfg.MaxIdleTime)
	var buf []byte
	for {
		// Silence is measured only before a frame starts: a timeout inside a
		// frame would lose the bytes already read and the framing with them.
		// (Java's PingInputStream likewise resumes the same read.)
		_ = cc.nc.SetReadDeadline(time.Now().Add(tick))
		if _, err := cc.br.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if cc.onSilence() {
					continue
				}
				return
			}
			cc.shutdown(fmt.Errorf("ipc: read response: %w", err))
			return
		}
		// A server that stalls inside a frame for two ping intervals is gone;
		// ending the connection lets the next call reconnect.
		_ = cc.nc.SetReadDeadline(time.Now().Add(2 * cfg.PingInterval))
		frame, err := readFrame(cc.br, cfg.MaxResponseLength, buf)
		if err != nil {
			cc.shutdown(fmt.Errorf("ipc: read response: %w", err))
			return
		}
		if cap(frame) <= smallFrame {
			buf = frame[:0]
		}
		cc.touch()
		if err := cc.deliver(frame); err != nil {
			cc.shutdown(err)
			return
		}
	}
}

// onSilence handles a read timeout and reports whether to keep reading.
func (cc *clientConn) onSilence() bool {
	cc.mu.Lock()
	pending, finished := len(cc.calls), cc.err != nil
	cc.mu.Unlock()
	if finished {
		return false
	}
	idle := time.Since(time.Unix(0, cc.lastActive.Load()))
	if pending == 0 {
		if idle >= cc.client.cfg.MaxIdleTime {
			cc.shutdown(errIdleClosed)
			return false
		}
		return true
	}
	ping := newRequestHeader(callIDPing, cc.client.cfg.ClientID, -1)
	if err := cc.writeFrame(time.Now().Add(cc.client.cfg.PingInterval), ping); err != nil {
		cc.shutdown(fmt.Errorf("ipc: ping: %w", err))
		return false
	}
	return true
}

// deliver decodes one answer. An error return breaks the connection.
func (cc *clientConn) deliver(frame []byte) error {
	var hdr commonpb.RpcResponseHeaderProto
	rest, err := unmarshalDelimited(frame, &hdr)
	if err != nil {
		return fmt.Errorf("ipc: decode response header: %w", err)
	}
	if hdr.GetStatus() == commonpb.RpcResponseHeaderProto_FATAL {
		return remoteErrorFromHeader(&hdr)
	}
	if id := hdr.GetClientId(); len(id) > 0 && string(id) != string(cc.client.cfg.ClientID) {
		return fmt.Errorf("ipc: response for client id %x", id)
	}
	callID := int32(hdr.GetCallId())
	cc.mu.Lock()
	p := cc.calls[callID]
	delete(cc.calls, callID)
	cc.mu.Unlock()
	if p == nil {
		// The caller gave up (its context ended); the answer has no taker.
		return nil
	}
	if hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS {
		p.done <- remoteErrorFromHeader(&hdr)
		return nil
	}
	if p.encoded != nil {
		var msg []byte
		msg, rest, err = nextDelimited(rest)
		if err == nil {
			// The frame's buffer is the next frame's.
			*p.encoded = append([]byte{}, msg...)
		}
	} else {
		rest, err = unmarshalDelimited(rest, p.resp)
	}
	if err != nil {
		err = fmt.Errorf("ipc: decode response: %w", err)
		p.done <- err
		return err
	}
	if len(rest) != 0 {
		err := errors.New("ipc: RPC response length mismatch")
		p.done <- err
		return err
	}
	p.done <- nil
	return nil
}
