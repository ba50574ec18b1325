package localizer

import (
	"encoding/binary"
	"fmt"
	"net"

	"google.golang.org/protobuf/encoding/protowire"
)

// github.com/colinmarc/hdfs (v2.4.0) allocates every length it reads
// before it reads the bytes: a namenode's 4-byte RPC response length (up
// to 4 GiB, readRPCPacket), a datanode's varint message length (up to
// 32 GiB, readPrefixedMessage) and a packet's checksum buffer, sized from
// the packet header's data length and the block's bytesPerChecksum (up to
// 8 GiB, or a panic for a negative length; blockReadStream.startPacket).
// It bounds none of them. So a broken or hostile namenode or datanode
// could make knit-node, which localizes for every container of its node,
// allocate gigabytes. The connections Knit dials for the client are
// therefore guarded: a guard follows the peer's bytes with the client's
// own framing and fails the read that would complete a length over the
// bound, before the client sees that length.

const (
	// defaultMaxResponseLength is ipc.maximum.response.length's default,
	// 128 MiB: the largest namenode response Hadoop's own client accepts
	// (Client.IpcStreams.readResponse), so Knit refuses no response a Java
	// client would read.
	defaultMaxResponseLength = 128 << 20
	// maxPacketSize bounds a block packet's payload and header together:
	// Hadoop's PacketReceiver.MAX_PACKET_SIZE, the most a DFSClient
	// buffers for one packet (datanodes send 64 KiB).
	maxPacketSize = 16 << 20
	// maxDatanodeMessage bounds a datanode's varint-prefixed messages, a
	// BlockOpResponseProto or a SASL DataTransferEncryptorMessageProto.
	// Datanodes write them in well under a KiB (a status, a short message,
	// checksum settings, a DIGEST-MD5 challenge); Hadoop's client only has
	// protobuf's 64 MiB default. 1 MiB leaves a wide margin and keeps a
	// hostile one cheap.
	maxDatanodeMessage = 1 << 20
)

// guard follows the bytes of one connection of the HDFS client.
type guard interface {
	// sent sees what the client wrote.
	sent(p []byte)
	// received sees what the peer sent, before the client does. An error
	// fails the client's read; the stream is not read further.
	received(p []byte) error
}

// guardedConn is a connection whose reads pass its guard first. It is
// read by one goroutine at a time, as the client reads one response at a
// time.
type guardedConn struct {
	net.Conn
	g guard
	// err is the guard's refusal, which every later read returns.
	err error
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if gerr := c.g.received(p[:n]); gerr != nil {
		// None of p is returned: the bytes complete the refused length.
		// The peer is broken, so its connection is of no further use.
		c.err = gerr
		_ = c.Conn.Close()
		return 0, gerr
	}
	return n, err
}

func (c *guardedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.g.sent(p[:n])
	return n, err
}

// streamError is a namenode's or datanode's stream that the guard refuses.
type streamError struct {
	peer string // "namenode host:port" or "datanode host:port"
	msg  string
}

func (e *streamError) Error() string { return e.peer + ": " + e.msg }

func tooLong(peer, what string, n, limit uint64) error {
	return &streamError{peer, fmt.Sprintf("%s of %d bytes is over the %d-byte limit", what, n, limit)}
}

// rpcFrames guards a namenode connection. On a SIMPLE connection the
// client writes its preamble ("hrpc", version, service class, auth NONE)
// and connection context without waiting for an answer, so everything the
// namenode sends is responses: a 4-byte big-endian length, then that many
// bytes (RpcResponseHeaderProto and the response, each varint-prefixed).
// A Kerberos (SASL) connection frames its exchange the same way; the
// localizer refuses Kerberos anyway.
type rpcFrames struct {
	peer  string
	limit uint64
	head  [4]byte
	headN int
	// left is how much of the current response's body is still to come.
	left uint64
}

var _ guard = (*rpcFrames)(nil)

