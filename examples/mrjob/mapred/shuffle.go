package mapred

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/writable"
)

// Names MapReduce gives the shuffle's pieces.
const (
	// ServiceName is the shuffle's aux-service name: the key of
	// service_data and services_meta_data.
	ServiceName = "mapreduce_shuffle"
	// DefaultPort is mapreduce.shuffle.port's default.
	DefaultPort = 13562
	// ShuffleSecretAlias is the Credentials secret key holding the
	// shuffle secret (TokenCache.SHUFFLE_TOKEN).
	ShuffleSecretAlias = "MapReduceShuffleToken"
	// JobTokenAlias is the Credentials alias of the job token
	// (TokenCache.JOB_TOKEN).
	JobTokenAlias = "JobToken"
	// JobTokenKind is the job token's kind (JobTokenIdentifier.KIND_NAME).
	JobTokenKind = "mapreduce.job"
	// SecretLength is the shuffle secret's length: JobSubmitter's
	// KeyGenerator("HmacSHA1").init(64).
	SecretLength = 8

	// The HTTP headers of the exchange (SecureShuffleUtils, ShuffleHeader).
	HeaderURLHash   = "UrlHash"
	HeaderReplyHash = "ReplyHash"
	HeaderName      = "name"
	HeaderVersion   = "version"
	// The values of the name and version headers both sides send.
	ShuffleName    = "mapreduce"
	ShuffleVersion = "1.0.0"
	// MapOutputPath is the shuffle's URL path.
	MapOutputPath = "/mapOutput"
	// MaxIDLength bounds a ShuffleHeader's map id (ShuffleHeader.MAX_ID_LENGTH).
	MaxIDLength = 1000
)

// JobToken is the job's token as the AM sends it as the shuffle's service
// data: identifier Text(job id) (JobTokenIdentifier), password the shuffle
// secret, kind "mapreduce.job", service the job id.
func JobToken(job string, secret []byte) token.Token {
	return token.Token{
		Identifier: writable.AppendText(nil, job),
		Password:   secret,
		Kind:       JobTokenKind,
		Service:    job,
	}
}

// ServiceData is ShuffleHandler.serializeServiceData: the Writable form of
// JobToken(job, secret), the bytes of service_data["mapreduce_shuffle"].
func ServiceData(job string, secret []byte) []byte {
	return JobToken(job, secret).AppendWritable(nil)
}

// ParseServiceData reads service data as ShuffleHandler.deserializeServiceData
// does, returning the job id of its identifier and the secret.
func ParseServiceData(b []byte) (job string, secret []byte, err error) {
	r := writable.NewBytesReader(b, writable.Limits{})
	t, err := token.ReadToken(r)
	if err != nil {
		return "", nil, fmt.Errorf("mapred: service data: %w", err)
	}
	if r.Offset() != int64(len(b)) {
		return "", nil, fmt.Errorf("mapred: service data: %d bytes after the token", int64(len(b))-r.Offset())
	}
	if job, err = writable.NewBytesReader(t.Identifier, writable.Limits{}).ReadText(); err != nil {
		return "", nil, fmt.Errorf("mapred: service data identifier: %w", err)
	}
	return job, t.Password, nil
}

// MarshalPort is ShuffleHandler.serializeMetaData: the port as a 4-byte
// big-endian int.
func MarshalPort(port int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(port)) }

// ParsePort reads the shuffle's services_meta_data entry as the MR AM does
// (ShuffleHandler.deserializeMetaData); a missing or short entry is an error
// with the AM's words.
func ParsePort(meta []byte) (int, error) {
	if len(meta) != 4 {
		return 0, errors.New("Invalid shuffle port number -1")
	}
	port := int(int32(binary.BigEndian.Uint32(meta)))
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("Invalid shuffle port number %d", port)
	}
	return port, nil
}

// MapOutputURL is the URL a reducer fetches its partition of maps from
// host:port with (ShuffleSchedulerImpl.getBaseURI plus the Fetcher's
// comma-joined map list).
func MapOutputURL(host string, port int, job string, reduce int, maps []string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + MapOutputPath +
		"?job=" + job + "&reduce=" + strconv.Itoa(reduce) + "&map=" + strings.Join(maps, ",")
}

// HashMessage is SecureShuffleUtils.buildMsgFrom(URL): the port, the path,
// "?" and the raw query. The port must be the shuffle's own, as the server
// hashes with its configured port.
func HashMessage(u *url.URL) (string, error) {
	port := u.Port()
	if port == "" {
		return "", fmt.Errorf("mapred: shuffle URL %s has no port", u)
	}
	return port + u.EscapedPath() + "?" + u.RawQuery, nil
}

