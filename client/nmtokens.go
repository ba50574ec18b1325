package client

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// NMTokenCache holds the NMToken of each node an application master may
// start containers on, keyed by the node's "host:port" (NodeAddress), as
// Hadoop's NMTokenCache does. The AMRMClient fills it from every allocate
// answer; the NMClient reads it. It is safe for concurrent use.
type NMTokenCache struct {
	mu     sync.Mutex
	tokens map[string]*commonpb.TokenProto
}

// NewNMTokenCache returns an empty cache.
func NewNMTokenCache() *NMTokenCache {
	return &NMTokenCache{tokens: map[string]*commonpb.TokenProto{}}
}

// NodeAddress is the cache key of a node: its NodeId as Java prints it,
// host ":" port.
func NodeAddress(n *yarnpb.NodeIdProto) string {
	return yarnid.NodeString(n)
}

// Set stores a copy of t as node's token, replacing an older one (the RM
// sends a new one after it rolls its master key).
func (c *NMTokenCache) Set(node string, t *commonpb.TokenProto) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[node] = proto.Clone(t).(*commonpb.TokenProto)
}

// Get returns a copy of node's token.
func (c *NMTokenCache) Get(node string) (*commonpb.TokenProto, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[node]
	if !ok {
		return nil, false
	}
	return proto.Clone(t).(*commonpb.TokenProto), true
}

// Remove forgets node's token.
func (c *NMTokenCache) Remove(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tokens, node)
}

// Len is the number of nodes with a token.
func (c *NMTokenCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tokens)
}

// addAll stores the tokens of an allocate or register answer.
func (c *NMTokenCache) addAll(tokens []*yarnpb.NMTokenProto) {
	for _, t := range tokens {
		if t.GetNodeId() == nil || t.GetToken() == nil {
			continue
		}
		c.Set(NodeAddress(t.GetNodeId()), t.GetToken())
	}
}
