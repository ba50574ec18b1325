package sparkshuffle

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// Defaults, Spark's where Spark has the setting.
const (
	// DefaultPort is spark.shuffle.service.port's default.
	DefaultPort = 7337
	// DefaultName is spark.shuffle.service.name's default, the aux service name.
	DefaultName = "spark_shuffle"
	// DefaultIdleTimeout is spark.shuffle.io.connectionTimeout's default
	// (spark.network.timeout, 120s): an idle connection is closed after it.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultIndexCacheBytes is spark.shuffle.service.index.cache.size's
	// default, 100 MiB.
	DefaultIndexCacheBytes = 100 << 20
	// DefaultMaxFrameBytes bounds a request frame; requests are small (a
	// fetch of thousands of blocks is well under 1 MiB).
	DefaultMaxFrameBytes = 16 << 20
	// DefaultMaxStreamsPerConn bounds the streams one connection holds open.
	DefaultMaxStreamsPerConn = 4096
	// DefaultWriteTimeout bounds how long one write may make no progress.
	DefaultWriteTimeout = 120 * time.Second
)

// Properties ConfigFromHadoop reads: the YARN service reads Spark's
// settings from the NodeManager's Hadoop configuration.
const (
	PropPort                 = "spark.shuffle.service.port"
	PropName                 = "spark.shuffle.service.name"
	PropAuthenticate         = "spark.authenticate"
	PropCryptoEnabled        = "spark.network.crypto.enabled"
	PropAuthEngineVersion    = "spark.network.crypto.authEngineVersion"
	PropSaslFallback         = "spark.network.crypto.saslFallback"
	PropCryptoCipher         = "spark.network.crypto.cipher"
	PropSaslServerEncrypt    = "spark.network.sasl.serverAlwaysEncrypt"
	PropMaxChunksTransferred = "spark.shuffle.maxChunksBeingTransferred"
	PropConnectionTimeout    = "spark.shuffle.io.connectionTimeout"
	PropIndexCacheSize       = "spark.shuffle.service.index.cache.size"
	PropLocalDirs            = "yarn.nodemanager.local-dirs"
	PropMaxStreamsPerConn    = "knit.spark.shuffle.max-streams-per-connection"
	PropMaxFrameBytes        = "knit.spark.shuffle.max-frame-bytes"
	ctrCipher                = "AES/CTR/NoPadding"
)

