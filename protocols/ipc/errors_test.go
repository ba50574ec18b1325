package ipc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// rawConn speaks the wire by hand, to send what no well-behaved client would.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string, preamble []byte) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(preamble); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func preamble(version, auth byte) []byte { return []byte{'h', 'r', 'p', 'c', version, 0, auth} }

func (r *rawConn) send(msgs ...proto.Message) {
	r.t.Helper()
	b, err := appendFrame(nil, msgs...)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) sendBytes(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// answer reads one response frame.
func (r *rawConn) answer() (*commonpb.RpcResponseHeaderProto, []byte) {
	r.t.Helper()
	frame, err := readFrame(r.br, DefaultMaxDataLength, nil)
	if err != nil {
		r.t.Fatalf("read answer: %v", err)
	}
	var hdr commonpb.RpcResponseHeaderProto
	rest, err := unmarshalDelimited(frame, &hdr)
	if err != nil {
		r.t.Fatalf("decode answer header: %v", err)
	}
	return &hdr, rest
}

// closed asserts the server hung up without sending anything more.
func (r *rawConn) closed() {
	r.t.Helper()
	b, err := io.ReadAll(r.br)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		r.t.Fatalf("waiting for close: %v", err)
	}
	if len(b) != 0 {
		r.t.Fatalf("server sent %d more bytes before closing: %q", len(b), b)
	}
}

// header is a call's request header as a Java client sends it.
func header(callID int32, clientID []byte) *commonpb.RpcRequestHeaderProto {
	return newRequestHeader(callID, clientID, 0)
}

var testClientID = []byte("0123456789abcdef")

func connContext(user string) *commonpb.IpcConnectionContextProto {
	return &commonpb.IpcConnectionContextProto{
		UserInfo: &commonpb.UserInformationProto{EffectiveUser: proto.String(user)},
		Protocol: proto.String(testProtocol),
	}
}

func requestHeader(protocol, method string, version uint64) *commonpb.RequestHeaderProto {
	return &commonpb.RequestHeaderProto{
		MethodName:                 proto.String(method),
		DeclaringClassProtocolName: proto.String(protocol),
		ClientProtocolVersion:      proto.Uint64(version),
	}
}

func TestCallErrorsAnswerWithHadoopClassesAndKeepTheConnection(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	tests := []struct {
		name       string
		protocol   string
		method     string
		version    uint64
		appID      int32
		wantClass  string
		wantCode   commonpb.RpcResponseHeaderProto_RpcErrorCodeProto
		wantSubstr string
	}{
		{"handler error names its exception class", testProtocol, "getApplicationReport", 1, -7,
			classAppNotFound, commonpb.RpcResponseHeaderProto_ERROR_APPLICATION, "Application with id '-7' doesn't exist in RM."},
		{"unknown protocol", "org.example.NoSuchProtocolPB", "getApplicationReport", 1, 1,
			ClassNoSuchProtocol, commonpb.RpcResponseHeaderProto_ERROR_NO_SUCH_PROTOCOL, "Unknown protocol: org.example.NoSuchProtocolPB"},
		{"unknown method", testProtocol, "getTheMoon", 1, 1,
			ClassNoSuchMethod, commonpb.RpcResponseHeaderProto_ERROR_NO_SUCH_METHOD, "Unknown method getTheMoon called on " + testProtocol + " protocol."},
		{"protocol version mismatch", testProtocol, "getApplicationReport", 2, 1,
			ClassVersionMismatch, commonpb.RpcResponseHeaderProto_ERROR_RPC_VERSION_MISMATCH, "(client = 2, server = 1)"},
	}
	r := dialRaw(t, ts.addr, preamble(9, authProtocolNone))
	r.send(header(callIDConnectionContext, testClientID), connContext("alice"))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.t = t
			hdr := header(int32(i), testClientID)
			hdr.RetryCount = proto.Int32(3)
			r.send(hdr, requestHeader(tt.protocol, tt.method, tt.version), &yarnpb.GetApplicationReportRequestProto{
				ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(tt.appID), ClusterTimestamp: proto.Int64(1)},
			})
			got, rest := r.answer()
			if got.GetStatus() != commonpb.RpcResponseHeaderProto_ERROR || got.GetCallId() != uint32(i) ||
				got.GetExceptionClassName() != tt.wantClass || got.GetErrorDetail() != tt.wantCode ||
				!strings.Contains(got.GetErrorMsg(), tt.wantSubstr) {
				t.Errorf("answer = %v", got)
			}
			if got.GetRetryCount() != 3 || string(got.GetClientId()) != string(testClientID) || got.GetServerIpcVersionNum() != 9 {
				t.Errorf("retry count, client id or version not echoed: %v", got)
			}
			if len(rest) != 0 {
				t.Errorf("error answer carries %d payload bytes", len(rest))
			}
		})
	}
	// The connection is still good after every one of those.
	r.t = t
	r.send(header(99, testClientID), requestHeader(testProtocol, "getNewApplication", 1), &yarnpb.GetNewApplicationRequestProto{})
	if got, _ := r.answer(); got.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS {
		t.Fatalf("call after errors: %v", got)
	}
}

