package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/webproxy"
)

// WebProxy returns the RM as the web application proxy's Apps.
func (rm *ResourceManager) WebProxy() webproxy.Apps { return proxyApps{rm} }

type proxyApps struct{ rm *ResourceManager }

var _ webproxy.Apps = proxyApps{}

// ProxyApplication is the application as the web user may see it: the
// tracking URL the AM registered (its final one once it unregistered), if
// the user has VIEW_APP on it.
func (p proxyApps) ProxyApplication(_ context.Context, user string, id yarnid.ApplicationID) (webproxy.Application, error) {
	e := p.rm.lookup(id)
	if e == nil {
		return webproxy.Application{}, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !p.rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP) {
		return webproxy.Application{}, yarnerr.AccessControl.Errorf("User %s cannot perform operation VIEW_APP on %s", user, id)
	}
	out := webproxy.Application{User: e.app.User(), State: e.app.ClientState(), OriginalTrackingURL: "N/A"}
	if t := e.app.CurrentAttempt(); t != nil {
		out.OriginalTrackingURL = t.OriginalTrackingURL()
	}
	return out, nil
}
