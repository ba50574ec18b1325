package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
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
	// meta is each node's services metadata as its last startContainers
	// answered it.
	meta map[string]map[string][]byte
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
		meta:  map[string]map[string][]byte{},
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
// as an error wrapping a *SerializedError. A call the node does not answer
// is sent again (call), and a container the node then says it started
// already was started by the attempt whose answer was lost.
func (c *NMClient) StartContainer(ctx context.Context, container *yarnpb.ContainerProto, clc *yarnpb.ContainerLaunchContextProto) (map[string][]byte, error) {
	id := container.GetId()
	req := &yarnpb.StartContainersRequestProto{StartContainerRequest: []*yarnpb.StartContainerRequestProto{{
		ContainerLaunchContext: clc,
		ContainerToken:         container.GetContainerToken(),
	}}}
	var resp *yarnpb.StartContainersResponseProto
	retried, err := c.call(ctx, container.GetNodeId(), func(nm *yarnrpc.ContainerManagementProtocolClient) (err error) {
		resp, err = nm.StartContainers(ctx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: start container %s: %w", containerString(id), err)
	}
	key := NodeAddress(container.GetNodeId())
	if err := containerFailure(resp.GetFailedRequests(), id); err != nil {
		if retried && relaunched(err) {
			// An attempt of this call whose answer was lost (the RM
			// serving the node's port failed over mid-call) started it.
			c.log.InfoContext(ctx, "container started by an earlier attempt of the call", "container", containerString(id), "node", key)
			c.mu.Lock()
			defer c.mu.Unlock()
			return maps.Clone(c.meta[key]), nil
		}
		return nil, fmt.Errorf("client: start container %s: %w", containerString(id), err)
	}
	meta := map[string][]byte{}
	for _, kv := range resp.GetServicesMetaData() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	c.mu.Lock()
	c.meta[key] = maps.Clone(meta)
	c.mu.Unlock()
	return meta, nil
}

// relaunched reports a node's refusal to start a container it started
// already.
func relaunched(err error) bool {
	var se *SerializedError
	return errors.As(err, &se) && strings.Contains(se.Message, yarnerr.RelaunchMessage)
}

// nodeManagerBackOff paces the attempts of a call a node did not answer,
// for at most yarn.client.nodemanager-connect.max-wait-ms (3 minutes), as
// NMProxy's retry policy does; from 100 ms to 2 s apart rather than its
// fixed 10 s, since a Knit node's NM port answers again as soon as an RM
// serves RKS.
func nodeManagerBackOff() backoff.BackOff { return growingBackOff(3 * time.Minute) }

// unanswered tells the failures NMProxy sends a call again after: no
// answer (the connection refused, cut or timed out) and
// RetriableException. An answer the node gave, error or not, is final.
func unanswered(err error) bool {
	if e, ok := yarnerr.Find(err); ok {
		return e.Class == yarnerr.Retriable
	}
	return !errors.Is(err, ipc.ErrClientClosed) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded)
}

// call makes fn's call of node n, again after a pause while the node gives
// no answer, until nodeManagerBackOff stops or ctx ends. retried says that
// an earlier attempt went unanswered: the node may have carried it out.
func (c *NMClient) call(ctx context.Context, n *yarnpb.NodeIdProto, fn func(*yarnrpc.ContainerManagementProtocolClient) error) (retried bool, err error) {
	var b backoff.BackOff
	for {
		nm, err := c.node(n)
		if err != nil {
			return retried, err
		}
		err = fn(nm)
		if err == nil || !unanswered(err) || ctx.Err() != nil {
			return retried, err
		}
		if b == nil {
			b = nodeManagerBackOff()
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return retried, err
		}
		c.log.InfoContext(ctx, "calling the NodeManager again", "node", NodeAddress(n), "in", wait, "err", err)
		if err := sleep(ctx, wait); err != nil {
			return retried, err
		}
		retried = true
	}
}

// StopContainer stops a container on its node (stopContainers).
func (c *NMClient) StopContainer(ctx context.Context, id *yarnpb.ContainerIdProto, node *yarnpb.NodeIdProto) error {
	req := &yarnpb.StopContainersRequestProto{ContainerId: []*yarnpb.ContainerIdProto{id}}
	var resp *yarnpb.StopContainersResponseProto
	_, err := c.call(ctx, node, func(nm *yarnrpc.ContainerManagementProtocolClient) (err error) {
		resp, err = nm.StopContainers(ctx, req)
		return err
	})
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
	req := &yarnpb.GetContainerStatusesRequestProto{ContainerId: []*yarnpb.ContainerIdProto{id}}
	var resp *yarnpb.GetContainerStatusesResponseProto
	_, err := c.call(ctx, node, func(nm *yarnrpc.ContainerManagementProtocolClient) (err error) {
		resp, err = nm.GetContainerStatuses(ctx, req)
		return err
	})
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
