package bench

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// BenchmarkRMHandlersInProcess calls the handlers BenchmarkRMCallsVersusNoOp
// measures over the wire straight, in BenchmarkRMCallsVersusNoOp's scene,
// with the caller as the RPC server gives it: their allocations per call
// are deterministic where CPU ratios on a shared machine are not, so this
// is the measure to work by and the wire benchmark the one to report.
func BenchmarkRMHandlersInProcess(b *testing.B) {
	scene := startRCScene(b)
	defer scene.close()
	ctx := context.Background()

	b.Run("getApplicationReport", func(b *testing.B) {
		reader := asUser(ctx, "user0")
		req := scene.request(b, "getApplicationReport", 0).(*yarnpb.GetApplicationReportRequestProto)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := scene.rm.GetApplicationReport(reader, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The answer is marshalled too: for 1,000 nodes the encoding is most
	// of the call, and what the handler builds decides its cost.
	b.Run("getClusterNodes", func(b *testing.B) {
		reader := asUser(ctx, "user0")
		req := &yarnpb.GetClusterNodesRequestProto{}
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			resp, err := scene.rm.GetClusterNodes(reader, req)
			if err != nil {
				b.Fatal(err)
			}
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], resp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "answer-bytes")
	})
	// Each run of allocate is another AM's, whose next heartbeat is its
	// first (-count runs it again in the same scene).
	ams := 0
	b.Run("allocate", func(b *testing.B) {
		id := new(yarnpb.AMRMTokenIdentifierProto)
		ams++
		if err := proto.Unmarshal(scene.tokens[ams-1].GetIdentifier(), id); err != nil {
			b.Fatal(err)
		}
		am := ipc.WithCaller(ctx, ipc.Caller{User: "am", Auth: ipc.AuthToken, TokenIdentity: id})
		req := rcHeartbeat(0)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := scene.rm.Allocate(am, req)
			if err != nil {
				b.Fatal(err)
			}
			req.ResponseId = proto.Int32(resp.GetResponseId())
		}
	})
}
