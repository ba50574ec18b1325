package router

import (
	"testing"
	"time"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// BenchmarkApplicationReport compares a report read through the Router
// (its cache warm, as in steady state) with one read from the RM directly,
// both over loopback Hadoop RPC: the Router's cost is its second hop.
func BenchmarkApplicationReport(b *testing.B) {
	s := store.NewMemory(nil)
	rm := startRM(b, "sc1", 1)
	join(b, s, rm)
	id := yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1}
	if _, err := s.AddApplicationHomeSubCluster(b.Context(), store.ApplicationHome{Application: id.String(), Home: "sc1"}); err != nil {
		b.Fatal(err)
	}
	routerAddr, c := serveRouter(b, s, routerOptions{cache: store.NewCache(s, time.Hour, nil)})
	if err := c.SubmitApplication(b.Context(), submission(id.Proto(), "default")); err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct{ name, addr string }{{"direct", rm.addr}, {"router", routerAddr}} {
		b.Run(tt.name, func(b *testing.B) {
			cl, err := ipc.Dial(b.Context(), tt.addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice", Errors: yarnerr.FromRemote})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			req := &yarnpb.GetApplicationReportRequestProto{ApplicationId: id.Proto()}
			b.ResetTimer()
			for b.Loop() {
				if err := cl.Call(b.Context(), "getApplicationReport", req, &yarnpb.GetApplicationReportResponseProto{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
