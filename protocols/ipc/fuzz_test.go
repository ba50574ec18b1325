package ipc

// Fuzz targets for every decoder of network bytes in the engine: the whole
// server side of a connection, the client's reading of answers, and the
// frame and delimited-message splitters under both.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// fuzzDeadline bounds anything a fuzz iteration waits for. Nothing should
// come close: the inputs are finite and end in EOF.
const fuzzDeadline = 5 * time.Second

// recordedStreams returns every recorded stream of one direction ("c2s" or
// "s2c") under both recording folders, by file name. Without ../shared the
// target skips (fails under CI), as the replay tests do.
func recordedStreams(f *testing.F, direction string) map[string][]byte {
	f.Helper()
	streams := map[string][]byte{}
	for _, dir := range []string{replayWireDir, replayWireRealDir} {
		files, err := filepath.Glob(filepath.Join(recordings.Path(f, dir), "*", "*-"+direction+".bin"))
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			streams[name] = b
		}
	}
	return streams
}

// fuzzFrame builds one frame of delimited messages, as the Java client would.
func fuzzFrame(msgs ...proto.Message) []byte {
	b, err := appendFrame(nil, msgs...)
	if err != nil {
		panic(err)
	}
	return b
}

func fuzzRequestHeader(callID int32) *commonpb.RpcRequestHeaderProto {
	clientID := []byte("0123456789abcdef")
	if callID == callIDSASL {
		clientID = []byte{}
	}
	return newRequestHeader(callID, clientID, -1)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// handMadeClientStreams are edge cases no recorded client sends.
func handMadeClientStreams() map[string][]byte {
	simple := []byte("hrpc\x09\x00\x00")
	sasl := []byte("hrpc\x09\x00\xdf")
	ctxFrame := fuzzFrame(fuzzRequestHeader(callIDConnectionContext), &commonpb.IpcConnectionContextProto{
		UserInfo: &commonpb.UserInformationProto{EffectiveUser: proto.String("alice")},
		Protocol: proto.String(replayClientProtocol),
	})
	call := func(id int32, protocol, method string, req proto.Message) []byte {
		return fuzzFrame(fuzzRequestHeader(id), &commonpb.RequestHeaderProto{
			MethodName:                 proto.String(method),
			DeclaringClassProtocolName: proto.String(protocol),
			ClientProtocolVersion:      proto.Uint64(ProtocolVersion),
		}, req)
	}
	report := call(0, replayClientProtocol, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(replayUnknownApp), ClusterTimestamp: proto.Int64(1)},
	})
	ping := fuzzFrame(fuzzRequestHeader(callIDPing))
	saslMsg := func(state commonpb.RpcSaslProto_SaslState, auths ...*commonpb.RpcSaslProto_SaslAuth) []byte {
		return fuzzFrame(fuzzRequestHeader(callIDSASL), &commonpb.RpcSaslProto{State: state.Enum(), Auths: auths})
	}
	token := &commonpb.RpcSaslProto_SaslAuth{Method: proto.String("TOKEN"), Mechanism: proto.String("DIGEST-MD5"),
		Protocol: proto.String(""), ServerId: proto.String("default")}
	simpleAuth := &commonpb.RpcSaslProto_SaslAuth{Method: proto.String("SIMPLE"), Mechanism: proto.String("")}
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

	return map[string][]byte{
		"empty":                     nil,
		"short preamble":            []byte("hrp"),
		"http GET":                  []byte("GET / HTTP/1.1\r\nHost: rm\r\n\r\n"),
		"bad magic":                 []byte("hrpX\x09\x00\x00"),
		"version 8":                 []byte("hrpc\x08\x00\x00"),
		"version 2":                 []byte("hrpc\x02\x00\x00"),
		"version 10":                []byte("hrpc\x0a\x00\x00"),
		"version -1":                []byte("hrpc\xff\x00\x00"),
		"unknown auth byte":         []byte("hrpc\x09\x00\x07"),
		"huge length":               concat(simple, be32(0x7fffffff)),
		"negative length":           concat(simple, be32(0xffffffff)),
		"empty frame":               concat(simple, be32(0)),
		"frame cut short":           concat(simple, be32(100), []byte{1, 2, 3}),
		"simple session":            concat(simple, ctxFrame, report, ping, call(1, replayClientProtocol, "getClusterMetrics", &yarnpb.GetClusterMetricsRequestProto{})),
		"unknown protocol":          concat(simple, ctxFrame, call(0, "no.such.Protocol", "x", &yarnpb.GetClusterMetricsRequestProto{})),
		"unknown method":            concat(simple, ctxFrame, call(0, replayClientProtocol, "noSuchMethod", &yarnpb.GetClusterMetricsRequestProto{})),
		"call before context":       concat(simple, report, ctxFrame),
		"context twice":             concat(simple, ctxFrame, ctxFrame, report),
		"unknown out of band id":    concat(simple, fuzzFrame(fuzzRequestHeader(-7))),
		"sasl on a simple conn":     concat(simple, saslMsg(commonpb.RpcSaslProto_NEGOTIATE)),
		"sasl context first":        concat(sasl, ctxFrame, report),
		"sasl initiate first":       concat(sasl, saslMsg(commonpb.RpcSaslProto_INITIATE, token)),
		"sasl negotiate twice":      concat(sasl, saslMsg(commonpb.RpcSaslProto_NEGOTIATE), saslMsg(commonpb.RpcSaslProto_NEGOTIATE)),
		"sasl response first":       concat(sasl, saslMsg(commonpb.RpcSaslProto_RESPONSE)),
		"sasl wrap":                 concat(sasl, saslMsg(commonpb.RpcSaslProto_WRAP)),
		"sasl simple then call":     concat(sasl, saslMsg(commonpb.RpcSaslProto_NEGOTIATE), saslMsg(commonpb.RpcSaslProto_INITIATE, simpleAuth), ctxFrame, report),
		"sasl two auths":            concat(sasl, saslMsg(commonpb.RpcSaslProto_NEGOTIATE), saslMsg(commonpb.RpcSaslProto_INITIATE, token, simpleAuth)),
		"sasl initiate no token":    concat(sasl, saslMsg(commonpb.RpcSaslProto_NEGOTIATE), saslMsg(commonpb.RpcSaslProto_INITIATE, token)),
		"sasl call before success":  concat(sasl, saslMsg(commonpb.RpcSaslProto_NEGOTIATE), report),
		"sasl simple after context": concat(sasl, saslMsg(commonpb.RpcSaslProto_INITIATE, simpleAuth), ctxFrame, saslMsg(commonpb.RpcSaslProto_NEGOTIATE)),
	}
}