func TestClientReturnsRemoteErrorsAsTypedErrors(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	_, err := report(t, c, -1)
	var re *RemoteError
	if !errors.As(err, &re) || re.ClassName != classAppNotFound || re.Fatal {
		t.Fatalf("err = %v, want a non-fatal %s", err, classAppNotFound)
	}
	if !errors.Is(err, &RemoteError{ClassName: classAppNotFound}) || !IsClass(err, classAppNotFound) {
		t.Errorf("errors.Is / IsClass do not match the class")
	}
	if _, err := report(t, c, 1); err != nil {
		t.Errorf("next call on the same client: %v", err)
	}
}

func TestFatalConnectionErrors(t *testing.T) {
	garbled := []byte{0, 0, 0, 3, 0x7f, 0xff, 0xff}
	tests := []struct {
		name      string
		server    Config
		preamble  []byte
		frames    func(r *rawConn)
		wantCall  int32
		wantClass string
		wantCode  commonpb.RpcResponseHeaderProto_RpcErrorCodeProto
		wantMsg   string
	}{
		{"bad magic", Config{Simple: true}, []byte("hrpx\x09\x00\x00"), nil,
			-1, ClassVersionMismatch, commonpb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH, "Server IPC version 9 cannot communicate with client version 9"},
		{"newer ipc version", Config{Simple: true}, preamble(10, 0), nil,
			-1, ClassVersionMismatch, commonpb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH, "client version 10"},
		{"unknown auth protocol", Config{Simple: true}, preamble(9, 0x42), nil,
			-1, ClassIPCException, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "Unknown auth protocol:66"},
		{"simple refused by a token-only server", Config{Tokens: testTokens}, preamble(9, 0), nil,
			-1, ClassAccessControl, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "SIMPLE authentication is not enabled.  Available:[TOKEN]"},
		{"garbled request header", Config{Simple: true}, preamble(9, 0), func(r *rawConn) { r.sendBytes(garbled) },
			-1, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST, "Error decoding RpcRequestHeaderProto"},
		{"call before the connection context", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			r.send(header(0, testClientID), requestHeader(testProtocol, "getNewApplication", 1), &yarnpb.GetNewApplicationRequestProto{})
		}, 0, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Connection context not established"},
		{"missing rpc kind", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			h := header(callIDConnectionContext, testClientID)
			h.RpcKind = nil
			r.send(h, connContext("alice"))
		}, callIDConnectionContext, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "No rpc kind"},
		{"writable rpc kind", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			r.send(header(callIDConnectionContext, testClientID), connContext("alice"))
			h := header(0, testClientID)
			h.RpcKind = commonpb.RpcKindProto_RPC_WRITABLE.Enum()
			r.send(h, requestHeader(testProtocol, "getNewApplication", 1), &yarnpb.GetNewApplicationRequestProto{})
		}, 0, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Unknown rpc kind"},
		{"continuation packets", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			h := header(callIDConnectionContext, testClientID)
			h.RpcOp = commonpb.RpcRequestHeaderProto_RPC_CONTINUATION_PACKET.Enum()
			r.send(h, connContext("alice"))
		}, callIDConnectionContext, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "does not implement rpc header operation"},
		{"second connection context", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			r.send(header(callIDConnectionContext, testClientID), connContext("alice"))
			r.send(header(callIDConnectionContext, testClientID), connContext("mallory"))
		}, callIDConnectionContext, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Connection context already processed"},
		{"unknown out-of-band call", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			r.send(header(-7, testClientID))
		}, -7, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Unknown out of band call #-7"},
		{"SASL message on a connection that did not ask for SASL", Config{Simple: true}, preamble(9, 0), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
		}, callIDSASL, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "SASL protocol not requested by client"},
		{"connection context during SASL", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDConnectionContext, testClientID), connContext("alice"))
		}, callIDConnectionContext, ClassFatalRPCServer, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Connection header sent during SASL negotiation"},
		{"SASL negotiate twice", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
			if hdr, _ := r.answer(); hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS {
				r.t.Fatalf("first negotiate: %v", hdr)
			}
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
		}, callIDSASL, ClassAccessControl, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "Client already attempted negotiation"},
		{"SASL initiate with an auth the server never offered", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
			r.answer()
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_INITIATE.Enum(),
				Auths: []*commonpb.RpcSaslProto_SaslAuth{{Method: proto.String("KERBEROS"), Mechanism: proto.String("GSSAPI")}}})
		}, callIDSASL, ClassAccessControl, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "KERBEROS authentication is not enabled.  Available:[TOKEN]"},
		{"SASL response before initiate", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_RESPONSE.Enum(), Token: []byte("x")})
		}, callIDSASL, ClassSaslException, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "RESPONSE before INITIATE"},
		{"SASL wrap without a security layer", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_WRAP.Enum(), Token: []byte("x")})
		}, callIDSASL, ClassSaslException, commonpb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "Server is not wrapping data"},
		{"garbage instead of a DIGEST-MD5 response", Config{Tokens: testTokens}, preamble(9, authProtocolSASL), func(r *rawConn) {
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
			hdr, rest := r.answer()
			var neg commonpb.RpcSaslProto
			if _, err := unmarshalDelimited(rest, &neg); err != nil || hdr.GetCallId() != uint32(0xFFFFFFDF) {
				r.t.Fatalf("negotiate answer: %v %v", hdr, err)
			}
			auth := proto.Clone(neg.GetAuths()[0]).(*commonpb.RpcSaslProto_SaslAuth)
			auth.Challenge = nil
			r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_INITIATE.Enum(),
				Auths: []*commonpb.RpcSaslProto_SaslAuth{auth}, Token: []byte("username=\"x\",,,=")})
		}, callIDSASL, ClassSaslException, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.server)
			r := dialRaw(t, ts.addr, tt.preamble)
			if tt.frames != nil {
				tt.frames(r)
			}
			got, _ := r.answer()
			if got.GetStatus() != commonpb.RpcResponseHeaderProto_FATAL || int32(got.GetCallId()) != tt.wantCall ||
				got.GetExceptionClassName() != tt.wantClass || got.GetErrorDetail() != tt.wantCode ||
				!strings.Contains(got.GetErrorMsg(), tt.wantMsg) || got.GetServerIpcVersionNum() != 9 {
				t.Errorf("answer = %v", got)
			}
			r.closed()
		})
	}
}

