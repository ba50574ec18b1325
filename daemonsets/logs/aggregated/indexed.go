package aggregated

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"time"
)

// The Indexed format (LogAggregationIndexedFileController, 3.4.1):
//
//	sha256(application id) | log bytes | Java-serialized IndexedLogsMeta | its length (int32) | sha256(application id)
//
// IndexedLogsMeta holds one IndexedPerAggregationLogMeta per aggregation
// cycle, each mapping container ids to IndexedFileLogMeta (name, size,
// stored size, modification time, offset).

const uuidLen = sha256.Size

const ifilePrefix = "org.apache.hadoop.yarn.logaggregation.filecontroller.ifile.LogAggregationIndexedFileController$"

var (
	classLogsMeta = &jClass{name: ifilePrefix + "IndexedLogsMeta", suid: 5439875373, flags: scSerializable, fields: []jField{
		{'I', "version", ""}, {'L', "acls", "Ljava/util/Map;"}, {'L', "compressName", "Ljava/lang/String;"},
		{'L', "logMetas", "Ljava/util/List;"}, {'L', "nodeId", "Ljava/lang/String;"}, {'L', "user", "Ljava/lang/String;"},
	}}
	classPerAggregation = &jClass{name: ifilePrefix + "IndexedPerAggregationLogMeta", suid: 0xea3455cf, flags: scSerializable, fields: []jField{
		{'J', "uploadTimeStamp", ""}, {'L', "logMetas", "Ljava/util/Map;"}, {'L', "remoteNodeLogFileName", "Ljava/lang/String;"},
	}}
	classFileMeta = &jClass{name: ifilePrefix + "IndexedFileLogMeta", suid: 1, flags: scSerializable, fields: []jField{
		{'J', "fileCompressedSize", ""}, {'J', "fileSize", ""}, {'J', "lastModifiedTime", ""}, {'J', "startIndex", ""},
		{'L', "containerId", "Ljava/lang/String;"}, {'L', "fileName", "Ljava/lang/String;"},
	}}
	classHashMap = &jClass{name: "java.util.HashMap", suid: 0x0507dac1c31660d1, flags: scSerializable | scWriteMethod, fields: []jField{
		{'F', "loadFactor", ""}, {'I', "threshold", ""},
	}}
	classArrayList = &jClass{name: "java.util.ArrayList", suid: 0x7881d21d99c7619d, flags: scSerializable | scWriteMethod, fields: []jField{
		{'I', "size", ""},
	}}
	classAccessType = &jClass{name: "org.apache.hadoop.yarn.api.records.ApplicationAccessType", flags: scSerializable | scEnum,
		super: &jClass{name: "java.lang.Enum", flags: scSerializable | scEnum}}
)

// The classes above are constant descriptions; nothing mutates them.

type indexedMeta struct {
	version  int32
	acls     []ACL
	compress string
	aggs     []indexedAgg
	nodeID   string
	user     string
}

type indexedAgg struct {
	upload     int64
	remote     string
	containers []indexedContainer
}

type indexedContainer struct {
	id    string
	files []indexedFile
}

type indexedFile struct {
	name, container            string
	size, stored, mtime, start int64
}

// IndexedReader reads an aggregated file in the Indexed format.
type IndexedReader struct {
	r    io.ReaderAt
	size int64
	meta indexedMeta
}

var _ Reader = (*IndexedReader)(nil)

// OpenIndexed reads the index of an Indexed-format file of size bytes. The
// index must lie inside the file and every log's range inside the log
// bytes.
func OpenIndexed(r io.ReaderAt, size int64) (*IndexedReader, error) {
	if size < 2*uuidLen+4 {
		return nil, corruptf("indexed file of %d bytes", size)
	}
	var head [uuidLen]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("read head: %w", noEOF(err))
	}
	var tail [4 + uuidLen]byte
	if _, err := r.ReadAt(tail[:], size-int64(len(tail))); err != nil {
		return nil, fmt.Errorf("read tail: %w", noEOF(err))
	}
	if !bytes.Equal(head[:], tail[4:]) {
		return nil, corruptf("head and tail separators differ")
	}
	n := int64(binary.BigEndian.Uint32(tail[:4]))
	end := size - int64(len(tail))
	if n <= 0 || n > end-uuidLen {
		return nil, corruptf("index of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, end-n); err != nil {
		return nil, fmt.Errorf("read index: %w", noEOF(err))
	}
	v, err := decodeJava(b)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	m, err := parseIndexedMeta(v)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	dataEnd := end - n
	for _, a := range m.aggs {
		for _, c := range a.containers {
			for _, f := range c.files {
				if f.start < uuidLen || f.stored < 0 || f.size < 0 || f.start > dataEnd || f.stored > dataEnd-f.start {
					return nil, corruptf("log %s of %s at %d+%d outside the file", f.name, f.container, f.start, f.stored)
				}
				if m.compress == codecNone && f.stored != f.size {
					return nil, corruptf("log %s of %s: %d bytes stored for %d", f.name, f.container, f.stored, f.size)
				}
			}
		}
	}
	return &IndexedReader{r: r, size: size, meta: m}, nil
}

