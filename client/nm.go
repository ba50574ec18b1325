package client

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// NMConfig configures an NMClient.
type NMConfig struct {
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// nodeConn is the connection to one node, its protocol client, and the
// NMToken it authenticates with.
type nodeConn struct {
	rpc   caller
	nm    *yarnrpc.ContainerManagementProtocolClient
	token *commonpb.TokenProto
}

// NMClient starts, stops and watches containers on the nodes they were
// allocated on (ContainerManagementProtocol), as Hadoop's NMClientImpl does.
// Each node is dialled at its NodeId with SASL TOKEN, proving the NMToken
// the RM sent for it; a node whose token changed gets a new connection, as
// in ContainerManagementProtocolProxy. It is safe for concurrent use.
type NMClient struct {
	tokens *NMTokenCache
	log    *slog.Logger
	dial   func(addr string, tok *commonpb.TokenProto) (caller, error)

	mu    sync.Mutex
	nodes map[string]*nodeConn
}

// NewNMClient returns a client that takes its NMTokens from tokens (the
// AMRMClient's NMTokens()).
func NewNMClient(tokens *NMTokenCache, cfg NMConfig) *NMClient {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &NMClient{
		tokens: tokens,
		log:    log,
		dial: func(addr string, tok *commonpb.TokenProto) (caller, error) {
			return ipc.NewClient(addr, ipc.ClientConfig{Protocol: yarnrpc.ContainerManagementProtocolName, Token: tok, Logger: log, Errors: yarnerr.FromRemote})
		},
		nodes: map[string]*nodeConn{},
	}
}

// Close closes every node connection.
func (c *NMClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, n := range c.nodes {
		_ = n.rpc.Close()
		delete(c.nodes, addr)
	}
	return nil
}

// StartContainer starts an allocated container with its launch context
// (startContainers), presenting the container's ContainerToken. It returns
// the node's auxiliary service metadata (for example the MapReduce shuffle
// port under "mapreduce_shuffle"). A container the node refused comes back
// as an error wrapping a *SerializedError.
func (c *NMClient) StartContainer(ctx context.Context, container *yarnpb.ContainerProto, clc *yarnpb.ContainerLaunchContextProto) (map[string][]byte, error) {
	id := container.GetId()
	nm, err := c.node(container.GetNodeId())
	if err != nil {
		return nil, fmt.Errorf("client: start container %s: %w", containerString(id), err)
	}
	req := &yarnpb.StartContainersRequestProto{StartContainerRequest: []*yarnpb.StartContainerRequestProto{{
		ContainerLaunchContext: clc,
		ContainerToken:         container.GetContainerToken(),
	}}}
	resp, err := nm.StartContainers(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: start container %s: %w", containerString(id), err)
	}
	if err := containerFailure(resp.GetFailedRequests(), id); err != nil {
		return nil, fmt.Errorf("client: start container %s: %w", containerString(id), err)
	}
	meta := map[string][]byte{}
	for _, kv := range resp.GetServicesMetaData() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	return meta, nil
}

// StopContainer stops a container on its node (stopContainers).
func (c *NMClient) StopContainer(ctx context.Context, id *yarnpb.ContainerIdProto, node *yarnpb.NodeIdProto) error {
	nm, err := c.node(node)
	if err != nil {
		return fmt.Errorf("client: stop container %s: %w", containerString(id), err)
	}
	req := &yarnpb.StopContainersRequestProto{ContainerId: []*yarnpb.ContainerIdProto{id}}
	resp, err := nm.StopContainers(ctx, req)
	if err != nil {
		return fmt.Errorf("client: stop container %s: %w", containerString(id), err)
	}
	if err := containerFailure(resp.GetFailedRequests(), id); err != nil {
		return fmt.Errorf("client: stop container %s: %w", containerString(id), err)
	}
	return nil
}

// UpdateContainer brings a container's update to its node (updateContainer,
// as NMClientImpl.updateContainerResource does): container is the one an
// INCREASE, PROMOTE or DEMOTE UpdatedContainer carried, with its new token.
func (c *NMClient) UpdateContainer(ctx context.Context, container *yarnpb.ContainerProto) error {
	id := container.GetId()
	nm, err := c.node(container.GetNodeId())
	if err != nil {
		return fmt.Errorf("client: update container %s: %w", containerString(id), err)
	}
	req := &yarnpb.ContainerUpdateRequestProto{UpdateContainerToken: []*commonpb.TokenProto{container.GetContainerToken()}}
	resp, err := nm.UpdateContainer(ctx, req)
	if err != nil {
		return fmt.Errorf("client: update container %s: %w", containerString(id), err)
	}
	if err := containerFailure(resp.GetFailedRequests(), id); err != nil {
		return fmt.Errorf("client: update container %s: %w", containerString(id), err)
	}
	return nil
}

// GetContainerStatus returns a container's status from its node
// (getContainerStatuses).
func (c *NMClient) GetContainerStatus(ctx context.Context, id *yarnpb.ContainerIdProto, node *yarnpb.NodeIdProto) (*yarnpb.ContainerStatusProto, error) {
	nm, err := c.node(node)
	if err != nil {
		return nil, fmt.Errorf("client: get status of container %s: %w", containerString(id), err)
	}
	req := &yarnpb.GetContainerStatusesRequestProto{ContainerId: []*yarnpb.ContainerIdProto{id}}
	resp, err := nm.GetContainerStatuses(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: get status of container %s: %w", containerString(id), err)
	}
	if err := containerFailure(resp.GetFailedRequests(), id); err != nil {
		return nil, fmt.Errorf("client: get status of container %s: %w", containerString(id), err)
	}
	for _, st := range resp.GetStatus() {
		if sameContainer(st.GetContainerId(), id) {
			return st, nil
		}
	}
	return nil, fmt.Errorf("client: get status of container %s: node answered without it", containerString(id))
}

// node returns the client of a node, connected with the node's current
// NMToken.
func (c *NMClient) node(n *yarnpb.NodeIdProto) (*yarnrpc.ContainerManagementProtocolClient, error) {
	key := NodeAddress(n)
	tok, ok := c.tokens.Get(key)
	if !ok {
		return nil, fmt.Errorf("%w for %s", ErrNoNMToken, key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if nc, ok := c.nodes[key]; ok {
		if proto.Equal(nc.token, tok) {
			return nc.nm, nil
		}
		// A new token (the RM rolled its key): new calls prove the token
		// that stays valid. The old client is left to calls still running on
		// it; its connection closes once idle.
		delete(c.nodes, key)
	}
	rpc, err := c.dial(net.JoinHostPort(n.GetHost(), strconv.Itoa(int(n.GetPort()))), tok)
	if err != nil {
		return nil, fmt.Errorf("client: new node client for %s: %w", key, err)
	}
	nc := &nodeConn{rpc: rpc, nm: yarnrpc.NewContainerManagementProtocolClient(rpc), token: tok}
	c.nodes[key] = nc
	return nc.nm, nil
}
