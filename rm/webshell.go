package rm

import (
	"context"
	"fmt"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/webshell"
)

// WebShell returns the RM as the web shell's Apps: the same ACL decisions
// as a kill (MODIFY_APP) or a report (VIEW_APP) of the application.
func (rm *ResourceManager) WebShell() webshell.Apps { return shellApps{rm} }

type shellApps struct{ rm *ResourceManager }

var _ webshell.Apps = shellApps{}

// ShellContainer answers for a container of an application the RM holds.
func (s shellApps) ShellContainer(_ context.Context, user string, id yarnid.ContainerID) (webshell.Container, error) {
	app := id.Attempt.App
	e := s.rm.lookup(app)
	if e == nil {
		return webshell.Container{}, fmt.Errorf("%w: application %s is not in the RM", webshell.ErrNoContainer, app)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.app.Container(id)
	if c == nil {
		return webshell.Container{}, fmt.Errorf("%w: application %s has no container %s", webshell.ErrNoContainer, app, id)
	}
	short := shortName(user)
	out := webshell.Container{App: app, Access: webshell.Access{
		View:   s.rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP),
		Modify: s.rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP),
		Owner:  e.app.User() == short,
		// With ACLs off the admin ACL grants nothing the others do not,
		// as for any application access.
		Admin: s.rm.cfg.Settings.ACLEnable && s.rm.queueTree().IsAdmin(short, nil),
	}}
	switch c.State() {
	case apps.ContainerStateCompleted, apps.ContainerStateExpired, apps.ContainerStateReleased, apps.ContainerStateKilled:
		out.Ended = true
	}
	if completedState(e.app.State()) {
		out.Ended = true
	}
	return out, nil
}
