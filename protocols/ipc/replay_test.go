package ipc

// Replay tests: the byte streams that unmodified Hadoop 3.4.1 Java clients
// sent (../shared/testdata/hadoop-wire and hadoop-wire-real) are written to a
// real Server, and every answer is checked against the recorded one: one per
// call, the call id, status, exception class, error detail, client id and
// retry count, and a payload that decodes as the method's response type.
// SASL answers are compared byte for byte with a fixed nonce.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
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
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

const (
	// The recording folders under ../shared/testdata (test/recordings).
	replayWireDir     = "hadoop-wire"
	replayWireRealDir = "hadoop-wire-real"

	replayClientProtocol    = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"
	replayMasterProtocol    = "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB"
	replayContainerProtocol = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB"

	replayClassAppNotFound       = "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
	replayClassFeatureNotEnabled = "org.apache.hadoop.yarn.exceptions.YARNFeatureNotEnabledException"

	// replayUnknownApp is the application number both YarnClient recordings
	// ask a report for last, expecting ApplicationNotFoundException.
	replayUnknownApp = 9999

	replayTimeout = 10 * time.Second
)

// readRecording returns a file of the shared recordings (path is under
// ../shared/testdata); recordings.Path skips the test, or fails it under CI,
// when the shared folder is not beside this checkout.
func readRecording(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(recordings.Path(t, path))
	if err != nil {
		t.Fatalf("read recording: %v", err)
	}
	return b
}

// splitRecordedFrames cuts a recorded stream into frames, each with its
// 4-byte length prefix. It is written independently of readFrame on purpose.
func splitRecordedFrames(b []byte) ([][]byte, error) {
	var frames [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%d stray bytes after the last frame", len(b))
		}
		n := int(binary.BigEndian.Uint32(b))
		if n > len(b)-4 {
			return nil, fmt.Errorf("frame of %d bytes, only %d left", n, len(b)-4)
		}
		frames = append(frames, b[:4+n])
		b = b[4+n:]
	}
	return frames, nil
}

// splitDelimitedParts cuts a frame body into its varint-delimited parts,
// failing on a truncated part.
func splitDelimitedParts(body []byte) ([][]byte, error) {
	var parts [][]byte
	for len(body) > 0 {
		part, n := protowire.ConsumeBytes(body)
		if n < 0 {
			return nil, fmt.Errorf("broken delimited part: %v", protowire.ParseError(n))
		}
		parts = append(parts, part)
		body = body[n:]
	}
	return parts, nil
}

// parseResponseFrame decodes a whole response frame (length prefix included)
// into its header and the delimited parts after it.
func parseResponseFrame(frame []byte) (*commonpb.RpcResponseHeaderProto, [][]byte, error) {
	if len(frame) < 4 || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		return nil, nil, fmt.Errorf("bad length prefix in % x", frame[:min(len(frame), 4)])
	}
	parts, err := splitDelimitedParts(frame[4:])
	if err != nil {
		return nil, nil, err
	}
	if len(parts) == 0 {
		return nil, nil, errors.New("frame without a header")
	}
	var hdr commonpb.RpcResponseHeaderProto
	if err := proto.Unmarshal(parts[0], &hdr); err != nil {
		return nil, nil, fmt.Errorf("response header: %w", err)
	}
	return &hdr, parts[1:], nil
}

// recordedRequest is one frame a Java client sent.
type recordedRequest struct {
	raw    []byte // the frame, length prefix included
	header *commonpb.RpcRequestHeaderProto
	parts  [][]byte // the delimited parts after the header
}

func (r recordedRequest) callID() int32 { return r.header.GetCallId() }

func parseRequestStream(t *testing.T, c2s []byte) (preamble []byte, reqs []recordedRequest) {
	t.Helper()
	if len(c2s) < preambleLen || string(c2s[:4]) != "hrpc" {
		t.Fatalf("recorded c2s does not start with a preamble: % x", c2s[:min(len(c2s), 7)])
	}
	frames, err := splitRecordedFrames(c2s[preambleLen:])
	if err != nil {
		t.Fatalf("recorded c2s: %v", err)
	}
	for i, f := range frames {
		parts, err := splitDelimitedParts(f[4:])
		if err != nil || len(parts) == 0 {
			t.Fatalf("recorded c2s frame %d: %v", i, err)
		}
		var hdr commonpb.RpcRequestHeaderProto
		if err := proto.Unmarshal(parts[0], &hdr); err != nil {
			t.Fatalf("recorded c2s frame %d header: %v", i, err)
		}
		reqs = append(reqs, recordedRequest{raw: f, header: &hdr, parts: parts[1:]})
	}
	return c2s[:preambleLen], reqs
}

// recordedAnswers holds what the recorded server sent: SASL answers in order
// and call answers by call id.
type recordedAnswers struct {
	sasl  [][]byte
	calls map[int32][]byte
}