// Config holds a Service's settings. The zero value of each field but
// LocalDirs and StateFile means its default.
type Config struct {
	// Listener is the socket the service accepts on; the service owns it
	// from New on. When nil, New listens on Address.
	Listener net.Listener
	// Address is where New listens when Listener is nil; default ":7337".
	Address string
	// Name is the aux service name (spark.shuffle.service.name); default
	// "spark_shuffle".
	Name string
	// LocalDirs are the node's local dirs (yarn.nodemanager.local-dirs).
	// An executor may register only dirs inside its application's folder
	// <local dir>/usercache/<user>/appcache/<app> of one of them, and files
	// are opened beneath that folder only. Required.
	LocalDirs []string
	// StateFile keeps the registered executors across restarts (the YARN
	// service's recovery DB). Empty keeps them in memory only.
	StateFile string
	// Authenticate requires each connection to authenticate with its
	// application's secret (spark.authenticate), by SASL DIGEST-MD5 or, with
	// CryptoEnabled, the auth engine.
	Authenticate bool
	// CryptoEnabled authenticates with the auth engine and encrypts the
	// connection with AES/CTR after it (spark.network.crypto.enabled).
	CryptoEnabled bool
	// AuthEngineVersion is spark.network.crypto.authEngineVersion, 1 or 2;
	// it is not negotiated, so it must match the clients'. Default 1.
	AuthEngineVersion int
	// NoSaslFallback refuses SASL clients on a crypto server
	// (spark.network.crypto.saslFallback=false).
	NoSaslFallback bool
	// MaxChunksBeingTransferred caps the chunks being sent by the whole
	// service; a fetch beyond it closes its connection, as Spark does
	// (spark.shuffle.maxChunksBeingTransferred). Zero means no cap.
	MaxChunksBeingTransferred int64
	// MaxStreamsPerConn caps the streams a connection holds open; an
	// OpenBlocks or FetchShuffleBlocks beyond it is refused. Default 4096.
	MaxStreamsPerConn int
	// MaxFrameBytes bounds a request frame; a longer one closes the
	// connection. Default 16 MiB.
	MaxFrameBytes int64
	// IdleTimeout closes a connection that sent nothing for this long
	// (spark.shuffle.io.connectionTimeout); default 120s.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose write makes no progress for
	// this long; default 120s.
	WriteTimeout time.Duration
	// IndexCacheBytes bounds the cached index files
	// (spark.shuffle.service.index.cache.size); default 100 MiB.
	IndexCacheBytes int64
	// Logger receives the service's logs; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = ":" + strconv.Itoa(DefaultPort)
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.AuthEngineVersion == 0 {
		c.AuthEngineVersion = 1
	}
	if c.MaxStreamsPerConn <= 0 {
		c.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IndexCacheBytes <= 0 {
		c.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.LocalDirs = append([]string(nil), c.LocalDirs...)
	return c
}

// ConfigFromHadoop builds a Config from the node's Hadoop configuration, as
// YarnShuffleService reads Spark's settings from it; lookup returns a
// property's value and whether it is set. Settings Knit cannot honour (SASL
// encryption, AES/GCM) fail rather than serve clients that would then fail.
func ConfigFromHadoop(lookup func(name string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	getBool := func(name string, set func(bool)) {
		if v, ok := lookup(name); ok {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				set(true)
			case "false":
				set(false)
			default:
				errs = append(errs, fmt.Errorf("%s: not a boolean: %q", name, v))
			}
		}
	}
	getInt := func(name string, set func(int64)) {
		if v, ok := lookup(name); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: not a number: %q", name, v))
				return
			}
			set(n)
		}
	}
	getInt(PropPort, func(n int64) {
		if n < 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d out of range", PropPort, n))
			return
		}
		c.Address = ":" + strconv.FormatInt(n, 10)
	})
	if v, ok := lookup(PropName); ok {
		c.Name = strings.TrimSpace(v)
	}
	if v, ok := lookup(PropLocalDirs); ok {
		// As the NodeManager reads it: getTrimmedStrings, file:// URIs as paths.
		for _, d := range hadoopconf.SplitTrimmed(v) {
			c.LocalDirs = append(c.LocalDirs, strings.TrimPrefix(d, "file://"))
		}
	}
	getBool(PropAuthenticate, func(b bool) { c.Authenticate = b })
	getBool(PropCryptoEnabled, func(b bool) { c.CryptoEnabled = b })
	getBool(PropSaslFallback, func(b bool) { c.NoSaslFallback = !b })
	getBool(PropSaslServerEncrypt, func(b bool) {
		if b {
			errs = append(errs, fmt.Errorf("%s: SASL encryption is not supported; use %s", PropSaslServerEncrypt, PropCryptoEnabled))
		}
	})
	getInt(PropAuthEngineVersion, func(n int64) {
		if n != 1 && n != 2 {
			errs = append(errs, fmt.Errorf("%s: version %d is not 1 or 2", PropAuthEngineVersion, n))
			return
		}
		c.AuthEngineVersion = int(n)
	})
	if v, ok := lookup(PropCryptoCipher); ok && !strings.EqualFold(strings.TrimSpace(v), ctrCipher) {
		errs = append(errs, fmt.Errorf("%s: only %s is supported, not %q", PropCryptoCipher, ctrCipher, v))
	}
	getInt(PropMaxChunksTransferred, func(n int64) { c.MaxChunksBeingTransferred = n })
	getInt(PropMaxStreamsPerConn, func(n int64) { c.MaxStreamsPerConn = int(n) })
	getInt(PropMaxFrameBytes, func(n int64) { c.MaxFrameBytes = n })
	if v, ok := lookup(PropConnectionTimeout); ok {
		d, err := parseSparkTime(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", PropConnectionTimeout, err))
		}
		c.IdleTimeout = d
	}
	if v, ok := lookup(PropIndexCacheSize); ok {
		n, err := parseSparkBytes(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", PropIndexCacheSize, err))
		}
		c.IndexCacheBytes = n
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("sparkshuffle: configuration: %w", err)
	}
	return c, nil
}

// parseSparkTime reads a Spark time string (JavaUtils.timeStringAsSec): a
// number with an optional unit (ms, s, m/min, h, d); no unit means seconds.
func parseSparkTime(v string) (time.Duration, error) {
	n, unit, err := numberAndUnit(v)
	units := map[string]time.Duration{"": time.Second, "ms": time.Millisecond, "s": time.Second,
		"m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := units[unit]
	if err != nil || !ok {
		return 0, fmt.Errorf("not a time: %q", v)
	}
	return time.Duration(n) * u, nil
}

// parseSparkBytes reads a Spark size string (JavaUtils.byteStringAsBytes):
// a number with an optional unit b, k/kb, m/mb, g/gb; no unit means bytes.
func parseSparkBytes(v string) (int64, error) {
	n, unit, err := numberAndUnit(v)
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "m": 20, "mb": 20, "g": 30, "gb": 30}
	sh, ok := shift[unit]
	if err != nil || !ok {
		return 0, fmt.Errorf("not a size: %q", v)
	}
	return n << sh, nil
}

// numberAndUnit splits "120s" into 120 and "s", lower-cased and trimmed.
func numberAndUnit(v string) (int64, string, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], s[i:]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, unit, err
}
