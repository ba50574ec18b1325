package mapred

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/knitdev/knit/protocols/writable"
	"github.com/knitdev/knit/protocols/yarnid"
)

func segment(words ...string) []byte {
	w := &SegmentWriter{}
	for _, s := range words {
		w.Append(AppendText(nil, s), AppendInt(nil, 1))
	}
	seg, _ := w.Close()
	return seg
}

func TestParseSegmentRefusesDamagedSegments(t *testing.T) {
	good := segment("a", "b")
	flipped := bytes.Clone(good)
	flipped[2] ^= 0xff
	noEOF := func() []byte {
		w := &SegmentWriter{}
		w.Append([]byte{1, 'a'}, AppendInt(nil, 1))
		return withChecksum(bytes.Clone(w.buf)) // a record, no EOF marker
	}()
	trailing := withChecksum(append(bytes.Clone(good[:len(good)-ChecksumSize]), 7))
	tests := []struct {
		name    string
		segment []byte
		want    error
	}{
		{name: "a flipped byte", segment: flipped, want: ErrChecksum},
		{name: "shorter than a checksum", segment: good[:3], want: ErrTruncated},
		{name: "no EOF marker", segment: noEOF, want: ErrTruncated},
		{name: "bytes after the EOF marker", segment: trailing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSegment(tt.segment)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("ParseSegment = %v, want %v", err, tt.want)
			}
		})
	}
}

// withChecksum ends b with its CRC32, as a segment ends.
func withChecksum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func TestParseIndexRefusesABadChecksumAndPartialRecords(t *testing.T) {
	good := MarshalIndex([]IndexRecord{{0, 10, 14}, {14, 6, 10}})
	bad := bytes.Clone(good)
	bad[5] ^= 1
	if _, err := ParseIndex(bad); !errors.Is(err, ErrIndexChecksum) {
		t.Errorf("flipped index: %v", err)
	}
	if _, err := ParseIndex(good[:30]); err == nil {
		t.Error("a partial record parsed")
	}
	got, err := ParseIndex(good)
	if err != nil || len(got) != 2 || got[1] != (IndexRecord{14, 6, 10}) {
		t.Errorf("ParseIndex = %v, %v", got, err)
	}
}

func TestMergeYieldsEveryRecordInKeyOrder(t *testing.T) {
	seg := func(words ...string) []Record {
		recs, err := ParseSegment(segment(words...))
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	var got []string
	for r := range Merge([][]Record{seg("apple", "kiwi", "zebra"), nil, seg("banana", "kiwi"), seg("a")}, CompareText) {
		s, _ := ParseText(r.Key)
		got = append(got, s)
	}
	want := []string{"a", "apple", "banana", "kiwi", "kiwi", "zebra"}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
}

func TestIDsPrintAsMapReducePrintsThem(t *testing.T) {
	job := JobID{App: yarnid.ApplicationID{ClusterTimestamp: 1795680442682, ID: 3}}
	tests := []struct {
		got, want string
	}{
		{job.String(), "job_1795680442682_0003"},
		{TaskID{Job: job, Type: Reduce, Index: 12}.String(), "task_1795680442682_0003_r_000012"},
		{AttemptID{Task: TaskID{Job: job, Type: Map, Index: 2}, N: 1}.String(), "attempt_1795680442682_0003_m_000002_1"},
		{JobID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 12345}}.String(), "job_1_12345"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s, want %s", tt.got, tt.want)
		}
	}
	for _, bad := range []string{"attempt_1_0003_x_000000_0", "attempt_1_3_m_000000_0", "job_1_0003", "attempt_1_0003_m_0_0"} {
		if _, err := ParseAttemptID(bad); err == nil {
			t.Errorf("ParseAttemptID(%q) succeeded", bad)
		}
	}
}

func TestPartitionIsHashPartitionerOnText(t *testing.T) {
	// Java: new Text("container").hashCode() and "kubernetes", both of
	// which the recorded job put in partition 0 of 3.
	tests := []struct {
		word string
		hash int32
	}{
		{"", 1},
		{"a", 31 + 'a'},
		{"\u00e9", (31+int32(int8(-61)))*31 + int32(int8(-87))},
	}
	for _, tt := range tests {
		if got := TextHashCode(tt.word); got != tt.hash {
			t.Errorf("TextHashCode(%q) = %d, want %d", tt.word, got, tt.hash)
		}
	}
	for _, w := range []string{"container", "kubernetes", "dog"} {
		if p := Partition(w, 3); p != 0 {
			t.Errorf("Partition(%q, 3) = %d, the recording has it in 0", w, p)
		}
	}
}

func TestParsePortRefusesWhatTheAMRefuses(t *testing.T) {
	for _, meta := range [][]byte{nil, {0, 0, 0x34}, MarshalPort(0), {0xff, 0xff, 0xff, 0xff}} {
		if _, err := ParsePort(meta); err == nil {
			t.Errorf("ParsePort(%x) succeeded", meta)
		}
	}
}

func TestReadShuffleHeaderBoundsTheMapIDAndLengths(t *testing.T) {
	long := writable.AppendVInt(nil, MaxIDLength+1)
	negative := ShuffleHeader{MapID: "m", CompressedLength: -1, RawLength: 0}.AppendTo(nil)
	for name, b := range map[string][]byte{"a map id over the limit": long, "a negative length": negative, "empty": nil} {
		if _, err := ReadShuffleHeader(writable.NewBytesReader(b, writable.Limits{})); err == nil {
			t.Errorf("%s: read", name)
		}
	}
	h := ShuffleHeader{MapID: "attempt_1_0001_m_000000_0", CompressedLength: 300, RawLength: 296, ForReduce: 2}
	got, err := ReadShuffleHeader(writable.NewBytesReader(h.AppendTo(nil), writable.Limits{}))
	if err != nil || got != h {
		t.Errorf("round trip %+v, %v", got, err)
	}
}

func FuzzParseSegment(f *testing.F) {
	f.Add(segment("a", "b"))
	f.Add([]byte{0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseSegment(b)
		if err != nil {
			return
		}
		w := &SegmentWriter{}
		for _, r := range recs {
			w.Append(r.Key, r.Value)
		}
		if seg, _ := w.Close(); len(seg) > len(b) {
			t.Errorf("%d records rewrite to %d bytes from %d", len(recs), len(seg), len(b))
		}
	})
}

func FuzzParseIndex(f *testing.F) {
	f.Add(MarshalIndex([]IndexRecord{{0, 1, 5}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseIndex(b)
		if err == nil && !bytes.Equal(MarshalIndex(recs), b) {
			t.Errorf("index does not round trip")
		}
	})
}

func FuzzReadResponse(f *testing.F) {
	f.Add(append(ShuffleHeader{MapID: "m", CompressedLength: 6, RawLength: 2, ForReduce: 0}.AppendTo(nil), segment()...), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 100 {
			return
		}
		_, _ = ReadResponse(bytes.NewReader(b), n, 1<<16)
	})
}
