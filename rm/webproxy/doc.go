// Package webproxy is the ResourceManager's web application proxy:
// /proxy/<application id>/<path> on the RM web port, as YARN's
// WebAppProxyServlet serves it inside the RM when yarn.web-proxy.address is
// not set.
//
// The proxy forwards GET, HEAD and PUT requests only to the tracking URL
// the application's AM registered (never to a URL a caller names, so it is
// no open proxy), passes the request headers YARN passes (User-Agent, the
// Accept family, Content-Type, Origin and the CORS preflight headers) and
// tells the AM the web user in the proxy-user cookie, which the AM's
// AmIpFilter reads. The AM's answer comes back with its status, headers
// (hop-by-hop ones dropped) and body; the proxy follows the AM's redirects
// within the AM's own host, as YARN's HTTP client follows them.
//
// Where YARN answers without the AM, so does the proxy, with the same pages
// and headers: an application the RM does not know is a 404 page; an
// application that has ended, or whose AM registered no tracking URL, is a
// 302 to its final tracking URL (with the caller's path and query) or to the
// RM's application page; a /proxy/redirect/ request that comes from the
// proxy itself (an AM whose filter does not recognise the proxy) is sent to
// the RM's failure page instead of looping. With security on, a user who is
// not the application's owner first sees YARN's warning page and a
// checked_<application> cookie. Unlike YARN, the proxy also checks the
// application view ACL for the web user (Apps returns a yarnerr.AccessControl
// error) and answers 403.
//
// Limits: request bodies (PUT) are read up to Config.MaxRequestBytes, AM
// answers copied up to Config.MaxResponseBytes, and a connection to the AM
// that makes no progress for Config.Timeout is abandoned
// (yarn.resourcemanager.proxy.connection.timeout).
//
// The proxy's requests carry "Via: 1.1 knit-rm-proxy"; a request that
// comes back with it (a tracking URL pointing at the proxy itself) is
// answered 508 Loop Detected instead of calling the proxy again.
//
// AMFilter is the other side: YARN's AmIpFilter for AMs written in Go (the
// proxy's replay test runs the recorded MR AM's answers behind it).
//
// Imports: the standard library, echo, protocols/yarnerr, protocols/yarnid
// and protocols/yarnpb. No globals; the RM is reached through Apps.
package webproxy
