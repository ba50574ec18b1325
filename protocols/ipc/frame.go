package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Wire constants of IPC version 9 (Hadoop's RpcConstants and Server.java).
const (
	preambleMagic  = "hrpc"
	preambleLen    = 7
	currentVersion = 9

	authProtocolNone = 0x00
	authProtocolSASL = 0xDF // -33 as a signed byte

	callIDAuthFailed        = -1
	callIDConnectionContext = -3
	callIDPing              = -4
	callIDSASL              = -33

	// DefaultMaxDataLength is ipc.maximum.data.length: the largest request
	// frame a server accepts and the largest response a client accepts.
	DefaultMaxDataLength = 128 << 20

	// ProtocolVersion is the clientProtocolVersion of every YARN protocol.
	ProtocolVersion = 1
)

// httpGetResponse is what Hadoop answers when a browser or curl hits an IPC
// port, so the mistake explains itself.
const httpGetResponse = "HTTP/1.1 404 Not Found\r\n" +
	"Content-type: text/plain\r\n\r\n" +
	"It looks like you are making an HTTP request to a Hadoop IPC port. " +
	"This is not the correct port for the web interface on this daemon.\r\n"

var (
	errFrameTooLong   = errors.New("frame longer than the maximum data length")
	errFrameNegative  = errors.New("negative frame length")
	errTruncated      = errors.New("truncated delimited message")
	errVarintTooLarge = errors.New("delimited length does not fit in the frame")
)

// connBufSize is the size of each connection's read and write buffers, at
// both ends. Calls are small and a larger frame bypasses the buffers, so
// 8 KiB batches as well as 32 KiB did in test/bench while an idle connection
// holds under a third of the memory (about 44 KiB for both ends, not 140).
const connBufSize = 8 << 10

// smallFrame is the size up to which a frame buffer is allocated at once;
// larger frames grow as their bytes arrive, so a peer that announces a huge
// frame and sends nothing costs no memory.
const smallFrame = 64 << 10

// readFrame reads one length-prefixed frame. buf is reused when it is big
// enough; the returned slice aliases it.
func readFrame(r *bufio.Reader, maxLen int, buf []byte) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(lenBuf[:]))
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d", errFrameNegative, n)
	case int(n) > maxLen:
		return nil, fmt.Errorf("%w: %d > %d", errFrameTooLong, n, maxLen)
	case int(n) <= smallFrame || int(n) <= cap(buf):
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, noEOF(err)
		}
		return buf, nil
	}
	var b bytes.Buffer
	b.Grow(smallFrame)
	if _, err := io.CopyN(&b, r, int64(n)); err != nil {
		return nil, noEOF(err)
	}
	return b.Bytes(), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// nextDelimited splits one varint-delimited message off the front of b.
func nextDelimited(b []byte) (msg, rest []byte, err error) {
	n, l := protowire.ConsumeVarint(b)
	if l < 0 {
		return nil, nil, errTruncated
	}
	if n > uint64(len(b)-l) {
		return nil, nil, errVarintTooLarge
	}
	return b[l : l+int(n)], b[l+int(n):], nil
}

// unmarshalDelimited decodes the next delimited message of b into m.
func unmarshalDelimited(b []byte, m proto.Message) (rest []byte, err error) {
	msg, rest, err := nextDelimited(b)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return nil, err
	}
	return rest, nil
}

var sizeOpts = proto.MarshalOptions{UseCachedSize: true}

// appendFrame appends a frame holding msgs, each varint-delimited, to dst.
// A nil message is skipped, which is how an error response carries only its
// header.
func appendFrame(dst []byte, msgs ...proto.Message) ([]byte, error) {
	return appendFrameEncoded(dst, nil, msgs...)
}

// appendFrameEncoded is appendFrame with a last message given as its
// encoding, which goes in as it is unless it is nil: a call or an answer
// forwarded without decoding it.
func appendFrameEncoded(dst, encoded []byte, msgs ...proto.Message) ([]byte, error) {
	tail := -1
	if encoded != nil {
		tail = len(encoded)
	}
	dst, err := appendFrameHead(dst, tail, msgs...)
	if err != nil {
		return dst, err
	}
	return append(dst, encoded...), nil
}

// appendFrameHead is appendFrameEncoded without the last message's own
// bytes, of which it is given the length (tail; -1 for none): the frame's
// length counts them and its last delimiter announces them, so that the
// caller can write them after the head without copying them.
func appendFrameHead(dst []byte, tail int, msgs ...proto.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for _, m := range msgs {
		if m == nil {
			continue
		}
		size := proto.Size(m)
		dst = protowire.AppendVarint(dst, uint64(size))
		var err error
		if dst, err = sizeOpts.MarshalAppend(dst, m); err != nil {
			return dst[:start], err
		}
	}
	if tail >= 0 {
		dst = protowire.AppendVarint(dst, uint64(tail))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4+max(tail, 0)))
	return dst, nil
}