func parseAnswerStream(t *testing.T, s2c []byte) recordedAnswers {
	t.Helper()
	frames, err := splitRecordedFrames(s2c)
	if err != nil {
		t.Fatalf("recorded s2c: %v", err)
	}
	ra := recordedAnswers{calls: map[int32][]byte{}}
	for i, f := range frames {
		hdr, _, err := parseResponseFrame(f)
		if err != nil {
			t.Fatalf("recorded s2c frame %d: %v", i, err)
		}
		id := int32(hdr.GetCallId())
		if id == callIDSASL {
			ra.sasl = append(ra.sasl, f)
			continue
		}
		if _, dup := ra.calls[id]; dup {
			t.Fatalf("recorded s2c answers call %d twice", id)
		}
		ra.calls[id] = f
	}
	return ra
}

// callerLog keeps the Caller each handler saw, by call id.
type callerLog struct {
	mu   sync.Mutex
	seen map[int32]Caller
}

func (l *callerLog) record(ctx context.Context) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[int32]Caller{}
	}
	l.seen[c.CallID] = c
}

func (l *callerLog) get(id int32) (Caller, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.seen[id]
	return c, ok
}

// replayMethod is one method the replay server answers. answer is the pure
// part of its handler, so the test can compute what the server should send.
type replayMethod struct {
	protocol, name string
	newRequest     func() proto.Message
	newResponse    func() proto.Message
	answer         func(proto.Message) (proto.Message, error)
	handle         func(*callerLog) Method
}

