package logs

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/test/recordings"
)

// TestLogPagesOfAggregatedContainers: once a container's logs have left
// the node, its log pages read them from the node's aggregated file (the
// recorded TFile file here).
func TestLogPagesOfAggregatedContainers(t *testing.T) {
	for _, name := range []string{"localhost_8241", "localhost_8241_1795680500000"} {
		t.Run(name, func(t *testing.T) { testLogPagesOfAggregatedContainers(t, name) })
	}
}

// testLogPagesOfAggregatedContainers serves the recorded file under name;
// under a rolled name, a later rolled file holds one more container.
func testLogPagesOfAggregatedContainers(t *testing.T, name string) {
	const app, cid = "application_1795680442682_0005", "container_1795680442682_0005_01_000002"
	root := t.TempDir()
	layout := aggregated.LayoutFor(aggregated.FormatTFile, func(k string) (string, bool) {
		return root, k == aggregated.ConfRemoteDir
	})
	dir, err := layout.AppDir("root", app)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(recordings.Path(t, "hadoop-logs", "tfile", app+".localhost_8241"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rolled := name != "localhost_8241"
	if rolled {
		var later bytes.Buffer
		w, err := aggregated.NewTFileWriter(&later, aggregated.Header{Owner: "root", NodeID: "localhost:8241"})
		if err != nil {
			t.Fatal(err)
		}
		err = w.WriteContainer("container_1795680442682_0005_01_000003", []aggregated.SourceFile{{Name: "syslog.1", Size: 6, ModTime: time.Now(),
			Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("later\n")), nil }}})
		if err != nil || w.Close() != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "localhost_8241_1795680600000"), later.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		// Another node's rolled file and a file being written are not this node's.
		for _, other := range []string{"localhost_82410_1795680600000", "localhost_8241_1795680700000.tmp"} {
			if err := os.WriteFile(filepath.Join(dir, other), []byte("not an aggregated file"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	e, err := New(Config{
		NodeID: "localhost:8241", WebAddress: "localhost:8242", Dirs: Dirs{t.TempDir()}, Source: fakeSource{},
		Access:     Access{Enabled: true, Admin: acl.Parse(" "), Groups: func(string) []string { return nil }},
		Aggregated: &Aggregated{Lister: LocalStore{}, Layouts: []aggregated.Layout{layout}}, Location: time.UTC,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	base := srv.URL + "/node/containerlogs/" + cid
	code, _, body := get(t, base+"/root?user.name=root", "")
	if code != http.StatusOK || !strings.Contains(body, `<a href="/node/containerlogs/`+cid+`/root/stdout/?start=-4096">stdout : Total file length is 4 bytes.</a>`) {
		t.Errorf("list: %d\n%s", code, body)
	}
	code, _, body = get(t, base+"/root/stdout/?start=0&user.name=root", "")
	if code != http.StatusOK || !strings.Contains(body, "<pre>err\n</pre>") {
		t.Errorf("file: %d\n%s", code, body)
	}
	code, _, body = get(t, base+"/root/prelaunch.out/?start=-20&user.name=root", "")
	if code != http.StatusOK || !strings.Contains(body, "Showing 20 bytes.") || !strings.Contains(body, "<pre>ing container\nhello\n</pre>") {
		t.Errorf("range: %d\n%s", code, body)
	}
	// Another owner in the URL finds no file (the path holds the owner);
	// another caller is refused.
	if code, _, _ := get(t, base+"/bob?user.name=bob", ""); code != http.StatusNotFound {
		t.Errorf("another owner: %d", code)
	}
	if code, _, _ := get(t, base+"/root?user.name=eve", ""); code != http.StatusForbidden {
		t.Errorf("another caller: %d", code)
	}
	if code, _, _ := get(t, srv.URL+"/node/containerlogs/container_1795680442682_0005_01_000009/root?user.name=root", ""); code != http.StatusNotFound {
		t.Errorf("unknown container: %d", code)
	}
	if rolled {
		code, _, body = get(t, srv.URL+"/node/containerlogs/container_1795680442682_0005_01_000003/root/syslog.1/?start=0&user.name=root", "")
		if code != http.StatusOK || !strings.Contains(body, "<pre>later\n</pre>") {
			t.Errorf("a later rolled file: %d\n%s", code, body)
		}
	}
}
