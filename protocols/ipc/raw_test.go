package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// rawRecorder is a HandleRaw method that keeps what it was given and
// answers answer, or err.
type rawRecorder struct {
	mu      sync.Mutex
	req     *yarnpb.GetApplicationReportRequestProto
	encoded []byte
	answer  []byte
	err     error
}

func (r *rawRecorder) method() Method {
	return HandleRaw("getApplicationReport", func(_ context.Context, req *yarnpb.GetApplicationReportRequestProto, encoded []byte) ([]byte, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.req, r.encoded = req, encoded
		return r.answer, r.err
	})
}

// withUnknownField is m's encoding with a field no YARN message has, which
// a decode and re-encode would keep but move: its place shows the bytes
// went through untouched.
func withUnknownField(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("forwarded as is"))
	enc, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, enc...)
}

func TestRawCallsCarryRequestAndAnswerBytesAsTheyAre(t *testing.T) {
	reqMsg := &yarnpb.GetApplicationReportRequestProto{ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(7), ClusterTimestamp: proto.Int64(1)}}
	reqBytes := withUnknownField(t, reqMsg)
	answer := withUnknownField(t, &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
		ApplicationId: reqMsg.GetApplicationId(), User: proto.String("alice"),
	}})
	rec := &rawRecorder{answer: answer}
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, rec.method()))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})

	got, err := c.CallRaw(t.Context(), "getApplicationReport", reqBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, answer) {
		t.Errorf("answer %x, want the handler's %x", got, answer)
	}
	rec.mu.Lock()
	if !bytes.Equal(rec.encoded, reqBytes) {
		t.Errorf("handler got request %x, want the caller's %x", rec.encoded, reqBytes)
	}
	if rec.req.GetApplicationId().GetId() != 7 {
		t.Errorf("handler got decoded request %v, want application 7", rec.req)
	}
	rec.mu.Unlock()

	// A typed client reads the encoded answer as any other.
	var typed yarnpb.GetApplicationReportResponseProto
	if err := c.Call(t.Context(), "getApplicationReport", reqMsg, &typed); err != nil {
		t.Fatal(err)
	}
	if typed.GetApplicationReport().GetUser() != "alice" {
		t.Errorf("typed answer %v, want alice's report", &typed)
	}
}

func TestRawHandlerAnsweringNothingAnswersTheEmptyMessage(t *testing.T) {
	rec := &rawRecorder{}
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, rec.method()))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	got, err := c.CallRaw(t.Context(), "getApplicationReport", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("answer %x, want the empty message", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.encoded == nil || len(rec.encoded) != 0 {
		t.Errorf("handler got request %#v, want the empty message's encoding", rec.encoded)
	}
}

func TestRawHandlerErrorsReachTheCallerAsRemoteErrors(t *testing.T) {
	rec := &rawRecorder{err: Errorf(classAppNotFound, "Application with id '7' doesn't exist in RM.")}
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, rec.method()))
	var mapped *RemoteError
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice", Errors: func(re *RemoteError) error { mapped = re; return re }})
	_, err := c.CallRaw(t.Context(), "getApplicationReport", nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.ClassName != classAppNotFound || re.Code != commonpb.RpcResponseHeaderProto_ERROR_APPLICATION {
		t.Fatalf("error %v, want the handler's %s", err, classAppNotFound)
	}
	if mapped == nil {
		t.Error("the client's Errors mapping was not applied")
	}
}

