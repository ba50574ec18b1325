package localizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// The fake HDFS below serves what github.com/colinmarc/hdfs asks to stat
// and read a file: ClientNamenodeProtocol's getFileInfo,
// getBlockLocations and getServerDefaults on Knit's own ipc server, and
// DataTransferProtocol's READ_BLOCK on plain TCP. The client's message
// types are internal to it, so the fake reads and writes Hadoop's
// messages field by field with protowire; the numbers are those of
// Hadoop's ClientNamenodeProtocol.proto, hdfs.proto and datatransfer.proto.

// clientProtocol is the namenode protocol's name on the wire.
const clientProtocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// The fake datanode's chunking: a CRC32C per 512 bytes, two chunks a packet.
const (
	fakeBytesPerChecksum = 512
	fakePacketBytes      = 2 * fakeBytesPerChecksum
)

// fakeFile is a file of the fake HDFS; its folders are implied, mode 0755.
type fakeFile struct {
	data    []byte
	perm    uint32 // 0644 if zero
	modTime int64  // ms since the epoch
	// answer, if set, is what the datanode sends for a READ_BLOCK of
	// the file instead of its block.
	answer []byte
}

// fakeHDFS is one namenode and one datanode holding files, one block each.
type fakeHDFS struct {
	files    map[string]fakeFile
	blocks   []string // block id i+1 holds files[blocks[i]]
	namenode string   // host:port
	dataPort int
	// users receives the effective user of each getFileInfo call.
	users chan string
}

func newFakeHDFS(t *testing.T, files map[string]fakeFile) *fakeHDFS {
	t.Helper()
	f := &fakeHDFS{files: files, blocks: slices.Sorted(maps.Keys(files)), users: make(chan string, 64)}
	f.dataPort = serveTCP(t, func(c net.Conn) {
		if err := f.serveRead(c); err != nil {
			t.Errorf("datanode: %v", err)
		}
	}).(*net.TCPAddr).Port
	f.namenode = ipctest.Serve(t, ipc.Config{Simple: true}, clientProtocol,
		ipc.Handle("getFileInfo", f.getFileInfo),
		ipc.Handle("getBlockLocations", f.getBlockLocations),
		ipc.Handle("getServerDefaults", getServerDefaults),
	)
	return f
}

// standbyNamenode answers every getFileInfo as a standby namenode does.
func standbyNamenode(t *testing.T) string {
	return ipctest.Serve(t, ipc.Config{Simple: true}, clientProtocol,
		ipc.Handle("getFileInfo", func(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
			return nil, ipc.Errorf("org.apache.hadoop.ipc.StandbyException", "Operation category READ is not supported in state standby")
		}))
}

func (f *fakeHDFS) getFileInfo(ctx context.Context, req *emptypb.Empty) (*emptypb.Empty, error) {
	if c, ok := ipc.CallerFrom(ctx); ok {
		select {
		case f.users <- c.User:
		default:
		}
	}
	in, err := decode(unknown(req))
	if err != nil {
		return nil, err
	}
	src := string(in.raw[1])
	var status msg
	if file, ok := f.files[src]; ok {
		perm := file.perm
		if perm == 0 {
			perm = 0o644
		}
		status = fileStatus(2, uint64(len(file.data)), perm, file.modTime) // IS_FILE
	} else if f.isDir(src) {
		status = fileStatus(1, 0, 0o755, 1) // IS_DIR
	}
	// GetFileInfoResponseProto: fs = 1, absent for a missing path.
	if status == nil {
		return raw(nil), nil
	}
	return raw(msg(nil).bytes(1, status)), nil
}

