package aggregated

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// encodeIndexedMeta serializes m as ObjectOutputStream writes an
// IndexedLogsMeta: maps in java.util.HashMap's iteration order for the
// insertion order m keeps, the container id String shared between a map
// key and its files' containerId fields.
func encodeIndexedMeta(m indexedMeta) []byte {
	e := newJavaEncoder()
	e.object(classLogsMeta)
	e.i32(m.version)
	// acls: a HashMap sized for its entries, as ContainerLaunchContext's
	// copy makes it (new HashMap(n)); enum keys hash by identity, so any
	// order is one Java could write.
	buckets, thr := hashMapLayout(len(m.acls), true)
	e.object(classHashMap)
	e.f32(0.75)
	e.i32(int32(thr))
	e.block(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(buckets)), uint32(len(m.acls))))
	for _, a := range m.acls {
		e.enum(classAccessType, a.Type)
		e.str(a.Value)
	}
	e.end()
	e.str(m.compress)
	writeList(e, len(m.aggs), func(i int) {
		a := m.aggs[i]
		e.object(classPerAggregation)
		e.i64(a.upload)
		keys := make([]string, len(a.containers))
		for i, c := range a.containers {
			keys[i] = c.id
		}
		buckets, thr := hashMapLayout(len(keys), false)
		e.object(classHashMap)
		e.f32(0.75)
		e.i32(int32(thr))
		e.block(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(buckets)), uint32(len(keys))))
		for _, ci := range javaMapOrder(keys, buckets) {
			c := a.containers[ci]
			e.sharedStr(c.id)
			writeList(e, len(c.files), func(j int) {
				f := c.files[j]
				e.object(classFileMeta)
				e.i64(f.stored)
				e.i64(f.size)
				e.i64(f.mtime)
				e.i64(f.start)
				e.sharedStr(f.container)
				e.str(f.name)
			})
		}
		e.end()
		e.str(a.remote)
	})
	e.str(m.nodeID)
	e.str(m.user)
	return e.b
}

func writeList(e *javaEncoder, n int, elem func(int)) {
	e.object(classArrayList)
	e.i32(int32(n))
	e.block(binary.BigEndian.AppendUint32(nil, uint32(n)))
	for i := 0; i < n; i++ {
		elem(i)
	}
	e.end()
}

// IndexedWriter writes an aggregated file in the Indexed format with the
// "none" codec, one aggregation cycle.
type IndexedWriter struct {
	w    *bufio.Writer
	pos  int64
	err  error
	uuid [uuidLen]byte
	meta indexedMeta
	buf  []byte
}

var _ Writer = (*IndexedWriter)(nil)

// NewIndexedWriter starts an Indexed-format file on w for appID. nodeID
// is the NodeId string ("host:port"), nodeFile the file's name
// ("host_port"), upload the cycle's time.
func NewIndexedWriter(w io.Writer, appID string, h Header, nodeFile string, upload time.Time) (*IndexedWriter, error) {
	iw := &IndexedWriter{
		w:    bufio.NewWriterSize(w, 64*1024),
		uuid: sha256.Sum256([]byte(appID)),
		meta: indexedMeta{
			version: 1, acls: append([]ACL(nil), h.ACLs...), compress: codecNone, nodeID: h.NodeID, user: h.Owner,
			aggs: []indexedAgg{{upload: upload.UnixMilli(), remote: nodeFile}},
		},
		buf: make([]byte, 65535),
	}
	iw.write(iw.uuid[:])
	return iw, iw.err
}

func (w *IndexedWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(p)
	w.pos += int64(n)
	w.err = err
}

// Write counts what copySource writes.
func (w *IndexedWriter) Write(p []byte) (int, error) {
	w.write(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// WriteContainer appends the container's files and records them in the
// index.
func (w *IndexedWriter) WriteContainer(containerID string, files []SourceFile) error {
	if w.err != nil {
		return w.err
	}
	c := indexedContainer{id: containerID}
	for _, f := range files {
		start := w.pos
		if err := copySource(destWriter{w}, f, w.buf); err != nil {
			return fmt.Errorf("container %s: %w", containerID, err)
		}
		c.files = append(c.files, indexedFile{
			name: f.Name, container: containerID, size: f.Size, stored: w.pos - start,
			mtime: f.ModTime.UnixMilli(), start: start,
		})
	}
	agg := &w.meta.aggs[0]
	agg.containers = append(agg.containers, c)
	return nil
}

// Close writes the index, its length and the separator.
func (w *IndexedWriter) Close() error {
	b := encodeIndexedMeta(w.meta)
	w.write(b)
	w.write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	w.write(w.uuid[:])
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err != nil {
		return fmt.Errorf("write indexed log: %w", w.err)
	}
	w.err = fmt.Errorf("indexed writer closed")
	return nil
}
