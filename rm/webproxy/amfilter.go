package webproxy

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// AMFilter is YARN's AmIpFilter for an application master written in Go:
// a request from one of the proxy hosts goes on to Next, with the web user
// the proxy named in its proxy-user cookie (ProxyUser reads it); any other
// caller is redirected to the proxy's /proxy/redirect/<application>/ path
// with its own path and query, so browsers reach the AM only through the
// proxy.
type AMFilter struct {
	// ProxyHosts are the hosts whose addresses the proxy's requests come
	// from (AmIpFilter's PROXY_HOSTS).
	ProxyHosts []string
	// ProxyURIBase is the proxy's URL of the application
	// ("http://rm:8088/proxy/application_…", a PROXY_URI_BASES entry).
	ProxyURIBase string
	// Next serves the AM's pages.
	Next http.Handler
	// LookupHost resolves a proxy host; nil means net.DefaultResolver. It is
	// asked at every request, so a proxy that moves is followed.
	LookupHost func(ctx context.Context, host string) ([]string, error)
}

// NewAMFilter is the filter an AM's AmFilterInitializer would set up:
// proxyAddress is yarn.web-proxy.address, or else the RM web address
// resolved as ResolvedAddress resolves it, and proxyBase the
// APPLICATION_WEB_PROXY_BASE the RM gave the AM.
func NewAMFilter(proxyAddress, proxyBase string, next http.Handler) *AMFilter {
	host := proxyAddress
	if h, _, err := net.SplitHostPort(proxyAddress); err == nil {
		host = h
	}
	return &AMFilter{ProxyHosts: []string{host}, ProxyURIBase: "http://" + proxyAddress + proxyBase, Next: next}
}

type proxyUserKey struct{}

// ProxyUser is the web user the proxy named for a request AMFilter let
// through; ok is false when it named none.
func ProxyUser(r *http.Request) (user string, ok bool) {
	user, ok = r.Context().Value(proxyUserKey{}).(string)
	return user, ok
}

func (f *AMFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.fromProxy(r) {
		if c, err := r.Cookie(ProxyUserCookie); err == nil {
			if u, err := url.QueryUnescape(c.Value); err == nil {
				r = r.WithContext(context.WithValue(r.Context(), proxyUserKey{}, u))
			}
		}
		f.Next.ServeHTTP(w, r)
		return
	}
	target := f.ProxyURIBase + r.URL.EscapedPath()
	if i := strings.Index(target, "/proxy"); i >= 0 {
		i += len("/proxy")
		target = target[:i] + "/redirect" + target[i:]
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Location", target)
	body := movedPage(target)
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	w.WriteHeader(http.StatusFound)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}

// fromProxy reports whether the caller's address is one of the proxy
// hosts'.
func (f *AMFilter) fromProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	lookup := f.LookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	for _, ph := range f.ProxyHosts {
		addrs, err := lookup(r.Context(), ph)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if a == host {
				return true
			}
		}
	}
	return false
}
