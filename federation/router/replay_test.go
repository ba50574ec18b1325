package router

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/test/recordings"
)

// Real Hadoop 3.4.1 clients' sessions (YarnClient: cluster metrics,
// nodes, a queue, a new application, its submission, reports, the list,
// the kill, a report of an application that never was; DistributedShell's
// client: resource types and profiles, queue ACLs, a submission and its
// reports), recorded against Knit and against a YARN RM, replayed byte for
// byte against the Router in front of two sub-clusters: every call is
// answered as the recorded RM answered it, except an unknown application,
// which YARN's Router answers with its own YarnException.
func TestRecordedClientSessionsThroughTheRouter(t *testing.T) {
	for _, rec := range []string{"hadoop-wire/yarn-client", "hadoop-wire-real/yarn-client", "hadoop-wire-real/ds-client"} {
		t.Run(rec, func(t *testing.T) { replayThroughRouter(t, rec) })
	}
}

func replayThroughRouter(t *testing.T, rec string) {
	dir := recordings.Path(t, rec)
	c2s, err := os.ReadFile(filepath.Join(dir, "1-8032-c2s.bin"))
	if err != nil {
		t.Fatal(err)
	}
	s2c, err := os.ReadFile(filepath.Join(dir, "1-8032-s2c.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c2s) < 7 || string(c2s[:4]) != "hrpc" || c2s[6] != 0 {
		t.Fatal("the recording is not a plain (no SASL) stream")
	}
	calls, err := recordings.Frames(c2s[7:])
	if err != nil {
		t.Fatal(err)
	}
	answers, err := recordings.Frames(s2c)
	if err != nil {
		t.Fatal(err)
	}
	type kind struct {
		status commonpb.RpcResponseHeaderProto_RpcStatusProto
		class  string
	}
	recorded := map[uint32]kind{}
	for _, a := range answers {
		var h commonpb.RpcResponseHeaderProto
		if _, err := recordings.Delimited(a, &h); err != nil {
			t.Fatal(err)
		}
		recorded[h.GetCallId()] = kind{h.GetStatus(), h.GetExceptionClassName()}
	}
	// An application the recorded RM never had is one the store has no
	// home for.
	want := func(id uint32) kind {
		if recorded[id].class == string(yarnerr.ApplicationNotFound) {
			return kind{commonpb.RpcResponseHeaderProto_ERROR, string(yarnerr.YarnException)}
		}
		return recorded[id]
	}

	s := store.NewMemory(nil)
	join(t, s, startRM(t, "sc1", 1), startRM(t, "sc2", 2))
	addr, _ := serveRouter(t, s, routerOptions{rand: &seqRand{ints: []int{1, 0}}})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	if _, err := nc.Write(c2s[:7]); err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, body := range calls {
		var h commonpb.RpcRequestHeaderProto
		if _, err := recordings.Delimited(body, &h); err != nil {
			t.Fatal(err)
		}
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(body)))
		if _, err := nc.Write(append(l[:], body...)); err != nil {
			t.Fatal(err)
		}
		if h.GetCallId() < 0 {
			continue // the connection context gets no answer
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, l[:]); err != nil {
			t.Fatalf("call %d: %v", h.GetCallId(), err)
		}
		ans := make([]byte, binary.BigEndian.Uint32(l[:]))
		if _, err := io.ReadFull(br, ans); err != nil {
			t.Fatal(err)
		}
		var rh commonpb.RpcResponseHeaderProto
		if _, err := recordings.Delimited(ans, &rh); err != nil {
			t.Fatal(err)
		}
		got := kind{rh.GetStatus(), rh.GetExceptionClassName()}
		if w := want(rh.GetCallId()); got != w {
			t.Errorf("call %d: answer %v %q (%s), want %v %q", rh.GetCallId(), got.status, got.class, rh.GetErrorMsg(), w.status, w.class)
		}
		if recorded[rh.GetCallId()].class == string(yarnerr.ApplicationNotFound) && !strings.HasSuffix(rh.GetErrorMsg(), " does not exist in FederationStateStore.") {
			t.Errorf("unknown application: message %q", rh.GetErrorMsg())
		}
		replayed++
	}
	if replayed != len(recorded) {
		t.Errorf("%d calls replayed, %d recorded", replayed, len(recorded))
	}
}
