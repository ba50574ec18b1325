package mapred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// IndexRecordLength is the size of one partition's entry in file.out.index
// (MapTask.MAP_OUTPUT_INDEX_RECORD_LENGTH).
const IndexRecordLength = 24

// ErrIndexChecksum is an index file whose trailing CRC32 does not match
// its records (SpillRecord's ChecksumException).
var ErrIndexChecksum = errors.New("mapred: index checksum error")

// IndexRecord is where one partition's segment lies in file.out
// (IndexRecord): StartOffset into the file, RawLength the segment without
// its checksum, PartLength the bytes to send.
type IndexRecord struct {
	StartOffset int64
	RawLength   int64
	PartLength  int64
}

// MarshalIndex writes file.out.index as SpillRecord.writeToFile does: each
// record as three big-endian int64, then the CRC32 of those bytes as an
// 8-byte big-endian long.
func MarshalIndex(records []IndexRecord) []byte {
	b := make([]byte, 0, len(records)*IndexRecordLength+8)
	for _, r := range records {
		b = binary.BigEndian.AppendUint64(b, uint64(r.StartOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(r.RawLength))
		b = binary.BigEndian.AppendUint64(b, uint64(r.PartLength))
	}
	return binary.BigEndian.AppendUint64(b, uint64(crc32.ChecksumIEEE(b)))
}

// ParseIndex reads file.out.index, checking its checksum and that each
// record's lengths are not negative and its raw length fits in its part.
func ParseIndex(b []byte) ([]IndexRecord, error) {
	if len(b) < 8 || (len(b)-8)%IndexRecordLength != 0 {
		return nil, fmt.Errorf("mapred: index of %d bytes is not whole records and a checksum", len(b))
	}
	body := b[:len(b)-8]
	if got, want := uint64(crc32.ChecksumIEEE(body)), binary.BigEndian.Uint64(b[len(body):]); got != want {
		return nil, fmt.Errorf("%w: computed %08x, stored %016x", ErrIndexChecksum, got, want)
	}
	records := make([]IndexRecord, 0, len(body)/IndexRecordLength)
	for off := 0; off < len(body); off += IndexRecordLength {
		r := IndexRecord{
			StartOffset: int64(binary.BigEndian.Uint64(body[off:])),
			RawLength:   int64(binary.BigEndian.Uint64(body[off+8:])),
			PartLength:  int64(binary.BigEndian.Uint64(body[off+16:])),
		}
		if r.StartOffset < 0 || r.RawLength < 0 || r.PartLength < 0 {
			return nil, fmt.Errorf("mapred: index record %d has a negative field: %+v", len(records), r)
		}
		records = append(records, r)
	}
	return records, nil
}

// MapOutput is a map's whole output: file.out, one IFile segment per
// partition in partition order, and its index.
type MapOutput struct {
	File  []byte
	Index []IndexRecord
}

// BuildMapOutput lays out the segments of partitions 0..n-1 one after the
// other, as MapTask's merge writes file.out, with their index records.
func BuildMapOutput(partitions []*SegmentWriter) MapOutput {
	var out MapOutput
	for _, w := range partitions {
		seg, raw := w.Close()
		out.Index = append(out.Index, IndexRecord{StartOffset: int64(len(out.File)), RawLength: raw, PartLength: int64(len(seg))})
		out.File = append(out.File, seg...)
	}
	return out
}
