package aggregated

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// The TFile container (org.apache.hadoop.io.file.tfile): a BCFile whose
// data blocks hold (vint key length, key, chunked value) entries and whose
// meta blocks are TFile.meta and TFile.index.
//
//	magic(16) | data blocks | meta blocks | meta index | offset of meta index (int64) | version (2×int16) | magic(16)

var bcfileMagic = [16]byte{0xd1, 0x11, 0xd3, 0x68, 0x91, 0xb5, 0xd7, 0xb6, 0x39, 0xdf, 0x41, 0x40, 0x92, 0xba, 0xe1, 0x50}

const (
	bcfileTrailerLen = 8 + 4 + 16
	codecNone        = "none"
	codecGz          = "gz"
	metaPrefix       = "data:"
	blockBCFileIndex = "BCFile.index"
	blockTFileIndex  = "TFile.index"
	blockTFileMeta   = "TFile.meta"
	// tfileMinBlock is the data block size the NodeManager asks for
	// (AggregatedLogFormat.LogWriter: 256 KiB).
	tfileMinBlock = 256 * 1024
	// tfileChunk is TFile's value chunk buffer (tfile.io.chunk.size, 1 MiB).
	tfileChunk = 1 << 20
	// maxKeyLen is TFile's key length limit (64 KiB).
	maxKeyLen = 64 * 1024
)

type blockRegion struct {
	offset, compressed, raw int64
}

type metaEntry struct {
	codec  string
	region blockRegion
}

// tfileReader reads a TFile; it holds only the indexes, never a block.
type tfileReader struct {
	r          io.ReaderAt
	size       int64
	dataEnd    int64 // where the meta blocks may start at the latest
	codec      string
	blocks     []blockRegion
	meta       map[string]metaEntry
	records    int64
	comparator string
}

func openTFile(r io.ReaderAt, size int64) (*tfileReader, error) {
	if size < int64(len(bcfileMagic))+bcfileTrailerLen {
		return nil, corruptf("tfile of %d bytes", size)
	}
	var head [16]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("read tfile head: %w", noEOF(err))
	}
	var tail [bcfileTrailerLen]byte
	if _, err := r.ReadAt(tail[:], size-bcfileTrailerLen); err != nil {
		return nil, fmt.Errorf("read tfile trailer: %w", noEOF(err))
	}
	if head != bcfileMagic || !bytes.Equal(tail[12:], bcfileMagic[:]) {
		return nil, corruptf("not a TFile (magic)")
	}
	if major := binary.BigEndian.Uint16(tail[8:]); major != 1 {
		return nil, corruptf("BCFile version %d", major)
	}
	metaOff := int64(binary.BigEndian.Uint64(tail[:8]))
	metaEnd := size - bcfileTrailerLen
	if metaOff < 16 || metaOff > metaEnd {
		return nil, corruptf("meta index offset %d", metaOff)
	}
	t := &tfileReader{r: r, size: size, dataEnd: metaOff, meta: map[string]metaEntry{}}
	br := bufio.NewReader(io.NewSectionReader(r, metaOff, metaEnd-metaOff))
	n, err := readVInt(br)
	if err != nil {
		return nil, fmt.Errorf("meta index: %w", noEOF(err))
	}
	if n < 0 || int64(n) > metaEnd-metaOff {
		return nil, corruptf("meta index of %d entries", n)
	}
	for i := 0; i < n; i++ {
		name, err := readTString(br)
		if err != nil {
			return nil, fmt.Errorf("meta index: %w", err)
		}
		codec, err := readTString(br)
		if err != nil {
			return nil, fmt.Errorf("meta index: %w", err)
		}
		reg, err := t.readRegion(br)
		if err != nil {
			return nil, fmt.Errorf("meta index %q: %w", name, err)
		}
		if len(name) <= len(metaPrefix) || name[:len(metaPrefix)] != metaPrefix {
			return nil, corruptf("meta block name %q", name)
		}
		t.meta[name[len(metaPrefix):]] = metaEntry{codec: codec, region: reg}
	}
	// BCFile.index: the default codec and the data block regions.
	idx, err := t.metaBlock(blockBCFileIndex)
	if err != nil {
		return nil, err
	}
	if t.codec, err = readTString(idx); err != nil {
		return nil, fmt.Errorf("data index: %w", err)
	}
	if n, err = readVInt(idx); err != nil {
		return nil, fmt.Errorf("data index: %w", noEOF(err))
	}
	if n < 0 || int64(n) > size {
		return nil, corruptf("data index of %d blocks", n)
	}
	for i := 0; i < n; i++ {
		reg, err := t.readRegion(idx)
		if err != nil {
			return nil, fmt.Errorf("data index: %w", err)
		}
		t.blocks = append(t.blocks, reg)
	}
	// TFile.meta: version, record count, comparator.
	m, err := t.metaBlock(blockTFileMeta)
	if err != nil {
		return nil, err
	}
	var ver [4]byte
	if _, err := io.ReadFull(m, ver[:]); err != nil {
		return nil, fmt.Errorf("tfile meta: %w", noEOF(err))
	}
	if major := binary.BigEndian.Uint16(ver[:]); major != 1 {
		return nil, corruptf("TFile version %d", major)
	}
	if t.records, err = readVLong(m); err != nil {
		return nil, fmt.Errorf("tfile meta: %w", noEOF(err))
	}
	if t.comparator, err = readTString(m); err != nil {
		return nil, fmt.Errorf("tfile meta: %w", err)
	}
	return t, nil
}

