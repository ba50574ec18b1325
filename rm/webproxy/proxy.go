package webproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Base is an application's path on the proxy, which the RM gives its AM
// as APPLICATION_WEB_PROXY_BASE (AmIpFilter's PROXY_URI_BASES end with it,
// and tracking URLs point under it).
func Base(app yarnid.ApplicationID) string { return "/proxy/" + app.String() }

// ProxyUserCookie carries the web user to the AM; AmIpFilter reads it.
const ProxyUserCookie = "proxy-user"

// viaToken names the proxy in the Via header of its requests, by which it
// knows its own requests coming back.
const viaToken = "knit-rm-proxy"

// approvalParam is the query parameter a user sets on the warning page's
// link (ProxyUriUtils.PROXY_APPROVAL_PARAM).
const approvalParam = "proxyapproved"

// Defaults of Config.
const (
	// DefaultTimeout is yarn.resourcemanager.proxy.connection.timeout.
	DefaultTimeout          = 60 * time.Second
	DefaultMaxRequestBytes  = 1 << 20
	DefaultMaxResponseBytes = 256 << 20
	maxRedirects            = 10
	// copyBufferBytes is the size of the reads from an AM and of the
	// writes to the browser.
	copyBufferBytes = 64 << 10
)

// Application is what the proxy needs of one application.
type Application struct {
	// User owns the application.
	User string
	// State is the state clients see.
	State yarnpb.YarnApplicationStateProto
	// OriginalTrackingURL is the URL the AM registered, or its final
	// tracking URL once it unregistered; "" or "N/A" when it gave none.
	OriginalTrackingURL string
}

// Apps finds applications for the proxy.
type Apps interface {
	// ProxyApplication returns the application id as user may see it. It
	// fails with a yarnerr.ApplicationNotFound error when the RM holds no
	// such application, and a yarnerr.AccessControl error when user may
	// not view it.
	ProxyApplication(ctx context.Context, user string, id yarnid.ApplicationID) (Application, error)
}

// Config configures the proxy.
type Config struct {
	// Apps answers every lookup. Required.
	Apps Apps
	// RMWebURL is the RM web address with its scheme, as AMs and browsers
	// reach it ("http://rm.example.com:8088"): the base of the redirects to
	// the RM's application and failure pages. Required.
	RMWebURL string
	// AnonymousUser is the web user when a request names none (user.name);
	// if empty, "dr.who" (hadoop.http.staticuser.user).
	AnonymousUser string
	// SecurityEnabled shows the warning page to users who do not own the
	// application, as YARN does with Kerberos on.
	SecurityEnabled bool
	// LocalAddr, if set, is the address connections to AMs come from: the
	// proxy host AMs' filters accept, as YARN binds its client to it.
	LocalAddr net.IP
	// Timeout bounds connecting, waiting for the answer and every pause
	// while copying it; if zero, DefaultTimeout.
	Timeout time.Duration
	// MaxRequestBytes and MaxResponseBytes cap bodies; if zero, the
	// defaults.
	MaxRequestBytes, MaxResponseBytes int64
	// Transport reaches the AMs; if nil, one built from the fields above.
	// Tests set it.
	Transport http.RoundTripper
	// Now is the clock of the Date and Expires headers; if nil, time.Now.
	Now func() time.Time
	// Logger logs each proxied request at debug level and failures; if
	// nil, slog.Default().
	Logger *slog.Logger
}

// Proxy serves /proxy/. Close releases its idle connections to AMs.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	tr     *http.Transport // nil when Config.Transport was given
	// bufs are the buffers answers are copied through: large, so a page
	// goes out in few writes.
	bufs         sync.Pool
	fixedHeaders http.Header
	// noUserAgent (none unless the caller sent one) and via are values
	// of every request to an AM, made once: the Transport only reads
	// them, and their capacity is their length, so an append copies.
	noUserAgent, via []string
	// dateCache holds the last Date header made, for the second it
	// names.
	dateCache atomic.Pointer[formattedDate]
}