// A request a raw method cannot decode is refused by the engine as any
// method's is (Hadoop's FATAL_DESERIALIZING_REQUEST), before the handler
// sees it; the server goes on serving.
func TestRawMethodRefusesARequestItCannotDecode(t *testing.T) {
	rec := &rawRecorder{answer: []byte{}}
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, rec.method()))
	for _, tt := range []struct {
		name  string
		bytes []byte
	}{
		{"truncated field", []byte{0x0a, 0x05, 0x08}},
		{"bad wire type", []byte{0x0f}},
		{"application id of the wrong type", []byte{0x0a, 0x02, 0x10, 0xff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := c.CallRaw(ctx, "getApplicationReport", tt.bytes)
			var re *RemoteError
			if !errors.As(err, &re) || re.ClassName != ClassFatalRPCServer || re.Code != commonpb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST ||
				!strings.Contains(re.Message, "IPC server unable to read call parameters") {
				t.Fatalf("error %v, want %s FATAL_DESERIALIZING_REQUEST", err, ClassFatalRPCServer)
			}
			if _, err := c.CallRaw(ctx, "getApplicationReport", nil); err != nil {
				t.Errorf("the next call, on a new connection: %v", err)
			}
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.req.GetApplicationId() != nil {
		t.Errorf("the handler saw a request it could not decode: %v", rec.req)
	}
}

// inParts answers answer as HandleRawParts does, cut in n pieces.
func inParts(answer []byte, n int) Method {
	return HandleRawParts("getApplicationReport", func(context.Context, *yarnpb.GetApplicationReportRequestProto, []byte) ([][]byte, error) {
		var parts [][]byte
		for i := range n {
			parts = append(parts, answer[i*len(answer)/n:(i+1)*len(answer)/n])
		}
		return parts, nil
	})
}

func TestRawAnswersOfEverySizeArriveWholeOnOneConnection(t *testing.T) {
	// Answers past half a pooled frame are written from their own bytes
	// after the frame's head; calls in flight together must still see
	// their own frames whole, whether the answer is one piece or many.
	for _, size := range []int{0, 100, maxPooledFrame/2 + 1, 3 * maxPooledFrame} {
		for _, pieces := range []int{0, 1, 7} {
			t.Run(fmt.Sprintf("%d bytes in %d parts", size, pieces), func(t *testing.T) {
				answer := withUnknownField(t, &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
					Diagnostics: proto.String(strings.Repeat("d", size)),
				}})
				m := (&rawRecorder{answer: answer}).method()
				if pieces > 0 {
					m = inParts(answer, pieces)
				}
				checkAnswersWhole(t, m, answer)
			})
		}
	}
}

// checkAnswersWhole makes 8 calls at once to a server of m on one
// connection and checks each gets answer.
func checkAnswersWhole(t *testing.T, m Method, answer []byte) {
	t.Helper()
	ts := serveTest(t, newTestServer(t, Config{Simple: true}, m))
	c := newTestClient(t, ts.addr, ClientConfig{User: "alice"})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := c.CallRaw(t.Context(), "getApplicationReport", nil)
			if err == nil && !bytes.Equal(got, answer) {
				err = fmt.Errorf("answer of %d bytes, want the handler's %d", len(got), len(answer))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestAFrameHeadAndItsEncodedTailAreTheWholeFrame(t *testing.T) {
	hdr := &commonpb.RpcResponseHeaderProto{CallId: proto.Uint32(3), Status: commonpb.RpcResponseHeaderProto_SUCCESS.Enum()}
	for _, tail := range [][]byte{nil, {}, bytes.Repeat([]byte{7}, 300)} {
		whole, err := appendFrameEncoded([]byte("before"), tail, hdr)
		if err != nil {
			t.Fatal(err)
		}
		tailLen := -1
		if tail != nil {
			tailLen = len(tail)
		}
		head, err := appendFrameHead([]byte("before"), tailLen, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if got := append(head, tail...); !bytes.Equal(got, whole) {
			t.Errorf("tail of %d bytes: head+tail %x, want %x", len(tail), got, whole)
		}
	}
}

func TestAnAnswerInPartsFollowsWhatTheWriteBufferHolds(t *testing.T) {
	// Another call's answer may wait in the buffer when an answer in
	// parts is written: it must go out first, and the parts after the
	// head, in order; the pooled slice must come back without them.
	for _, buffered := range []string{"", "an earlier answer"} {
		t.Run(fmt.Sprintf("%d bytes buffered", len(buffered)), func(t *testing.T) {
			srv := newTestServer(t, Config{Simple: true})
			server, client := net.Pipe()
			defer client.Close()
			c := newConn(srv, server)
			defer server.Close()
			parts := [][]byte{[]byte("part one, "), []byte("part two, "), bytes.Repeat([]byte{'3'}, 3*connBufSize)}
			want := buffered + "head: " + string(bytes.Join(parts, nil))
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(io.LimitReader(client, int64(len(want))))
				got <- b
			}()
			c.bw.WriteString(buffered)
			if err := c.writeVector([]byte("head: "), parts); err != nil {
				t.Fatal(err)
			}
			if b := <-got; string(b) != want {
				t.Errorf("the peer read %d bytes %.40q…, want %d %.40q…", len(b), b, len(want), want)
			}
			if string(parts[0]) != "part one, " {
				t.Errorf("writing consumed the caller's parts: %q", parts[0])
			}
			v := srv.vectors.get()
			if len(*v) != 0 || slices.ContainsFunc((*v)[:cap(*v)], func(b []byte) bool { return b != nil }) {
				t.Errorf("the pooled slice came back holding %d parts", len(*v))
			}
		})
	}
}