func (f *fakeHDFS) isDir(p string) bool {
	for name := range f.files {
		if p == "/" || strings.HasPrefix(name, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// fileStatus is an HdfsFileStatusProto with its required fields.
func fileStatus(fileType, length uint64, perm uint32, modTime int64) msg {
	return msg(nil).
		uint(1, fileType).
		bytes(2, nil). // path: empty in getFileInfo's answers
		uint(3, length).
		bytes(4, msg(nil).uint(1, uint64(perm))). // FsPermissionProto
		bytes(5, []byte(testUser)).
		bytes(6, []byte("supergroup")).
		uint(7, uint64(modTime)).
		uint(8, uint64(modTime))
}

func (f *fakeHDFS) getBlockLocations(_ context.Context, req *emptypb.Empty) (*emptypb.Empty, error) {
	in, err := decode(unknown(req))
	if err != nil {
		return nil, err
	}
	src := string(in.raw[1])
	file, ok := f.files[src]
	if !ok {
		return nil, ipc.Errorf("java.io.FileNotFoundException", "File does not exist: %s", src)
	}
	size := uint64(len(file.data))
	// LocatedBlocksProto: fileLength, blocks, underConstruction,
	// isLastBlockComplete.
	located := msg(nil).uint(1, size).uint(3, 0).uint(5, 1)
	if size > 0 {
		block := msg(nil). // ExtendedBlockProto
					bytes(1, []byte("BP-1-127.0.0.1-1")).
					uint(2, uint64(slices.Index(f.blocks, src)+1)).
					uint(3, 1001). // generation stamp
					uint(4, size)
		datanode := msg(nil). // DatanodeIDProto
					bytes(1, []byte("127.0.0.1")).
					bytes(2, []byte("localhost")).
					bytes(3, []byte("dn-1")).
					uint(4, uint64(f.dataPort)).
					uint(5, 0).
					uint(6, 0)
		token := msg(nil).bytes(1, nil).bytes(2, nil).bytes(3, nil).bytes(4, nil)
		// LocatedBlockProto: b, offset, locs (DatanodeInfoProto), corrupt,
		// blockToken.
		lb := msg(nil).bytes(1, block).uint(2, 0).bytes(3, msg(nil).bytes(1, datanode)).uint(4, 0).bytes(5, token)
		located = located.bytes(2, lb)
	}
	// GetBlockLocationsResponseProto: locations = 1.
	return raw(msg(nil).bytes(1, located)), nil
}

func getServerDefaults(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	// FsServerDefaultsProto: blockSize, bytesPerChecksum, writePacketSize,
	// replication, fileBufferSize; no encryptDataTransfer.
	defaults := msg(nil).uint(1, 128<<20).uint(2, fakeBytesPerChecksum).uint(3, 64<<10).uint(4, 3).uint(5, 4096)
	return raw(msg(nil).bytes(1, defaults)), nil
}

// serveRead answers one READ_BLOCK: BlockOpResponseProto, then the
// block's bytes from the chunk holding the offset, in packets, the last
// one empty.
func (f *fakeHDFS) serveRead(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	var head [3]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return fmt.Errorf("op header: %w", err)
	}
	if v, op := binary.BigEndian.Uint16(head[:2]), head[2]; v != 28 || op != 81 {
		return fmt.Errorf("version %d op %d, want 28 and READ_BLOCK (81)", v, op)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > 1<<16 {
		return fmt.Errorf("OpReadBlockProto length %d: %v", n, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("OpReadBlockProto: %w", err)
	}
	// OpReadBlockProto: header (ClientOperationHeaderProto: baseHeader
	// (BaseHeaderProto: block (ExtendedBlockProto))), offset, len.
	op, err := decode(b)
	if err != nil {
		return err
	}
	block, err := nested(op, 1, 1, 1)
	if err != nil {
		return err
	}
	id := block.num[2]
	if id == 0 || id > uint64(len(f.blocks)) {
		return fmt.Errorf("no block %d", id)
	}
	file := f.files[f.blocks[id-1]]
	if file.answer != nil {
		// The client may refuse the answer, and hang up, before it is
		// all written.
		_, _ = c.Write(file.answer)
		_, _ = io.Copy(io.Discard, r)
		return nil
	}
	data := file.data
	start := op.num[2] - op.num[2]%fakeBytesPerChecksum
	end := min(op.num[2]+op.num[3], uint64(len(data)))

	w := bufio.NewWriter(c)
	// BlockOpResponseProto: status SUCCESS, readOpChecksumInfo
	// (ChecksumProto: CRC32C, bytesPerChecksum; chunkOffset).
	checksum := msg(nil).uint(1, 2).uint(2, fakeBytesPerChecksum)
	resp := msg(nil).uint(1, 0).bytes(4, msg(nil).bytes(1, checksum).uint(2, start))
	_, _ = w.Write(protowire.AppendVarint(nil, uint64(len(resp))))
	_, _ = w.Write(resp)
	seq := uint64(0)
	for off := start; off < end; off += fakePacketBytes {
		writePacket(w, off, seq, false, data[off:min(off+fakePacketBytes, end)])
		seq++
	}
	writePacket(w, end, seq, true, nil)
	if err := w.Flush(); err != nil {
		return err
	}
	// Hadoop's client answers with a ClientReadStatusProto; colinmarc's
	// hangs up, before reading the empty last packet, so the connection
	// may end in a reset: read whatever comes until it ends, either way.
	_, _ = io.Copy(io.Discard, r)
	return nil
}

// writePacket writes one packet: payload length (itself, checksums and
// data), header length, PacketHeaderProto, a CRC32C per chunk, the data.
func writePacket(w io.Writer, offset, seq uint64, last bool, data []byte) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var sums []byte
	for i := 0; i < len(data); i += fakeBytesPerChecksum {
		sums = binary.BigEndian.AppendUint32(sums, crc32.Checksum(data[i:min(i+fakeBytesPerChecksum, len(data))], castagnoli))
	}
	lastFlag := uint64(0)
	if last {
		lastFlag = 1
	}
	// PacketHeaderProto: offsetInBlock, seqno, lastPacketInBlock, dataLen.
	header := msg(nil).fixed64(1, offset).fixed64(2, seq).uint(3, lastFlag).fixed32(4, uint32(len(data)))
	out := binary.BigEndian.AppendUint32(nil, uint32(4+len(sums)+len(data)))
	out = binary.BigEndian.AppendUint16(out, uint16(len(header)))
	out = append(append(append(out, header...), sums...), data...)
	_, _ = w.Write(out)
}

// msg builds a protobuf message field by field.
type msg []byte

func (m msg) uint(n protowire.Number, v uint64) msg {
	return protowire.AppendVarint(protowire.AppendTag(m, n, protowire.VarintType), v)
}

func (m msg) bytes(n protowire.Number, v []byte) msg {
	return protowire.AppendBytes(protowire.AppendTag(m, n, protowire.BytesType), v)
}

func (m msg) fixed64(n protowire.Number, v uint64) msg {
	return protowire.AppendFixed64(protowire.AppendTag(m, n, protowire.Fixed64Type), v)
}

func (m msg) fixed32(n protowire.Number, v uint32) msg {
	return protowire.AppendFixed32(protowire.AppendTag(m, n, protowire.Fixed32Type), v)
}

// decoded is a decoded message: varint and length-delimited fields by
// number, the last of each.
type decoded struct {
	num map[protowire.Number]uint64
	raw map[protowire.Number][]byte
}

func decode(b []byte) (decoded, error) {
	f := decoded{num: map[protowire.Number]uint64{}, raw: map[protowire.Number][]byte{}}
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return f, protowire.ParseError(l)
		}
		b = b[l:]
		switch typ {
		case protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return f, protowire.ParseError(l)
			}
			f.num[n], b = v, b[l:]
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return f, protowire.ParseError(l)
			}
			f.raw[n], b = v, b[l:]
		default:
			l := protowire.ConsumeFieldValue(n, typ, b)
			if l < 0 {
				return f, protowire.ParseError(l)
			}
			b = b[l:]
		}
	}
	return f, nil
}