func newRPCFrames(addr string, limit uint64) *rpcFrames {
	return &rpcFrames{peer: "namenode " + addr, limit: limit}
}

func (f *rpcFrames) sent([]byte) {}

func (f *rpcFrames) received(p []byte) error {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		k := copy(f.head[f.headN:], p)
		f.headN += k
		p = p[k:]
		if f.headN < len(f.head) {
			return nil
		}
		f.headN = 0
		n := uint64(binary.BigEndian.Uint32(f.head[:]))
		if n > f.limit {
			return tooLong(f.peer, "RPC response", n, f.limit)
		}
		f.left = n
	}
	return nil
}

// dtState is where a datanode's stream is.
type dtState int

const (
	// dtRequest: the client has not written its first 3 bytes, which
	// tell a READ_BLOCK request from a SASL handshake.
	dtRequest dtState = iota + 1
	// dtOtherOp: the client asked for something other than READ_BLOCK,
	// whose answer the guard does not know.
	dtOtherOp
	dtSASLLength
	dtSASLMessage
	dtOpLength
	dtOpMessage
	dtPacketLengths
	dtPacketHeader
	dtPacketData
	// dtDone: the client reads no more that the guard follows.
	dtDone
)

// The first 3 bytes the client writes to a datanode.
const (
	// readBlockRequest is DataTransferProtocol version 28 and READ_BLOCK.
	readBlockRequest = "\x00\x1c\x51"
	// saslMagic begins a SASL data transfer handshake (0xDEADBEEF).
	saslMagic = "\xde\xad\xbe"
)

// dataTransfer guards a datanode connection the client reads a block from
// (READ_BLOCK): a varint-prefixed BlockOpResponseProto, then packets,
// each a 4-byte payload length, a 2-byte header length, a
// PacketHeaderProto, the chunks' checksums and the data, until the packet
// marked last. It checks what Hadoop's PacketReceiver checks (the payload
// and header within MAX_PACKET_SIZE), and that the payload is exactly the
// checksums and data the client will read for the header's data length,
// so that the checksum buffer the client sizes from that data length is
// within the packet too.
//
// With data transfer protection (dfs.data.transfer.protection, or a
// namenode asking for encrypted transfers) the client first runs a SASL
// handshake of two varint-prefixed messages, which are bounded the same
// way. What follows depends on the negotiated quality of protection and
// may be wrapped or encrypted by the client's own SASL layer, which reads
// from this connection: the guard passes it through unchecked.
type dataTransfer struct {
	peer  string
	state dtState
	// req is the client's first bytes, until it tells the request.
	req []byte
	// head collects a varint length or a packet's two lengths.
	head []byte
	// msg collects a message, msgLen bytes long; msgLeft counts down a
	// SASL message's bytes and a packet's checksums and data, which the
	// guard only counts.
	msg     []byte
	msgLen  uint64
	msgLeft uint64
	// saslLeft counts the SASL handshake's messages still to come.
	saslLeft int
	// How the client sizes each packet's checksums, from the
	// BlockOpResponseProto.
	bytesPerChecksum uint64
	checksumSize     uint64
	// The current packet's lengths, and whether it is the block's last.
	payloadLen uint64
	headerLen  uint64
	last       bool
}

var _ guard = (*dataTransfer)(nil)

func newDataTransfer(addr string) *dataTransfer {
	return &dataTransfer{peer: "datanode " + addr, state: dtRequest}
}

func (d *dataTransfer) sent(p []byte) {
	if d.state != dtRequest {
		return
	}
	d.req = append(d.req, p[:min(len(p), 3-len(d.req))]...)
	if len(d.req) < 3 {
		return
	}
	switch string(d.req) {
	case readBlockRequest:
		d.state = dtOpLength
	case saslMagic:
		d.state, d.saslLeft = dtSASLLength, 2
	default:
		d.state = dtOtherOp
	}
	d.req = nil
}