// fuzzSecrets is the fuzz server's token lookup: it knows the recorded
// tokens (scripted keys from keys.json, the real AMRMToken's password from
// its container_tokens), so that recorded SASL exchanges get past
// authentication and their calls are fuzzed too.
type fuzzSecrets struct {
	amrmKey, nmKey []byte
	realID, realPW []byte
}

func loadFuzzSecrets(f *testing.F) fuzzSecrets {
	// The real AMRMToken of ../shared/testdata/hadoop-wire-real/ds-am/container_tokens.
	realID, _ := hex.DecodeString("0a0d0a09080210cffdbe91a034100110928895be02")
	realPW, _ := hex.DecodeString("28dc66180ae392d239488c4b8604adfa2ddf9198")
	s := fuzzSecrets{realID: realID, realPW: realPW, amrmKey: []byte("none"), nmKey: []byte("none")}
	if b, err := os.ReadFile(recordings.Path(f, replayWireDir, "keys.json")); err == nil {
		var k recordedKeys
		if json.Unmarshal(b, &k) == nil {
			s.amrmKey, _ = hex.DecodeString(k.AMRMToken.KeyHex)
			s.nmKey, _ = hex.DecodeString(k.NMToken.KeyHex)
		}
	}
	return s
}

func (s fuzzSecrets) lookup(_ context.Context, id []byte) (Secret, error) {
	if bytes.Equal(id, s.realID) {
		return Secret{Password: s.realPW, User: "appattempt_1795333013199_0002_000001"}, nil
	}
	var nm yarnpb.NMTokenIdentifierProto
	if proto.Unmarshal(id, &nm) == nil && nm.NodeId != nil {
		return Secret{Password: hmacSHA1(s.nmKey, id), User: replayAttemptID(nm.GetAppAttemptId())}, nil
	}
	var amrm yarnpb.AMRMTokenIdentifierProto
	if proto.Unmarshal(id, &amrm) == nil && amrm.AppAttemptId != nil {
		return Secret{Password: hmacSHA1(s.amrmKey, id), User: replayAttemptID(amrm.GetAppAttemptId())}, nil
	}
	return Secret{}, Errorf(ClassInvalidToken, "unknown token")
}

