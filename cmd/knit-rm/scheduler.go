package main

import (
	"log/slog"
	"path"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/tokens"
)

// newScheduler builds RGS; the activation gives it this term's epoch. Both
// clients are the RM's fenced ones.
func newScheduler(f flags, p pool, client kubernetes.Interface, dyn dynamic.Interface, podFactory informers.SharedInformerFactory, tm *tokens.Manager, l *nodes.Lister, m *rmMetrics, log *slog.Logger) (*rgs.Controller, error) {
	mount := "/knit"
	return rgs.New(rgs.Config{
		Client:            client,
		Dynamic:           dyn,
		Signer:            tm.ContainerTokens(),
		Nodes:             l,
		Resources:         rgs.Resources{MillicoresPerVcore: int64(f.millicoresPerVcore)},
		PodFactory:        podFactory,
		CreateQPS:         float32(f.podCreateQPS),
		CreateBurst:       f.podCreateBurst,
		CreateConcurrency: f.podCreateConcurrency,
		Workers:           f.workers,
		Observer:          m.rgs,
		SubCluster:        p.subCluster,
		NodeSelector:      p.nodes,
		Launcher: rgs.Launcher{
			Image:       f.launcherImage,
			InitCommand: []string{"cp", f.launcherBinary, path.Join(mount, "knit-launcher")},
			Command: []string{path.Join(mount, "knit-launcher"),
				"--launch-dir", launch.Dir(f.nodeRoot), "--termination-log", "/dev/termination-log"},
			MountPath: mount,
			NodeRoot:  f.nodeRoot,
			PodUIDEnv: launch.EnvPodUID,
		},
		Logger: log.With("component", "rgs"),
	})
}

// serveAMProtocol serves ApplicationMasterProtocol on the scheduler port,
// where AMs authenticate with their AMRMTokens only.
func serveAMProtocol(run lifecycle.Runner, r *rm.ResourceManager, tm *tokens.Manager, settings conf.RMSettings, m *rmMetrics, rep *replica) error {
	log := run.Logger
	a := rep.admission()
	srv, err := ipc.NewServer(ipc.Config{Tokens: a.Tokens(tm.AMRM().SecretLookup()), AdmitCall: a.AdmitCall, Observer: m.rpc, Logger: log.With("component", "scheduler-rpc")})
	if err != nil {
		return err
	}
	if err := r.RegisterAM(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "scheduler port (ApplicationMasterProtocol)", Address: settings.SchedulerAddress, Server: srv})
	return nil
}