func TestOldClientsGetAnAnswerTheirVersionReads(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	msg := "Server IPC version 9 cannot communicate with client version "
	str := func(s string) string { return string([]byte{0, 0, 0, byte(len(s))}) + s }
	tests := []struct {
		name    string
		version byte
		want    string
	}{
		{"version 8 reads int id, int status, two strings", 8, "\xff\xff\xff\xff\xff\xff\xff\xff" + str(ClassVersionMismatch) + str(msg+"8")},
		{"version 2 reads int id, a boolean, two strings", 2, "\x00\x00\x00\x00\x01" + str(ClassVersionMismatch) + str(msg+"2")},
		{"version 1 gets nothing", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dialRaw(t, ts.addr, preamble(tt.version, 0))
			got, _ := io.ReadAll(r.br)
			if string(got) != tt.want {
				t.Errorf("answer = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHTTPRequestOnTheIPCPortGetsAPlainAnswer(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	r := dialRaw(t, ts.addr, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	got, _ := io.ReadAll(r.br)
	if string(got) != httpGetResponse {
		t.Errorf("answer = %q", got)
	}
}

func TestFramesOverTheMaximumDataLengthCloseTheConnection(t *testing.T) {
	ts := startServer(t, Config{Simple: true, MaxDataLength: 1024})
	for _, length := range [][]byte{{0, 0, 4, 1}, {0x80, 0, 0, 0}} {
		r := dialRaw(t, ts.addr, preamble(9, 0))
		r.sendBytes(length)
		r.closed()
	}
}

func TestBadTokensAreRefused(t *testing.T) {
	forged := testToken("alice")
	forged.Password = []byte("not the hmac")
	tests := []struct {
		name      string
		token     *commonpb.TokenProto
		wantClass string
	}{
		{"unknown identifier", &commonpb.TokenProto{Identifier: []byte("nobody"), Password: []byte("x"), Kind: proto.String("T"), Service: proto.String("")}, ClassInvalidToken},
		{"wrong password", forged, ClassSaslException},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, Config{Tokens: testTokens})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, ts.addr, ClientConfig{Protocol: testProtocol, Token: tt.token})
			var re *RemoteError
			if !errors.As(err, &re) || re.ClassName != tt.wantClass || !re.Fatal || re.Code != commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED {
				t.Fatalf("dial err = %v, want fatal %s", err, tt.wantClass)
			}
		})
	}
}

