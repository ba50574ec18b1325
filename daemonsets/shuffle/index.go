package shuffle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// indexKey names one map output's index in the service's cache
// (Hadoop's IndexCache, mapreduce.tasktracker.indexcache.mb), which counts
// 24 bytes a partition against its bound, as IndexCache does.
type indexKey struct {
	job, mapID string
}
