package localizer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// Hadoop's defaults for the client settings read here.
const (
	// defaultNamenodePort is dfs.namenode.rpc-address's port, for hdfs
	// URLs that name none.
	defaultNamenodePort = "8020"
	// defaultConnectTimeout is ipc.client.connect.timeout's 20000 ms.
	defaultConnectTimeout = 20 * time.Second
	// defaultSocketTimeout is dfs.client.socket-timeout's 60000 ms.
	defaultSocketTimeout = 60 * time.Second
)

// errKerberos refuses hdfs:// resources of a Kerberos cluster.
var errKerberos = errors.New("localizer: Knit's localizer does not support Kerberos HDFS yet (hadoop.security.authentication is kerberos)")

// HDFSConfig says how hdfs:// resources are read: over Hadoop RPC to the
// namenode and the DataTransferProtocol to datanodes
// (github.com/colinmarc/hdfs), as the container's user with SIMPLE
// authentication.
type HDFSConfig struct {
	// ConfDir is the Hadoop configuration folder (HADOOP_CONF_DIR). Its
	// core-site.xml and hdfs-site.xml give fs.defaultFS, the namenodes of
	// HA nameservices (dfs.ha.namenodes.<ns>,
	// dfs.namenode.rpc-address.<ns>.<nn>), hadoop.security.authentication,
	// dfs.client.use.datanode.hostname, the data transfer protection, the
	// client's timeouts and ipc.maximum.response.length. Empty, or a
	// folder without them, means hdfs URLs must name their namenode.
	ConfDir string
}

// hdfsSource reads hdfs:// URLs with one client per resource, since the
// client's user is fixed when it connects.
type hdfsSource struct {
	conf hadoopconf.HadoopConf
	// opts is what the configuration says of every client; Open adds the
	// namenodes, the user and the dialers.
	opts           hdfs.ClientOptions
	kerberos       bool
	connectTimeout time.Duration
	socketTimeout  time.Duration
	// maxResponse bounds a namenode's RPC responses (see hdfsguard.go).
	maxResponse uint64
}

var _ Source = (*hdfsSource)(nil)

// newHDFSSource reads the configuration folder once, as a NodeManager
// reads its configuration at start.
func newHDFSSource(cfg HDFSConfig) (*hdfsSource, error) {
	var conf hadoopconf.HadoopConf
	if cfg.ConfDir != "" {
		c, err := hadoopconf.Load(cfg.ConfDir)
		if err != nil {
			return nil, fmt.Errorf("localizer: hadoop configuration: %w", err)
		}
		conf = c
	}
	s := &hdfsSource{conf: conf, opts: hdfs.ClientOptionsFromConf(conf)}
	// ClientOptionsFromConf marks a Kerberos configuration with an empty
	// Kerberos client; Open refuses it instead.
	s.kerberos = s.opts.KerberosClient != nil
	s.opts.KerberosClient = nil
	var err error
	if s.connectTimeout, err = msSetting(conf, "ipc.client.connect.timeout", defaultConnectTimeout); err != nil {
		return nil, err
	}
	if s.socketTimeout, err = msSetting(conf, "dfs.client.socket-timeout", defaultSocketTimeout); err != nil {
		return nil, err
	}
	if s.maxResponse, err = sizeSetting(conf, "ipc.maximum.response.length", defaultMaxResponseLength); err != nil {
		return nil, err
	}
	return s, nil
}

// msSetting reads a setting in milliseconds; def if unset or ≤ 0.
func msSetting(conf hadoopconf.HadoopConf, key string, def time.Duration) (time.Duration, error) {
	ms, err := positiveSetting(conf, key, def.Milliseconds())
	return time.Duration(ms) * time.Millisecond, err
}

// sizeSetting reads a setting in bytes; def if unset or ≤ 0. Hadoop's
// client takes ipc.maximum.response.length ≤ 0 as no limit; knit-node
// keeps its default instead, since one node's process localizes for
// every container on it.
func sizeSetting(conf hadoopconf.HadoopConf, key string, def uint64) (uint64, error) {
	n, err := positiveSetting(conf, key, int64(def))
	return uint64(n), err
}

// positiveSetting reads an integer setting; def if unset or ≤ 0.
func positiveSetting(conf hadoopconf.HadoopConf, key string, def int64) (int64, error) {
	v := strings.TrimSpace(conf[key])
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("localizer: hadoop configuration %s: %w", key, err)
	}
	if n <= 0 {
		return def, nil
	}
	return n, nil
}

