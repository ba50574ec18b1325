package logs

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/test/recordings"
)

const (
	runningApp = "application_1795680442682_0004"
	runningCID = "container_1795680442682_0004_01_000005"
	nodeID     = "localhost:8241"
)

type fakeSource []Container

func (f fakeSource) Containers() []Container { return f }

var mtime = time.Date(2026, 11, 26, 8, 11, 59, 0, time.UTC)

// testServer lays out the recorded running container's log files (stdout
// empty, like the recording) and serves them.
func testServer(t testing.TB, access Access) (*httptest.Server, Dirs) {
	t.Helper()
	dirs := Dirs{t.TempDir()}
	files := map[string]string{"stdout": "", "stderr": "", "syslog": strings.Repeat("s", 10368), "prelaunch.out": strings.Repeat("p", 100)}
	dir := filepath.Join(dirs[0], runningApp, runningCID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := dirs.SetRecord(runningApp, AppRecord{Owner: "root", ACLs: []aggregated.ACL{{Type: "VIEW_APP", Value: "bob"}}}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{
		NodeID: nodeID, WebAddress: "127.0.0.1:8242", Dirs: dirs,
		Source: fakeSource{{ID: runningCID, App: runningApp, User: "root", State: "RUNNING", ExitCode: ExitInvalid, MemoryMB: 512, VCores: 1, ExecutionType: "GUARANTEED"}},
		Access: access, Location: time.UTC, RMWebAddress: "localhost:8288",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, dirs
}

func get(t *testing.T, url, accept string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(recordings.Path(t, "hadoop-logs", "running", "nm-web", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// keys returns the key paths of a JSON document, arrays collapsed.
func keys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	var out []string
	var walk func(string, any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				out = append(out, p+"."+k)
				walk(p+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(p+"[]", x)
			}
		}
	}
	walk("", v)
	slices.Sort(out)
	return slices.Compact(out)
}

func TestNodeWebShapesMatchRecording(t *testing.T) {
	srv, _ := testServer(t, Access{})
	for _, tc := range []struct{ path, recording string }{
		{"/ws/v1/node/containers/" + runningCID + "/logs", "01-container-logs-json.body"},
		{"/ws/v1/node/info", "04-node-info.body"},
		{"/ws/v1/node/apps", "05-node-apps.body"},
		{"/ws/v1/node/containers", "06-node-containers.body"},
		{"/ws/v1/node/containers/container_1795680442682_0004_01_000099/logs", "12-container-logs-unknown-cid.body"},
	} {
		code, h, body := get(t, srv.URL+tc.path, "application/json")
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s", tc.path, code, h.Get("Content-Type"))
		}
		if got, want := keys(t, body), keys(t, recorded(t, tc.recording)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: keys\n got %v\nwant %v", tc.path, got, want)
		}
	}
	_, _, body := get(t, srv.URL+"/ws/v1/node/containers/"+runningCID+"/logs", "")
	if !strings.Contains(body, `{"fileName":"syslog","fileSize":"10368","lastModifiedTime":"Thu Nov 26 08:11:59 +0000 2026"}`) {
		t.Errorf("log list: %s", body)
	}
	_, h, body := get(t, srv.URL+"/ws/v1/node/containers/"+runningCID+"/logs", "application/xml")
	if !strings.HasPrefix(h.Get("Content-Type"), "application/xml") || !strings.Contains(body, "<containerLogsInfo><containerLogInfo><fileName>prelaunch.out</fileName>") {
		t.Errorf("XML: %s %s", h.Get("Content-Type"), body)
	}
}

func TestContainerLogEnvelopeMatchesRecording(t *testing.T) {
	srv, _ := testServer(t, Access{})
	for _, path := range []string{"/ws/v1/node/containerlogs/" + runningCID + "/stdout", "/ws/v1/node/containers/" + runningCID + "/logs/stdout?size=9223372036854775807"} {
		code, h, body := get(t, srv.URL+path, "text/plain")
		if code != http.StatusOK || h.Get("Content-Type") != "text/plain;charset=utf-8" {
			t.Errorf("%s: %d %s", path, code, h.Get("Content-Type"))
		}
		if want := recorded(t, "02-containerlogs-stdout.body"); body != want {
			t.Errorf("%s:\n got %q\nwant %q", path, body, want)
		}
	}
	_, _, body := get(t, srv.URL+"/ws/v1/node/containerlogs/"+runningCID+"/prelaunch.out?size=-10", "")
	if !strings.Contains(body, "LogLength:100\nLogContents:\npppppppppp"+"End of LogType:prelaunch.out.This log") {
		t.Errorf("size=-10: %q", body)
	}
	if code, _, _ := get(t, srv.URL+"/ws/v1/node/containerlogs/"+runningCID+"/nope", ""); code != http.StatusNotFound {
		t.Errorf("missing file: %d", code)
	}
	if code, _, _ := get(t, srv.URL+"/ws/v1/node/containerlogs/"+runningCID+"/..%2f..%2fetc", ""); code != http.StatusNotFound {
		t.Errorf("escaping name: %d", code)
	}
}

func TestHTMLPagesMatchRecording(t *testing.T) {
	srv, _ := testServer(t, Access{})
	_, _, body := get(t, srv.URL+"/node/containerlogs/"+runningCID+"/root", "")
	want := recorded(t, "07-html-containerlogs.body")
	// The recording lists eight files; this node has four of them.
	for _, line := range strings.Split(want, "\n") {
		if strings.Contains(line, "Total file length") && !strings.Contains(line, "/stdout/") && !strings.Contains(line, "/syslog/") && !strings.Contains(line, "/prelaunch.out/") && !strings.Contains(line, "/stderr/") {
			want = strings.Replace(want, "          <p>\n"+line+"\n", "", 1)
		}
	}
	if body != want {
		t.Errorf("file list page differs:\n%s", body)
	}
	_, _, body = get(t, srv.URL+"/node/containerlogs/"+runningCID+"/root/syslog/?start=-4096", "")
	if !strings.Contains(body, "Showing 4096 bytes. Click \n            <a href=\"/node/containerlogs/"+runningCID+"/root/syslog/?start=0\">here</a>\n             for full log\n          <pre>"+strings.Repeat("s", 4096)+"</pre>\n        </td>") {
		t.Errorf("log page: %s", body)
	}
}

func TestLogAccess(t *testing.T) {
	srv, _ := testServer(t, Access{Enabled: true, Admin: acl.Parse("admin"), Groups: func(string) []string { return nil }})
	path := "/ws/v1/node/containers/" + runningCID + "/logs"
	for _, tc := range []struct {
		user string
		want int
	}{{"root", 200}, {"bob", 200}, {"admin", 200}, {"mallory", 403}, {"", 403}} {
		q := ""
		if tc.user != "" {
			q = "?user.name=" + tc.user
		}
		if code, _, body := get(t, srv.URL+path+q, ""); code != tc.want {
			t.Errorf("%q: %d %s", tc.user, code, body)
		}
		if code, _, _ := get(t, srv.URL+"/ws/v1/node/containerlogs/"+runningCID+"/stdout"+q, ""); code != tc.want {
			t.Errorf("%q log file: %d", tc.user, code)
		}
		if code, _, _ := get(t, srv.URL+"/node/containerlogs/"+runningCID+"/root"+q, ""); code != tc.want {
			t.Errorf("%q page: %d", tc.user, code)
		}
	}

	// A refusal reads as the NodeManager's: a RemoteException from the
	// web services, the bare message from the plain-text log endpoint.
	denied := "User [mallory] is not authorized to view the logs for " + runningCID
	if _, _, body := get(t, srv.URL+path+"?user.name=mallory", ""); body != `{"RemoteException":{"exception":"ForbiddenException","message":"java.lang.Exception: `+denied+`","javaClassName":"org.apache.hadoop.yarn.webapp.ForbiddenException"}}` {
		t.Errorf("log list refusal: %s", body)
	}
	if _, _, body := get(t, srv.URL+"/ws/v1/node/containerlogs/"+runningCID+"/stdout?user.name=mallory", ""); body != denied {
		t.Errorf("log file refusal: %q", body)
	}
	if _, _, body := get(t, srv.URL+"/ws/v1/node/containerlogs/container_bad/stdout", ""); body != "invalid container id, container_bad" {
		t.Errorf("bad container id: %q", body)
	}
}

// TestPseudoAuthCookieFlow replays what the stock `yarn logs` does: an
// OPTIONS with user.name that must answer 200 and set hadoop.auth, then
// GETs carrying only the cookie.
func TestPseudoAuthCookieFlow(t *testing.T) {
	srv, _ := testServer(t, Access{Enabled: true, Admin: acl.Parse(" "), Groups: func(string) []string { return nil }})
	path := srv.URL + "/ws/v1/node/containers/" + runningCID + "/logs"
	req, _ := http.NewRequest(http.MethodOptions, path+"?user.name=bob", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "hadoop.auth" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusOK || cookie == nil || !strings.HasPrefix(strings.Trim(cookie.Value, `"`), "u=bob&p=bob&t=simple&e=") {
		t.Fatalf("OPTIONS: %d, cookie %v", resp.StatusCode, cookie)
	}
	for _, tc := range []struct {
		value string
		want  int
	}{{cookie.Value, 200}, {strings.Replace(cookie.Value, "u=bob&p=bob", "u=eve&p=eve", 1), 403}, {"", 403}} {
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", "application/json")
		if tc.value != "" {
			req.Header.Set("Cookie", "hadoop.auth="+tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("cookie %q: %d, want %d", tc.value, resp.StatusCode, tc.want)
		}
	}
}