// ApplicationID checks that the file belongs to appID (its separator is
// the SHA-256 of the id).
func (r *IndexedReader) ApplicationID(appID string) bool {
	var head [uuidLen]byte
	if _, err := r.r.ReadAt(head[:], 0); err != nil {
		return false
	}
	return head == sha256.Sum256([]byte(appID))
}

// Header returns the owner, ACLs and NodeId the index records.
func (r *IndexedReader) Header() Header {
	return Header{Owner: r.meta.user, ACLs: append([]ACL(nil), r.meta.acls...), NodeID: r.meta.nodeID}
}

// Walk visits the logs in the index's order: aggregation cycles, then
// containers in the serialized map's order, then each container's list.
func (r *IndexedReader) Walk(fn func(f LogFile, content io.Reader) error) error {
	for _, a := range r.meta.aggs {
		for _, c := range a.containers {
			for _, f := range c.files {
				var content io.Reader = io.NewSectionReader(r.r, f.start, f.stored)
				switch r.meta.compress {
				case codecNone:
				case codecGz:
					zr, err := zlib.NewReader(bufio.NewReader(content))
					if err != nil {
						return corruptf("log %s of %s: %v", f.name, f.container, err)
					}
					content = &exactReader{r: zr, n: f.size}
				default:
					return fmt.Errorf("%w: compression %q is not supported", errCorrupt, r.meta.compress)
				}
				lf := LogFile{ContainerID: f.container, Name: f.name, Length: f.size, ModTime: time.UnixMilli(f.mtime)}
				if err := fn(lf, content); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func parseIndexedMeta(v any) (indexedMeta, error) {
	var m indexedMeta
	o, err := asObject(v, classLogsMeta.name)
	if err != nil {
		return m, err
	}
	if m.version, err = field[int32](o, "version"); err != nil {
		return m, err
	}
	if m.compress, err = stringField(o, "compressName"); err != nil {
		return m, err
	}
	if m.nodeID, err = stringField(o, "nodeId"); err != nil {
		return m, err
	}
	if m.user, err = stringField(o, "user"); err != nil {
		return m, err
	}
	if acls := o.fields["acls"]; acls != nil {
		kvs, err := hashMapEntries(acls)
		if err != nil {
			return m, fmt.Errorf("acls: %w", err)
		}
		for i := 0; i < len(kvs); i += 2 {
			k, ok := kvs[i].(*jEnum)
			if !ok {
				return m, corruptf("acl key is %T", kvs[i])
			}
			s, _ := kvs[i+1].(string)
			m.acls = append(m.acls, ACL{Type: k.name, Value: s})
		}
	}
	aggs, err := arrayListElems(o.fields["logMetas"])
	if err != nil {
		return m, fmt.Errorf("logMetas: %w", err)
	}
	for _, av := range aggs {
		ao, err := asObject(av, classPerAggregation.name)
		if err != nil {
			return m, err
		}
		var a indexedAgg
		if a.upload, err = field[int64](ao, "uploadTimeStamp"); err != nil {
			return m, err
		}
		if a.remote, err = stringField(ao, "remoteNodeLogFileName"); err != nil {
			return m, err
		}
		kvs, err := hashMapEntries(ao.fields["logMetas"])
		if err != nil {
			return m, fmt.Errorf("container map: %w", err)
		}
		for i := 0; i < len(kvs); i += 2 {
			id, ok := kvs[i].(string)
			if !ok {
				return m, corruptf("container key is %T", kvs[i])
			}
			c := indexedContainer{id: id}
			files, err := arrayListElems(kvs[i+1])
			if err != nil {
				return m, fmt.Errorf("container %s: %w", id, err)
			}
			for _, fv := range files {
				fo, err := asObject(fv, classFileMeta.name)
				if err != nil {
					return m, err
				}
				var f indexedFile
				for name, p := range map[string]*int64{"fileCompressedSize": &f.stored, "fileSize": &f.size, "lastModifiedTime": &f.mtime, "startIndex": &f.start} {
					if *p, err = field[int64](fo, name); err != nil {
						return m, err
					}
				}
				if f.name, err = stringField(fo, "fileName"); err != nil {
					return m, err
				}
				if f.container, err = stringField(fo, "containerId"); err != nil {
					return m, err
				}
				c.files = append(c.files, f)
			}
			a.containers = append(a.containers, c)
		}
		m.aggs = append(m.aggs, a)
	}
	return m, nil
}

func asObject(v any, class string) (*jObject, error) {
	o, ok := v.(*jObject)
	if !ok || o.class.name != class {
		return nil, corruptf("%s expected, got %T", class, v)
	}
	return o, nil
}

func field[T any](o *jObject, name string) (T, error) {
	v, ok := o.fields[name].(T)
	if !ok {
		return v, corruptf("field %s of %s is %T", name, o.class.name, o.fields[name])
	}
	return v, nil
}

func stringField(o *jObject, name string) (string, error) {
	switch v := o.fields[name].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", corruptf("field %s of %s is %T", name, o.class.name, o.fields[name])
}

// hashMapEntries returns a java.util.HashMap's keys and values, alternating,
// in stream order.
func hashMapEntries(v any) ([]any, error) {
	o, err := asObject(v, classHashMap.name)
	if err != nil {
		return nil, err
	}
	if len(o.annot) < 1 {
		return nil, corruptf("HashMap without sizes")
	}
	sizes, ok := o.annot[0].([]byte)
	if !ok || len(sizes) != 8 {
		return nil, corruptf("HashMap sizes")
	}
	n := int(int32(binary.BigEndian.Uint32(sizes[4:])))
	if n < 0 || len(o.annot) != 1+2*n {
		return nil, corruptf("HashMap of %d entries holds %d items", n, len(o.annot)-1)
	}
	return o.annot[1:], nil
}

func arrayListElems(v any) ([]any, error) {
	o, err := asObject(v, classArrayList.name)
	if err != nil {
		return nil, err
	}
	n, err := field[int32](o, "size")
	if err != nil {
		return nil, err
	}
	if n < 0 || len(o.annot) != 1+int(n) {
		return nil, corruptf("ArrayList of %d elements holds %d items", n, len(o.annot)-1)
	}
	if b, ok := o.annot[0].([]byte); !ok || len(b) != 4 {
		return nil, corruptf("ArrayList capacity")
	}
	return o.annot[1:], nil
}

// javaStringHash is String.hashCode.
func javaStringHash(s string) int32 {
	var h int32
	for _, c := range modifiedUTF16(s) {
		h = 31*h + int32(c)
	}
	return h
}

// hashMapLayout replays java.util.HashMap's growth for n insertions into
// a map made by new HashMap() (sized false) or new HashMap(n) (sized
// true), returning the table length and threshold writeObject writes.
func hashMapLayout(n int, sized bool) (buckets, threshold int) {
	tableLen := 0
	threshold = 0
	if sized {
		threshold = tableSizeFor(n)
	}
	resize := func() {
		oldCap, oldThr := tableLen, threshold
		newCap, newThr := 0, 0
		switch {
		case oldCap > 0:
			newCap = oldCap << 1
			if oldCap >= 16 {
				newThr = oldThr << 1
			}
		case oldThr > 0:
			newCap = oldThr
		default:
			newCap, newThr = 16, 12
		}
		if newThr == 0 {
			newThr = int(float32(newCap) * 0.75)
		}
		tableLen, threshold = newCap, newThr
	}
	for size := 1; size <= n; size++ {
		if tableLen == 0 {
			resize()
		}
		if size > threshold {
			resize()
		}
	}
	if tableLen > 0 {
		return tableLen, threshold
	}
	if threshold > 0 {
		return threshold, threshold
	}
	return 16, threshold
}

func tableSizeFor(c int) int {
	n := 1
	for n < c {
		n <<= 1
	}
	return n
}

// javaMapOrder returns the iteration order of string keys inserted in the
// given order into a HashMap with tableLen buckets.
func javaMapOrder(keys []string, tableLen int) []int {
	type slot struct{ bucket, i int }
	slots := make([]slot, len(keys))
	for i, k := range keys {
		h := uint32(javaStringHash(k))
		h ^= h >> 16
		slots[i] = slot{int(h & uint32(tableLen-1)), i}
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	// Stable by bucket: insertion order within a bucket.
	sort.SliceStable(order, func(a, b int) bool { return slots[order[a]].bucket < slots[order[b]].bucket })
	return order
}