// namenodes returns the RPC addresses of the namenodes an hdfs URL names:
// its authority, or fs.defaultFS's for hdfs:///path. An HA nameservice
// stands for its namenodes, tried in order (a standby sends the client to
// the next); a host without port is at port 8020.
func namenodes(conf hadoopconf.HadoopConf, u *url.URL) ([]string, error) {
	host, port := u.Hostname(), u.Port()
	if host == "" {
		def := conf["fs.defaultFS"]
		if def == "" {
			def = conf["fs.default.name"] // the deprecated name
		}
		du, err := url.Parse(def)
		if err != nil || du.Scheme != "hdfs" || du.Hostname() == "" {
			// DistributedFileSystem.initialize's words.
			return nil, fmt.Errorf("localizer: Incomplete HDFS URI, no host: %s", u)
		}
		host, port = du.Hostname(), du.Port()
	}
	if ids := conf["dfs.ha.namenodes."+host]; ids != "" && port == "" {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			key := "dfs.namenode.rpc-address." + host + "." + strings.TrimSpace(id)
			if addr := strings.TrimSpace(conf[key]); addr != "" {
				addrs = append(addrs, addr)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("localizer: nameservice %s has no dfs.namenode.rpc-address.%s.* configured", host, host)
		}
		return addrs, nil
	}
	if port == "" {
		port = defaultNamenodePort
	}
	return []string{net.JoinHostPort(host, port)}, nil
}

func (s *hdfsSource) Open(ctx context.Context, r Request) (*Object, error) {
	if s.kerberos {
		return nil, errKerberos
	}
	addrs, err := namenodes(s.conf, r.URL)
	if err != nil {
		return nil, err
	}
	opts := s.opts
	opts.Addresses, opts.User = addrs, r.User
	opts.NamenodeDialFunc = s.dialer(ctx, func(addr string) guard { return newRPCFrames(addr, s.maxResponse) })
	opts.DatanodeDialFunc = s.dialer(ctx, func(addr string) guard { return newDataTransfer(addr) })
	client, err := hdfs.NewClient(opts)
	if err != nil {
		return nil, ended(ctx, fmt.Errorf("localizer: namenode of %s: %w", r.URL, err))
	}
	o, err := openHDFS(client, r)
	if err != nil {
		_ = client.Close()
		return nil, ended(ctx, err)
	}
	return o, nil
}

// ended is ctx's error if ctx has ended, else err: a connection closed
// because ctx ended fails with some network error, which is not the
// resource's fault.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("localizer: %w", ctx.Err())
	}
	return err
}

// openHDFS stats the file and readies its reader; the object's body closes
// the client.
func openHDFS(client *hdfs.Client, r Request) (*Object, error) {
	f, err := client.Open(r.URL.Path)
	if err != nil {
		return nil, fmt.Errorf("localizer: %w", err)
	}
	st := f.Stat()
	if st.IsDir() {
		return nil, folderError(r.URL)
	}
	o := &Object{Body: hdfsBody{f, client}, Size: st.Size(), ModTime: st.ModTime().UnixMilli(), Public: true}
	if r.CheckPublic {
		o.Public = isPublic(st.Mode(), path.Dir(r.URL.Path), func(dir string) (fs.FileMode, error) {
			st, err := client.Stat(dir)
			if err != nil {
				return 0, err
			}
			return st.Mode(), nil
		})
	}
	return o, nil
}

// hdfsBody is an open file and the client it came from.
type hdfsBody struct {
	*hdfs.FileReader
	client *hdfs.Client
}

func (b hdfsBody) Close() error {
	return errors.Join(b.FileReader.Close(), b.client.Close())
}

// dialer connects to namenodes or datanodes for one Open. The client's
// calls take no context (it dials with context.Background), so ctx is
// used instead: its end closes the connections, and each read or write
// that waits longer than the socket timeout fails, as in Hadoop's client.
// Each connection's reads pass a new guard of its peer's framing.
func (s *hdfsSource) dialer(ctx context.Context, newGuard func(addr string) guard) func(context.Context, string, string) (net.Conn, error) {
	d := &net.Dialer{Timeout: s.connectTimeout}
	return func(_ context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		return &guardedConn{Conn: &timeoutConn{Conn: c, timeout: s.socketTimeout, stop: stop}, g: newGuard(addr)}, nil
	}
}

// timeoutConn bounds every read and write by a timeout, and forgets its
// context when closed.
type timeoutConn struct {
	net.Conn
	timeout time.Duration
	stop    func() bool
}

func (c *timeoutConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *timeoutConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *timeoutConn) Close() error {
	c.stop()
	return c.Conn.Close()
}