// nested decodes the message nested in f at the field numbers given.
func nested(f decoded, nums ...protowire.Number) (decoded, error) {
	for _, n := range nums {
		var err error
		if f, err = decode(f.raw[n]); err != nil {
			return f, err
		}
	}
	return f, nil
}

// raw carries a message the fake encodes itself to the ipc server, as
// the unknown fields of an Empty, which proto.Marshal writes unchanged.
func raw(m msg) *emptypb.Empty {
	e := &emptypb.Empty{}
	e.ProtoReflect().SetUnknown(protoreflect.RawFields(m))
	return e
}

// unknown is the message an Empty carries, as raw wrote it or the ipc
// server decoded it.
func unknown(e *emptypb.Empty) []byte { return e.ProtoReflect().GetUnknown() }

// hadoopConfDir writes props as a core-site.xml in a new folder.
func hadoopConfDir(t *testing.T, props map[string]string) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "  <property><name>%s</name><value>%s</value></property>\n", k, props[k])
	}
	b.WriteString("</configuration>\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestHDFSNamenodesOfURL(t *testing.T) {
	ha := map[string]string{
		"fs.defaultFS":                      "hdfs://ns1",
		"dfs.nameservices":                  "ns1",
		"dfs.ha.namenodes.ns1":              "nn1, nn2",
		"dfs.namenode.rpc-address.ns1.nn1":  "nn1.example:8020",
		"dfs.namenode.rpc-address.ns1.nn2":  "nn2.example:8020",
		"dfs.ha.namenodes.empty":            "nn1",
		"dfs.namenode.rpc-address.other.nn": "unused:1",
	}
	tests := []struct {
		name string
		conf map[string]string
		url  string
		want []string
		err  string
	}{
		{"host and port", nil, "hdfs://nn:9000/a", []string{"nn:9000"}, ""},
		{"host without port is at 8020", nil, "hdfs://nn/a", []string{"nn:8020"}, ""},
		{"IPv6 host", nil, "hdfs://[::1]:9000/a", []string{"[::1]:9000"}, ""},
		{"HA nameservice is its namenodes in order", ha, "hdfs://ns1/a", []string{"nn1.example:8020", "nn2.example:8020"}, ""},
		{"no authority is fs.defaultFS's", ha, "hdfs:/a", []string{"nn1.example:8020", "nn2.example:8020"}, ""},
		{"no authority, default is host and port", map[string]string{"fs.defaultFS": "hdfs://nn:9000/"}, "hdfs:/a", []string{"nn:9000"}, ""},
		{"no authority, deprecated fs.default.name", map[string]string{"fs.default.name": "hdfs://old:8020"}, "hdfs:/a", []string{"old:8020"}, ""},
		{"no authority, no default", nil, "hdfs:/a", nil, "localizer: Incomplete HDFS URI, no host: hdfs:/a"},
		{"no authority, default not hdfs", map[string]string{"fs.defaultFS": "file:///"}, "hdfs:/a", nil, "localizer: Incomplete HDFS URI, no host: hdfs:/a"},
		{"nameservice without addresses", ha, "hdfs://empty/a", nil, "localizer: nameservice empty has no dfs.namenode.rpc-address.empty.* configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := namenodes(tc.conf, u)
			if gotErr := fmt.Sprint(err); tc.err != "" && gotErr != tc.err || tc.err == "" && err != nil {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHDFSSourceLocalizes(t *testing.T) {
	data := bytes.Repeat([]byte("hdfs bytes "), 300) // several chunks and packets
	const mtime = 1700000000123
	fake := newFakeHDFS(t, map[string]fakeFile{
		"/user/alice/job.jar":     {data: data, modTime: mtime},
		"/user/alice/private.jar": {data: data, modTime: mtime, perm: 0o600},
		"/user/alice/empty.txt":   {modTime: mtime},
	})
	conf := hadoopConfDir(t, map[string]string{
		"fs.defaultFS":                     "hdfs://ns1",
		"dfs.ha.namenodes.ns1":             "nn1,nn2",
		"dfs.namenode.rpc-address.ns1.nn1": standbyNamenode(t),
		"dfs.namenode.rpc-address.ns1.nn2": fake.namenode,
	})
	e := newEnv(t, func(c *Config) { c.HDFS = HDFSConfig{ConfDir: conf} })
	size := int64(len(data))
	now := fixedNow().UnixMilli()
	tests := []struct {
		name, url string
		size, ts  int64
		vis       yarnpb.LocalResourceVisibilityProto
		want      string // the file's bytes, or with failure set nothing
		failure   string
	}{
		{"by namenode address", "hdfs://" + fake.namenode + "/user/alice/job.jar", size, mtime, visPrivate, string(data), ""},
		{"HA nameservice, past its standby", "hdfs://ns1/user/alice/job.jar", size, mtime, visPrivate, string(data), ""},
		{"no authority is fs.defaultFS", "hdfs:///user/alice/job.jar", size, mtime, visApp, string(data), ""},
		{"PUBLIC checks every folder", "hdfs://ns1/user/alice/job.jar", size, mtime, visPublic, string(data), ""},
		{"empty file", "hdfs://ns1/user/alice/empty.txt", 0, mtime, visPrivate, "", ""},
		{
			"changed timestamp", "hdfs://ns1/user/alice/job.jar", size, mtime - 1000, visPrivate, "",
			fmt.Sprintf(`Resource hdfs://ns1/user/alice/job.jar changed on src filesystem - expected: "%s", was: "%s", current time: "%s"`,
				javaISO(mtime-1000), javaISO(mtime), javaISO(now)),
		},
		{
			"changed size", "hdfs://ns1/user/alice/job.jar", size + 1, mtime, visPrivate, "",
			fmt.Sprintf("Resource hdfs://ns1/user/alice/job.jar changed on src filesystem - expected size: %d, was: %d", size+1, size),
		},
		{"missing file", "hdfs://ns1/user/alice/gone.jar", size, mtime, visPrivate, "", "File hdfs://ns1/user/alice/gone.jar does not exist"},
		{
			"PUBLIC file others cannot read", "hdfs://ns1/user/alice/private.jar", size, mtime, visPublic, "",
			"Resource hdfs://ns1/user/alice/private.jar is not publicly accessible and as such cannot be part of the public cache.",
		},
		{
			"folder", "hdfs://ns1/user/alice", 0, 1, visPrivate, "",
			"Failed to download resource hdfs://ns1/user/alice: hdfs://ns1/user/alice is a folder; folders as local resources are not supported",
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := e.prepare(i+1, []kv{{"res", lr(t, tc.url, tc.size, tc.ts, typeFile, tc.vis, "")}}, nil)
			if f.Failure != tc.failure {
				t.Fatalf("Failure = %q\nwant      %q", f.Failure, tc.failure)
			}
			if tc.failure == "" && readLink(t, f, "res") != tc.want {
				t.Errorf("the localized file does not hold the HDFS file's bytes")
			}
		})
	}
	if u := <-fake.users; u != testUser {
		t.Errorf("the namenode was called as %q, want the container's user %q", u, testUser)
	}
}

func TestHDFSSourceRefusesKerberos(t *testing.T) {
	conf := hadoopConfDir(t, map[string]string{
		"fs.defaultFS":                   "hdfs://nn:8020",
		"hadoop.security.authentication": "kerberos",
	})
	e := newEnv(t, func(c *Config) { c.HDFS = HDFSConfig{ConfDir: conf} })
	f := e.prepare(1, []kv{{"job.jar", lr(t, "hdfs://nn:8020/user/alice/job.jar", 10, 1, typeFile, visPrivate, "")}}, nil)
	want := "Failed to download resource hdfs://nn:8020/user/alice/job.jar: Knit's localizer does not support Kerberos HDFS yet (hadoop.security.authentication is kerberos)"
	if f.Failure != want {
		t.Errorf("Failure = %q\nwant      %q", f.Failure, want)
	}
}

func TestHDFSSourceEndsWithItsContext(t *testing.T) {
	// A namenode that accepts connections (the kernel does) and never
	// answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	s, err := newHDFSSource(HDFSConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	u := &url.URL{Scheme: "hdfs", Host: silent.Addr().String(), Path: "/user/alice/job.jar"}
	// An Open that outlived its context would end at the socket timeout
	// with another error.
	_, err = s.Open(ctx, Request{URL: u, User: testUser})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open = %v, want the context's deadline", err)
	}
}

// lengthNamenode is a broken namenode: it answers every connection with
// an RPC response length of n, and nothing more.
func lengthNamenode(t *testing.T, n uint32) string {
	t.Helper()
	return serveTCP(t, func(c net.Conn) {
		_, _ = c.Write(binary.BigEndian.AppendUint32(nil, n))
		_, _ = io.Copy(io.Discard, c)
	}).String()
}

// serveTCP serves each connection of a loopback listener with serve (which
// need not close it) until the test ends, and returns the address.
func serveTCP(t *testing.T, serve func(net.Conn)) net.Addr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	return l.Addr()
}

// allocatedBy runs fn and returns how many bytes the process allocated
// meanwhile.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Refusals must come at once, without waiting for the bytes a length
// promises (a client that waited would fail with the socket's timeout or
// EOF, not the refusal), and without allocating what it asks: a refusal
// allocates far less than this.
const refusalBytes = 64 << 20

func TestHDFSSourceRefusesNamenodeResponsesOverTheLimit(t *testing.T) {
	tests := []struct {
		name    string
		length  uint32 // of the namenode's first response
		conf    map[string]string
		failure string // after "namenode <address>: "
	}{
		{
			"a 4 GiB response fails at Hadoop's default limit", math.MaxUint32, nil,
			"RPC response of 4294967295 bytes is over the 134217728-byte limit",
		},
		{
			"a response over ipc.maximum.response.length fails", 1025, map[string]string{"ipc.maximum.response.length": "1024"},
			"RPC response of 1025 bytes is over the 1024-byte limit",
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nn := lengthNamenode(t, tc.length)
			e := newEnv(t, func(c *Config) { c.HDFS = HDFSConfig{ConfDir: hadoopConfDir(t, tc.conf)} })
			u := "hdfs://" + nn + "/user/alice/job.jar"
			var f launch.Files
			allocated := allocatedBy(func() {
				f = e.prepare(i+1, []kv{{"res", lr(t, u, 10, 1, typeFile, visPrivate, "")}}, nil)
			})
			want := fmt.Sprintf("Failed to download resource %s: open /user/alice/job.jar: namenode %s: %s", u, nn, tc.failure)
			if f.Failure != want {
				t.Errorf("Failure = %q\nwant      %q", f.Failure, want)
			}
			if allocated > refusalBytes {
				t.Errorf("the refusal allocated %d bytes", allocated)
			}
		})
	}
}

