package webproxy

import (
	"net"
	"os"
	"strings"
)

// ResolvedAddress is a host:port as YARN's WebAppUtils resolves the RM web
// address for AmIpFilter and the proxy's redirects: a wildcard or loopback
// host becomes this machine's host name (an AM on another machine could
// not reach 0.0.0.0 or 127.0.0.1 of this one). An address without a port
// is returned as it is.
func ResolvedAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	local := host == "" || host == "localhost"
	if ip := net.ParseIP(host); ip != nil && (ip.IsUnspecified() || ip.IsLoopback()) {
		local = true
	}
	if local {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// LocalAddrFor is the address proxied connections should come from so that
// an AM whose filter resolves proxyHost accepts them, as YARN binds its
// client to the proxy host: the first address of proxyHost that is one of
// this machine's, or nil to leave the choice to the system.
func LocalAddrFor(proxyHost string) net.IP {
	if h, _, err := net.SplitHostPort(proxyHost); err == nil {
		proxyHost = h
	}
	ips, err := net.LookupIP(strings.TrimSpace(proxyHost))
	if err != nil {
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, ip := range ips {
		if ip.IsLoopback() {
			continue // any loopback source reaches a loopback AM
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ip
			}
		}
	}
	return nil
}