// fuzzNonce is the nonce the fuzz server offers: the one a recorded INITIATE
// in the input answers, so that recorded exchanges verify.
func fuzzNonce(in []byte) string {
	if m := recordedNonce.FindSubmatch(in); m != nil && len(m[1]) > 0 {
		return string(m[1])
	}
	return "fuzz-nonce"
}

// fuzzConn is the server's end of a connection whose client wrote the fuzz
// input and then half-closed: reads return the input, then EOF; writes are
// kept; Close is reported. Being in memory, it cannot lose the server's last
// bytes to a TCP reset, and it never blocks.
type fuzzConn struct {
	in *bytes.Reader

	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
	done   chan struct{}
}

func newFuzzConn(in []byte) *fuzzConn {
	return &fuzzConn{in: bytes.NewReader(in), done: make(chan struct{})}
}

var fuzzAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 45454}

func (c *fuzzConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return c.in.Read(p)
}

func (c *fuzzConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.out.Write(p)
}

func (c *fuzzConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return nil
}

func (c *fuzzConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

func (c *fuzzConn) LocalAddr() net.Addr                { return fuzzAddr }
func (c *fuzzConn) RemoteAddr() net.Addr               { return fuzzAddr }
func (c *fuzzConn) SetDeadline(t time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(t time.Time) error { return nil }

var _ net.Conn = (*fuzzConn)(nil)

// chanListener hands the server the connections sent on conns.
type chanListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return fuzzAddr }

var _ net.Listener = (*chanListener)(nil)

func FuzzServerConnection(f *testing.F) {
	for _, b := range recordedStreams(f, "c2s") {
		f.Add(b)
	}
	for _, b := range handMadeClientStreams() {
		f.Add(b)
	}
	secrets := loadFuzzSecrets(f)
	discard := slog.New(slog.DiscardHandler)

	f.Fuzz(func(t *testing.T, in []byte) {
		srv, err := NewServer(Config{
			Simple:      true,
			Tokens:      secrets.lookup,
			IdleTimeout: 200 * time.Millisecond,
			Logger:      discard,
		})
		if err != nil {
			t.Fatal(err)
		}
		nonce := fuzzNonce(in)
		srv.nonce = func() (string, error) { return nonce, nil }
		if err := registerReplayMethods(srv, &callerLog{}); err != nil {
			t.Fatal(err)
		}
		l := newChanListener()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()

		// No timer: the input ends in EOF and the connection is in memory,
		// so a server that holds on is a hang the fuzzer reports.
		nc := newFuzzConn(in)
		l.conns <- nc
		<-nc.done
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("serve returned %v", err)
		}
		if err := checkServerOutput(in, nc.written()); err != nil {
			t.Fatalf("%v\n in % x\nout % x", err, in[:min(len(in), 256)], nc.written())
		}
	})
}

