package rm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/test/recordings"
)

// Recorded Java client streams on the client port, all without SASL
// (authProtocol NONE), so their bytes can be sent to the RM unchanged.
// Each is a folder under ../shared/testdata and a recording's name in it.
var clientRecordings = [][2]string{
	{"hadoop-wire/yarn-client", "1-8032"},
	{"hadoop-wire-real/yarn-client", "1-8032"},
	{"hadoop-wire-real/ds-client", "1-8032"},
}

// splitFrames cuts a stream into 4-byte length-prefixed frames (bodies only).
func splitFrames(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%d trailing bytes", len(b))
		}
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			return nil, fmt.Errorf("frame of %d bytes cut short", n)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out, nil
}

// header reads the delimited header at the start of a frame body.
func header(body []byte, m proto.Message) error {
	n, k := protowire.ConsumeVarint(body)
	if k < 0 || len(body) < k+int(n) {
		return fmt.Errorf("bad delimited header")
	}
	return proto.Unmarshal(body[k:k+int(n)], m)
}

type answerKind struct {
	status commonpb.RpcResponseHeaderProto_RpcStatusProto
	class  string
}

func kindOf(body []byte) (uint32, answerKind, error) {
	var h commonpb.RpcResponseHeaderProto
	if err := header(body, &h); err != nil {
		return 0, answerKind{}, err
	}
	return h.GetCallId(), answerKind{h.GetStatus(), h.GetExceptionClassName()}, nil
}

// TestRecordedClientsGetAnswersOfTheRecordedKind replays every call of the
// recorded Java clients, one at a time, and checks that each gets a
// success where the recorded RM answered one, or the same exception class.
func TestRecordedClientsGetAnswersOfTheRecordedKind(t *testing.T) {
	for _, rec := range clientRecordings {
		t.Run(rec[0], func(t *testing.T) {
			rec := filepath.Join(recordings.Path(t, rec[0]), rec[1])
			c2s, err := os.ReadFile(rec + "-c2s.bin")
			if err != nil {
				t.Fatal(err)
			}
			s2c, err := os.ReadFile(rec + "-s2c.bin")
			if err != nil {
				t.Fatal(err)
			}
			if len(c2s) < 7 || string(c2s[:4]) != "hrpc" || c2s[6] != 0 {
				t.Skip("recording uses SASL; only plain streams are replayed here")
			}
			calls, err := splitFrames(c2s[7:])
			if err != nil {
				t.Fatal(err)
			}
			answers, err := splitFrames(s2c)
			if err != nil {
				t.Fatal(err)
			}
			recorded := map[uint32]answerKind{}
			for _, a := range answers {
				id, k, err := kindOf(a)
				if err != nil {
					t.Fatal(err)
				}
				recorded[id] = k
			}

			e := newEnv(t, envOptions{})
			nc, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			write := func(body []byte) {
				var l [4]byte
				binary.BigEndian.PutUint32(l[:], uint32(len(body)))
				if _, err := nc.Write(append(l[:], body...)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := nc.Write(c2s[:7]); err != nil {
				t.Fatal(err)
			}
			replayed := 0
			for _, body := range calls {
				var h commonpb.RpcRequestHeaderProto
				if err := header(body, &h); err != nil {
					t.Fatal(err)
				}
				write(body)
				if h.GetCallId() < 0 {
					continue // connection context and pings get no answer
				}
				_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				var l [4]byte
				if _, err := io.ReadFull(br, l[:]); err != nil {
					t.Fatalf("call %d: %v", h.GetCallId(), err)
				}
				ans := make([]byte, binary.BigEndian.Uint32(l[:]))
				if _, err := io.ReadFull(br, ans); err != nil {
					t.Fatal(err)
				}
				id, got, err := kindOf(ans)
				if err != nil {
					t.Fatal(err)
				}
				want, ok := recorded[id]
				if !ok {
					continue // the recording ended before this answer
				}
				if got != want {
					t.Errorf("call %d: answer %v %q, recorded %v %q", id, got.status, got.class, want.status, want.class)
				}
				replayed++
			}
			if replayed == 0 {
				t.Error("no call replayed")
			}
			t.Logf("%d calls replayed", replayed)
		})
	}
}
