package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"go.uber.org/fx"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/cmd/internal/fedcmd"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/membership"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/ha"
	rmrest "github.com/knitdev/knit/rm/rest"
)

// federationFlags say where the federation's store is and how the Router
// reaches this RM; yarn.federation.enabled turns membership on.
type federationFlags struct {
	kubeconfig, namespace, advertiseHost string
}

func (f *federationFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "federation-kubeconfig", "", "kubeconfig of the cluster hosting the federation's state store; empty means --kubeconfig's cluster")
	fs.StringVar(&f.namespace, "federation-namespace", "knit-federation", "namespace of the federation's state store (it must exist)")
	fs.StringVar(&f.advertiseHost, "federation-advertise-host", fedcmd.AdvertiseHost(), "host the RM registers in the federation for its addresses bound to a wildcard (default $POD_IP, else the host name)")
}

// runFederation keeps the active RM's sub-cluster in its federation when
// yarn.federation.enabled is set: registered once its ports are up (it is
// invoked after them), heartbeating while it is active, deregistered on a
// clean stop before its ports close. Its writes are fenced as every write
// of the RM: a deposed leader registers and heartbeats nothing.
func runFederation(run lifecycle.Runner, c *hadoopconf.Configuration, settings conf.RMSettings, f flags, r *rm.ResourceManager, kc *rest.Config, rep *replica) error {
	fs, err := federation.LoadSettings(c)
	if err != nil || !fs.Enabled {
		return err
	}
	cfg := kc
	if f.federation.kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", f.federation.kubeconfig); err != nil {
			return fmt.Errorf("federation kubeconfig: %w", err)
		}
		cfg.Wrap(ha.FenceTransport(rep.elector.Fence))
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("federation kubernetes client: %w", err)
	}
	st, err := fedstore.NewKube(fedstore.KubeConfig{Client: client, Namespace: f.federation.namespace})
	if err != nil {
		return err
	}
	// The active RM starts now, as far as the federation is concerned.
	info := fedstore.SubClusterInfo{ID: fs.SubClusterID, LastStartTime: time.Now()}
	for _, a := range []struct {
		dst  *string
		addr string
	}{
		{&info.ClientRMServiceAddress, settings.Address},
		{&info.AMRMServiceAddress, settings.SchedulerAddress},
		{&info.RMAdminServiceAddress, settings.AdminAddress},
		{&info.RMWebServiceAddress, settings.WebappAddress},
	} {
		if *a.dst, err = membership.ConnectAddress(a.addr, f.federation.advertiseHost); err != nil {
			return err
		}
	}
	member, err := membership.New(membership.Config{
		Store:        st,
		SubCluster:   info,
		Capability:   capability(r.REST()),
		Holds:        holds(r),
		Interval:     fs.HeartbeatInterval,
		InitialDelay: fs.HeartbeatInitialDelay,
		Logger:       run.Logger.With("component", "federation"),
	})
	if err != nil {
		return err
	}
	run.Lifecycle.Append(fx.Hook{OnStart: member.Register, OnStop: member.Deregister})
	run.Background("federation heartbeat", member.Run)
	return nil
}

// holds reports whether the RM still holds an application, for the
// cleanup of the homes of those it pruned. The report is asked for as no
// user: only whether there is one matters.
func holds(r *rm.ResourceManager) func(ctx context.Context, app string) (bool, error) {
	return func(ctx context.Context, app string) (bool, error) {
		id, err := yarnid.ParseApplicationID(app)
		if err != nil {
			return false, nil // no id this RM gives: not one of its applications
		}
		_, err = r.GetApplicationReport(rm.WithCaller(ctx, rm.Caller{}), &yarnpb.GetApplicationReportRequestProto{ApplicationId: id.Proto()})
		if errors.Is(err, yarnerr.ApplicationNotFound) {
			return false, nil
		}
		return err == nil, err
	}
}

// capability is the sub-cluster's capability as YARN's heartbeat writes
// it: the cluster metrics of the REST API, under "clusterMetrics".
func capability(cluster rmrest.Cluster) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		m, err := cluster.Metrics(ctx)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(struct {
			ClusterMetrics rmrest.ClusterMetrics `json:"clusterMetrics"`
		}{m})
		return string(b), err
	}
}
