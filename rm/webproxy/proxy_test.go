package webproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

const app = "application_1700000000000_0001"

// echoAM answers every request with what it received, and keeps it.
type echoAM struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func newEchoAM(t *testing.T, h http.HandlerFunc) *echoAM {
	t.Helper()
	am := &echoAM{}
	am.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		am.mu.Lock()
		am.reqs = append(am.reqs, r.Clone(r.Context()))
		am.body = append(am.body, string(b))
		am.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Connection", "close")
		if r.URL.Query().Get("frame") != "" {
			w.Header().Set("X-Frame-Options", "DENY")
		}
		_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI())
	}))
	t.Cleanup(am.srv.Close)
	return am
}

func (am *echoAM) last() (*http.Request, string) {
	am.mu.Lock()
	defer am.mu.Unlock()
	if len(am.reqs) == 0 {
		return nil, ""
	}
	return am.reqs[len(am.reqs)-1], am.body[len(am.body)-1]
}

func running(url string) *fakeApps {
	return &fakeApps{apps: map[string]Application{
		app: {User: "alice", State: yarnpb.YarnApplicationStateProto_RUNNING, OriginalTrackingURL: url},
	}}
}

func do(t *testing.T, method, url string, body io.Reader, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.CloseIdleConnections()
	return resp, string(b)
}

func TestHeadersPassedAndStripped(t *testing.T) {
	am := newEchoAM(t, nil)
	proxy := newProxy(t, running(am.srv.URL+"/app"), nil)
	resp, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/jobs/?a=1&user.name=bob", nil, map[string]string{
		"Accept-Language": "fr", "Origin": "http://ui", "Authorization": "Basic eA==", "Cookie": "hadoop.auth=secret",
		"X-Forwarded-For": "10.0.0.1", "Referer": "http://elsewhere/",
	})
	if resp.StatusCode != http.StatusOK || body != "GET /app/jobs/?a=1&user.name=bob" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Connection") != "" || resp.Header.Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("answer headers %v: want no Connection and the RM's X-FRAME-OPTIONS", resp.Header)
	}
	r, _ := am.last()
	if r.Header.Get("Accept-Language") != "fr" || r.Header.Get("Origin") != "http://ui" {
		t.Errorf("pass-through headers lost: %v", r.Header)
	}
	for _, h := range []string{"Authorization", "X-Forwarded-For", "Referer"} {
		if r.Header.Get(h) != "" {
			t.Errorf("%s reached the AM", h)
		}
	}
	if got := r.Header.Get("Cookie"); got != "proxy-user=bob" {
		t.Errorf("Cookie %q at the AM, want only proxy-user=bob", got)
	}
	if ua := r.Header.Get("User-Agent"); ua != "" && !strings.HasPrefix(ua, "Go-http-client") {
		t.Errorf("User-Agent %q", ua)
	}
	resp, _ = do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/?frame=1", nil, nil)
	if got := resp.Header.Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
		t.Errorf("X-Frame-Options %q: want the AM's value alone", got)
	}
}

func TestMethods(t *testing.T) {
	am := newEchoAM(t, nil)
	proxy := newProxy(t, running(am.srv.URL), func(c *Config) { c.MaxRequestBytes = 8 })
	resp, body := do(t, http.MethodPut, proxy.URL+"/proxy/"+app+"/ws/v1/state", strings.NewReader(`{"s":1}`), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK || body != "PUT /ws/v1/state" {
		t.Fatalf("PUT: %d %q", resp.StatusCode, body)
	}
	r, got := am.last()
	if got != `{"s":1}` || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("the AM got %q %q", got, r.Header.Get("Content-Type"))
	}
	if resp, _ := do(t, http.MethodPut, proxy.URL+"/proxy/"+app+"/x", strings.NewReader("123456789"), nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT over the limit: %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodPost, proxy.URL+"/proxy/"+app+"/x", strings.NewReader("a"), nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	if resp, body := do(t, http.MethodHead, proxy.URL+"/proxy/"+app+"/x", nil, nil); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d %q", resp.StatusCode, body)
	}
}

func TestACLAndBadPaths(t *testing.T) {
	am := newEchoAM(t, nil)
	apps := running(am.srv.URL)
	apps.denied = map[string]bool{"mallory": true}
	proxy := newProxy(t, apps, nil)
	for _, c := range []struct {
		path   string
		status int
		text   string
	}{
		{"/proxy/" + app + "/?user.name=mallory", http.StatusForbidden, "User mallory is not authorized to view application " + app},
		{"/proxy/", http.StatusNotFound, " appears to be formatted incorrectly."},
		{"/proxy/job_1_2/", http.StatusNotFound, "job_1_2 appears to be formatted incorrectly."},
		{"/proxy", http.StatusNotFound, "Your path appears to be formatted incorrectly."},
	} {
		resp, body := do(t, http.MethodGet, proxy.URL+c.path, nil, nil)
		if resp.StatusCode != c.status || !strings.Contains(body, c.text) {
			t.Errorf("%s: %d %q, want %d with %q", c.path, resp.StatusCode, body, c.status, c.text)
		}
	}
	if r, _ := am.last(); r != nil {
		t.Errorf("the AM got %s", r.URL)
	}
}

