package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/webproxy"
)

// Web proxy settings, as yarn-default.xml names them.
const (
	keyProxyAddress        = "yarn.web-proxy.address"
	keyProxyTimeoutEnabled = "yarn.resourcemanager.proxy.timeout.enabled"
	keyProxyTimeout        = "yarn.resourcemanager.proxy.connection.timeout"
)

// newWebProxy is the proxy the RM serves on its web port. Its connections
// to AMs come from the proxy host AMs resolve (yarn.web-proxy.address, else
// the RM web address), so their AmIpFilter lets them through.
func newWebProxy(r *rm.ResourceManager, settings conf.RMSettings, c *hadoopconf.Configuration, log *slog.Logger) (*webproxy.Proxy, error) {
	rmWeb := webproxy.ResolvedAddress(settings.WebappAddress)
	proxyHost := rmWeb
	if v, err := c.GetTrimmed(keyProxyAddress, ""); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	} else if v != "" {
		proxyHost = v
	}
	timeout := webproxy.DefaultTimeout
	enabled, err := c.GetBool(keyProxyTimeoutEnabled, true)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	ms, err := c.GetInt(keyProxyTimeout, int(webproxy.DefaultTimeout/time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if enabled && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	return webproxy.New(webproxy.Config{
		Apps:      r.WebProxy(),
		RMWebURL:  "http://" + rmWeb,
		LocalAddr: webproxy.LocalAddrFor(proxyHost),
		Timeout:   timeout,
		Logger:    log,
	})
}