func (t *tfileReader) readRegion(br io.ByteReader) (blockRegion, error) {
	var reg blockRegion
	var err error
	for _, p := range []*int64{&reg.offset, &reg.compressed, &reg.raw} {
		if *p, err = readVLong(br); err != nil {
			return reg, noEOF(err)
		}
	}
	if reg.offset < 16 || reg.compressed < 0 || reg.raw < 0 || reg.offset > t.dataEnd || reg.compressed > t.dataEnd-reg.offset {
		return reg, corruptf("block region %+v outside the file", reg)
	}
	return reg, nil
}

// metaBlock opens a meta block by name (without "data:").
func (t *tfileReader) metaBlock(name string) (*bufio.Reader, error) {
	e, ok := t.meta[name]
	if !ok {
		return nil, corruptf("no meta block %s", name)
	}
	rd, err := t.block(e.codec, e.region)
	if err != nil {
		return nil, fmt.Errorf("meta block %s: %w", name, err)
	}
	return bufio.NewReader(rd), nil
}

// block streams one block's raw bytes.
func (t *tfileReader) block(codec string, reg blockRegion) (io.Reader, error) {
	sec := io.NewSectionReader(t.r, reg.offset, reg.compressed)
	switch codec {
	case codecNone:
		if reg.raw != reg.compressed {
			return nil, corruptf("uncompressed block of %d bytes stored in %d", reg.raw, reg.compressed)
		}
		return sec, nil
	case codecGz:
		// Hadoop's "gz" is DefaultCodec: zlib framing.
		zr, err := zlib.NewReader(bufio.NewReader(sec))
		if err != nil {
			return nil, corruptf("gz block: %v", err)
		}
		return &exactReader{r: zr, n: reg.raw}, nil
	}
	return nil, fmt.Errorf("%w: compression %q is not supported", errCorrupt, codec)
}