// TestNeverAnOpenProxy: the proxy reaches the registered AM only, whatever
// the path says and wherever the AM redirects.
func TestNeverAnOpenProxy(t *testing.T) {
	other := newEchoAM(t, nil)
	am := newEchoAM(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.srv.URL+"/secret", http.StatusFound)
		case "/home":
			http.Redirect(w, r, "/jobs/", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "AM "+r.URL.Path)
		}
	})
	apps := running(am.srv.URL)
	apps.apps["application_1700000000000_0002"] = Application{User: "alice", State: yarnpb.YarnApplicationStateProto_RUNNING, OriginalTrackingURL: "file:///etc/passwd"}
	proxy := newProxy(t, apps, nil)

	if resp, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"//evil.example.com/x", nil, nil); resp.StatusCode != http.StatusOK || body != "AM //evil.example.com/x" {
		t.Errorf("double slash: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/home", nil, nil); body != "AM /jobs/" {
		t.Errorf("same-host redirect not followed: %d %q", resp.StatusCode, body)
	}
	resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/away", nil, nil)
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), other.srv.URL) {
		t.Errorf("other-host redirect: %d %q, want it passed back", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r, _ := other.last(); r != nil {
		t.Errorf("the proxy reached another host: %s", r.URL)
	}
	if resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/application_1700000000000_0002/", nil, nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("file tracking URL: %d", resp.StatusCode)
	}
}

// TestATrackingURLOfTheProxyItself: an AM that registers the proxy's own
// URL gets one refused request, not a chain of them.
func TestATrackingURLOfTheProxyItself(t *testing.T) {
	apps := &fakeApps{apps: map[string]Application{}}
	proxy := newProxy(t, apps, nil)
	apps.set(app, Application{User: "alice", State: yarnpb.YarnApplicationStateProto_RUNNING, OriginalTrackingURL: proxy.URL + "/proxy/" + app})
	resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/", nil, nil)
	if resp.StatusCode != http.StatusLoopDetected {
		t.Errorf("status %d, want 508", resp.StatusCode)
	}
}

func TestLoopBackToTheProxy(t *testing.T) {
	am := newEchoAM(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, rmWebURL+"/proxy/redirect/"+app+"/", http.StatusFound)
	})
	proxy := newProxy(t, running(am.srv.URL), nil)
	resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/", nil, nil)
	if want := rmWebURL + "/cluster/failure/" + app; resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("AM loop: %d %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

func TestTimeoutAndAnswerLimit(t *testing.T) {
	release := make(chan struct{})
	am := newEchoAM(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, strings.Repeat("x", 100))
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	proxy := newProxy(t, running(am.srv.URL), func(c *Config) { c.Timeout = 200 * time.Millisecond; c.MaxResponseBytes = 50 })
	// The AM answers only once the test ends: a 502 now is the timeout's.
	resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/slow", nil, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("silent AM: %d, want 502 at the timeout", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/big", nil, nil); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("answer over the limit: %d", resp.StatusCode)
	}
}

// TestAnswersArriveWholeOrCut checks the answer's body at the edges of
// the copy buffer, read whole before it is sent or copied as it comes: an
// AM's answer reaches the browser byte for byte, and one the AM ends short
// of its declared length reaches it cut, with no byte the AM did not send.
func TestAnswersArriveWholeOrCut(t *testing.T) {
	for _, tc := range []struct {
		name           string
		declared, sent int // declared -1: streamed, no length
	}{
		{"a declared page of the recorded MR job page's size", 7284, 7284},
		{"a declared page that fills the copy buffer", copyBufferBytes, copyBufferBytes},
		{"a declared page one byte over the copy buffer", copyBufferBytes + 1, copyBufferBytes + 1},
		{"a streamed page", -1, 3 * copyBufferBytes},
		{"an empty declared page", 0, 0},
		{"a declared page that fits the buffer, ended short", 7284, 5000},
		{"a declared page over the buffer, ended short", 2 * copyBufferBytes, copyBufferBytes + 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := make([]byte, tc.sent)
			for i := range page {
				page[i] = byte('a' + i%26)
			}
			am := newEchoAM(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.declared < 0 {
					_, _ = w.Write(page)
					return
				}
				conn, bw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				_, _ = fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", tc.declared)
				_, _ = bw.Write(page)
				_ = bw.Flush()
			})
			proxy := newProxy(t, running(am.srv.URL), nil)
			resp, err := http.Get(proxy.URL + "/proxy/" + app + "/page")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			short := tc.declared > tc.sent
			if short != errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("reading the answer: %v; the AM ended short: %v", err, short)
			}
			// A cut answer may lose its tail still in the proxy's
			// buffers when the connection is cut.
			if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(page, got) || (!short && len(got) != len(page)) {
				t.Errorf("got %d and %d bytes, want 200 and the AM's %d", resp.StatusCode, len(got), len(page))
			}
		})
	}
}