// checkServerOutput checks that what the server wrote is what Hadoop writes
// for that preamble: nothing for a cut-short one, the HTTP text for GET, the
// old-version answer for versions 2 to 8, else well-formed response frames.
func checkServerOutput(in, out []byte) error {
	if len(in) < preambleLen {
		if len(out) != 0 {
			return errors.New("answered a preamble cut short")
		}
		return nil
	}
	if string(in[:4]) == "GET " {
		if string(out) != httpGetResponse {
			return errors.New("GET not answered with the HTTP text")
		}
		return nil
	}
	version := int(int8(in[4]))
	if string(in[:4]) != preambleMagic || version != currentVersion {
		writeString := func(b []byte, s string) []byte {
			return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
		}
		msg := fmt.Sprintf("Server IPC version 9 cannot communicate with client version %d", version)
		switch {
		case version >= currentVersion:
			return checkSingleFatal(out, ClassVersionMismatch, commonpb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH)
		case version >= 3:
			want := writeString(writeString([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ClassVersionMismatch), msg)
			if !bytes.Equal(out, want) {
				return fmt.Errorf("version %d answer is not the old-version fatal", version)
			}
		case version == 2:
			want := writeString(writeString([]byte{0, 0, 0, 0, 1}, ClassVersionMismatch), msg)
			if !bytes.Equal(out, want) {
				return errors.New("version 2 answer is not the 0.18 fatal")
			}
		default:
			if len(out) != 0 {
				return fmt.Errorf("answered version %d, which Hadoop leaves unanswered", version)
			}
		}
		return nil
	}
	switch in[6] {
	case authProtocolNone, authProtocolSASL:
	default:
		return checkSingleFatal(out, ClassIPCException, commonpb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED)
	}
	_, err := checkResponseFrames(out)
	return err
}

func checkSingleFatal(out []byte, class string, code ErrorCode) error {
	hdrs, err := checkResponseFrames(out)
	if err != nil {
		return err
	}
	if len(hdrs) != 1 || hdrs[0].GetStatus() != commonpb.RpcResponseHeaderProto_FATAL ||
		int32(hdrs[0].GetCallId()) != callIDAuthFailed || hdrs[0].GetExceptionClassName() != class || hdrs[0].GetErrorDetail() != code {
		return fmt.Errorf("want one FATAL %s %s with call id -1, got %v", class, code, hdrs)
	}
	return nil
}

// checkResponseFrames parses out as response frames and checks each: a
// header with the required fields and version 9; SUCCESS with exactly one
// delimited message after it (an RpcSaslProto for call id -33); ERROR and
// FATAL with none; nothing after a FATAL; no SUCCESS for the connection
// context or a ping.
func checkResponseFrames(out []byte) ([]*commonpb.RpcResponseHeaderProto, error) {
	frames, err := splitRecordedFrames(out)
	if err != nil {
		return nil, err
	}
	var hdrs []*commonpb.RpcResponseHeaderProto
	for i, f := range frames {
		hdr, parts, err := parseResponseFrame(f)
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i, err)
		}
		hdrs = append(hdrs, hdr)
		id := int32(hdr.GetCallId())
		if hdr.GetServerIpcVersionNum() != currentVersion {
			return nil, fmt.Errorf("frame %d: serverIpcVersionNum %d", i, hdr.GetServerIpcVersionNum())
		}
		switch hdr.GetStatus() {
		case commonpb.RpcResponseHeaderProto_SUCCESS:
			if len(parts) != 1 {
				return nil, fmt.Errorf("frame %d: SUCCESS with %d messages after the header", i, len(parts))
			}
			switch {
			case id == callIDSASL:
				var msg commonpb.RpcSaslProto
				if err := proto.Unmarshal(parts[0], &msg); err != nil {
					return nil, fmt.Errorf("frame %d: SASL answer: %w", i, err)
				}
			case id < 0:
				return nil, fmt.Errorf("frame %d: SUCCESS for out-of-band call %d", i, id)
			}
		case commonpb.RpcResponseHeaderProto_ERROR, commonpb.RpcResponseHeaderProto_FATAL:
			if len(parts) != 0 {
				return nil, fmt.Errorf("frame %d: %s with %d messages after the header", i, hdr.GetStatus(), len(parts))
			}
			if hdr.ExceptionClassName == nil || hdr.ErrorDetail == nil || hdr.ErrorMsg == nil {
				return nil, fmt.Errorf("frame %d: %s without class, message or detail: %v", i, hdr.GetStatus(), hdr)
			}
			if hdr.GetStatus() == commonpb.RpcResponseHeaderProto_FATAL && i != len(frames)-1 {
				return nil, fmt.Errorf("frame %d: FATAL followed by %d more frames", i, len(frames)-1-i)
			}
		default:
			return nil, fmt.Errorf("frame %d: status %d", i, hdr.GetStatus())
		}
	}
	return hdrs, nil
}