var _ http.Handler = (*Proxy)(nil)

// New returns a proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Apps == nil {
		return nil, errors.New("webproxy: no Apps")
	}
	u, err := url.Parse(cfg.RMWebURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("webproxy: RM web URL %q is not an absolute URL", cfg.RMWebURL)
	}
	cfg.RMWebURL = strings.TrimSuffix(cfg.RMWebURL, "/")
	if cfg.AnonymousUser == "" {
		cfg.AnonymousUser = "dr.who"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Proxy{
		cfg: cfg, log: cfg.Logger, fixedHeaders: fixedHeaders(),
		noUserAgent: []string{""}, via: []string{"1.1 " + viaToken},
	}
	p.bufs.New = func() any { b := make([]byte, copyBufferBytes); return &b }
	if p.log == nil {
		p.log = slog.Default()
	}
	rt := cfg.Transport
	if rt == nil {
		d := &net.Dialer{Timeout: cfg.Timeout}
		if cfg.LocalAddr != nil {
			d.LocalAddr = &net.TCPAddr{IP: cfg.LocalAddr}
		}
		p.tr = &http.Transport{
			Proxy:               nil, // the AM is reached directly, whatever HTTP_PROXY says
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: cfg.Timeout,
			// No ResponseHeaderTimeout: forward's idle timer already
			// cancels a request whose answer does not come within
			// Timeout, and the Transport would start a timer of its own
			// for every request.
			DisableCompression:  true, // the browser's Accept-Encoding goes through; bodies are copied as sent
			MaxIdleConnsPerHost: 64,   // a busy UI's page loads, kept open between requests
			IdleConnTimeout:     90 * time.Second,
			// An AM's answer comes in whole pages: read as much of it as
			// has arrived in one call, and send it on in as few writes.
			ReadBufferSize: copyBufferBytes,
		}
		rt = p.tr
	}
	p.client = &http.Client{Transport: rt, CheckRedirect: sameHostRedirects}
	return p, nil
}

// sameHostRedirects follows an AM's redirects as YARN's client does, but
// only within the host and port of the tracking URL: the proxy reaches no
// host the AM did not register.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return http.ErrUseLastResponse
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// Close closes idle connections to AMs.
func (p *Proxy) Close() {
	if p.tr != nil {
		p.tr.CloseIdleConnections()
	}
}

// Register serves the proxy under /proxy on e.
func (p *Proxy) Register(e *echo.Echo) {
	h := echo.WrapHandler(p)
	e.Any("/proxy", h)
	e.Any("/proxy/*", h)
}

