package sparkshuffle

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// AuthMode is how a Client authenticates.
type AuthMode int

const (
	// AuthNone sends requests unauthenticated (spark.authenticate=false).
	AuthNone AuthMode = iota + 1
	// AuthSASL authenticates with SASL DIGEST-MD5.
	AuthSASL
	// AuthCrypto authenticates with the auth engine and encrypts.
	AuthCrypto
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// AppID is the application the client speaks for.
	AppID string
	// Secret is the application's secret; unused with AuthNone.
	Secret []byte
	// Auth is the authentication; zero means AuthNone.
	Auth AuthMode
	// AuthEngineVersion is 1 or 2 with AuthCrypto; zero means 1.
	AuthEngineVersion int
	// Timeout bounds each request's round trip; zero means 30s.
	Timeout time.Duration
}

// Client is a minimal client of the service, shaped like Spark's
// ExternalBlockStoreClient: one connection, one request at a time. Knit
// uses it in tests, benchmarks and Spark-shaped test applications. It is
// not safe for concurrent use.
type Client struct {
	cfg   ClientConfig
	nc    net.Conn
	r     *bufio.Reader
	w     io.Writer
	reqID atomic.Int64
}

// RemoteError is a failure the server answered with.
type RemoteError struct{ Text string }

func (e *RemoteError) Error() string { return "sparkshuffle: server: " + firstLine(e.Text) }

// Dial connects to addr and authenticates as cfg says.
func Dial(ctx context.Context, addr string, cfg ClientConfig) (*Client, error) {
	if cfg.Auth == 0 {
		cfg.Auth = AuthNone
	}
	if cfg.AuthEngineVersion == 0 {
		cfg.AuthEngineVersion = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sparkshuffle: dial: %w", err)
	}
	c := &Client{cfg: cfg, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: nc}
	c.reqID.Store(1)
	if err := c.authenticate(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }

func (c *Client) authenticate() error {
	switch c.cfg.Auth {
	case AuthSASL:
		sc := newSaslClient(c.cfg.AppID, c.cfg.Secret)
		ch, err := c.rpc((&saslMessage{appID: c.cfg.AppID}).encode())
		if err != nil {
			return fmt.Errorf("sparkshuffle: SASL: %w", err)
		}
		resp, err := sc.client.Respond(ch)
		if err != nil {
			return fmt.Errorf("sparkshuffle: SASL: %w", err)
		}
		final, err := c.rpc((&saslMessage{appID: c.cfg.AppID, token: resp}).encode())
		if err != nil {
			return fmt.Errorf("sparkshuffle: SASL: %w", err)
		}
		if err := sc.client.Verify(final); err != nil {
			return fmt.Errorf("sparkshuffle: SASL: %w", err)
		}
	case AuthCrypto:
		ac, err := newAuthClient(c.cfg.AuthEngineVersion, c.cfg.AppID, c.cfg.Secret)
		if err != nil {
			return err
		}
		resp, err := c.rpc(ac.hello.encode())
		if err != nil {
			return fmt.Errorf("sparkshuffle: auth: %w", err)
		}
		keys, err := ac.finish(resp)
		if err != nil {
			return fmt.Errorf("sparkshuffle: auth: %w", err)
		}
		in, out, err := keys.streams(false)
		if err != nil {
			return err
		}
		c.r = bufio.NewReaderSize(&cryptReader{s: in, r: c.nc}, 64<<10)
		c.w = &cryptWriter{s: out, w: c.nc}
	}
	return nil
}

func (c *Client) deadline() { c.nc.SetDeadline(time.Now().Add(c.cfg.Timeout)) }

// rpc sends an RpcRequest and returns the RpcResponse body.
func (c *Client) rpc(body []byte) ([]byte, error) {
	c.deadline()
	id := c.reqID.Add(1)
	if _, err := c.w.Write(rpcRequestFrame(id, body)); err != nil {
		return nil, err
	}
	typ, p, err := readFrame(c.r, 1<<31-1)
	if err != nil {
		return nil, err
	}
	q, err := decodeRequest(typ, p)
	if err != nil {
		return nil, err
	}
	switch typ {
	case typeRPCResponse:
		return q.body, nil
	case typeRPCFailure:
		r := &javaBuf{b: p[8:]}
		s, _ := r.str()
		return nil, &RemoteError{Text: s}
	}
	return nil, fmt.Errorf("sparkshuffle: answer of type %d to an RPC", typ)
}

// RegisterExecutor registers an executor's shuffle dirs.
func (c *Client) RegisterExecutor(m *RegisterExecutor) error {
	_, err := c.rpc(encodeMessage(m))
	return err
}

// Fetch sends OpenBlocks or FetchShuffleBlocks and fetches every chunk of
// the stream, calling fn with each chunk's bytes (valid until fn returns);
// it stops at the first failed chunk.
func (c *Client) Fetch(m any, fn func(chunk int, data []byte) error) error {
	body, err := c.rpc(encodeMessage(m))
	if err != nil {
		return err
	}
	dm, err := decodeMessage(body)
	if err != nil {
		return err
	}
	h, ok := dm.(*StreamHandle)
	if !ok {
		return fmt.Errorf("sparkshuffle: answer %T, not a StreamHandle", dm)
	}
	c.deadline()
	// All chunk requests at once, as OneForOneBlockFetcher sends them.
	var reqs []byte
	for i := range h.NumChunks {
		reqs = append(reqs, chunkFetchRequestFrame(h.StreamID, i)...)
	}
	if _, err := c.w.Write(reqs); err != nil {
		return err
	}
	var buf []byte
	for i := range h.NumChunks {
		c.deadline()
		var hdr [frameHeaderLen + 12]byte
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint64(hdr[:8])) - int64(len(hdr))
		if n < 0 || n > 1<<31 {
			return errors.New("sparkshuffle: bad chunk frame")
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return err
		}
		switch hdr[8] {
		case typeChunkFetchSuccess:
			if err := fn(int(i), buf); err != nil {
				return err
			}
		case typeChunkFetchFailure:
			r := &javaBuf{b: buf}
			s, _ := r.str()
			return &RemoteError{Text: s}
		default:
			return fmt.Errorf("sparkshuffle: answer of type %d to a chunk fetch", hdr[8])
		}
	}
	return nil
}