// fuzzClientID is the client id of the first answer in in, so that recorded
// answer streams are taken for this client's own.
func fuzzClientID(in []byte) []byte {
	frames, _ := splitRecordedFrames(in)
	for _, f := range frames {
		if hdr, _, err := parseResponseFrame(f); err == nil && len(hdr.GetClientId()) == 16 {
			return hdr.GetClientId()
		}
	}
	return []byte("0123456789abcdef")
}

// handMadeServerStreams are answers no recorded server sends.
func handMadeServerStreams() map[string][]byte {
	clientID := []byte("0123456789abcdef")
	hdr := func(id int32, status commonpb.RpcResponseHeaderProto_RpcStatusProto) *commonpb.RpcResponseHeaderProto {
		return &commonpb.RpcResponseHeaderProto{CallId: wireCallID(id), Status: status.Enum(),
			ServerIpcVersionNum: proto.Uint32(currentVersion), ClientId: clientID, RetryCount: proto.Int32(0)}
	}
	ok := hdr(0, commonpb.RpcResponseHeaderProto_SUCCESS)
	report := &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{User: proto.String("alice")}}
	fatalHdr := hdr(-1, commonpb.RpcResponseHeaderProto_FATAL)
	fatalHdr.ExceptionClassName = proto.String(ClassVersionMismatch)
	errHdr := hdr(0, commonpb.RpcResponseHeaderProto_ERROR)
	errHdr.ExceptionClassName = proto.String(replayClassAppNotFound)
	withTrailer := fuzzFrame(ok, report)
	withTrailer = append(withTrailer, 0)
	binary.BigEndian.PutUint32(withTrailer, uint32(len(withTrailer)-4))
	saslOK := hdr(callIDSASL, commonpb.RpcResponseHeaderProto_SUCCESS)
	saslOK.ClientId = []byte{}
	return map[string][]byte{
		"empty":             nil,
		"success":           concat(fuzzFrame(ok, report), fuzzFrame(hdr(1, 0), report), fuzzFrame(hdr(2, 0), report)),
		"error":             fuzzFrame(errHdr),
		"fatal":             fuzzFrame(fatalHdr),
		"trailing bytes":    withTrailer,
		"success no body":   fuzzFrame(ok),
		"unknown call id":   fuzzFrame(hdr(77, 0), report),
		"other client id":   fuzzFrame(&commonpb.RpcResponseHeaderProto{CallId: proto.Uint32(0), Status: commonpb.RpcResponseHeaderProto_SUCCESS.Enum(), ClientId: []byte("someone else....")}, report),
		"negative length":   {0xff, 0xff, 0xff, 0xff},
		"huge length":       {0x7f, 0xff, 0xff, 0xff},
		"zero length":       {0, 0, 0, 0},
		"sasl success":      fuzzFrame(saslOK, &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_SUCCESS.Enum()}),
		"sasl no auths":     fuzzFrame(saslOK, &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum()}),
		"sasl challenge":    fuzzFrame(saslOK, &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_CHALLENGE.Enum(), Token: []byte("x")}),
		"sasl bad rspauth":  fuzzFrame(saslOK, &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_SUCCESS.Enum(), Token: []byte("rspauth=00")}),
		"sasl simple offer": fuzzFrame(saslOK, &commonpb.RpcSaslProto{State: commonpb.RpcSaslProto_NEGOTIATE.Enum(), Auths: []*commonpb.RpcSaslProto_SaslAuth{{Method: proto.String("SIMPLE"), Mechanism: proto.String("")}}}),
	}
}