func TestTokenUserCannotClaimAnotherUser(t *testing.T) {
	ts := startServer(t, Config{Tokens: testTokens})
	// Authenticate as alice by hand, then claim "mallory" in the context.
	r := dialRaw(t, ts.addr, preamble(9, authProtocolSASL))
	r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()})
	_, rest := r.answer()
	var neg commonpb.RpcSaslProto
	if _, err := unmarshalDelimited(rest, &neg); err != nil {
		t.Fatal(err)
	}
	tok := testToken("alice")
	mech := newTestDigestClient(tok)
	resp, err := mech.Respond(neg.GetAuths()[0].GetChallenge())
	if err != nil {
		t.Fatal(err)
	}
	auth := proto.Clone(neg.GetAuths()[0]).(*commonpb.RpcSaslProto_SaslAuth)
	auth.Challenge = nil
	r.send(header(callIDSASL, []byte{}), &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_INITIATE.Enum(), Auths: []*commonpb.RpcSaslProto_SaslAuth{auth}, Token: resp})
	if hdr, _ := r.answer(); hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS {
		t.Fatalf("SASL: %v", hdr)
	}
	r.send(header(callIDConnectionContext, testClientID), connContext("mallory"))
	got, _ := r.answer()
	if got.GetStatus() != commonpb.RpcResponseHeaderProto_FATAL || got.GetExceptionClassName() != ClassAccessControl ||
		!strings.Contains(got.GetErrorMsg(), "doesn't match what the client claims to be (mallory)") {
		t.Errorf("answer = %v", got)
	}
	r.closed()
}

func TestAuthorizeConnectionRefusesWithItsOwnClass(t *testing.T) {
	const classAuthorization = "org.apache.hadoop.security.authorize.AuthorizationException"
	ts := startServer(t, Config{Simple: true, AuthorizeConnection: func(_ context.Context, c Caller) error {
		if c.RealUser != "" {
			return Errorf(classAuthorization, "User: %s is not allowed to impersonate %s", c.RealUser, c.User)
		}
		return nil
	}})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice", RealUser: "mallory"})
	_, err := report(t, c, 1)
	var re *RemoteError
	if !errors.As(err, &re) || re.ClassName != classAuthorization || !re.Fatal {
		t.Fatalf("err = %v", err)
	}
	direct := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	if _, err := report(t, direct, 1); err != nil {
		t.Errorf("user without a proxy: %v", err)
	}
}

