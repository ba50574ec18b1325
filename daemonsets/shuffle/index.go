package shuffle

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
)

// indexRecordBytes is one partition's entry in file.out.index
// (MapTask.MAP_OUTPUT_INDEX_RECORD_LENGTH): three big-endian int64s.
const indexRecordBytes = 24

// maxIndexFileBytes bounds the index file read into memory: 2.8 million
// partitions, beyond any real job's reduce count.
const maxIndexFileBytes = 64 << 20

// Index file errors.
var (
	// errIndexChecksum: the CRC32 at the end of file.out.index does not
	// match its records (SpillRecord's ChecksumException).
	errIndexChecksum = errors.New("checksum error reading spill index")
	// errIndexMalformed: file.out.index is too short, too long or holds
	// negative offsets or lengths.
	errIndexMalformed = errors.New("malformed spill index")
)

// indexRecord is one partition of a map output (IndexRecord).
type indexRecord struct {
	// start is the partition's offset in file.out.
	start int64
	// raw is the partition's uncompressed length.
	raw int64
	// part is the partition's length in file.out.
	part int64
}

// parseIndex reads file.out.index as SpillRecord does: length/24 records,
// then the CRC32 of the record bytes as a big-endian int64. Whatever
// follows the checksum is ignored, as Hadoop ignores it.
func parseIndex(b []byte) ([]indexRecord, error) {
	if len(b) > maxIndexFileBytes {
		return nil, fmt.Errorf("%w: %d bytes", errIndexMalformed, len(b))
	}
	n := len(b) / indexRecordBytes
	recBytes := n * indexRecordBytes
	if len(b) < recBytes+8 {
		return nil, fmt.Errorf("%w: %d bytes hold no checksum after %d records", errIndexMalformed, len(b), n)
	}
	want := binary.BigEndian.Uint64(b[recBytes:])
	if uint64(crc32.ChecksumIEEE(b[:recBytes])) != want {
		return nil, errIndexChecksum
	}
	recs := make([]indexRecord, n)
	for i := range recs {
		p := b[i*indexRecordBytes:]
		recs[i] = indexRecord{
			start: int64(binary.BigEndian.Uint64(p)),
			raw:   int64(binary.BigEndian.Uint64(p[8:])),
			part:  int64(binary.BigEndian.Uint64(p[16:])),
		}
		if recs[i].start < 0 || recs[i].part < 0 {
			return nil, fmt.Errorf("%w: partition %d has offset %d, length %d", errIndexMalformed, i, recs[i].start, recs[i].part)
		}
	}
	return recs, nil
}

// indexKey names one map output's index.
type indexKey struct {
	job, mapID string
}

// indexEntry is a cached index, or one being loaded (ready still open).
type indexEntry struct {
	key   indexKey
	recs  []indexRecord
	err   error
	ready chan struct{}
	// elem is the entry's place in the LRU list; nil while loading or
	// when the entry is not kept.
	elem *list.Element
}

// size is what the entry counts against the bound, as IndexCache counts
// it: 24 bytes per partition.
func (e *indexEntry) size() int64 { return int64(len(e.recs)) * indexRecordBytes }

// indexCache keeps parsed index files within a byte bound, least recently
// used out first (Hadoop's IndexCache, mapreduce.tasktracker.indexcache.mb).
// Concurrent lookups of one index load it once. Failed loads are not kept.
type indexCache struct {
	max int64

	mu      sync.Mutex
	used    int64
	entries map[indexKey]*indexEntry
	lru     *list.List // of *indexEntry, most recent at the front
}

func newIndexCache(maxBytes int64) *indexCache {
	return &indexCache{max: maxBytes, entries: map[indexKey]*indexEntry{}, lru: list.New()}
}

// get returns the index of (job, mapID), calling load to read it when it
// is not cached. It waits for a concurrent load of the same index, or for
// ctx to end.
func (c *indexCache) get(ctx context.Context, job, mapID string, load func() ([]indexRecord, error)) ([]indexRecord, error) {
	k := indexKey{job, mapID}
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.recs, nil
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.recs, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &indexEntry{key: k, ready: make(chan struct{})}
	c.entries[k] = e
	c.mu.Unlock()

	e.recs, e.err = load()

	c.mu.Lock()
	if c.entries[k] == e {
		if e.err != nil || e.size() > c.max {
			delete(c.entries, k)
		} else {
			e.elem = c.lru.PushFront(e)
			c.used += e.size()
			c.evictLocked()
		}
	}
	c.mu.Unlock()
	close(e.ready)
	return e.recs, e.err
}

// evictLocked drops least recently used entries until the bound holds.
func (c *indexCache) evictLocked() {
	for c.used > c.max {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.dropLocked(back.Value.(*indexEntry))
	}
}

func (c *indexCache) dropLocked(e *indexEntry) {
	if e.elem != nil {
		c.lru.Remove(e.elem)
		c.used -= e.size()
		e.elem = nil
	}
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
}

// removeJob drops every entry of job; a load in progress finishes but is
// not kept.
func (c *indexCache) removeJob(job string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.job == job {
			c.dropLocked(e)
		}
	}
}

// stats reports the entries kept and the bytes they count.
func (c *indexCache) stats() (entries int, used int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.used
}