func replayHandle[Req, Resp proto.Message](protocol, name string, fn func(Req) (Resp, error)) replayMethod {
	var req Req
	var resp Resp
	return replayMethod{
		protocol:    protocol,
		name:        name,
		newRequest:  func() proto.Message { return req.ProtoReflect().Type().New().Interface() },
		newResponse: func() proto.Message { return resp.ProtoReflect().Type().New().Interface() },
		answer: func(m proto.Message) (proto.Message, error) {
			r, err := fn(m.(Req))
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		handle: func(log *callerLog) Method {
			return Handle(name, func(ctx context.Context, r Req) (Resp, error) {
				log.record(ctx)
				return fn(r)
			})
		},
	}
}

func replayResource(mb int64, vcores int32) *yarnpb.ResourceProto {
	return &yarnpb.ResourceProto{Memory: proto.Int64(mb), VirtualCores: proto.Int32(vcores)}
}

func replayResourceTypes() []*yarnpb.ResourceTypeInfoProto {
	return []*yarnpb.ResourceTypeInfoProto{
		{Name: proto.String("memory-mb"), Units: proto.String("Mi"), Type: yarnpb.ResourceTypesProto_COUNTABLE.Enum()},
		{Name: proto.String("vcores"), Units: proto.String(""), Type: yarnpb.ResourceTypesProto_COUNTABLE.Enum()},
	}
}

func replayReport(id *yarnpb.ApplicationIdProto) *yarnpb.ApplicationReportProto {
	return &yarnpb.ApplicationReportProto{
		ApplicationId:          id,
		User:                   proto.String("root"),
		Queue:                  proto.String("root.default"),
		YarnApplicationState:   yarnpb.YarnApplicationStateProto_ACCEPTED.Enum(),
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_UNDEFINED.Enum(),
	}
}

func replayAppID(id *yarnpb.ApplicationIdProto) string {
	return fmt.Sprintf("application_%d_%04d", id.GetClusterTimestamp(), id.GetId())
}

// replayAttemptID renders an attempt id as Hadoop's ApplicationAttemptId.toString.
func replayAttemptID(a *yarnpb.ApplicationAttemptIdProto) string {
	app := a.GetApplicationId()
	return fmt.Sprintf("appattempt_%d_%04d_%06d", app.GetClusterTimestamp(), app.GetId(), a.GetAttemptId())
}

// replayMethods answers every method the recordings call with a minimal valid
// response, and the two recorded errors with the recorded classes.
func replayMethods() []replayMethod {
	const cp, mp, nm = replayClientProtocol, replayMasterProtocol, replayContainerProtocol
	return []replayMethod{
		replayHandle(cp, "getClusterMetrics", func(*yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
			return &yarnpb.GetClusterMetricsResponseProto{ClusterMetrics: &yarnpb.YarnClusterMetricsProto{
				NumNodeManagers: proto.Int32(1), NumActiveNms: proto.Int32(1),
			}}, nil
		}),
		replayHandle(cp, "getClusterNodes", func(*yarnpb.GetClusterNodesRequestProto) (*yarnpb.GetClusterNodesResponseProto, error) {
			return &yarnpb.GetClusterNodesResponseProto{NodeReports: []*yarnpb.NodeReportProto{{
				NodeId:      &yarnpb.NodeIdProto{Host: proto.String("127.0.0.1"), Port: proto.Int32(45454)},
				HttpAddress: proto.String("127.0.0.1:8042"),
				Capability:  replayResource(8192, 8),
				NodeState:   yarnpb.NodeStateProto_NS_RUNNING.Enum(),
			}}}, nil
		}),
		replayHandle(cp, "getQueueInfo", func(req *yarnpb.GetQueueInfoRequestProto) (*yarnpb.GetQueueInfoResponseProto, error) {
			return &yarnpb.GetQueueInfoResponseProto{QueueInfo: &yarnpb.QueueInfoProto{
				QueueName: proto.String(req.GetQueueName()),
				State:     yarnpb.QueueStateProto_Q_RUNNING.Enum(),
			}}, nil
		}),
		replayHandle(cp, "getQueueUserAcls", func(*yarnpb.GetQueueUserAclsInfoRequestProto) (*yarnpb.GetQueueUserAclsInfoResponseProto, error) {
			return &yarnpb.GetQueueUserAclsInfoResponseProto{QueueUserAcls: []*yarnpb.QueueUserACLInfoProto{{
				QueueName: proto.String("root.default"),
				UserAcls:  []yarnpb.QueueACLProto{yarnpb.QueueACLProto_QACL_SUBMIT_APPLICATIONS},
			}}}, nil
		}),
		replayHandle(cp, "getResourceTypeInfo", func(*yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
			return &yarnpb.GetAllResourceTypeInfoResponseProto{ResourceTypeInfo: replayResourceTypes()}, nil
		}),
		replayHandle(cp, "getResourceProfiles", func(*yarnpb.GetAllResourceProfilesRequestProto) (*yarnpb.GetAllResourceProfilesResponseProto, error) {
			return nil, Errorf(replayClassFeatureNotEnabled, "Resource profile is not enabled, please enable resource profile feature "+
				"before using its functions. (by setting yarn.resourcemanager.resource-profiles.enabled to true)")
		}),
		replayHandle(cp, "getNewApplication", func(*yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			return &yarnpb.GetNewApplicationResponseProto{
				ApplicationId:     &yarnpb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(1732230000000)},
				MaximumCapability: replayResource(8192, 4),
			}, nil
		}),
		replayHandle(cp, "submitApplication", func(*yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
			return &yarnpb.SubmitApplicationResponseProto{}, nil
		}),
		replayHandle(cp, "getApplicationReport", func(req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			if req.GetApplicationId().GetId() == replayUnknownApp {
				return nil, Errorf(replayClassAppNotFound, "Application with id '%s' doesn't exist in RM. "+
					"Please check that the job submission was successful.", replayAppID(req.GetApplicationId()))
			}
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: replayReport(req.GetApplicationId())}, nil
		}),
		replayHandle(cp, "getApplications", func(*yarnpb.GetApplicationsRequestProto) (*yarnpb.GetApplicationsResponseProto, error) {
			id := &yarnpb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(1732230000000)}
			return &yarnpb.GetApplicationsResponseProto{Applications: []*yarnpb.ApplicationReportProto{replayReport(id)}}, nil
		}),
		replayHandle(cp, "forceKillApplication", func(*yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
		}),

		replayHandle(mp, "registerApplicationMaster", func(*yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
			return &yarnpb.RegisterApplicationMasterResponseProto{
				MaximumCapability: replayResource(8192, 4),
				Queue:             proto.String("root.default"),
				ResourceTypes:     replayResourceTypes(),
			}, nil
		}),
		replayHandle(mp, "allocate", func(req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			return &yarnpb.AllocateResponseProto{
				ResponseId:      proto.Int32(req.GetResponseId() + 1),
				Limit:           replayResource(7168, 7),
				NumClusterNodes: proto.Int32(1),
			}, nil
		}),
		replayHandle(mp, "finishApplicationMaster", func(*yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
			return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
		}),

		replayHandle(nm, "startContainers", func(req *yarnpb.StartContainersRequestProto) (*yarnpb.StartContainersResponseProto, error) {
			resp := &yarnpb.StartContainersResponseProto{ServicesMetaData: []*yarnpb.StringBytesMapProto{
				{Key: proto.String("mapreduce_shuffle"), Value: []byte{0, 0, 0x34, 0xfa}},
			}}
			for _, r := range req.GetStartContainerRequest() {
				var id yarnpb.ContainerTokenIdentifierProto
				if err := proto.Unmarshal(r.GetContainerToken().GetIdentifier(), &id); err != nil {
					return nil, Errorf("org.apache.hadoop.yarn.exceptions.InvalidContainerException", "container token: %v", err)
				}
				resp.SucceededRequests = append(resp.SucceededRequests, id.GetContainerId())
			}
			return resp, nil
		}),
		replayHandle(nm, "getContainerStatuses", func(req *yarnpb.GetContainerStatusesRequestProto) (*yarnpb.GetContainerStatusesResponseProto, error) {
			resp := &yarnpb.GetContainerStatusesResponseProto{}
			for _, id := range req.GetContainerId() {
				resp.Status = append(resp.Status, &yarnpb.ContainerStatusProto{
					ContainerId: id,
					State:       yarnpb.ContainerStateProto_C_RUNNING.Enum(),
					Diagnostics: proto.String(""),
				})
			}
			return resp, nil
		}),
		replayHandle(nm, "stopContainers", func(req *yarnpb.StopContainersRequestProto) (*yarnpb.StopContainersResponseProto, error) {
			return &yarnpb.StopContainersResponseProto{SucceededRequests: req.GetContainerId()}, nil
		}),
	}
}

func replayMethodTable() map[string]replayMethod {
	t := map[string]replayMethod{}
	for _, m := range replayMethods() {
		t[m.protocol+"#"+m.name] = m
	}
	return t
}

