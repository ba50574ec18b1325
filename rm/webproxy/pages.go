package webproxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rmHeaders are the headers the RM's own filters put on every answer of
// its web port (no-cache, the XFS and XSS filters); an AM's answer
// replaces those it sets itself.
func (p *Proxy) rmHeaders(h http.Header) {
	for k, v := range p.fixedHeaders {
		h[k] = v
	}
	now := p.date()
	h["Expires"] = now
	h["Date"] = now
}

// xFrameOptions is spelled as Hadoop spells it, not canonically.
const xFrameOptions = "X-FRAME-OPTIONS"

// fixedHeaders are the rmHeaders every answer shares: net/http only reads
// their values, and copies the map before it writes them.
func fixedHeaders() http.Header {
	return http.Header{
		"Cache-Control":          {"no-cache"},
		"Pragma":                 {"no-cache"},
		"X-Content-Type-Options": {"nosniff"},
		xFrameOptions:            {"SAMEORIGIN"},
		"X-Xss-Protection":       {"1; mode=block"},
		"Vary":                   {"Accept-Encoding"},
	}
}

// date is the Date and Expires of an answer made now, formatted once a
// second. Answers share it: net/http only reads the values of a header,
// and its capacity is its length, so an append copies.
func (p *Proxy) date() []string {
	now := p.cfg.Now().Unix()
	if d := p.dateCache.Load(); d != nil && d.unix == now {
		return d.value
	}
	d := &formattedDate{unix: now, value: []string{time.Unix(now, 0).UTC().Format(http.TimeFormat)}}
	p.dateCache.Store(d)
	return d.value
}

// formattedDate is a second and its HTTP date, as a header's value.
type formattedDate struct {
	unix  int64
	value []string
}

// escape is Hamlet's escaping of text and attribute values.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// writePage answers with one of the proxy's own HTML pages.
func (p *Proxy) writePage(w http.ResponseWriter, r *http.Request, status int, body string) {
	h := w.Header()
	p.rmHeaders(h)
	h.Set("Content-Type", "text/html;charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}

// page is ProxyUtils.notFound's page, with another status where needed.
func (p *Proxy) page(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p.writePage(w, r, status, "<html>\n  <h1>\n    "+escape(msg)+"\n  </h1>\n</html>\n")
}

// redirect is ProxyUtils.sendRedirect: a 302 and the "Moved" page.
func (p *Proxy) redirect(w http.ResponseWriter, r *http.Request, target string) {
	w.Header().Set("Location", target)
	p.writePage(w, r, http.StatusFound, movedPage(target))
}

// movedPage is ProxyUtils.sendRedirect's page.
func movedPage(target string) string {
	return "<html>\n  <head>\n    <title>\n      Moved\n    </title>\n  </head>\n" +
		"  <body>\n    <h1>\n      Moved\n    </h1>\n    <div>\n      Content has moved \n" +
		"      <a href=\"" + escape(target) + "\">here</a>\n    </div>\n  </body>\n</html>\n"
}

// warn is WebAppProxyServlet's warning page, shown with security on to a
// user who does not own the application, with the cookie that marks the
// user as warned; its link carries the approval.
func (p *Proxy) warn(w http.ResponseWriter, r *http.Request, req request, owner string) {
	link := "/proxy/" + req.appID + "/" + req.rest + "?"
	if q := r.URL.RawQuery; q != "" {
		link += q + "&"
	}
	link += approvalParam + "=true"
	w.Header().Add("Set-Cookie", checkCookie(req.appID, false).String())
	p.writePage(w, r, http.StatusOK, "<html>\n  <h1>\n    WARNING: The following page may not be safe!\n  </h1>\n"+
		"  <h3>\n    click \n    <a href=\""+escape(link)+"\">here</a>\n"+
		"     to continue to an Application Master web interface owned by \n    "+escape(owner)+"\n  </h3>\n</html>\n")
}