func TestHandlerPanicFailsOnlyItsCall(t *testing.T) {
	methods := append(clientProtocolMethods(), Handle("forceKillApplication",
		func(context.Context, *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			panic("boom")
		}))
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, methods...))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	err := c.Call(context.Background(), "forceKillApplication", &yarnpb.KillApplicationRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(1)},
	}, &yarnpb.KillApplicationResponseProto{})
	if !IsClass(err, ClassRPCServer) {
		t.Fatalf("err = %v", err)
	}
	if _, err := report(t, c, 1); err != nil {
		t.Errorf("call after the panic: %v", err)
	}
}

func TestClientReconnectsAfterTheServerClosesAnIdleConnection(t *testing.T) {
	ts := startServer(t, Config{Simple: true, IdleTimeout: 100 * time.Millisecond})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	var previous *clientConn
	for i := 0; i < 3; i++ {
		if _, err := report(t, c, 1); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if c.cur == previous {
			t.Fatalf("call %d reused the connection the server closed", i)
		}
		previous = c.cur
		time.Sleep(300 * time.Millisecond)
	}
}

func TestClientClosesItsIdleConnectionAndReopens(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice", MaxIdleTime: 50 * time.Millisecond})
	if _, err := report(t, c, 1); err != nil {
		t.Fatal(err)
	}
	first := c.cur
	time.Sleep(250 * time.Millisecond)
	if first.usable() {
		t.Fatal("idle connection still open")
	}
	if _, err := report(t, c, 1); err != nil {
		t.Fatalf("call after idle close: %v", err)
	}
}

func TestLongCallsOutliveTheServerIdleTimeout(t *testing.T) {
	ts := startServer(t, Config{Simple: true, IdleTimeout: 150 * time.Millisecond})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice", PingInterval: 50 * time.Millisecond})
	// The handler sleeps 600ms, four server idle timeouts: a call in flight
	// keeps its connection open.
	if _, err := report(t, c, 600); err != nil {
		t.Fatalf("long call: %v", err)
	}
}

func TestClientPingsASilentServerWhileACallWaits(t *testing.T) {
	pings := make(chan int, 1)
	addr := silentPeer(t, func(nc net.Conn, br *bufio.Reader) {
		if _, err := io.ReadFull(br, make([]byte, preambleLen)); err != nil {
			return
		}
		var call *commonpb.RpcRequestHeaderProto
		n := 0
		_ = nc.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
		for {
			frame, err := readFrame(br, DefaultMaxDataLength, nil)
			if err != nil {
				break // the deadline: the client has waited 400ms
			}
			var hdr commonpb.RpcRequestHeaderProto
			if _, err := unmarshalDelimited(frame, &hdr); err != nil {
				return
			}
			switch id := hdr.GetCallId(); {
			case id == callIDPing:
				n++
			case id >= 0:
				call = &hdr
			}
		}
		pings <- n
		if call == nil {
			return
		}
		b, _ := appendFrame(nil, &commonpb.RpcResponseHeaderProto{
			CallId: wireCallID(call.GetCallId()), Status: commonpb.RpcResponseHeaderProto_SUCCESS.Enum(),
			ServerIpcVersionNum: proto.Uint32(currentVersion), ClientId: call.GetClientId(), RetryCount: proto.Int32(0),
		}, &yarnpb.GetNewApplicationResponseProto{})
		_, _ = nc.Write(b)
		_, _ = io.Copy(io.Discard, br)
	})
	c := newTestClient(t, addr, ClientConfig{User: "alice", PingInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{}); err != nil {
		t.Fatalf("call: %v", err)
	}
	if n := <-pings; n < 3 {
		t.Errorf("client sent %d pings in 400ms of silence with a 50ms ping interval", n)
	}
}

func TestCallHonoursContextDeadline(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var resp yarnpb.GetApplicationReportResponseProto
	err := c.Call(ctx, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(500), ClusterTimestamp: proto.Int64(1)},
	}, &resp)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// The late answer arrives with no taker, is dropped, and the same
	// connection serves the next call.
	conn := c.cur
	time.Sleep(600 * time.Millisecond)
	if _, err := report(t, c, 1); err != nil {
		t.Fatalf("next call: %v", err)
	}
	if c.cur != conn {
		t.Error("the late answer broke the connection")
	}
}

