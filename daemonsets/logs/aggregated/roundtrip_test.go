package aggregated

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

type written struct {
	container, name, content string
}

// TestWritersRoundTrip writes several containers, one log larger than a
// TFile chunk and data block, in both formats, and reads back the same
// files in the same order.
func TestWritersRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3*tfileChunk+12345)
	for i := range big {
		big[i] = byte('a' + rng.IntN(26))
	}
	want := []written{
		{"container_1_0007_01_000001", "stderr", "boom\n"},
		{"container_1_0007_01_000001", "stdout", ""},
		{"container_1_0007_01_000002", "syslog", string(big)},
		{"container_1_0007_01_000002", "naïve.log", strings.Repeat("x", 300*1024)},
		{"container_1_0007_01_000003", "stdout", "done\n"},
	}
	h := Header{Owner: "alice", ACLs: []ACL{{"VIEW_APP", "bob"}, {"MODIFY_APP", " admins"}}, NodeID: "127.0.1.1:8041"}
	for _, format := range []Format{FormatTFile, FormatIndexed} {
		t.Run(string(format), func(t *testing.T) {
			var out bytes.Buffer
			var w Writer
			var err error
			if format == FormatTFile {
				w, err = NewTFileWriter(&out, h)
			} else {
				w, err = NewIndexedWriter(&out, "application_1_0007", h, NodeFile(h.NodeID), time.UnixMilli(1795680000000))
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(want); {
				j := i
				var files []SourceFile
				for ; j < len(want) && want[j].container == want[i].container; j++ {
					files = append(files, memFile(want[j].name, want[j].content))
				}
				if err := w.WriteContainer(want[i].container, files); err != nil {
					t.Fatal(err)
				}
				i = j
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b := out.Bytes()
			var r Reader
			if format == FormatTFile {
				r, err = OpenTFile(bytes.NewReader(b), int64(len(b)), time.Time{})
			} else {
				r, err = OpenIndexed(bytes.NewReader(b), int64(len(b)))
			}
			if err != nil {
				t.Fatal(err)
			}
			gh := r.Header()
			if gh.Owner != h.Owner || len(gh.ACLs) != 2 || gh.ACLs[0] != h.ACLs[0] || gh.ACLs[1] != h.ACLs[1] {
				t.Errorf("header = %+v", gh)
			}
			var got []written
			if err := r.Walk(func(f LogFile, content io.Reader) error {
				c, err := io.ReadAll(content)
				got = append(got, written{f.ContainerID, f.Name, string(c)})
				if int64(len(c)) != f.Length {
					t.Errorf("%s: length %d, read %d", f.Name, f.Length, len(c))
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if format == FormatIndexed {
				// HashMap order: compare as sets of containers, files in order.
				sortWritten(got)
			}
			if len(got) != len(want) {
				t.Fatalf("read %d files, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("file %d = %s/%s (%d bytes), want %s/%s (%d bytes)", i, got[i].container, got[i].name, len(got[i].content), want[i].container, want[i].name, len(want[i].content))
				}
			}
		})
	}
}

func sortWritten(w []written) {
	for i := 1; i < len(w); i++ {
		for j := i; j > 0 && w[j].container < w[j-1].container; j-- {
			w[j], w[j-1] = w[j-1], w[j]
		}
	}
}

// TestTFileWriterBlocks checks the structure a large file gets: one data
// block per 256 KiB of entries, non-last value chunks at the 1 MiB buffer.
func TestTFileWriterBlocks(t *testing.T) {
	var out bytes.Buffer
	w, err := NewTFileWriter(&out, Header{Owner: "u"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"container_1_0001_01_000001", "container_1_0001_01_000002"} {
		if err := w.WriteContainer(c, []SourceFile{memFile("stdout", strings.Repeat("y", 2*tfileChunk))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := openTFile(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.blocks) != 2 || tr.records != 5 {
		t.Errorf("blocks = %d, records = %d; want 2 blocks (header entries and the first container, then the second), 5 records", len(tr.blocks), tr.records)
	}
}
