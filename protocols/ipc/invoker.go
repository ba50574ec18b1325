package ipc

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// Invoker calls methods of the one protocol it was made for, naming each by
// its Hadoop method name. *Client is one; the typed clients that
// protoc-gen-hadooprpc generates (protocols/yarnrpc) call through it, so a
// test double or a client that connects lazily can stand in.
type Invoker interface {
	Call(ctx context.Context, method string, req, resp proto.Message) error
}

var _ Invoker = (*Client)(nil)
