package webproxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// The recorded cluster: RM web localhost:8288, MR SleepJob 0004 (running,
// then finished with the JobHistory URL as its final tracking URL), a
// finished DistributedShell 0005 that gave none.
const (
	rmWebURL = "http://localhost:8288"
	mrApp    = "application_1795680442682_0004"
	dsApp    = "application_1795680442682_0005"
	jhsURL   = "http://localhost:19888/jobhistory/job/job_1795680442682_0004"
)

// recorded is one exchange of ../shared/testdata/hadoop-proxy.
type recorded struct {
	status int
	header []headerLine // in the recorded order, repeats kept
	body   []byte
}

type headerLine struct{ name, value string }

func (r recorded) get(name string) string {
	for _, h := range r.header {
		if strings.EqualFold(h.name, name) {
			return h.value
		}
	}
	return ""
}

func readRecorded(t *testing.T, name string) recorded {
	t.Helper()
	dir := recordings.Path(t, "hadoop-proxy")
	hf, err := os.Open(filepath.Join(dir, name+".headers"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(hf, strings.NewReader("\r\n"))), nil)
	if err != nil {
		t.Fatalf("%s.headers: %v", name, err)
	}
	resp.Body.Close()
	var rec recorded
	rec.status = resp.StatusCode
	raw, err := os.ReadFile(filepath.Join(dir, name+".headers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n")[1:] {
		if k, v, ok := strings.Cut(line, ": "); ok {
			rec.header = append(rec.header, headerLine{k, v})
		}
	}
	if rec.body, err = os.ReadFile(filepath.Join(dir, name+".body")); err != nil {
		t.Fatal(err)
	}
	return rec
}

// framing headers differ with how each server frames a body of the same
// bytes (Jetty chunked what Go sends with a length, and back).
func framing(name string) bool {
	return strings.EqualFold(name, "Transfer-Encoding") || strings.EqualFold(name, "Content-Length")
}

// compare checks status, every recorded header (Date and Expires by
// form, not value) and no header beyond them, and the body byte for byte.
func compare(t *testing.T, name string, want recorded, got *http.Response, body []byte) {
	t.Helper()
	if got.StatusCode != want.status {
		t.Errorf("%s: status %d, recorded %d", name, got.StatusCode, want.status)
	}
	seen := map[string]bool{}
	for _, h := range want.header {
		seen[http.CanonicalHeaderKey(h.name)] = true
		v := headerValue(got.Header, h.name)
		switch {
		case strings.EqualFold(h.name, "Date") || strings.EqualFold(h.name, "Expires"):
			if _, err := http.ParseTime(v); err != nil {
				t.Errorf("%s: %s %q is no HTTP date", name, h.name, v)
			}
		case strings.EqualFold(h.name, "Content-Length"):
			if got.ContentLength >= 0 && h.value != "" && want.get("Transfer-Encoding") == "" {
				if n := len(body); h.value != strconv.Itoa(n) {
					t.Errorf("%s: Content-Length %d, recorded %s", name, n, h.value)
				}
			}
		case framing(h.name):
		case v != h.value:
			t.Errorf("%s: %s = %q, recorded %q", name, h.name, v, h.value)
		}
	}
	for k := range got.Header {
		if !seen[http.CanonicalHeaderKey(k)] && !framing(k) {
			t.Errorf("%s: header %s = %q, which the recorded answer does not have", name, k, got.Header[k])
		}
	}
	if string(body) != string(want.body) {
		t.Errorf("%s: body differs from the recorded one\n got: %q\nwant: %q", name, clip(body), clip(want.body))
	}
}

func headerValue(h http.Header, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// fakeApps is the RM as the proxy sees it.
type fakeApps struct {
	mu     sync.Mutex
	apps   map[string]Application
	denied map[string]bool // user → may view nothing
}

func (f *fakeApps) ProxyApplication(_ context.Context, user string, id yarnid.ApplicationID) (Application, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.apps[id.String()]
	if !ok {
		return Application{}, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
	}
	if f.denied[user] {
		return Application{}, yarnerr.AccessControl.Errorf("User %s cannot perform operation VIEW_APP on %s", user, id)
	}
	return a, nil
}

func (f *fakeApps) set(id string, a Application) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apps[id] = a
}

// fakeAM serves the MR AM's recorded answers as the proxy received them
// (the RM's own X-FRAME-OPTIONS left out), behind its AmIpFilter, and
// keeps the last request it served.
type fakeAM struct {
	srv  *httptest.Server
	mu   sync.Mutex
	last *http.Request
}

func newFakeAM(t *testing.T, pages map[string]recorded) *fakeAM {
	t.Helper()
	am := &fakeAM{}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		am.mu.Lock()
		am.last = r.Clone(context.Background())
		am.mu.Unlock()
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		for _, h := range page.header {
			if strings.EqualFold(h.name, "X-FRAME-OPTIONS") || framing(h.name) {
				continue
			}
			w.Header()[h.name] = append(w.Header()[h.name], h.value)
		}
		if page.get("Content-Length") != "" {
			w.Header().Set("Content-Length", page.get("Content-Length"))
		}
		w.WriteHeader(page.status)
		_, _ = w.Write(page.body)
		if f, ok := w.(http.Flusher); ok && page.get("Transfer-Encoding") != "" {
			f.Flush()
		}
	})
	// The MR AM's filter: PROXY_HOSTS localhost, the RM web address.
	am.srv = httptest.NewServer(&AMFilter{ProxyHosts: []string{"127.0.0.1"}, ProxyURIBase: rmWebURL + "/proxy/" + mrApp, Next: mux})
	t.Cleanup(am.srv.Close)
	return am
}

