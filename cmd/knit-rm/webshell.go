package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.uber.org/fx"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/webproxy"
	"github.com/knitdev/knit/rm/webshell"
	"github.com/knitdev/knit/rm/webui"
)

// eventsComponent is the reporting controller of the RM's Events.
const eventsComponent = "knit-rm"

// newWebShell is the web shell on the RM web port: the UI's caller, the
// RM's ACLs, RGS's pods, pods/exec with the RM's own credentials, and the
// audit Events sent through an events broadcaster stopped with the RM.
func newWebShell(run lifecycle.Runner, r *rm.ResourceManager, ui *webui.UI, sched *rgs.Controller, settings conf.RMSettings,
	c *hadoopconf.Configuration, cfg *rest.Config, client kubernetes.Interface, f flags, log *slog.Logger) (*webshell.Server, error) {
	ss, err := webshell.LoadSettings(c, settings.WebappAddress, webproxy.ResolvedAddress(settings.WebappAddress))
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	exec, err := webshell.NewPodExec(cfg)
	if err != nil {
		return nil, err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	run.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { return broadcaster.StartRecordingToSinkWithContext(ctx) },
		OnStop: func(context.Context) error {
			cancel()
			broadcaster.Shutdown()
			return nil
		},
	})
	s, err := webshell.New(webshell.Config{
		Apps: r.WebShell(), Pods: sched, Exec: exec, Events: broadcaster.NewRecorder(scheme.Scheme, eventsComponent),
		Caller: ui.Caller, Settings: ss, LaunchDir: launch.Dir(f.nodeRoot), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	// Stops run in reverse: sessions end (their Events sent) before the
	// broadcaster shuts down.
	run.Lifecycle.Append(fx.StopHook(s.Close))
	return s, nil
}

// shellLinks lets the web UI, built first (the shell authenticates with
// its Caller), link to the shell built after it.
type shellLinks struct{ server *webshell.Server }

func (l *shellLinks) Link(ctx context.Context, user, container string) string {
	return l.server.Link(ctx, user, container)
}