// exactReader yields exactly n bytes of r and fails if r has fewer.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= int64(n)
	if err == io.EOF && e.n > 0 {
		return n, corruptf("block ends %d bytes early", e.n)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// scan calls fn for each entry in file order. The value reader is valid
// only during the call; what fn leaves unread is skipped.
func (t *tfileReader) scan(fn func(key []byte, value io.Reader) error) error {
	var seen int64
	for _, reg := range t.blocks {
		rd, err := t.block(t.codec, reg)
		if err != nil {
			return fmt.Errorf("data block at %d: %w", reg.offset, err)
		}
		cr := &countReader{r: rd}
		br := bufio.NewReader(cr)
		for cr.n-int64(br.Buffered()) < reg.raw {
			klen, err := readVInt(br)
			if err != nil {
				return fmt.Errorf("key length: %w", noEOF(err))
			}
			if klen < 0 || klen > maxKeyLen {
				return corruptf("key of %d bytes", klen)
			}
			key := make([]byte, klen)
			if _, err := io.ReadFull(br, key); err != nil {
				return fmt.Errorf("key: %w", noEOF(err))
			}
			v := &chunkReader{r: br}
			if err := fn(key, v); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, v); err != nil {
				return fmt.Errorf("value of %q: %w", key, err)
			}
			seen++
		}
	}
	if seen != t.records {
		return corruptf("%d entries, TFile.meta says %d", seen, t.records)
	}
	return nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// chunkReader decodes a TFile value: chunks led by a vint length, negative
// for every chunk but the last.
type chunkReader struct {
	r      *bufio.Reader
	remain int64
	last   bool
	err    error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.remain == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.last {
			c.err = io.EOF
			return 0, io.EOF
		}
		n, err := readVInt(c.r)
		if err != nil {
			c.err = fmt.Errorf("value chunk: %w", noEOF(err))
			return 0, c.err
		}
		if n < 0 {
			c.remain = -int64(n)
		} else {
			c.remain, c.last = int64(n), true
		}
	}
	if int64(len(p)) > c.remain {
		p = p[:c.remain]
	}
	n, err := c.r.Read(p)
	c.remain -= int64(n)
	if err == io.EOF {
		if c.remain > 0 {
			err = io.ErrUnexpectedEOF
		} else {
			err = nil
		}
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// readTString reads TFile's Utils.readString: vint length (-1 for null)
// and UTF-8 bytes.
func readTString(br *bufio.Reader) (string, error) {
	n, err := readVInt(br)
	if err != nil {
		return "", noEOF(err)
	}
	if n == -1 {
		return "", nil
	}
	if n < 0 || n > maxKeyLen {
		return "", corruptf("string of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", noEOF(err)
	}
	return string(b), nil
}

func appendTString(b []byte, s string) []byte {
	b = appendVLong(b, int64(len(s)))
	return append(b, s...)
}

// tfileWriter writes an unsorted TFile with the "none" codec, as
// TFile.Writer does with the NodeManager's settings: 256 KiB minimum data
// blocks, 1 MiB value chunks.
type tfileWriter struct {
	w        *bufio.Writer
	pos      int64
	err      error
	inBlock  bool
	blkStart int64
	blkRecs  int64
	records  int64
	firstKey []byte
	lastKey  []byte
	index    []tfileIndexEntry
	blocks   []blockRegion
	chunk    []byte
	minBlock int64
}

type tfileIndexEntry struct {
	key     []byte
	entries int64
}

func newTFileWriter(w io.Writer) *tfileWriter {
	t := &tfileWriter{w: bufio.NewWriterSize(w, 64*1024), minBlock: tfileMinBlock}
	t.write(bcfileMagic[:])
	return t
}

func (t *tfileWriter) write(p []byte) {
	if t.err != nil {
		return
	}
	n, err := t.w.Write(p)
	t.pos += int64(n)
	t.err = err
}

// append writes one entry; value writes the value through a writer that
// buffers and chunks as TFile's ChunkEncoder does.
func (t *tfileWriter) append(key []byte, value func(io.Writer) error) error {
	if t.err != nil {
		return t.err
	}
	if len(key) > maxKeyLen {
		return fmt.Errorf("tfile key of %d bytes", len(key))
	}
	if !t.inBlock {
		t.inBlock, t.blkStart, t.blkRecs = true, t.pos, 0
	}
	t.write(appendVLong(nil, int64(len(key))))
	t.write(key)
	if t.firstKey == nil {
		t.firstKey = bytes.Clone(key)
	}
	if t.chunk == nil {
		t.chunk = make([]byte, 0, tfileChunk)
	}
	enc := &chunkEncoder{t: t, buf: t.chunk[:0]}
	if err := value(enc); err != nil {
		return err
	}
	enc.close()
	if t.err != nil {
		return t.err
	}
	t.lastKey = append(t.lastKey[:0], key...)
	t.blkRecs++
	t.records++
	if t.pos-t.blkStart >= t.minBlock {
		t.finishBlock()
	}
	return t.err
}

func (t *tfileWriter) finishBlock() {
	if !t.inBlock {
		return
	}
	size := t.pos - t.blkStart
	t.blocks = append(t.blocks, blockRegion{offset: t.blkStart, compressed: size, raw: size})
	t.index = append(t.index, tfileIndexEntry{key: bytes.Clone(t.lastKey), entries: t.blkRecs})
	t.inBlock = false
}

type chunkEncoder struct {
	t   *tfileWriter
	buf []byte
}

func (c *chunkEncoder) Write(p []byte) (int, error) {
	if c.t.err != nil {
		return 0, c.t.err
	}
	if len(p)+len(c.buf) >= cap(c.buf) {
		// ChunkEncoder.writeBufData: one non-last chunk of the buffer and p.
		c.t.write(appendVLong(nil, -int64(len(c.buf)+len(p))))
		c.t.write(c.buf)
		c.t.write(p)
		c.buf = c.buf[:0]
		return len(p), c.t.err
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *chunkEncoder) close() {
	c.t.write(appendVLong(nil, int64(len(c.buf))))
	c.t.write(c.buf)
	c.buf = c.buf[:0]
}

// close writes the meta blocks, the meta index and the trailer, and
// flushes. It does not close the underlying writer.
func (t *tfileWriter) close() error {
	t.finishBlock()
	metas := map[string]blockRegion{}
	metaBlock := func(name string, body []byte) {
		metas[name] = blockRegion{offset: t.pos, compressed: int64(len(body)), raw: int64(len(body))}
		t.write(body)
	}
	// TFile.meta: version 1.0, record count, no comparator.
	b := []byte{0, 1, 0, 0}
	b = appendVLong(b, t.records)
	metaBlock(blockTFileMeta, appendTString(b, ""))
	// TFile.index: first key, then (last key, entries) per data block, each
	// led by its length.
	b = nil
	if t.firstKey == nil {
		b = appendVLong(b, 0)
	} else {
		fk := appendVLong(nil, int64(len(t.firstKey)))
		fk = append(fk, t.firstKey...)
		b = appendVLong(b, int64(len(fk)))
		b = append(b, fk...)
		for _, e := range t.index {
			eb := appendVLong(nil, int64(len(e.key)))
			eb = append(eb, e.key...)
			eb = appendVLong(eb, e.entries)
			b = appendVLong(b, int64(len(eb)))
			b = append(b, eb...)
		}
	}
	metaBlock(blockTFileIndex, b)
	// BCFile.index: default codec and data block regions.
	b = appendTString(nil, codecNone)
	b = appendVLong(b, int64(len(t.blocks)))
	for _, r := range t.blocks {
		b = appendRegion(b, r)
	}
	metaBlock(blockBCFileIndex, b)
	// Meta index, sorted by name as BCFile's TreeMap keeps it.
	metaOff := t.pos
	names := make([]string, 0, len(metas))
	for n := range metas {
		names = append(names, n)
	}
	sort.Strings(names)
	b = appendVLong(nil, int64(len(names)))
	for _, n := range names {
		b = appendTString(b, metaPrefix+n)
		b = appendTString(b, codecNone)
		b = appendRegion(b, metas[n])
	}
	b = binary.BigEndian.AppendUint64(b, uint64(metaOff))
	b = append(b, 0, 1, 0, 0)
	b = append(b, bcfileMagic[:]...)
	t.write(b)
	if t.err == nil {
		t.err = t.w.Flush()
	}
	if t.err != nil {
		return fmt.Errorf("write tfile: %w", t.err)
	}
	t.err = errors.New("tfile writer closed")
	return nil
}

func appendRegion(b []byte, r blockRegion) []byte {
	b = appendVLong(b, r.offset)
	b = appendVLong(b, r.compressed)
	return appendVLong(b, r.raw)
}
