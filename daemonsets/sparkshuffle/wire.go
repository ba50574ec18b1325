package sparkshuffle

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Message types of Spark's transport protocol (network-common
// Message.Type), the byte after a frame's length.
const (
	typeChunkFetchRequest      byte = 0
	typeChunkFetchSuccess      byte = 1
	typeChunkFetchFailure      byte = 2
	typeRPCRequest             byte = 3
	typeRPCResponse            byte = 4
	typeRPCFailure             byte = 5
	typeStreamRequest          byte = 6
	typeStreamResponse         byte = 7
	typeStreamFailure          byte = 8
	typeOneWayMessage          byte = 9
	typeUploadStream           byte = 10
	typeMergedBlockMetaRequest byte = 11
	typeMergedBlockMetaSuccess byte = 12
)

// frameHeaderLen is the frame length (int64) plus the message type byte.
const frameHeaderLen = 9

// errFrame marks a frame the connection cannot go on after: Spark's
// TransportFrameDecoder and MessageDecoder close the channel on them.
var errFrame = errors.New("sparkshuffle: bad frame")

// readFrame reads one frame: its message type and the bytes after it. A
// length that is not positive, at or beyond 2^31 (Spark's MAX_FRAME_SIZE) or
// beyond max fails with errFrame. The payload buffer grows with the bytes
// that arrive, so a large announced length costs nothing until it is sent.
func readFrame(r *bufio.Reader, max int64) (byte, []byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	size := int64(binary.BigEndian.Uint64(hdr[:])) - 8
	if size <= 0 || size >= math.MaxInt32 || size > max {
		return 0, nil, fmt.Errorf("%w: frame length %d", errFrame, size+8)
	}
	typ, err := r.ReadByte()
	if err != nil {
		return 0, nil, unexpectedEOF(err)
	}
	n := size - 1
	payload := make([]byte, 0, min(n, 64<<10))
	for int64(len(payload)) < n {
		chunk := min(n-int64(len(payload)), 1<<20)
		start := len(payload)
		payload = append(payload, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, payload[start:]); err != nil {
			return 0, nil, unexpectedEOF(err)
		}
	}
	return typ, payload, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// request is one decoded client→server transport message.
type request struct {
	typ byte
	// ChunkFetchRequest.
	streamID   int64
	chunkIndex int32
	// RpcRequest, UploadStream, MergedBlockMetaRequest.
	requestID int64
	// RpcRequest and OneWayMessage body; UploadStream meta.
	body []byte
	// StreamRequest, StreamResponse and StreamFailure.
	streamName string
	// MergedBlockMetaRequest.
	appID                               string
	shuffleID, shuffleMergeID, reduceID int32
}

// decodeRequest decodes the fields of a transport message of type typ, as
// MessageDecoder does. Responses a client sends are decoded too and later
// ignored, as the server's TransportResponseHandler ignores answers to RPCs
// it never sent. An unknown type, or fields that do not fit, fail with
// errFrame: Spark closes the channel.
func decodeRequest(typ byte, p []byte) (request, error) {
	r := &javaBuf{b: p}
	q := request{typ: typ}
	var err error
	switch typ {
	case typeChunkFetchRequest, typeChunkFetchSuccess:
		q.streamID, err = r.long()
		if err == nil {
			q.chunkIndex, err = r.int()
		}
	case typeChunkFetchFailure:
		if q.streamID, err = r.long(); err == nil {
			if q.chunkIndex, err = r.int(); err == nil {
				_, err = r.str()
			}
		}
	case typeRPCRequest, typeRPCResponse:
		if q.requestID, err = r.long(); err == nil {
			if _, err = r.int(); err == nil { // body size: the body is the frame's rest
				q.body = r.rest()
			}
		}
	case typeRPCFailure:
		if q.requestID, err = r.long(); err == nil {
			_, err = r.str()
		}
	case typeStreamRequest:
		q.streamName, err = r.str()
	case typeStreamResponse:
		if q.streamName, err = r.str(); err == nil {
			_, err = r.long()
		}
	case typeStreamFailure:
		if q.streamName, err = r.str(); err == nil {
			_, err = r.str()
		}
	case typeOneWayMessage:
		if _, err = r.int(); err == nil {
			q.body = r.rest()
		}
	case typeUploadStream:
		if q.requestID, err = r.long(); err == nil {
			var n int32
			if n, err = r.int(); err == nil {
				if q.body, err = r.bytes(n); err == nil {
					_, err = r.long()
				}
			}
		}
	case typeMergedBlockMetaRequest:
		if q.requestID, err = r.long(); err == nil {
			if q.appID, err = r.str(); err == nil {
				if q.shuffleID, err = r.int(); err == nil {
					if q.shuffleMergeID, err = r.int(); err == nil {
						q.reduceID, err = r.int()
					}
				}
			}
		}
	case typeMergedBlockMetaSuccess:
		if q.requestID, err = r.long(); err == nil {
			_, err = r.int()
		}
	default:
		return request{}, fmt.Errorf("%w: unknown message type %d", errFrame, int8(typ))
	}
	if err != nil {
		return request{}, fmt.Errorf("%w: message type %d: %w", errFrame, typ, err)
	}
	return q, nil
}

// Frame builders for server→client messages. Each returns the whole frame
// but for a ChunkFetchSuccess's or StreamResponse's body, which follows.

func appendHeader(b []byte, frameLen int64, typ byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(frameLen))
	return append(b, typ)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func rpcResponseFrame(requestID int64, body []byte) []byte {
	b := make([]byte, 0, frameHeaderLen+12+len(body))
	b = appendHeader(b, int64(frameHeaderLen+12+len(body)), typeRPCResponse)
	b = binary.BigEndian.AppendUint64(b, uint64(requestID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

func rpcFailureFrame(requestID int64, msg string) []byte {
	b := make([]byte, 0, frameHeaderLen+12+len(msg))
	b = appendHeader(b, int64(frameHeaderLen+12+len(msg)), typeRPCFailure)
	b = binary.BigEndian.AppendUint64(b, uint64(requestID))
	return appendString(b, msg)
}

// chunkSuccessHeader is a ChunkFetchSuccess frame without its n body bytes.
func chunkSuccessHeader(streamID int64, chunk int32, n int64) []byte {
	b := make([]byte, 0, frameHeaderLen+12)
	b = appendHeader(b, frameHeaderLen+12+n, typeChunkFetchSuccess)
	b = binary.BigEndian.AppendUint64(b, uint64(streamID))
	return binary.BigEndian.AppendUint32(b, uint32(chunk))
}

func chunkFailureFrame(streamID int64, chunk int32, msg string) []byte {
	b := make([]byte, 0, frameHeaderLen+16+len(msg))
	b = appendHeader(b, int64(frameHeaderLen+16+len(msg)), typeChunkFetchFailure)
	b = binary.BigEndian.AppendUint64(b, uint64(streamID))
	b = binary.BigEndian.AppendUint32(b, uint32(chunk))
	return appendString(b, msg)
}

// streamResponseHeader is a StreamResponse frame; its n body bytes follow
// outside the frame (isBodyInFrame is false for it).
func streamResponseHeader(name string, n int64) []byte {
	b := make([]byte, 0, frameHeaderLen+12+len(name))
	b = appendHeader(b, int64(frameHeaderLen+12+len(name)), typeStreamResponse)
	b = appendString(b, name)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func streamFailureFrame(name, msg string) []byte {
	b := make([]byte, 0, frameHeaderLen+8+len(name)+len(msg))
	b = appendHeader(b, int64(frameHeaderLen+8+len(name)+len(msg)), typeStreamFailure)
	b = appendString(b, name)
	return appendString(b, msg)
}

// Frame builders for client→server messages (Client, tests).

func rpcRequestFrame(requestID int64, body []byte) []byte {
	b := rpcResponseFrame(requestID, body)
	b[8] = typeRPCRequest
	return b
}

func chunkFetchRequestFrame(streamID int64, chunk int32) []byte {
	b := make([]byte, 0, frameHeaderLen+12)
	b = appendHeader(b, frameHeaderLen+12, typeChunkFetchRequest)
	b = binary.BigEndian.AppendUint64(b, uint64(streamID))
	return binary.BigEndian.AppendUint32(b, uint32(chunk))
}

func streamRequestFrame(name string) []byte {
	b := make([]byte, 0, frameHeaderLen+4+len(name))
	b = appendHeader(b, int64(frameHeaderLen+4+len(name)), typeStreamRequest)
	return appendString(b, name)
}

// javaBuf reads big-endian fields as Netty's ByteBuf does for Spark's
// decoders, failing with the exception text Java gives: a read past the end
// is Netty's IndexOutOfBoundsException, a negative length Java's
// NegativeArraySizeException.
type javaBuf struct {
	b   []byte
	pos int
}

// need fails unless n more bytes can be read.
func (r *javaBuf) need(n int) error {
	if n <= len(r.b)-r.pos {
		return nil
	}
	if len(r.b) == 0 {
		// Unpooled.wrappedBuffer of an empty buffer is EMPTY_BUFFER, whose
		// reads throw a bare IndexOutOfBoundsException.
		return &JavaError{Class: "java.lang.IndexOutOfBoundsException"}
	}
	return &JavaError{Class: "java.lang.IndexOutOfBoundsException", Message: fmt.Sprintf(
		"readerIndex(%d) + length(%d) exceeds writerIndex(%d): UnpooledUnsafeDirectByteBuf(ridx: %d, widx: %d, cap: %d/%d)",
		r.pos, n, len(r.b), r.pos, len(r.b), len(r.b), len(r.b))}
}

func (r *javaBuf) byte() (byte, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	r.pos++
	return r.b[r.pos-1], nil
}

func (r *javaBuf) int() (int32, error) {
	if err := r.need(4); err != nil {
		return 0, err
	}
	r.pos += 4
	return int32(binary.BigEndian.Uint32(r.b[r.pos-4:])), nil
}

func (r *javaBuf) long() (int64, error) {
	if err := r.need(8); err != nil {
		return 0, err
	}
	r.pos += 8
	return int64(binary.BigEndian.Uint64(r.b[r.pos-8:])), nil
}

func (r *javaBuf) bool() (bool, error) {
	b, err := r.byte()
	return b != 0, err
}

func negativeSize(n int32) error {
	return &JavaError{Class: "java.lang.NegativeArraySizeException", Message: fmt.Sprint(n)}
}

func (r *javaBuf) bytes(n int32) ([]byte, error) {
	if n < 0 {
		return nil, negativeSize(n)
	}
	if err := r.need(int(n)); err != nil {
		return nil, err
	}
	r.pos += int(n)
	return r.b[r.pos-int(n) : r.pos : r.pos], nil
}

// str reads Encoders.Strings: an int length and UTF-8 bytes, malformed
// sequences replaced as Java's decoder replaces them.
func (r *javaBuf) str() (string, error) {
	n, err := r.int()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}

// count reads an array length; elements are then read one by one, so a
// huge count fails at the first missing element rather than allocating.
func (r *javaBuf) count() (int32, error) {
	n, err := r.int()
	if err == nil && n < 0 {
		err = negativeSize(n)
	}
	return n, err
}

func (r *javaBuf) strs() ([]string, error) {
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	var out []string
	for range n {
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *javaBuf) ints() ([]int32, error) {
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	var out []int32
	for range n {
		v, err := r.int()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *javaBuf) longs() ([]int64, error) {
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	var out []int64
	for range n {
		v, err := r.long()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *javaBuf) rest() []byte {
	b := r.b[r.pos:len(r.b):len(r.b)]
	r.pos = len(r.b)
	return b
}

// Encoders for the same field kinds.

func appendStrings(b []byte, ss []string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendInts(b []byte, vs []int32) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(vs)))
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func appendLongs(b []byte, vs []int64) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(vs)))
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func appendBytes(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}
