package yarnid

import (
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// NodeString is NodeId.toString: host:port. Token services, NMToken caches
// and relayed connections all name a node by it.
func NodeString(n *yarnpb.NodeIdProto) string {
	return n.GetHost() + ":" + strconv.Itoa(int(n.GetPort()))
}

// ParseNodeID reads a NodeId string (host:port) as NodeId.fromString does.
func ParseNodeID(s string) (*yarnpb.NodeIdProto, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("Invalid NodeId [%s]. Expected host:port", s)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("Invalid port: %s", port)
	}
	return &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(int32(p))}, nil
}
