package router

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// rawCall makes one call of the Router at addr as alice, for the calls
// the Knit client has no method for.
func rawCall(t *testing.T, addr, method string, req, resp proto.Message) error {
	t.Helper()
	c, err := ipc.Dial(t.Context(), addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Call(t.Context(), method, req, resp)
}