func TestHDFSSourceRefusesBrokenDatanodeStreams(t *testing.T) {
	hl := len(packetHeader(0, true))
	tests := []struct {
		name    string
		answer  []byte // to READ_BLOCK
		failure string // after "datanode <address>: "
	}{
		{
			"a 32 GiB BlockOpResponseProto fails", []byte{0xff, 0xff, 0xff, 0xff, 0x7f},
			"BlockOpResponseProto of 34359738367 bytes is over the 1048576-byte limit",
		},
		{
			"a packet over Hadoop's 16 MiB fails", concat(opResponse(0, 2, 512), packet(math.MaxUint32, packetHeader(0, true), nil)),
			fmt.Sprintf("packet of %d bytes is over the 16777216-byte limit", math.MaxUint32+hl),
		},
		{
			"2 GiB of data in a small packet fails", concat(opResponse(0, 2, 1), packet(9, packetHeader(math.MaxInt32, true), nil)),
			"sent a packet of 9 payload bytes whose header says 2147483647 data bytes",
		},
		{
			"a negative data length fails", concat(opResponse(0, 2, 512), packet(4, packetHeader(-4096, true), nil)),
			"sent a packet data length of -4096",
		},
	}
	files := map[string]fakeFile{}
	for i, tc := range tests {
		files[fmt.Sprintf("/user/alice/%d.jar", i)] = fakeFile{data: []byte("ten bytes!"), modTime: 1, answer: tc.answer}
	}
	fake := newFakeHDFS(t, files)
	e := newEnv(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := fmt.Sprintf("hdfs://%s/user/alice/%d.jar", fake.namenode, i)
			var f launch.Files
			allocated := allocatedBy(func() {
				f = e.prepare(i+1, []kv{{"res", lr(t, u, 10, 1, typeFile, visPrivate, "")}}, nil)
			})
			want := fmt.Sprintf("Failed to download resource %s: datanode 127.0.0.1:%d: %s", u, fake.dataPort, tc.failure)
			if f.Failure != want {
				t.Errorf("Failure = %q\nwant      %q", f.Failure, want)
			}
			if allocated > refusalBytes {
				t.Errorf("the refusal allocated %d bytes", allocated)
			}
		})
	}
}