func FuzzClientResponses(f *testing.F) {
	for name, b := range recordedStreams(f, "s2c") {
		f.Add(b, filepath.Base(filepath.Dir(name)) == "ds-am")
	}
	for _, b := range handMadeServerStreams() {
		f.Add(b, false)
		f.Add(b, true)
	}
	discard := slog.New(slog.DiscardHandler)
	tok := &commonpb.TokenProto{Identifier: []byte("id"), Password: []byte("pw"), Kind: proto.String("YARN_AM_RM_TOKEN"), Service: proto.String("")}

	f.Fuzz(func(t *testing.T, answer []byte, sasl bool) {
		// Every connection is an in-memory server that answers with the
		// input, then reads on and ends in EOF, as a server that wrote its
		// answer and half-closed; no socket, no timer.
		var conns []*fuzzConn
		cfg := ClientConfig{
			Protocol:          replayClientProtocol,
			User:              "alice",
			ClientID:          fuzzClientID(answer),
			MaxResponseLength: 1 << 20,
			Dial: func(context.Context, string) (net.Conn, error) {
				nc := newFuzzConn(answer)
				conns = append(conns, nc)
				return nc, nil
			},
			NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} },
			Logger:     discard,
		}
		if sasl {
			cfg.Token = tok
		}
		c, err := NewClient("fuzz:8032", cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Three calls: the first usually takes the answers, the later ones
		// find a broken or reused connection; the second takes its answer
		// undecoded, as a proxy does. None may wait for a deadline, and
		// there is none: a call that never returns hangs the fuzzer.
		for i := range 3 {
			if i == 1 {
				_, _ = c.CallRaw(context.Background(), "getApplicationReport", nil)
				continue
			}
			var resp yarnpb.GetApplicationReportResponseProto
			_ = c.Call(context.Background(), "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{}, &resp)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for i, nc := range conns {
			select {
			case <-nc.done:
			default:
				t.Fatalf("connection %d still open after Close", i)
			}
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, b := range recordedStreams(f, "c2s") {
		f.Add(b[min(len(b), preambleLen):], uint32(DefaultMaxDataLength))
	}
	for _, b := range recordedStreams(f, "s2c") {
		f.Add(b, uint32(200))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint32(10))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2}, uint32(DefaultMaxDataLength))
	f.Add([]byte{0, 0, 0, 3, 0x80, 0x80, 0x80}, uint32(10))
	f.Add([]byte{0, 0, 0, 3, 5, 1, 2}, uint32(10))
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0}, uint32(10))
	f.Add(append([]byte{0, 1, 0, 2}, make([]byte, smallFrame+2)...), uint32(smallFrame+2))

	f.Fuzz(func(t *testing.T, in []byte, maxLen uint32) {
		// Up to twice smallFrame, so both of readFrame's buffer paths run.
		limit := int(maxLen % (2*smallFrame + 1))
		checkDelimitedSplit(t, in)

		br := bufio.NewReader(bytes.NewReader(in))
		var buf []byte
		rest := in
		for {
			frame, err := readFrame(br, limit, buf)
			if err != nil {
				checkReadFrameError(t, rest, limit, err)
				return
			}
			if len(frame) > limit {
				t.Fatalf("frame of %d bytes, limit %d", len(frame), limit)
			}
			n := int(binary.BigEndian.Uint32(rest))
			if n != len(frame) || !bytes.Equal(frame, rest[4:4+n]) {
				t.Fatalf("frame % x is not the %d bytes after its length", frame, n)
			}
			checkDelimitedSplit(t, frame)
			var hdr commonpb.RpcRequestHeaderProto
			_, _ = unmarshalDelimited(frame, &hdr)
			rest = rest[4+n:]
			if cap(frame) <= smallFrame {
				buf = frame[:0]
			}
		}
	})
}

// checkReadFrameError checks that readFrame failed for the reason rest gives.
func checkReadFrameError(t *testing.T, rest []byte, limit int, err error) {
	t.Helper()
	var want error
	switch {
	case len(rest) == 0:
		want = io.EOF
	case len(rest) < 4:
		want = io.ErrUnexpectedEOF
	default:
		switch n := int32(binary.BigEndian.Uint32(rest)); {
		case n < 0:
			want = errFrameNegative
		case int(n) > limit:
			want = errFrameTooLong
		default:
			want = io.ErrUnexpectedEOF
		}
	}
	if !errors.Is(err, want) {
		t.Fatalf("readFrame of % x (limit %d): %v, want %v", rest[:min(len(rest), 16)], limit, err, want)
	}
}

