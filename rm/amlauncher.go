package rm

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/webproxy"
)

// amLaunchTimeout bounds one AM launch: the API writes retry within it.
const amLaunchTimeout = 2 * time.Minute

// launchAM is YARN's AMLauncher: it starts the AM container with the
// submission's launch context, an AMRMToken added to its credentials
// (alias "", as setupTokens adds it) and the AM-only environment, then
// reports AttemptLaunched or AttemptLaunchFailed. It runs apart from the
// entry's lock, which the effect is executed under.
func (rm *ResourceManager) launchAM(ctx context.Context, x apps.LaunchAM) {
	e := rm.lookup(x.Attempt.App)
	if e == nil {
		return
	}
	// The effect runs under e.mu: the application is read here, once.
	sub := e.app.Submission()
	user := e.app.User()
	submitted := e.app.SubmitTime()
	rm.goLaunch(ctx, amLaunchTimeout, func(ctx context.Context) {
		err := rm.startAM(ctx, x, sub.GetAmContainerSpec(), user, submitted)
		var ev apps.Event = apps.AttemptLaunched{Attempt: x.Attempt}
		if err != nil {
			rm.log.WarnContext(ctx, "AM launch failed", "attempt", x.Attempt.String(), "err", err)
			ev = apps.AttemptLaunchFailed{Attempt: x.Attempt, Diagnostics: err.Error()}
		}
		if err := rm.Handle(ctx, x.Attempt.App, ev); err != nil {
			rm.log.WarnContext(ctx, "AM launch report", "attempt", x.Attempt.String(), "event", ev.Name(), "err", err)
		}
	})
}

func (rm *ResourceManager) startAM(ctx context.Context, x apps.LaunchAM, clc *yarnpb.ContainerLaunchContextProto, user string, submitted time.Time) error {
	id, err := yarnid.ContainerIDFromProto(x.Container.GetId())
	if err != nil {
		return fmt.Errorf("AM container: %w", err)
	}
	creds := &token.Credentials{}
	if len(clc.GetTokens()) > 0 {
		if creds, err = token.ParseCredentials(clc.GetTokens()); err != nil {
			return fmt.Errorf("setting up tokens for %s: %w", id, err)
		}
	}
	if rm.cfg.Tokens != nil {
		creds.AddToken("", rm.cfg.Tokens.AMRM().Create(x.Attempt.Proto()))
	}
	return rm.cfg.Launcher.Launch(ctx, rks.LaunchRequest{
		Container:     id,
		User:          user,
		Node:          x.Container.GetNodeId(),
		Context:       clc,
		Credentials:   creds,
		AppSubmitTime: submitted.UnixMilli(),
		WebProxyBase:  webproxy.Base(x.Attempt.App),
	})
}

// ContainerStarted records that a task container was started on its node
// (the container's LAUNCHED event), which ends its allocation expiry. It
// implements rks.Observer; AM containers are the attempt's, reported by
// launchAM.
func (rm *ResourceManager) ContainerStarted(ctx context.Context, id yarnid.ContainerID) {
	e := rm.lookup(id.Attempt.App)
	if e == nil {
		return
	}
	e.mu.Lock()
	t := e.app.CurrentAttempt()
	am := t != nil && t.AMContainer() != nil && proto.Equal(t.AMContainer().GetId(), id.Proto())
	e.mu.Unlock()
	if am {
		return
	}
	if err := rm.Handle(ctx, id.Attempt.App, apps.ContainerLaunched{Container: id}); err != nil {
		rm.log.DebugContext(ctx, "container launched", "container", id.String(), "err", err)
	}
}