func (am *fakeAM) lastRequest() *http.Request {
	am.mu.Lock()
	defer am.mu.Unlock()
	return am.last
}

// trackingURL is what the MR AM registers: host:port, no scheme.
func (am *fakeAM) trackingURL() string { return strings.TrimPrefix(am.srv.URL, "http://") }

func newProxy(t *testing.T, apps Apps, mod func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{Apps: apps, RMWebURL: rmWebURL, Timeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	p.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return srv
}

// get asks as curl did: its User-Agent and Accept, no redirects followed,
// from the local address from (nil: the system's choice).
func get(t *testing.T, rawURL, accept string, from net.IP) (*http.Response, []byte) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	tr := &http.Transport{DialContext: d.DialContext, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "curl/7.88.1")
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestReplayRecordedProxy replays every exchange of the real RM's proxy and
// compares status, headers and body with what it answered.
func TestReplayRecordedProxy(t *testing.T) {
	root := readRecorded(t, "01-rm-proxy-root")
	info := readRecorded(t, "02-rm-proxy-ws-info")
	am := newFakeAM(t, map[string]recorded{"/": root, "/ws/v1/mapreduce/info": info})
	apps := &fakeApps{apps: map[string]Application{
		mrApp: {User: "root", State: yarnpb.YarnApplicationStateProto_RUNNING, OriginalTrackingURL: am.trackingURL()},
		dsApp: {User: "root", State: yarnpb.YarnApplicationStateProto_FINISHED, OriginalTrackingURL: "N/A"},
	}}
	proxy := newProxy(t, apps, nil)

	running := []struct{ name, path, accept string }{
		{"01-rm-proxy-root", "/proxy/" + mrApp + "/", "*/*"},
		{"02-rm-proxy-ws-info", "/proxy/" + mrApp + "/ws/v1/mapreduce/info", "application/json"},
		{"03-rm-proxy-noslash", "/proxy/" + mrApp, "*/*"},
		{"09-rm-proxy-unknown-app", "/proxy/application_1795680442682_9999/", "*/*"},
		{"10-rm-proxy-finished-ds-app", "/proxy/" + dsApp + "/", "*/*"},
	}
	for _, c := range running {
		resp, body := get(t, proxy.URL+c.path, c.accept, nil)
		compare(t, c.name, readRecorded(t, c.name), resp, body)
	}
	// The proxy told the AM who asked, and passed curl's headers.
	last := am.lastRequest()
	if got := last.Header.Get("Cookie"); got != ProxyUserCookie+"=dr.who" {
		t.Errorf("the AM got Cookie %q, want proxy-user=dr.who", got)
	}
	if got := last.Header.Get("User-Agent"); got != "curl/7.88.1" {
		t.Errorf("the AM got User-Agent %q", got)
	}

	// The AM's own filter: a direct visitor from 127.0.0.2 is sent to the
	// proxy's redirect path; the proxy host passes.
	amURL := am.srv.URL
	for _, c := range []struct {
		name, path string
		from       string
	}{
		{"04-am-direct-from-127.0.0.2", "/ws/v1/mapreduce/info", "127.0.0.2"},
		{"05-am-direct-from-127.0.0.1", "/ws/v1/mapreduce/info", "127.0.0.1"},
		{"06-am-direct-root-from-127.0.0.2", "/", "127.0.0.2"},
	} {
		want := readRecorded(t, c.name)
		resp, body := get(t, amURL+c.path, "*/*", net.ParseIP(c.from))
		if resp.StatusCode != want.status || resp.Header.Get("Location") != want.get("Location") {
			t.Errorf("%s: %d Location %q, recorded %d %q", c.name, resp.StatusCode, resp.Header.Get("Location"), want.status, want.get("Location"))
		}
		if want.status == http.StatusFound && string(body) != string(want.body) {
			t.Errorf("%s: body %q, recorded %q", c.name, body, want.body)
		}
	}
	// Following that redirect from 127.0.0.2 (not this host's address)
	// reaches the AM through the proxy.
	loc, _ := url.Parse(readRecorded(t, "04-am-direct-from-127.0.0.2").get("Location"))
	resp, body := get(t, proxy.URL+loc.Path, "application/json", net.ParseIP("127.0.0.2"))
	compare(t, "04 followed", info, resp, body)

	// The job ends: its final tracking URL is the JobHistory server's.
	apps.set(mrApp, Application{User: "root", State: yarnpb.YarnApplicationStateProto_FINISHED, OriginalTrackingURL: jhsURL})
	for _, c := range []struct{ name, path string }{
		{"07-rm-proxy-finished-root", "/proxy/" + mrApp + "/"},
		{"08-rm-proxy-finished-ws-info", "/proxy/" + mrApp + "/ws/v1/mapreduce/info"},
	} {
		resp, body := get(t, proxy.URL+c.path, "*/*", nil)
		compare(t, c.name, readRecorded(t, c.name), resp, body)
	}
}