// registerReplayMethods serves the three protocols of the recordings on srv.
func registerReplayMethods(srv *Server, log *callerLog) error {
	byProtocol := map[string][]Method{}
	for _, m := range replayMethods() {
		byProtocol[m.protocol] = append(byProtocol[m.protocol], m.handle(log))
	}
	for p, ms := range byProtocol {
		if err := srv.Register(p, ms...); err != nil {
			return err
		}
	}
	return nil
}

// replaySpec is one recorded connection and the server that should answer it
// as the recorded one did.
type replaySpec struct {
	c2s, s2c []byte
	cfg      Config
	// nonce, if set, is the DIGEST-MD5 nonce the server must use.
	nonce string
	// What every handler must see of its caller.
	wantAuth       AuthMethod
	wantUser       string
	wantIdentifier []byte
}

// startReplayServer serves the replay methods on a loopback port until the
// test ends.
func startReplayServer(t *testing.T, cfg Config, nonce string, log *callerLog) string {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if nonce != "" {
		srv.nonce = func() (string, error) { return nonce, nil }
	}
	if err := registerReplayMethods(srv, log); err != nil {
		t.Fatal(err)
	}
	return serveTest(t, srv).addr
}

// readAnswer reads one whole frame, length prefix included.
func readAnswer(nc net.Conn, br *bufio.Reader) ([]byte, error) {
	_ = nc.SetReadDeadline(time.Now().Add(replayTimeout))
	var lenBuf [4]byte
	if _, err := io.ReadFull(br, lenBuf[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lenBuf[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("answer frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, lenBuf[:])
	if _, err := io.ReadFull(br, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// runReplay writes the recorded client stream to a server frame by frame,
// waiting for each answer as the Java client did, and checks every answer.
func runReplay(t *testing.T, spec replaySpec) {
	t.Helper()
	preamble, reqs := parseRequestStream(t, spec.c2s)
	recorded := parseAnswerStream(t, spec.s2c)
	methods := replayMethodTable()

	var callers callerLog
	addr := startReplayServer(t, spec.cfg, spec.nonce, &callers)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	if _, err := nc.Write(preamble); err != nil {
		t.Fatal(err)
	}

	saslAnswers, calls := 0, 0
	for i, req := range reqs {
		if _, err := nc.Write(req.raw); err != nil {
			t.Fatalf("write frame %d (call %d): %v", i, req.callID(), err)
		}
		id := req.callID()
		if id == callIDConnectionContext || id == callIDPing {
			continue // never answered
		}
		got, err := readAnswer(nc, br)
		if err != nil {
			t.Fatalf("frame %d (call %d): no answer: %v", i, id, err)
		}
		if id == callIDSASL {
			if saslAnswers >= len(recorded.sasl) {
				t.Fatalf("SASL frame %d answered, the recorded server did not answer it", i)
			}
			checkSASLAnswer(t, req, got, recorded.sasl[saslAnswers])
			saslAnswers++
			continue
		}
		want, ok := recorded.calls[id]
		if !ok {
			t.Fatalf("call %d has no recorded answer", id)
		}
		checkCallAnswer(t, methods, req, got, want)
		calls++
		if c, ok := callers.get(id); ok {
			if c.Auth != spec.wantAuth || c.User != spec.wantUser {
				t.Errorf("call %d: handler saw caller %s %q, want %s %q", id, c.Auth, c.User, spec.wantAuth, spec.wantUser)
			}
			if !bytes.Equal(c.TokenIdentifier, spec.wantIdentifier) {
				t.Errorf("call %d: handler saw token identifier %x, want %x", id, c.TokenIdentifier, spec.wantIdentifier)
			}
			if !bytes.Equal(c.ClientID, req.header.GetClientId()) || c.RetryCount != req.header.GetRetryCount() {
				t.Errorf("call %d: handler saw client id %x retry %d, want %x %d", id, c.ClientID, c.RetryCount,
					req.header.GetClientId(), req.header.GetRetryCount())
			}
		} else if !isErrorAnswer(t, want) {
			t.Errorf("call %d: no handler saw it", id)
		}
	}
	if saslAnswers != len(recorded.sasl) || calls != len(recorded.calls) {
		t.Errorf("answered %d SASL frames and %d calls; the recording has %d and %d",
			saslAnswers, calls, len(recorded.sasl), len(recorded.calls))
	}
	t.Logf("%d frames replayed: %d SASL answers and %d call answers checked", len(reqs), saslAnswers, calls)

	// Nothing unsolicited: once the client half-closes, the server sends no
	// more bytes and closes its side.
	if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(replayTimeout))
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Errorf("waiting for the server to close: %v", err)
	}
	if len(rest) != 0 {
		t.Errorf("server sent %d unsolicited bytes: % x", len(rest), rest[:min(len(rest), 64)])
	}
}

func isErrorAnswer(t *testing.T, frame []byte) bool {
	hdr, _, err := parseResponseFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	return hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS
}

// checkSASLAnswer compares a SASL answer with the recorded one byte for byte
// (the nonce is fixed) and checks that our client reads it.
func checkSASLAnswer(t *testing.T, req recordedRequest, got, want []byte) {
	t.Helper()
	var sent commonpb.RpcSaslProto
	if len(req.parts) != 1 || proto.Unmarshal(req.parts[0], &sent) != nil {
		t.Fatalf("recorded SASL frame does not decode")
	}
	gotMsg := decodeSASLAnswer(t, got)
	wantMsg := decodeSASLAnswer(t, want)
	if !bytes.Equal(got, want) {
		t.Errorf("answer to SASL %s differs from the recorded one:\n got %s\nwant %s\n got % x\nwant % x",
			sent.GetState(), prototext.Format(gotMsg), prototext.Format(wantMsg), got, want)
	}
	switch gotMsg.GetState() {
	case commonpb.RpcSaslProto_NEGOTIATE:
		a := gotMsg.GetAuths()
		if len(a) == 0 || a[0].GetMethod() != "TOKEN" || a[0].GetMechanism() != "DIGEST-MD5" ||
			a[0].Protocol == nil || a[0].GetProtocol() != "" || a[0].GetServerId() != "default" {
			t.Errorf("NEGOTIATE does not offer TOKEN/DIGEST-MD5 with protocol \"\" and serverId \"default\" first: %v", a)
		} else if want := wantMsg.GetAuths(); len(want) > 0 && !bytes.Equal(a[0].GetChallenge(), want[0].GetChallenge()) {
			t.Errorf("challenge %q, recorded %q", a[0].GetChallenge(), want[0].GetChallenge())
		}
	case commonpb.RpcSaslProto_SUCCESS:
		if tok := string(gotMsg.GetToken()); !strings.HasPrefix(tok, "rspauth=") || tok != string(wantMsg.GetToken()) {
			t.Errorf("SUCCESS token %q, recorded %q", tok, wantMsg.GetToken())
		}
	default:
		t.Errorf("unexpected SASL answer state %s", gotMsg.GetState())
	}
}

func decodeSASLAnswer(t *testing.T, frame []byte) *commonpb.RpcSaslProto {
	t.Helper()
	hdr, parts, err := parseResponseFrame(frame)
	if err != nil {
		t.Fatalf("SASL answer: %v", err)
	}
	if hdr.GetCallId() != uint32(0xFFFFFFDF) || hdr.GetStatus() != commonpb.RpcResponseHeaderProto_SUCCESS ||
		hdr.GetServerIpcVersionNum() != currentVersion || hdr.ClientId == nil || len(hdr.ClientId) != 0 || hdr.GetRetryCount() != -1 {
		t.Errorf("SASL answer header %v, want callId 4294967263 SUCCESS version 9 clientId \"\" retryCount -1", hdr)
	}
	if len(parts) != 1 {
		t.Fatalf("SASL answer has %d parts after the header, want 1", len(parts))
	}
	var msg commonpb.RpcSaslProto
	if err := proto.Unmarshal(parts[0], &msg); err != nil {
		t.Fatalf("SASL answer: %v", err)
	}
	// Our client's reader must take it as well.
	cc := &clientConn{
		client: &Client{cfg: ClientConfig{MaxResponseLength: DefaultMaxDataLength}},
		br:     bufio.NewReader(bytes.NewReader(frame)),
	}
	if viaClient, err := cc.readSASL(); err != nil {
		t.Errorf("our client rejects the SASL answer: %v", err)
	} else if !proto.Equal(viaClient, &msg) {
		t.Errorf("our client reads SASL answer %v, want %v", viaClient, &msg)
	}
	return &msg
}

// checkCallAnswer checks the server's answer to a recorded call against the
// recorded answer and the handler's pure answer.
func checkCallAnswer(t *testing.T, methods map[string]replayMethod, req recordedRequest, got, recorded []byte) {
	t.Helper()
	id := req.callID()
	if len(req.parts) != 2 {
		t.Fatalf("call %d: recorded frame has %d parts after the header, want 2", id, len(req.parts))
	}
	var rh commonpb.RequestHeaderProto
	if err := proto.Unmarshal(req.parts[0], &rh); err != nil {
		t.Fatalf("call %d: request header: %v", id, err)
	}
	name := rh.GetDeclaringClassProtocolName() + "#" + rh.GetMethodName()
	m, ok := methods[name]
	if !ok {
		t.Fatalf("call %d: no replay handler for %s", id, name)
	}
	request := m.newRequest()
	if err := proto.Unmarshal(req.parts[1], request); err != nil {
		t.Fatalf("call %d %s: recorded request does not decode: %v", id, name, err)
	}

	hdr, parts, err := parseResponseFrame(got)
	if err != nil {
		t.Fatalf("call %d %s: answer: %v", id, name, err)
	}
	want, _, err := parseResponseFrame(recorded)
	if err != nil {
		t.Fatalf("call %d: recorded answer: %v", id, err)
	}
	if hdr.CallId == nil || hdr.GetCallId() != uint32(id) {
		t.Errorf("call %d %s: answer has callId %d (set: %t), want %d as uint32", id, name, hdr.GetCallId(), hdr.CallId != nil, uint32(id))
	}
	if hdr.GetServerIpcVersionNum() != currentVersion {
		t.Errorf("call %d %s: serverIpcVersionNum %d, want 9", id, name, hdr.GetServerIpcVersionNum())
	}
	if !bytes.Equal(hdr.GetClientId(), req.header.GetClientId()) || !bytes.Equal(hdr.GetClientId(), want.GetClientId()) {
		t.Errorf("call %d %s: clientId %x, sent %x, recorded %x", id, name, hdr.GetClientId(), req.header.GetClientId(), want.GetClientId())
	}
	if hdr.RetryCount == nil || hdr.GetRetryCount() != req.header.GetRetryCount() || hdr.GetRetryCount() != want.GetRetryCount() {
		t.Errorf("call %d %s: retryCount %d (set: %t), sent %d, recorded %d", id, name, hdr.GetRetryCount(), hdr.RetryCount != nil,
			req.header.GetRetryCount(), want.GetRetryCount())
	}
	if hdr.Status == nil || hdr.GetStatus() != want.GetStatus() {
		t.Fatalf("call %d %s: status %s (set: %t), recorded %s (%s: %.200s)", id, name, hdr.GetStatus(), hdr.Status != nil, want.GetStatus(),
			hdr.GetExceptionClassName(), hdr.GetErrorMsg())
	}

	expected, expectedErr := m.answer(request)
	var resp proto.Message
	switch hdr.GetStatus() {
	case commonpb.RpcResponseHeaderProto_SUCCESS:
		if len(parts) != 1 {
			t.Fatalf("call %d %s: SUCCESS carries %d delimited parts after the header, want exactly 1", id, name, len(parts))
		}
		resp = m.newResponse()
		if err := proto.Unmarshal(parts[0], resp); err != nil {
			t.Fatalf("call %d %s: payload does not decode as %T: %v", id, name, resp, err)
		}
		if expectedErr != nil || !proto.Equal(resp, expected) {
			t.Errorf("call %d %s: payload %v, handler returned %v (%v)", id, name, resp, expected, expectedErr)
		}
		if hdr.ExceptionClassName != nil || hdr.ErrorMsg != nil || hdr.ErrorDetail != nil {
			t.Errorf("call %d %s: SUCCESS with error fields %v", id, name, hdr)
		}
	default:
		if len(parts) != 0 {
			t.Errorf("call %d %s: ERROR carries %d parts after the header, want none", id, name, len(parts))
		}
		if hdr.GetExceptionClassName() != want.GetExceptionClassName() || hdr.ErrorDetail == nil || hdr.GetErrorDetail() != want.GetErrorDetail() {
			t.Errorf("call %d %s: error %s/%s, recorded %s/%s", id, name,
				hdr.GetExceptionClassName(), hdr.GetErrorDetail(), want.GetExceptionClassName(), want.GetErrorDetail())
		}
		// Java appends the server's stack trace; the message before it must match.
		recordedMsg, _, _ := strings.Cut(want.GetErrorMsg(), "\n\tat ")
		if hdr.GetErrorMsg() != recordedMsg {
			t.Errorf("call %d %s: errorMsg %q, recorded %q", id, name, hdr.GetErrorMsg(), recordedMsg)
		}
	}

	// Our own client decodes the answer by the same rules.
	var clientResp proto.Message = m.newResponse()
	cc := &clientConn{client: &Client{cfg: ClientConfig{ClientID: req.header.GetClientId()}}, calls: map[int32]*pendingCall{}}
	p := &pendingCall{resp: clientResp, done: make(chan error, 1)}
	cc.calls[id] = p
	if err := cc.deliver(got[4:]); err != nil {
		t.Errorf("call %d %s: our client breaks the connection on the answer: %v", id, name, err)
	}
	select {
	case err := <-p.done:
		switch {
		case resp != nil && err != nil:
			t.Errorf("call %d %s: our client fails the call: %v", id, name, err)
		case resp != nil && !proto.Equal(clientResp, resp):
			t.Errorf("call %d %s: our client decodes %v, want %v", id, name, clientResp, resp)
		case resp == nil && !IsClass(err, want.GetExceptionClassName()):
			t.Errorf("call %d %s: our client returns %v, want a %s", id, name, err, want.GetExceptionClassName())
		}
	default:
		t.Errorf("call %d %s: our client delivered nothing", id, name)
	}
}

func TestReplayYarnClientsWithoutSASL(t *testing.T) {
	for _, dir := range []string{
		replayWireDir + "/yarn-client",
		replayWireDir + "/ds-client",
		replayWireRealDir + "/yarn-client",
		replayWireRealDir + "/ds-client",
	} {
		t.Run(dir, func(t *testing.T) {
			runReplay(t, replaySpec{
				c2s:      readRecording(t, dir+"/1-8032-c2s.bin"),
				s2c:      readRecording(t, dir+"/1-8032-s2c.bin"),
				cfg:      Config{Simple: true},
				wantAuth: AuthSimple,
				wantUser: "root",
			})
		})
	}
}

var recordedNonce = regexp.MustCompile(`nonce="([^"]*)"`)

// negotiateNonce finds the nonce in the first recorded SASL answer.
func negotiateNonce(t *testing.T, s2c []byte) string {
	t.Helper()
	ra := parseAnswerStream(t, s2c)
	if len(ra.sasl) == 0 {
		t.Fatal("recording has no SASL answer")
	}
	_, parts, err := parseResponseFrame(ra.sasl[0])
	if err != nil || len(parts) != 1 {
		t.Fatalf("recorded NEGOTIATE: %v", err)
	}
	var msg commonpb.RpcSaslProto
	if err := proto.Unmarshal(parts[0], &msg); err != nil || msg.GetState() != commonpb.RpcSaslProto_NEGOTIATE || len(msg.GetAuths()) == 0 {
		t.Fatalf("recorded first SASL answer is not a NEGOTIATE with auths: %v %v", &msg, err)
	}
	m := recordedNonce.FindSubmatch(msg.GetAuths()[0].GetChallenge())
	if m == nil {
		t.Fatalf("no nonce in recorded challenge %q", msg.GetAuths()[0].GetChallenge())
	}
	return string(m[1])
}

// recordedKeys is keys.json of the scripted recordings.
type recordedKeys struct {
	ClusterTimestamp int64 `json:"cluster_timestamp"`
	AMRMToken        struct {
		KeyHex string `json:"key_hex"`
	} `json:"amrm_token"`
	NMToken struct {
		KeyHex string `json:"key_hex"`
	} `json:"nm_token"`
}

func readRecordedKeys(t *testing.T) (amrm, nm []byte) {
	t.Helper()
	var k recordedKeys
	if err := json.Unmarshal(readRecording(t, replayWireDir+"/keys.json"), &k); err != nil {
		t.Fatalf("keys.json: %v", err)
	}
	amrm, err1 := hex.DecodeString(k.AMRMToken.KeyHex)
	nm, err2 := hex.DecodeString(k.NMToken.KeyHex)
	if err := errors.Join(err1, err2); err != nil || len(amrm) == 0 || len(nm) == 0 {
		t.Fatalf("keys.json keys: %v", err)
	}
	return amrm, nm
}

// amrmTokens is a RM's secret lookup for AMRMTokens under one master key.
func amrmTokens(key []byte) SecretLookup {
	return func(_ context.Context, id []byte) (Secret, error) {
		var ident yarnpb.AMRMTokenIdentifierProto
		if err := proto.Unmarshal(id, &ident); err != nil || ident.AppAttemptId == nil {
			return Secret{}, Errorf(ClassInvalidToken, "not an AMRMTokenIdentifier")
		}
		return Secret{Password: hmacSHA1(key, id), User: replayAttemptID(ident.GetAppAttemptId()), Identity: &ident}, nil
	}
}

// nmTokens is a NodeManager's secret lookup for NMTokens under one master key.
func nmTokens(key []byte) SecretLookup {
	return func(_ context.Context, id []byte) (Secret, error) {
		var ident yarnpb.NMTokenIdentifierProto
		if err := proto.Unmarshal(id, &ident); err != nil || ident.AppAttemptId == nil || ident.NodeId == nil {
			return Secret{}, Errorf(ClassInvalidToken, "not an NMTokenIdentifier")
		}
		return Secret{Password: hmacSHA1(key, id), User: replayAttemptID(ident.GetAppAttemptId()), Identity: &ident}, nil
	}
}

// saslIdentifier returns the token identifier a recorded INITIATE names.
func saslIdentifier(t *testing.T, c2s []byte) []byte {
	t.Helper()
	_, reqs := parseRequestStream(t, c2s)
	for _, r := range reqs {
		if r.callID() != callIDSASL || len(r.parts) != 1 {
			continue
		}
		var msg commonpb.RpcSaslProto
		if err := proto.Unmarshal(r.parts[0], &msg); err != nil || msg.GetState() != commonpb.RpcSaslProto_INITIATE {
			continue
		}
		m := regexp.MustCompile(`username="([^"]*)"`).FindSubmatch(msg.GetToken())
		if m == nil {
			t.Fatalf("no username in recorded INITIATE %q", msg.GetToken())
		}
		id, err := base64.StdEncoding.DecodeString(string(m[1]))
		if err != nil {
			t.Fatalf("recorded username: %v", err)
		}
		return id
	}
	t.Fatal("recording has no SASL INITIATE")
	return nil
}

// TestReplayScriptedAMWithTokens replays the DistributedShell AM's scheduler
// connection (AMRMToken) and its six NodeManager connections (NMToken) with
// the recorded nonces, against a server configured like the scripted
// responder (TOKEN and SIMPLE), so every SASL answer must match byte for byte.
func TestReplayScriptedAMWithTokens(t *testing.T) {
	dir := replayWireDir + "/ds-am"
	amrmKey, nmKey := readRecordedKeys(t)
	const attempt = "appattempt_1732230000000_0001_000001"
	conns := []struct {
		name   string
		tokens SecretLookup
	}{
		{"1-8030", amrmTokens(amrmKey)},
		{"2-45454", nmTokens(nmKey)},
		{"3-45454", nmTokens(nmKey)},
		{"4-45454", nmTokens(nmKey)},
		{"5-45454", nmTokens(nmKey)},
		{"6-45454", nmTokens(nmKey)},
		{"7-45454", nmTokens(nmKey)},
	}
	for _, c := range conns {
		t.Run(c.name, func(t *testing.T) {
			c2s := readRecording(t, filepath.Join(dir, c.name+"-c2s.bin"))
			s2c := readRecording(t, filepath.Join(dir, c.name+"-s2c.bin"))
			runReplay(t, replaySpec{
				c2s:            c2s,
				s2c:            s2c,
				cfg:            Config{Simple: true, Tokens: c.tokens},
				nonce:          negotiateNonce(t, s2c),
				wantAuth:       AuthToken,
				wantUser:       attempt,
				wantIdentifier: saslIdentifier(t, c2s),
			})
		})
	}
}

// TestReplayRealAMWithContainerTokensPassword replays the AM's scheduler
// connection to a real 3.4.1 RM. The RM's master key is unknown, but the
// token password is in the container_tokens file the RM sent the AM. The
// server offers TOKEN only, as the real scheduler port does, so NEGOTIATE and
// SUCCESS (rspauth) must equal the real RM's bytes.
func TestReplayRealAMWithContainerTokensPassword(t *testing.T) {
	dir := replayWireRealDir + "/ds-am"
	c2s := readRecording(t, dir+"/1-8030-c2s.bin")
	s2c := readRecording(t, dir+"/1-8030-s2c.bin")
	creds, err := token.ParseCredentials(readRecording(t, dir+"/container_tokens"))
	if err != nil {
		t.Fatalf("container_tokens: %v", err)
	}
	amrm, ok := creds.Token("")
	if !ok || amrm.Kind != "YARN_AM_RM_TOKEN" {
		t.Fatalf("container_tokens holds no AMRMToken under alias \"\": %v", amrm)
	}
	var ident yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(amrm.Identifier, &ident); err != nil {
		t.Fatalf("AMRMToken identifier: %v", err)
	}
	attempt := replayAttemptID(ident.GetAppAttemptId())
	if attempt != "appattempt_1795333013199_0002_000001" {
		t.Fatalf("AMRMToken names attempt %s", attempt)
	}
	lookup := func(_ context.Context, id []byte) (Secret, error) {
		if !bytes.Equal(id, amrm.Identifier) {
			return Secret{}, Errorf(ClassInvalidToken, "unknown AMRMToken")
		}
		return Secret{Password: amrm.Password, User: attempt, Identity: &ident}, nil
	}

	ra := parseAnswerStream(t, s2c)
	if len(ra.sasl) != 2 || !bytes.Contains(ra.sasl[1], []byte("rspauth=51b01b13e5aa45c8d9580b8217c5492d")) {
		t.Fatalf("recorded SUCCESS does not carry the documented rspauth")
	}
	runReplay(t, replaySpec{
		c2s:            c2s,
		s2c:            s2c,
		cfg:            Config{Tokens: lookup},
		nonce:          negotiateNonce(t, s2c),
		wantAuth:       AuthToken,
		wantUser:       attempt,
		wantIdentifier: amrm.Identifier,
	})
}

// TestNegotiateAnswerIsTheRecordedOneButForTheNonce sends only the recorded
// preamble and NEGOTIATE to a server with its own random nonce: with the
// nonce swapped for the recorded one, the answer must be the recorded bytes,
// so the default nonce has the JDK's length and the rest is exact.
func TestNegotiateAnswerIsTheRecordedOneButForTheNonce(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		cfg  Config
	}{
		{"scripted responder offers TOKEN and SIMPLE", replayWireDir + "/ds-am", Config{Simple: true, Tokens: testTokens}},
		{"real RM scheduler port offers TOKEN only", replayWireRealDir + "/ds-am", Config{Tokens: testTokens}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c2s := readRecording(t, tt.dir+"/1-8030-c2s.bin")
			s2c := readRecording(t, tt.dir+"/1-8030-s2c.bin")
			preamble, reqs := parseRequestStream(t, c2s)
			want := parseAnswerStream(t, s2c).sasl[0]
			recorded := negotiateNonce(t, s2c)

			addr := startReplayServer(t, tt.cfg, "", &callerLog{})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(append(append([]byte{}, preamble...), reqs[0].raw...)); err != nil {
				t.Fatal(err)
			}
			got, err := readAnswer(nc, bufio.NewReader(nc))
			if err != nil {
				t.Fatal(err)
			}
			m := recordedNonce.FindSubmatchIndex(got)
			if m == nil {
				t.Fatalf("no nonce in the answer % x", got)
			}
			nonce := string(got[m[2]:m[3]])
			if nonce == recorded {
				t.Fatalf("server reused the recorded nonce %q", nonce)
			}
			if _, err := base64.StdEncoding.DecodeString(nonce); err != nil || len(nonce) != len(recorded) {
				t.Errorf("nonce %q is not %d base64 characters like the JDK's", nonce, len(recorded))
			}
			swapped := append(append(append([]byte{}, got[:m[2]]...), recorded...), got[m[3]:]...)
			if !bytes.Equal(swapped, want) {
				t.Errorf("NEGOTIATE answer with the nonce swapped back:\n got % x\nwant % x", swapped, want)
			}
		})
	}
}
