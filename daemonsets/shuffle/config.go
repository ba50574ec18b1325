package shuffle

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// Defaults, Hadoop's where Hadoop has the setting.
const (
	// DefaultPort is mapreduce.shuffle.port's default.
	DefaultPort = 13562
	// DefaultKeepAliveTimeout is mapreduce.shuffle.connection-keep-alive.timeout's default.
	DefaultKeepAliveTimeout = 5 * time.Second
	// DefaultMaxSessionOpenFiles is mapreduce.shuffle.max.session-open-files' default.
	DefaultMaxSessionOpenFiles = 3
	// DefaultIndexCacheBytes is mapreduce.tasktracker.indexcache.mb's default, 10 MiB.
	DefaultIndexCacheBytes = 10 << 20
	// DefaultMaxRequestLineBytes is Netty's HttpRequestDecoder maxInitialLineLength.
	DefaultMaxRequestLineBytes = 4096
	// DefaultMaxHeaderBytes is Netty's HttpRequestDecoder maxHeaderSize.
	DefaultMaxHeaderBytes = 8192
	// DefaultReadHeaderTimeout bounds how long a new connection may take to send its request.
	DefaultReadHeaderTimeout = 60 * time.Second
	// DefaultWriteIdleTimeout bounds how long a transfer may make no progress.
	DefaultWriteIdleTimeout = 120 * time.Second
	// DefaultTLSBufferBytes is mapreduce.shuffle.ssl.file.buffer.size's default.
	DefaultTLSBufferBytes = 60 << 10
)

// Hadoop property names ConfigFromHadoop reads.
const (
	PropPort                = "mapreduce.shuffle.port"
	PropLocalDirs           = "yarn.nodemanager.local-dirs"
	PropSSLEnabled          = "mapreduce.shuffle.ssl.enabled"
	PropSSLFileBufferSize   = "mapreduce.shuffle.ssl.file.buffer.size"
	PropKeepAliveEnabled    = "mapreduce.shuffle.connection-keep-alive.enable"
	PropKeepAliveTimeout    = "mapreduce.shuffle.connection-keep-alive.timeout"
	PropMaxConnections      = "mapreduce.shuffle.max.connections"
	PropMaxSessionOpenFiles = "mapreduce.shuffle.max.session-open-files"
	PropIndexCacheMB        = "mapreduce.tasktracker.indexcache.mb"
	// PropMaxTransfersPerReducer is Knit's own: see Config.MaxTransfersPerReducer.
	PropMaxTransfersPerReducer = "knit.shuffle.max.transfers-per-reducer"
)