// request is one proxy request, parsed.
type request struct {
	user     string
	id       yarnid.ApplicationID
	appID    string
	rest     string // the path after the application id, escaped, no leading slash
	redirect bool   // came through /proxy/redirect/ (an AM's filter sent it)
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut:
	default:
		p.page(w, r, http.StatusMethodNotAllowed, "HTTP method "+r.Method+" is not supported by this URL")
		return
	}
	if strings.Contains(r.Header.Get("Via"), viaToken) {
		// A tracking URL that points back at the proxy would have it call
		// itself until every request timed out.
		p.page(w, r, http.StatusLoopDetected, "The tracking URL leads back to the proxy")
		return
	}
	var query url.Values // nil answers every Get with ""
	if r.URL.RawQuery != "" {
		// Most page loads carry no query; parsing none would still make
		// a map.
		query = r.URL.Query()
	}
	req, msg := p.parse(r, query)
	if msg != "" {
		p.log.WarnContext(r.Context(), "invalid proxy path", "user", req.user, "path", r.URL.Path)
		p.page(w, r, http.StatusNotFound, msg)
		return
	}
	if req.redirect && fromThisHost(r.RemoteAddr) {
		p.log.ErrorContext(r.Context(), "an AM's web app redirected the proxy's request back to the proxy: "+
			"the AM does not see the proxy's address as a proxy host; check yarn.web-proxy.address and the RM web address the AM resolves",
			"application", req.appID)
		p.redirect(w, r, p.cfg.RMWebURL+"/cluster/failure/"+req.appID)
		return
	}
	ctx := r.Context()
	approved := query.Get(approvalParam) == "true"
	warned := false
	if p.cfg.SecurityEnabled {
		if c, err := r.Cookie(checkCookieName(req.appID)); err == nil {
			warned = true
			approved = approved || c.Value == "true"
		}
	}
	checkUser := p.cfg.SecurityEnabled && (!warned || !approved)

	app, err := p.cfg.Apps.ProxyApplication(ctx, req.user, req.id)
	switch {
	case errors.Is(err, yarnerr.ApplicationNotFound):
		p.log.WarnContext(ctx, "proxy request for an unknown application", "user", req.user, "application", req.appID)
		p.page(w, r, http.StatusNotFound, "Application "+req.appID+" could not be found in RM or history server")
		return
	case errors.Is(err, yarnerr.AccessControl):
		p.page(w, r, http.StatusForbidden, "User "+req.user+" is not authorized to view application "+req.appID)
		return
	case err != nil:
		p.log.ErrorContext(ctx, "proxy: application lookup", "application", req.appID, "err", err)
		p.page(w, r, http.StatusInternalServerError, "Cannot look up application "+req.appID)
		return
	}
	tracking := app.OriginalTrackingURL
	if tracking == "" || tracking == "N/A" {
		p.redirect(w, r, p.cfg.RMWebURL+"/cluster/app/"+req.appID)
		return
	}
	base, err := trackingURL(tracking)
	if err != nil {
		p.log.WarnContext(ctx, "proxy: bad tracking URL", "application", req.appID, "url", tracking, "err", err)
		p.page(w, r, http.StatusInternalServerError, "The tracking URL of application "+req.appID+" is not valid")
		return
	}
	if checkUser && app.User != req.user {
		p.warn(w, r, req, app.User)
		return
	}
	target := buildTarget(base, req.rest, r.URL.RawQuery)
	switch app.State {
	case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED,
		yarnpb.YarnApplicationStateProto_KILLED:
		p.redirect(w, r, target.String())
		return
	}
	var cookie *http.Cookie
	if warned && approved {
		cookie = checkCookie(req.appID, true)
	}
	p.forward(w, r, req, target, cookie)
}

// parse splits /proxy[/redirect]/<application>[/<rest>]; msg is the 404
// message of a path that names no application.
func (p *Proxy) parse(r *http.Request, query url.Values) (req request, msg string) {
	req.user = query.Get("user.name")
	if req.user == "" {
		req.user = p.cfg.AnonymousUser
	}
	path := r.URL.EscapedPath()
	info, ok := strings.CutPrefix(path, "/proxy")
	if !ok || info == "" {
		return req, "Your path appears to be formatted incorrectly."
	}
	if after, ok := strings.CutPrefix(info, "/redirect"); ok {
		info, req.redirect = after, true
	}
	_, info, ok = strings.Cut(info, "/")
	if !ok {
		return req, "Your path appears to be formatted incorrectly."
	}
	appID, rest, _ := strings.Cut(info, "/")
	req.appID, _ = url.PathUnescape(appID)
	req.rest = rest
	id, err := yarnid.ParseApplicationID(req.appID)
	if err != nil {
		return req, req.appID + " appears to be formatted incorrectly."
	}
	req.id = id
	return req, ""
}

// trackingURL is the AM's URL with a scheme (MapReduce registers host:port).
// Only http and https URLs with a host are proxied.
func trackingURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("tracking URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracking URL %q: not an http(s) URL with a host", s)
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// buildTarget appends the caller's path and query to the tracking URL, as
// YARN's UriBuilder does: one slash between the paths, the caller's query
// after the URL's own.
func buildTarget(base *url.URL, rest, rawQuery string) *url.URL {
	u := *base
	if rest != "" {
		p := u.EscapedPath()
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		p += rest
		if unescaped, err := url.PathUnescape(p); err == nil {
			u.Path, u.RawPath = unescaped, p
		}
	}
	if rawQuery != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&" + rawQuery
		} else {
			u.RawQuery = rawQuery
		}
	}
	return &u
}

