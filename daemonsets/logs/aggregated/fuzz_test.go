package aggregated

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// maxFuzzInput bounds inputs so a run stays fast; the readers never
// allocate more than the input they are given allows.
const maxFuzzInput = 1 << 20

func seeds(f *testing.F, dir string) {
	matches, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "shared", "testdata", "hadoop-logs", dir, "application_*"))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
}

func drain(r Reader) {
	_ = r.Walk(func(_ LogFile, content io.Reader) error {
		_, err := io.Copy(io.Discard, content)
		return err
	})
}

func FuzzTFileReader(f *testing.F) {
	seeds(f, "tfile")
	var small bytes.Buffer
	w, _ := NewTFileWriter(&small, Header{Owner: "u", ACLs: []ACL{{"VIEW_APP", "a"}}})
	_ = w.WriteContainer("container_1_0001_01_000001", []SourceFile{memFile("stdout", "hi\n")})
	_ = w.Close()
	f.Add(small.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		r, err := OpenTFile(bytes.NewReader(b), int64(len(b)), time.Time{})
		if err != nil {
			return
		}
		drain(r)
	})
}

func FuzzIndexedReader(f *testing.F) {
	seeds(f, "indexed")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		r, err := OpenIndexed(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		drain(r)
	})
}

func memFile(name, content string) SourceFile {
	return SourceFile{Name: name, Size: int64(len(content)), ModTime: time.UnixMilli(1795680000000),
		Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(content))), nil }}
}