// checkDelimitedSplit splits b with nextDelimited until it fails and checks
// every step against protowire's own reading.
func checkDelimitedSplit(t *testing.T, b []byte) {
	t.Helper()
	for len(b) > 0 {
		msg, rest, err := nextDelimited(b)
		part, n := protowire.ConsumeBytes(b)
		if err != nil {
			if n >= 0 {
				t.Fatalf("nextDelimited(% x): %v, but protowire reads %d bytes", b[:min(len(b), 16)], err, n)
			}
			if !errors.Is(err, errTruncated) && !errors.Is(err, errVarintTooLarge) {
				t.Fatalf("nextDelimited: unexpected error %v", err)
			}
			return
		}
		if n < 0 || !bytes.Equal(msg, part) || len(rest) != len(b)-n {
			t.Fatalf("nextDelimited(% x) = % x + %d bytes, protowire reads % x (%d)", b[:min(len(b), 16)], msg, len(rest), part, n)
		}
		b = rest
	}
}

// The client tests below pin down behaviour found while writing
// FuzzClientResponses: a peer that is slow rather than malformed.

// silentPeer accepts one connection, hands over what the client sent through
// serve, and closes the connection when the test ends.
func silentPeer(t *testing.T, serve func(net.Conn, *bufio.Reader)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, nc)
		mu.Unlock()
		defer nc.Close()
		serve(nc, bufio.NewReader(nc))
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		<-done
	})
	return l.Addr().String()
}