func TestWarningPageWithSecurity(t *testing.T) {
	am := newEchoAM(t, nil)
	proxy := newProxy(t, running(am.srv.URL), func(c *Config) { c.SecurityEnabled = true })
	// The owner goes straight through.
	if resp, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/x?user.name=alice", nil, nil); body != "GET /x?user.name=alice" {
		t.Errorf("owner: %d %q", resp.StatusCode, body)
	}
	// Another user is warned, and marked as warned.
	resp, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/x?user.name=bob", nil, nil)
	if !strings.Contains(body, "WARNING: The following page may not be safe!") ||
		!strings.Contains(body, `href="/proxy/`+app+`/x?user.name=bob&amp;proxyapproved=true"`) || !strings.Contains(body, "owned by \n    alice") {
		t.Errorf("warning page: %q", body)
	}
	if c := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "checked_"+app+"=false") || !strings.Contains(c, "Path=/proxy/"+app) {
		t.Errorf("warning cookie %q", c)
	}
	// Approved after the warning: proxied, and the cookie says so.
	resp, body = do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/x?user.name=bob&proxyapproved=true", nil, map[string]string{"Cookie": "checked_" + app + "=false"})
	if body != "GET /x?user.name=bob&proxyapproved=true" || !strings.HasPrefix(resp.Header.Get("Set-Cookie"), "checked_"+app+"=true") {
		t.Errorf("approved: %q %q", body, resp.Header.Get("Set-Cookie"))
	}
	// Approval without having seen the page shows the page.
	if _, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/x?user.name=bob&proxyapproved=true", nil, nil); !strings.Contains(body, "WARNING") {
		t.Errorf("approval without the cookie: %q", body)
	}
}

func TestResolvedAddress(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	for in, want := range map[string]string{
		"0.0.0.0:8088":         host + ":8088",
		"127.0.0.1:8088":       host + ":8088",
		"rm.example.com:18088": "rm.example.com:18088",
		"10.1.2.3:8088":        "10.1.2.3:8088",
	} {
		if got := ResolvedAddress(in); got != want {
			t.Errorf("ResolvedAddress(%q) = %q, want %q", in, got, want)
		}
	}
	if ip := LocalAddrFor("rm.invalid:8088"); ip != nil {
		t.Errorf("LocalAddrFor an unknown host = %v", ip)
	}
}

// TestAMFilterBehindTheProxy: an AM behind AMFilter, reached through the
// proxy, learns the web user; reached directly from elsewhere, it sends the
// caller to the proxy.
func TestAMFilterBehindTheProxy(t *testing.T) {
	var users []string
	var amURL string
	filter := NewAMFilter("rm.example:8088", Base(mustAppID(t, app)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := ProxyUser(r)
		users = append(users, u)
		_, _ = io.WriteString(w, "AM")
	}))
	// The proxy's requests come from 127.0.0.1, which rm.example stands for here.
	filter.LookupHost = func(_ context.Context, host string) ([]string, error) {
		if host != "rm.example" {
			return nil, errors.New("unknown host " + host)
		}
		return []string{"127.0.0.1"}, nil
	}
	am := httptest.NewServer(filter)
	defer am.Close()
	amURL = am.URL
	proxy := newProxy(t, running(amURL), nil)
	if _, body := do(t, http.MethodGet, proxy.URL+"/proxy/"+app+"/jobs?user.name=alice%20b", nil, nil); body != "AM" {
		t.Fatalf("through the proxy: %q", body)
	}
	if len(users) != 1 || users[0] != "alice b" {
		t.Errorf("users the AM saw: %q", users)
	}
	filter.LookupHost = func(context.Context, string) ([]string, error) { return []string{"10.0.0.1"}, nil }
	resp, _ := do(t, http.MethodGet, amURL+"/jobs?x=1", nil, nil)
	if want := "http://rm.example:8088/proxy/redirect/" + app + "/jobs?x=1"; resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("direct visit: %d %q, want a redirect to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

func mustAppID(t *testing.T, s string) yarnid.ApplicationID {
	t.Helper()
	id, err := yarnid.ParseApplicationID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
