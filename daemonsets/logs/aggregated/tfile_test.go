package aggregated

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/knitdev/knit/test/recordings"
)

const (
	tfileApp   = "application_1795680442682_0005"
	indexedApp = "application_1795680855678_0001"
	nodeFile   = "localhost_8241"
)

func recording(t *testing.T, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(recordings.Path(t, append([]string{"hadoop-logs"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tfileModTime is the recorded file's modification time as the recorded
// `yarn logs` printed it (the copy kept no mtime).
var tfileModTime = time.Date(2026, 11, 26, 8, 12, 35, 0, time.UTC)

func dump(t *testing.T, r Reader, o DumpOptions) string {
	t.Helper()
	o.Location = time.UTC
	var out bytes.Buffer
	found, err := Dump(&out, r, nodeFile, o)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no log found")
	}
	return out.String()
}

func TestTFileRecordingDecodesToYarnLogs(t *testing.T) {
	file := recording(t, "tfile", tfileApp+"."+nodeFile)
	r, err := OpenTFile(bytes.NewReader(file), int64(len(file)), tfileModTime)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Owner != "root" || len(h.ACLs) != 0 {
		t.Errorf("header = %+v", h)
	}
	if got, want := dump(t, r, DumpOptions{}), string(recording(t, "tfile", "yarn-logs-app.stdout")); got != want {
		t.Errorf("yarn logs output differs\n%s", firstDiff(got, want))
	}
	got := dump(t, r, DumpOptions{ContainerID: "container_1795680442682_0005_01_000002", LogFiles: []string{"stdout"}})
	if want := string(recording(t, "tfile", "yarn-logs-container-stdout.stdout")); got != want {
		t.Errorf("container stdout differs\n%s", firstDiff(got, want))
	}
}

// TestTFileWriterMatchesRecording writes the recorded file's contents again
// and expects the same bytes: same entries, chunks, blocks, indexes and
// trailer.
func TestTFileWriterMatchesRecording(t *testing.T) {
	file := recording(t, "tfile", tfileApp+"."+nodeFile)
	r, err := OpenTFile(bytes.NewReader(file), int64(len(file)), tfileModTime)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := NewTFileWriter(&out, r.Header())
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, r, w)
	if !bytes.Equal(out.Bytes(), file) {
		t.Errorf("rewritten file differs from the recording\n%s", firstDiff(out.String(), string(file)))
	}
}

// rewrite copies every container of r into w, in r's order.
func rewrite(t *testing.T, r Reader, w Writer) {
	t.Helper()
	var order []string
	files := map[string][]SourceFile{}
	err := r.Walk(func(f LogFile, content io.Reader) error {
		b, err := io.ReadAll(content)
		if err != nil {
			return err
		}
		if _, ok := files[f.ContainerID]; !ok {
			order = append(order, f.ContainerID)
		}
		files[f.ContainerID] = append(files[f.ContainerID], SourceFile{
			Name: f.Name, Size: int64(len(b)), ModTime: f.ModTime,
			Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range order {
		if err := w.WriteContainer(c, files[c]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	return "at byte " + itoa(i) + "\n got: " + quote(got[lo:min(len(got), i+80)]) + "\nwant: " + quote(want[lo:min(len(want), i+80)])
}