// An answer whose bytes arrive with pauses, so that the frame takes longer
// than the client's read tick (its ping interval), is still one answer:
// Java's PingInputStream pings and resumes the same read. A frame stalled
// for more than two ping intervals means a dead server: the call fails
// instead of hanging.
func TestClientReadsAnAnswerThatPausesMidFrame(t *testing.T) {
	tests := []struct {
		name    string
		pause   time.Duration
		wantErr bool
	}{
		{"pauses within two ping intervals are waited out", 200 * time.Millisecond, false},
		{"a stall past two ping intervals ends the connection", 700 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientID := []byte("0123456789abcdef")
			want := &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{User: proto.String("alice")}}
			answer := fuzzFrame(&commonpb.RpcResponseHeaderProto{
				CallId: proto.Uint32(0), Status: commonpb.RpcResponseHeaderProto_SUCCESS.Enum(),
				ServerIpcVersionNum: proto.Uint32(currentVersion), ClientId: clientID, RetryCount: proto.Int32(0),
			}, want)
			addr := silentPeer(t, func(nc net.Conn, br *bufio.Reader) {
				// Preamble, connection context, then the call.
				if _, err := io.ReadFull(br, make([]byte, preambleLen)); err != nil {
					return
				}
				for i := 0; i < 2; i++ {
					if _, err := readFrame(br, DefaultMaxDataLength, nil); err != nil {
						return
					}
				}
				for _, cut := range [][]byte{answer[:2], answer[2:9], answer[9:]} {
					if _, err := nc.Write(cut); err != nil {
						return
					}
					time.Sleep(tt.pause)
				}
				_, _ = io.Copy(io.Discard, br) // pings, until the client hangs up
			})
			c, err := NewClient(addr, ClientConfig{
				Protocol: replayClientProtocol, User: "alice", ClientID: clientID,
				PingInterval: 300 * time.Millisecond,
				NewBackOff:   func() backoff.BackOff { return &backoff.StopBackOff{} },
				Logger:       slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
			defer cancel()
			var got yarnpb.GetApplicationReportResponseProto
			err = c.Call(ctx, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{}, &got)
			if tt.wantErr {
				if err == nil || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("call = %v, want the connection to end before the call's deadline", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !proto.Equal(&got, want) {
				t.Errorf("got %v, want %v", &got, want)
			}
		})
	}
}

// Cancelling a call's context ends the call even while the client is still
// waiting for the server's SASL answers: "ctx bounds the whole call".
func TestClientCallCancelledDuringTheHandshakeReturns(t *testing.T) {
	waiting := make(chan struct{})
	addr := silentPeer(t, func(_ net.Conn, br *bufio.Reader) {
		// Read the preamble and the NEGOTIATE, then never answer.
		if _, err := io.ReadFull(br, make([]byte, preambleLen)); err == nil {
			if _, err := readFrame(br, DefaultMaxDataLength, nil); err == nil {
				close(waiting)
			}
		}
		_, _ = io.Copy(io.Discard, br)
	})
	c, err := NewClient(addr, ClientConfig{
		Protocol: replayMasterProtocol,
		Token: &commonpb.TokenProto{Identifier: []byte("id"), Password: []byte("pw"),
			Kind: proto.String("YARN_AM_RM_TOKEN"), Service: proto.String("")},
		DialTimeout: 3 * fuzzDeadline,
		NewBackOff:  func() backoff.BackOff { return &backoff.StopBackOff{} },
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var resp yarnpb.AllocateResponseProto
		done <- c.Call(ctx, "allocate", &yarnpb.AllocateRequestProto{}, &resp)
	}()
	select {
	case <-waiting: // the client now waits for the NEGOTIATE answer
	case <-time.After(fuzzDeadline):
		t.Fatal("client sent no NEGOTIATE")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call returned %v, want context.Canceled", err)
		}
	case <-time.After(fuzzDeadline):
		t.Fatal("call ignored its cancelled context while waiting for the SASL answer")
	}
}

// Found by FuzzServerConnection: a FATAL answer ends the connection, so no
// answer of a call still in flight may follow it on the wire (Hadoop closes
// the connection; the Java client stops reading at the FATAL).
func TestNothingFollowsAFatalAnswer(t *testing.T) {
	const protocol = "test.BlockingProtocol"
	started, release := make(chan struct{}), make(chan struct{})
	srv, err := NewServer(Config{Simple: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Register(protocol, Handle("block", func(context.Context, *yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
		close(started)
		<-release // even past the connection's end, as a slow handler does
		return &yarnpb.GetClusterMetricsResponseProto{}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, srv)

	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	call := func(id int32, payload []byte) []byte {
		f := fuzzFrame(fuzzRequestHeader(id), &commonpb.RequestHeaderProto{
			MethodName: proto.String("block"), DeclaringClassProtocolName: proto.String(protocol),
			ClientProtocolVersion: proto.Uint64(ProtocolVersion),
		})
		f = append(protowire.AppendVarint(f, uint64(len(payload))), payload...)
		binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		return f
	}
	hello := concat([]byte("hrpc\x09\x00\x00"), fuzzFrame(fuzzRequestHeader(callIDConnectionContext), &commonpb.IpcConnectionContextProto{
		UserInfo: &commonpb.UserInformationProto{EffectiveUser: proto.String("alice")}, Protocol: proto.String(protocol),
	}), call(0, nil))
	if _, err := nc.Write(hello); err != nil {
		t.Fatal(err)
	}
	<-started
	// Call 1's request does not decode: FATAL_DESERIALIZING_REQUEST.
	if _, err := nc.Write(call(1, []byte{0xff})); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	first, err := readAnswer(nc, br)
	if err != nil {
		t.Fatalf("no FATAL answer: %v", err)
	}
	if hdr, _, err := parseResponseFrame(first); err != nil || hdr.GetStatus() != commonpb.RpcResponseHeaderProto_FATAL || hdr.GetCallId() != 1 {
		t.Fatalf("first answer %v (%v), want FATAL for call 1", hdr, err)
	}
	close(release)
	_ = nc.SetReadDeadline(time.Now().Add(fuzzDeadline))
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("waiting for the server to close: %v", err)
	}
	if len(rest) != 0 {
		hdrs, _ := checkResponseFrames(rest)
		t.Errorf("%d bytes after the FATAL answer: %v", len(rest), hdrs)
	}
}