func (d *dataTransfer) received(p []byte) error {
	for len(p) > 0 {
		var err error
		switch d.state {
		case dtRequest:
			return d.fail("sent before the client's request")
		case dtOtherOp:
			return d.fail("answers a request other than READ_BLOCK, which Knit's localizer does not make")
		case dtDone:
			return nil
		case dtSASLLength, dtOpLength:
			p, err = d.length(p)
		case dtSASLMessage, dtPacketData:
			n := min(uint64(len(p)), d.msgLeft)
			d.msgLeft -= n
			p = p[n:]
			if d.msgLeft == 0 {
				d.next()
			}
		case dtOpMessage, dtPacketHeader:
			n := min(uint64(len(p)), d.msgLen-uint64(len(d.msg)))
			d.msg = append(d.msg, p[:n]...)
			p = p[n:]
			if uint64(len(d.msg)) == d.msgLen {
				err = d.message()
			}
		case dtPacketLengths:
			n := min(len(p), 6-len(d.head))
			d.head = append(d.head, p[:n]...)
			p = p[n:]
			if len(d.head) == 6 {
				err = d.packetLengths()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// length reads a message's varint length, which the client reads from at
// most 5 bytes (binary.MaxVarintLen32).
func (d *dataTransfer) length(p []byte) ([]byte, error) {
	for len(p) > 0 {
		b := p[0]
		p = p[1:]
		d.head = append(d.head, b)
		if b < 0x80 {
			break
		}
		if len(d.head) == binary.MaxVarintLen32 {
			return p, d.fail("sent a message length longer than 5 bytes")
		}
	}
	if d.head[len(d.head)-1] >= 0x80 {
		return p, nil
	}
	n, _ := binary.Uvarint(d.head)
	d.head = d.head[:0]
	what := "BlockOpResponseProto"
	if d.state == dtSASLLength {
		what = "SASL message"
	}
	if n > maxDatanodeMessage {
		return p, tooLong(d.peer, what, n, maxDatanodeMessage)
	}
	if d.state == dtSASLLength {
		d.state, d.msgLeft = dtSASLMessage, n
		if n == 0 {
			d.next()
		}
		return p, nil
	}
	d.state, d.msgLen, d.msg = dtOpMessage, n, nil
	if n == 0 {
		return p, d.message()
	}
	return p, nil
}

// next moves past a SASL message or a packet's data.
func (d *dataTransfer) next() {
	switch d.state {
	case dtSASLMessage:
		d.saslLeft--
		if d.saslLeft > 0 {
			d.state = dtSASLLength
			return
		}
		d.state = dtDone
	case dtPacketData:
		d.state = dtPacketLengths
		if d.last {
			// The client stops after the last packet's data.
			d.state = dtDone
		}
	}
}

// message handles a whole BlockOpResponseProto or PacketHeaderProto.
func (d *dataTransfer) message() error {
	b := d.msg
	d.msg = nil
	if d.state == dtOpMessage {
		return d.opResponse(b)
	}
	return d.packetHeader(b)
}

// opResponse reads what the client reads from a BlockOpResponseProto to
// size packets, decoded as protobuf-go decodes it: the last value of a
// scalar wins, repeats of a message field merge, enums are open.
func (d *dataTransfer) opResponse(b []byte) error {
	var status int32
	var info []byte
	err := eachField(b, func(f field) {
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			status = int32(f.val)
		case f.num == 4 && f.typ == protowire.BytesType:
			info = append(info, f.b...) // readOpChecksumInfo
		}
	})
	var checksum []byte
	if err == nil {
		err = eachField(info, func(f field) {
			if f.num == 1 && f.typ == protowire.BytesType {
				checksum = append(checksum, f.b...)
			}
		})
	}
	var typ int32
	var perChecksum uint32
	if err == nil {
		err = eachField(checksum, func(f field) {
			switch {
			case f.num == 1 && f.typ == protowire.VarintType:
				typ = int32(f.val)
			case f.num == 2 && f.typ == protowire.VarintType:
				perChecksum = uint32(f.val)
			}
		})
	}
	if err != nil {
		return d.fail(fmt.Sprintf("sent a malformed BlockOpResponseProto: %v", err))
	}
	switch {
	case status != 0:
		// The client reports the datanode's error and reads no packets.
		d.state = dtDone
		return nil
	case typ == 0: // CHECKSUM_NULL
		d.checksumSize = 0
	case typ == 1 || typ == 2: // CHECKSUM_CRC32, CHECKSUM_CRC32C
		d.checksumSize = 4
	default:
		// The client refuses the checksum type itself.
		d.state = dtDone
		return nil
	}
	if perChecksum == 0 {
		// The client would divide the data length by it.
		return d.fail("sent bytesPerChecksum 0")
	}
	d.bytesPerChecksum = uint64(perChecksum)
	d.state = dtPacketLengths
	return nil
}

// packetLengths checks a packet's payload and header lengths as
// PacketReceiver does.
func (d *dataTransfer) packetLengths() error {
	d.payloadLen = uint64(binary.BigEndian.Uint32(d.head[:4]))
	d.headerLen = uint64(binary.BigEndian.Uint16(d.head[4:]))
	d.head = d.head[:0]
	if d.payloadLen < 4 {
		return d.fail(fmt.Sprintf("sent a packet payload length of %d, less than its own 4 bytes", d.payloadLen))
	}
	if total := d.payloadLen + d.headerLen; total > maxPacketSize {
		return tooLong(d.peer, "packet", total, maxPacketSize)
	}
	d.state, d.msgLen, d.msg = dtPacketHeader, d.headerLen, nil
	if d.headerLen == 0 {
		return d.message()
	}
	return nil
}

// packetHeader reads a PacketHeaderProto's data length and last-packet
// mark, and checks that the payload holds exactly the data and the
// checksums the client reads for it.
func (d *dataTransfer) packetHeader(b []byte) error {
	var dataLen int32
	var last bool
	err := eachField(b, func(f field) {
		switch {
		case f.num == 3 && f.typ == protowire.VarintType:
			last = f.val != 0
		case f.num == 4 && f.typ == protowire.Fixed32Type:
			dataLen = int32(f.val)
		}
	})
	if err != nil {
		return d.fail(fmt.Sprintf("sent a malformed PacketHeaderProto: %v", err))
	}
	if dataLen < 0 {
		return d.fail(fmt.Sprintf("sent a packet data length of %d", dataLen))
	}
	data := uint64(dataLen)
	if data > d.payloadLen-4 {
		return d.fail(fmt.Sprintf("sent a packet of %d payload bytes whose header says %d data bytes", d.payloadLen, data))
	}
	// The client's own arithmetic: a checksum per chunk, the last chunk
	// possibly short.
	sums := (data + d.bytesPerChecksum - 1) / d.bytesPerChecksum * d.checksumSize
	if 4+sums+data != d.payloadLen {
		return d.fail(fmt.Sprintf("sent a packet of %d payload bytes for %d data bytes and %d checksum bytes", d.payloadLen, data, sums))
	}
	d.state, d.msgLeft, d.last = dtPacketData, sums+data, last
	if d.msgLeft == 0 {
		d.next()
	}
	return nil
}

func (d *dataTransfer) fail(msg string) error {
	return &streamError{peer: d.peer, msg: msg}
}

// field is one field of a protobuf message.
type field struct {
	num protowire.Number
	typ protowire.Type
	val uint64 // a varint's, fixed32's or fixed64's value
	b   []byte // a length-delimited value
}

// eachField calls fn with each field of b, in order; an error if b is not
// a well-formed message.
func eachField(b []byte, fn func(field)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.val, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.val = uint64(v)
		case protowire.Fixed64Type:
			f.val, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		fn(f)
		b = b[n:]
	}
	return nil
}