// fromThisHost reports whether a caller's address is one of this host's
// interface addresses (NetUtils.getLocalInetAddress): 127.0.0.2 is not, on
// a loopback that holds 127.0.0.1/8.
func fromThisHost(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// passesThrough is WebAppProxyServlet's PASS_THROUGH_HEADERS.
func passesThrough(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "User-Agent", "Accept", "Accept-Encoding", "Accept-Language", "Accept-Charset", "Content-Type",
		"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers":
		return true
	}
	return false
}

// hopByHop reports headers that belong to one connection, not the answer.
func hopByHop(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// forward makes the request to the AM and copies its answer.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, req request, target *url.URL, cookie *http.Cookie) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var body *bytes.Reader
	if r.Method == http.MethodPut {
		b, err := io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxRequestBytes+1))
		if err != nil {
			p.page(w, r, http.StatusBadRequest, "Cannot read the request body")
			return
		}
		if int64(len(b)) > p.cfg.MaxRequestBytes {
			p.page(w, r, http.StatusRequestEntityTooLarge, "The request body is larger than "+strconv.FormatInt(p.cfg.MaxRequestBytes, 10)+" bytes")
			return
		}
		body = bytes.NewReader(b)
	}
	out := outgoing(ctx, r.Method, target, body)
	out.Header["User-Agent"] = p.noUserAgent
	for name, v := range r.Header {
		// The server canonicalized the caller's header names.
		if passesThrough(name) && len(v) > 0 {
			out.Header[name] = v[:1]
		}
	}
	if req.user != "" {
		out.Header["Cookie"] = []string{ProxyUserCookie + "=" + url.QueryEscape(req.user)}
	}
	out.Header["Via"] = p.via
	// The timeout bounds each pause, not the whole answer: a page that
	// keeps streaming keeps its connection.
	idle := time.AfterFunc(p.cfg.Timeout, cancel)
	defer idle.Stop()
	start := time.Now()
	resp, err := p.client.Do(out)
	if err != nil {
		p.log.WarnContext(r.Context(), "proxy: application master unreachable", "application", req.appID, "url", target.String(), "err", err)
		p.page(w, r, http.StatusBadGateway, "Cannot reach the application master of "+req.appID)
		return
	}
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && strings.Contains(loc, "/proxy/redirect/") {
		// The AM's filter sent the proxy back to itself (YARN loops once
		// more and lands here through handleRedirect).
		p.log.ErrorContext(r.Context(), "an AM's web app redirected the proxy's request back to the proxy: "+
			"the AM does not see the proxy's address as a proxy host; check yarn.web-proxy.address and the RM web address the AM resolves",
			"application", req.appID, "location", loc)
		p.redirect(w, r, p.cfg.RMWebURL+"/cluster/failure/"+req.appID)
		return
	}
	if resp.ContentLength > p.cfg.MaxResponseBytes {
		p.log.WarnContext(r.Context(), "proxy: answer too large", "application", req.appID, "bytes", resp.ContentLength)
		p.page(w, r, http.StatusBadGateway, "The application master's answer is larger than "+strconv.FormatInt(p.cfg.MaxResponseBytes, 10)+" bytes")
		return
	}
	h := w.Header()
	p.rmHeaders(h)
	for name, v := range resp.Header {
		// The client canonicalized the AM's header names, and the RM's
		// are canonical but for one.
		if hopByHop(name) {
			continue
		}
		if name == "X-Frame-Options" {
			delete(h, xFrameOptions) // the AM's value replaces the RM's, as setHeader does
		}
		h[name] = v
	}
	if cookie != nil {
		h.Add("Set-Cookie", cookie.String())
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(resp.StatusCode)
		return
	}
	buf := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(buf)
	n, err := p.copyAnswer(w, resp, &idleReader{r: io.LimitedReader{R: resp.Body, N: p.cfg.MaxResponseBytes + 1}, t: idle, d: p.cfg.Timeout}, *buf)
	if p.log.Enabled(r.Context(), slog.LevelDebug) { // its arguments would cost every request
		p.log.DebugContext(r.Context(), "proxied", "user", req.user, "application", req.appID, "url", target.String(),
			"status", resp.StatusCode, "bytes", n, "elapsed", time.Since(start))
	}
	if err != nil {
		// The status line is out: all that is left is to cut the answer.
		p.log.WarnContext(r.Context(), "proxy: answer cut", "application", req.appID, "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// copyAnswer sends the status line and the headers set on w, then the
// AM's answer read from body, and reports the bytes of it sent. An answer
// of declared length that fits buf is read whole before anything goes
// out, so that the page leaves in writes back to back: copied as it comes,
// its first 4 KiB (net/http's write buffer) would go out, then the proxy
// would wait for the rest from the AM, and for the Transport to take the
// AM's connection back, before sending the rest, and the browser would
// wake for each part. A page of that size costs no more than that wait
// for its first byte.
func (p *Proxy) copyAnswer(w http.ResponseWriter, resp *http.Response, body io.Reader, buf []byte) (int64, error) {
	if resp.ContentLength <= 0 || resp.ContentLength > int64(len(buf)) {
		w.WriteHeader(resp.StatusCode)
		n, err := io.CopyBuffer(w, body, buf)
		if err == nil && n > p.cfg.MaxResponseBytes {
			err = fmt.Errorf("answer longer than %d bytes", p.cfg.MaxResponseBytes)
		}
		return n, err
	}
	// An AM that ends its answer short has the part it sent passed on and
	// cut, as when copying as it comes.
	got, rerr := io.ReadFull(body, buf[:resp.ContentLength])
	w.WriteHeader(resp.StatusCode)
	n, err := w.Write(buf[:got])
	if err == nil {
		err = rerr
	}
	return int64(n), err
}

// outgoing is the request to the AM for target, as
// http.NewRequestWithContext makes it from the URL's text, without
// printing and parsing again the URL already built.
func outgoing(ctx context.Context, method string, target *url.URL, body *bytes.Reader) *http.Request {
	out := &http.Request{
		Method:     method,
		URL:        target,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, 8),
		Host:       target.Host,
	}
	if body != nil {
		out.Body = io.NopCloser(body)
		out.ContentLength = int64(body.Len())
		snapshot := *body
		out.GetBody = func() (io.ReadCloser, error) { r := snapshot; return io.NopCloser(&r), nil }
		if out.ContentLength == 0 {
			out.Body, out.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		}
	}
	return out.WithContext(ctx)
}

func isRedirect(code int) bool { return code >= 300 && code < 400 }

// idleReader reads up to r's limit and pushes the deadline of t out by d
// after every read. It holds its LimitedReader, one allocation fewer a
// page.
type idleReader struct {
	r io.LimitedReader
	t *time.Timer
	d time.Duration
}

func (ir *idleReader) Read(b []byte) (int, error) {
	n, err := ir.r.Read(b)
	if n > 0 {
		ir.t.Reset(ir.d)
	}
	return n, err
}

func checkCookieName(appID string) string { return "checked_" + appID }

// checkCookie records that the user saw the warning page (false) or went
// on from it (true), for two hours, on the application's proxy path.
func checkCookie(appID string, set bool) *http.Cookie {
	return &http.Cookie{
		Name: checkCookieName(appID), Value: strconv.FormatBool(set),
		Path: "/proxy/" + appID, MaxAge: 2 * 60 * 60, HttpOnly: true,
	}
}