// Config holds a Service's settings. The zero value of every field but
// LocalDirs means its default.
type Config struct {
	// Listener is the socket the service accepts on; the service owns it
	// from New on and closes it when Serve returns (or on Close). When nil,
	// New listens on Address.
	Listener net.Listener
	// Address is where New listens when Listener is nil; default
	// ":13562" (mapreduce.shuffle.port).
	Address string
	// AdvertisedPort is the port reducers are told (Metadata) and the port
	// the UrlHash covers: Hadoop hashes its own configured port, so behind a
	// port mapping this is the outside port. Zero means the listener's port.
	AdvertisedPort int
	// LocalDirs are the node's local dirs (yarn.nodemanager.local-dirs),
	// searched in order for each map output file. Required.
	LocalDirs []string
	// TLS, when set, makes the service speak HTTPS (mapreduce.shuffle.ssl.enabled).
	// Bodies are then copied through a buffer of TLSBufferBytes, not sendfile.
	TLS *tls.Config
	// SSLEnabled records mapreduce.shuffle.ssl.enabled; New fails when it is
	// set and TLS is nil, rather than serving plain HTTP to HTTPS reducers.
	SSLEnabled bool
	// TLSBufferBytes is the copy buffer of a TLS transfer
	// (mapreduce.shuffle.ssl.file.buffer.size); default 60 KiB.
	TLSBufferBytes int
	// KeepAliveEnabled keeps every connection open after a 200 answer, as
	// the keepAlive=true parameter does for one request
	// (mapreduce.shuffle.connection-keep-alive.enable).
	KeepAliveEnabled bool
	// KeepAliveTimeout is how long a kept-alive connection may wait for its
	// next request, and the timeout the Keep-Alive header announces in whole
	// seconds (mapreduce.shuffle.connection-keep-alive.timeout); default 5s.
	KeepAliveTimeout time.Duration
	// MaxConnections caps open connections; one more is answered 429 with
	// Retry-After and closed (mapreduce.shuffle.max.connections). Zero or
	// less means no cap.
	MaxConnections int
	// MaxSessionOpenFiles caps the map output files one request holds open
	// at once (mapreduce.shuffle.max.session-open-files); default 3.
	MaxSessionOpenFiles int
	// IndexCacheBytes bounds the memory of cached index records
	// (mapreduce.tasktracker.indexcache.mb × 1 MiB); default 10 MiB. The
	// least recently used entries go first; an index larger than the bound is
	// used once and not kept.
	IndexCacheBytes int64
	// MaxTransfersPerReducer caps the requests of one reducer (job and
	// reduce number) being answered at once; one more is answered 429 with
	// Retry-After, which the Fetcher takes as "back off", not as a failure.
	// Zero or less means no cap. Knit's own setting.
	MaxTransfersPerReducer int
	// MaxRequestLineBytes bounds the request line; default 4096 (Netty's).
	MaxRequestLineBytes int
	// MaxHeaderBytes bounds the request's header lines together; default
	// 8192 (Netty's). A longer request is answered 400 and closed.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds how long a new connection may take to send
	// its first request; default 60s.
	ReadHeaderTimeout time.Duration
	// WriteIdleTimeout drops a connection whose transfer makes no progress
	// for this long; default 120s.
	WriteIdleTimeout time.Duration
	// Logger receives the service's logs; default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with every zero field at its default.
func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = ":" + strconv.Itoa(DefaultPort)
	}
	if c.TLSBufferBytes <= 0 {
		c.TLSBufferBytes = DefaultTLSBufferBytes
	}
	if c.KeepAliveTimeout <= 0 {
		c.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	if c.MaxSessionOpenFiles <= 0 {
		c.MaxSessionOpenFiles = DefaultMaxSessionOpenFiles
	}
	if c.IndexCacheBytes <= 0 {
		c.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if c.MaxRequestLineBytes <= 0 {
		c.MaxRequestLineBytes = DefaultMaxRequestLineBytes
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.WriteIdleTimeout <= 0 {
		c.WriteIdleTimeout = DefaultWriteIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.LocalDirs = append([]string(nil), c.LocalDirs...)
	return c
}

// ConfigFromHadoop builds a Config from Hadoop properties; lookup returns a
// property's value and whether it is set (the caller's Hadoop configuration
// reader, after variable expansion). Unset properties keep their defaults.
// Numbers are read as Hadoop's Configuration.getInt reads them (trimmed,
// decimal or 0x hex), booleans as getBoolean (true/false in any case, else
// the default). mapreduce.shuffle.ssl.enabled sets SSLEnabled only: the
// caller supplies Config.TLS from its key material.
func ConfigFromHadoop(lookup func(name string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	getInt := func(name string, set func(int)) {
		v, ok := lookup(name)
		if !ok {
			return
		}
		n, err := hadoopconf.ParseJavaInt(strings.TrimSpace(v), 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		set(int(n))
	}
	getBool := func(name string, set func(bool)) {
		v, ok := lookup(name)
		if !ok {
			return
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			set(true)
		case "false":
			set(false)
		}
	}
	getInt(PropPort, func(n int) {
		if n < 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d out of range", PropPort, n))
			return
		}
		c.Address = ":" + strconv.Itoa(n)
	})
	if v, ok := lookup(PropLocalDirs); ok {
		// As the NodeManager reads it: getTrimmedStrings, file:// URIs as paths.
		for _, d := range hadoopconf.SplitTrimmed(v) {
			c.LocalDirs = append(c.LocalDirs, strings.TrimPrefix(d, "file://"))
		}
	}
	getBool(PropSSLEnabled, func(b bool) { c.SSLEnabled = b })
	getInt(PropSSLFileBufferSize, func(n int) { c.TLSBufferBytes = n })
	getBool(PropKeepAliveEnabled, func(b bool) { c.KeepAliveEnabled = b })
	getInt(PropKeepAliveTimeout, func(n int) { c.KeepAliveTimeout = time.Duration(n) * time.Second })
	getInt(PropMaxConnections, func(n int) { c.MaxConnections = n })
	getInt(PropMaxSessionOpenFiles, func(n int) { c.MaxSessionOpenFiles = n })
	getInt(PropIndexCacheMB, func(n int) { c.IndexCacheBytes = int64(n) << 20 })
	getInt(PropMaxTransfersPerReducer, func(n int) { c.MaxTransfersPerReducer = n })
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("shuffle: configuration: %w", err)
	}
	return c, nil
}
