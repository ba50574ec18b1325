package rm

import (
	"context"
	"net"
	"testing"

	"github.com/knitdev/knit/protocols/ipc"
)

func TestEverySurfaceNamesItsCallerTheSameWay(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000}
	token := &struct{ attempt string }{"appattempt_1_0001_000001"}
	tests := []struct {
		name string
		ctx  context.Context
		want Caller
	}{
		{"no caller", context.Background(), Caller{}},
		{"a REST or web user", WithCaller(context.Background(), Caller{User: "alice"}), Caller{User: "alice"}},
		{"an RPC under SIMPLE auth", ipc.WithCaller(context.Background(), ipc.Caller{User: "bob", RealUser: "oozie", Auth: ipc.AuthSimple, RemoteAddr: addr}),
			Caller{User: "bob", RealUser: "oozie", RemoteAddr: addr}},
		{"an RPC under TOKEN auth", ipc.WithCaller(context.Background(), ipc.Caller{User: "appattempt_1_0001_000001", Auth: ipc.AuthToken, TokenIdentity: token}),
			Caller{User: "appattempt_1_0001_000001", Token: true, TokenIdentity: token}},
		{"a surface's caller over the RPC's", WithCaller(ipc.WithCaller(context.Background(), ipc.Caller{User: "bob"}), Caller{User: "alice"}),
			Caller{User: "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := callerOf(tt.ctx); got != tt.want {
				t.Errorf("callerOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
