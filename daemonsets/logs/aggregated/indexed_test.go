package aggregated

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// indexedUpload is the recorded index's upload time.
func TestIndexedRecordingDecodesToYarnLogs(t *testing.T) {
	file := recording(t, "indexed", indexedApp+"."+nodeFile)
	r, err := OpenIndexed(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Owner != "root" || h.NodeID != "localhost:8241" || len(h.ACLs) != 0 {
		t.Errorf("header = %+v", h)
	}
	if !r.ApplicationID(indexedApp) || r.ApplicationID(tfileApp) {
		t.Error("separator does not identify the application")
	}
	if got, want := dump(t, r, DumpOptions{}), string(recording(t, "indexed", "yarn-logs-app.stdout")); got != want {
		t.Errorf("yarn logs output differs\n%s", firstDiff(got, want))
	}
	got := dump(t, r, DumpOptions{ContainerID: "container_1795680855678_0001_01_000002", LogFiles: []string{"stdout"}})
	if want := string(recording(t, "indexed", "yarn-logs-container-stdout.stdout")); got != want {
		t.Errorf("container stdout differs\n%s", firstDiff(got, want))
	}
}

// TestIndexedMetaReencodes decodes the recorded index and serializes it
// again: the same bytes, so HashMap order, sizes, shared strings and class
// descriptors follow Java's.
func TestIndexedMetaReencodes(t *testing.T) {
	file := recording(t, "indexed", indexedApp+"."+nodeFile)
	n := int(binary.BigEndian.Uint32(file[len(file)-uuidLen-4:]))
	idx := file[len(file)-uuidLen-4-n : len(file)-uuidLen-4]
	v, err := decodeJava(idx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseIndexedMeta(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeIndexedMeta(m); !bytes.Equal(got, idx) {
		t.Errorf("re-encoded index differs\n%s", firstDiff(string(got), string(idx)))
	}
}

// TestIndexedWriterMatchesRecording rewrites the recorded file from its
// logs, in the recorded data order, and expects the same bytes.
func TestIndexedWriterMatchesRecording(t *testing.T) {
	file := recording(t, "indexed", indexedApp+"."+nodeFile)
	r, err := OpenIndexed(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	// The NodeManager wrote the containers' bytes in aggregation order;
	// the index lists them in HashMap order. Rebuild the insertion order
	// from the offsets.
	agg := r.meta.aggs[0]
	containers := append([]indexedContainer(nil), agg.containers...)
	sortByFirstOffset(containers)
	reordered := &IndexedReader{r: r.r, size: r.size, meta: r.meta}
	reordered.meta.aggs = []indexedAgg{{upload: agg.upload, remote: agg.remote, containers: containers}}

	var out bytes.Buffer
	w, err := NewIndexedWriter(&out, indexedApp, r.Header(), nodeFile, time.UnixMilli(agg.upload))
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, reordered, w)
	if !bytes.Equal(out.Bytes(), file) {
		t.Errorf("rewritten file differs from the recording\n%s", firstDiff(out.String(), string(file)))
	}
}

func sortByFirstOffset(cs []indexedContainer) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].files[0].start < cs[j-1].files[0].start; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}