func TestShutdownLetsCallsInFlightAnswer(t *testing.T) {
	ts := startServer(t, Config{Simple: true})
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	if _, err := report(t, c, 1); err != nil {
		t.Fatal(err)
	}
	var answered atomic.Bool
	callDone := make(chan error, 1)
	go func() {
		_, err := report(t, c, 300)
		answered.Store(err == nil)
		callDone <- err
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-callDone; err != nil || !answered.Load() {
		t.Fatalf("call in flight during shutdown: %v", err)
	}
	if err := ts.wait(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Error("listener still accepts after shutdown")
	}
}

func TestShutdownDeadlineClosesStuckCalls(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, Handle("getNewApplication",
		func(ctx context.Context, _ *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return &yarnpb.GetNewApplicationResponseProto{}, nil
			}
		})))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	callDone := make(chan error, 1)
	go func() {
		callDone <- c.Call(context.Background(), "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown = %v, want the deadline", err)
	}
	if err := <-callDone; err == nil {
		t.Fatal("stuck call answered successfully")
	}
}

// flakyListener fails its first Accept with a temporary error, as a server
// out of file descriptors sees EMFILE.
type flakyListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestServeKeepsAcceptingAfterATemporaryError(t *testing.T) {
	srv := newTestServer(t, Config{Simple: true}, clientProtocolMethods()...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(&flakyListener{Listener: l}) }()
	defer func() {
		srv.Close()
		<-served
	}()
	c := newTestClient(t, l.Addr().String(), ClientConfig{User: "alice"})
	if _, err := report(t, c, 1); err != nil {
		t.Fatalf("call after EMFILE: %v", err)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve gave up: %v", err)
	default:
	}
}

func TestAFatalErrorFromAHandlerFailsOnlyItsCall(t *testing.T) {
	methods := append(clientProtocolMethods(), Handle("forceKillApplication",
		func(context.Context, *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			// As a handler passing on what its own client got.
			return nil, &RemoteError{ClassName: ClassInvalidToken, Message: "token expired", Fatal: true,
				Code: commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED}
		}))
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, methods...))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	err := c.Call(context.Background(), "forceKillApplication", &yarnpb.KillApplicationRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(1)},
	}, &yarnpb.KillApplicationResponseProto{})
	var re *RemoteError
	if !errors.As(err, &re) || re.ClassName != ClassInvalidToken || re.Fatal {
		t.Fatalf("err = %v, want a non-fatal %s", err, ClassInvalidToken)
	}
	conn := c.cur
	if _, err := report(t, c, 1); err != nil || c.cur != conn {
		t.Fatalf("next call: %v (same connection: %v)", err, c.cur == conn)
	}
}

func TestACallToAServerThatStopsReadingFails(t *testing.T) {
	release := make(chan struct{})
	addr := silentPeer(t, func(nc net.Conn, br *bufio.Reader) {
		// Take the preamble and the context, then read nothing more.
		if _, err := io.ReadFull(br, make([]byte, preambleLen)); err != nil {
			return
		}
		if _, err := readFrame(br, DefaultMaxDataLength, nil); err != nil {
			return
		}
		<-release
	})
	t.Cleanup(func() { close(release) }) // runs before silentPeer's own clean-up
	c := newTestClient(t, addr, ClientConfig{User: "alice", PingInterval: 100 * time.Millisecond})
	// Far more than the socket buffers hold, so the write blocks.
	big := &yarnpb.GetApplicationsRequestProto{ApplicationTags: []string{strings.Repeat("x", 32<<20)}}
	done := make(chan error, 1)
	go func() {
		done <- c.Call(context.Background(), "getApplications", big, &yarnpb.GetApplicationsResponseProto{})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("call to a server that reads nothing succeeded")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("call still blocked writing to a server that reads nothing")
	}
}
