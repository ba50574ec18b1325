package sparkshuffle

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/knitdev/knit/test/recordings"
)

// seedFrames adds every recorded client frame as a seed.
func seedFrames(f *testing.F, whole bool) {
	dir := recordings.Path(f, "spark-shuffle")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.c2s.bin"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if whole {
			f.Add(b)
			continue
		}
		for _, fr := range splitFrames(b) {
			if fr.partial {
				f.Add(fr.bytes)
				continue
			}
			f.Add(append([]byte{fr.typ}, fr.payload...))
		}
	}
}

// FuzzReadFrame: the frame reader and the transport message decoder never
// panic and never accept a frame beyond the bound.
func FuzzReadFrame(f *testing.F) {
	seedFrames(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			typ, p, err := readFrame(r, 1<<16)
			if err != nil {
				return
			}
			if len(p) >= 1<<16 {
				t.Fatalf("frame payload of %d bytes beyond the bound", len(p))
			}
			decodeRequest(typ, p)
		}
	})
}

// FuzzDecodeRequest decodes transport messages.
func FuzzDecodeRequest(f *testing.F) {
	seedFrames(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		decodeRequest(b[0], b[1:])
	})
}

// FuzzDecodeMessage: every BlockTransferMessage decodes without panic, and
// what decodes re-encodes to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range []any{
		&OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_0_0"}},
		&FetchShuffleBlocks{AppID: "a", ExecID: "1", MapIDs: []int64{1, 2}, ReduceIDs: [][]int32{{0}, {1, 2}}, BatchFetch: true},
		&RegisterExecutor{AppID: "a", ExecID: "1", Info: ExecutorShuffleInfo{LocalDirs: []string{"/x"}, SubDirsPerLocalDir: 64, ShuffleManager: sortManager}},
		&GetLocalDirsForExecutors{AppID: "a", ExecIDs: []string{"1"}},
		&RemoveBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"rdd_1_1"}},
		&DiagnoseCorruption{AppID: "a", ExecID: "1", Algorithm: "ADLER32"},
		&FetchShuffleBlockChunks{AppID: "a", ExecID: "1", ReduceIDs: []int32{1}, ChunkIDs: [][]int32{{0}}},
	} {
		f.Add(encodeMessage(m))
	}
	seedFrames(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			if _, ok := err.(*JavaError); !ok {
				t.Fatalf("error %T is not a JavaError: %v", err, err)
			}
			return
		}
		switch m.(type) {
		case *unservedMessage, *pushBlockStream:
			return
		}
		if !utf8.Valid(b) {
			return // strings decode as Java's decoder does, U+FFFD for bad bytes
		}
		if again := encodeMessage(m); !bytes.HasPrefix(b, again) {
			t.Fatalf("%T re-encodes to %x, decoded from %x", m, again, b)
		}
	})
}

// FuzzAuthMessages decodes the auth engine's and SASL's messages, and runs
// the server side of the auth engine on what decodes.
func FuzzAuthMessages(f *testing.F) {
	seedFrames(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeAuthMessage(b); err == nil {
			authServerRespond(bytes.NewReader(make([]byte, 256)), 2, []byte("secret"), m)
		}
		decodeSaslMessage(b)
	})
}

// FuzzBlockIDs parses OpenBlocks ids and stream chunk names.
func FuzzBlockIDs(f *testing.F) {
	for _, s := range []string{"shuffle_0_1_2", "rdd_5_0", "shuffle_0_1_", "123_4", "appId=x", "_", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		openBlocksRefs(&OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{s, s}})
		c := &conn{streams: map[int64]*stream{}}
		c.streamChunk(context.Background(), s)
		fetchShuffleRefs(&FetchShuffleBlocks{MapIDs: []int64{1, 2}, ReduceIDs: [][]int32{{int32(len(s))}}, BatchFetch: len(s)%2 == 0})
	})
}