// Hash is SecureShuffleUtils.generateHash: base64 of HMAC-SHA1 under secret.
func Hash(secret []byte, msg string) string {
	m := hmac.New(sha1.New, secret)
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// URLHash is the UrlHash header of a request for u.
func URLHash(secret []byte, u *url.URL) (string, error) {
	msg, err := HashMessage(u)
	if err != nil {
		return "", err
	}
	return Hash(secret, msg), nil
}

// ReplyHash is the ReplyHash header the shuffle answers a request whose
// UrlHash was urlHash: the hash of the header's text.
func ReplyHash(secret []byte, urlHash string) string { return Hash(secret, urlHash) }

// VerifyHash reports whether hash is the hash of msg under secret, in
// constant time (SecureShuffleUtils.verifyHash).
func VerifyHash(secret []byte, hash, msg string) bool {
	return hmac.Equal([]byte(hash), []byte(Hash(secret, msg)))
}

// ShuffleHeader precedes each map's segment in a shuffle response
// (ShuffleHeader): the map attempt, the bytes that follow (compressed
// length, the index's partLength), their raw length and the partition.
type ShuffleHeader struct {
	MapID            string
	CompressedLength int64
	RawLength        int64
	ForReduce        int32
}

// AppendTo appends h as ShuffleHeader.write does.
func (h ShuffleHeader) AppendTo(dst []byte) []byte {
	dst = writable.AppendText(dst, h.MapID)
	dst = writable.AppendVLong(dst, h.CompressedLength)
	dst = writable.AppendVLong(dst, h.RawLength)
	return writable.AppendVInt(dst, h.ForReduce)
}

// ReadShuffleHeader reads a ShuffleHeader as ShuffleHeader.readFields
// does: the map id at most MaxIDLength bytes (readStringSafely), and the
// lengths not negative (the Fetcher's check).
func ReadShuffleHeader(r *writable.Reader) (ShuffleHeader, error) {
	var h ShuffleHeader
	n, err := r.ReadVInt()
	if err != nil {
		return h, fmt.Errorf("mapred: shuffle header map id length: %w", err)
	}
	if n < 0 || n > MaxIDLength {
		return h, fmt.Errorf("mapred: shuffle header map id of %d bytes, limit %d", n, MaxIDLength)
	}
	id, err := r.ReadRaw(int(n))
	if err != nil {
		return h, fmt.Errorf("mapred: shuffle header map id: %w", err)
	}
	h.MapID = string(id)
	if h.CompressedLength, err = r.ReadVLong(); err != nil {
		return h, fmt.Errorf("mapred: shuffle header compressed length: %w", err)
	}
	if h.RawLength, err = r.ReadVLong(); err != nil {
		return h, fmt.Errorf("mapred: shuffle header raw length: %w", err)
	}
	if h.ForReduce, err = r.ReadVInt(); err != nil {
		return h, fmt.Errorf("mapred: shuffle header reduce: %w", err)
	}
	if h.CompressedLength < 0 || h.RawLength < 0 {
		return h, fmt.Errorf("mapred: invalid lengths in map output header: id: %s len: %d, decomp len: %d", h.MapID, h.CompressedLength, h.RawLength)
	}
	return h, nil
}

// ResponseMap is one map's part of a shuffle response.
type ResponseMap struct {
	Header  ShuffleHeader
	Segment []byte
}

// ReadResponse reads a shuffle response body of n maps: each ShuffleHeader
// and its segment. A segment longer than maxSegment is an error before
// anything is allocated for it.
func ReadResponse(body io.Reader, n int, maxSegment int64) ([]ResponseMap, error) {
	r := writable.NewReader(body, writable.Limits{MaxLength: MaxIDLength, MaxTotal: 1 << 62})
	out := make([]ResponseMap, 0, n)
	for range n {
		h, err := ReadShuffleHeader(r)
		if err != nil {
			return out, err
		}
		if h.CompressedLength > maxSegment {
			return out, fmt.Errorf("mapred: map %s sends %d bytes, limit %d", h.MapID, h.CompressedLength, maxSegment)
		}
		seg, err := r.ReadRaw(int(h.CompressedLength))
		if err != nil {
			return out, fmt.Errorf("mapred: segment of map %s: %w", h.MapID, err)
		}
		out = append(out, ResponseMap{Header: h, Segment: seg})
	}
	return out, nil
}
