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

// federationStore is the RM's way into its federation's store, nil when
// yarn.federation.enabled is not set: the store itself, and the claims of
// the cluster timestamp, which the RM's own store holds before it hands
// out any application id.
type federationStore struct {
	settings   federation.Settings
	store      *fedstore.Kube
	timestamps *membership.Timestamps
}

// newFederationStore opens the federation store when the RM is a member;
// it does no I/O. Its writes are fenced as every write of the RM: a
// deposed leader claims, registers and heartbeats nothing.
func newFederationStore(c *hadoopconf.Configuration, f flags, kc *rest.Config, rep *replica) (*federationStore, error) {
	fs, err := federation.LoadSettings(c)
	if err != nil || !fs.Enabled {
		return nil, err
	}
	cfg := kc
	if f.federation.kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", f.federation.kubeconfig); err != nil {
			return nil, fmt.Errorf("federation kubeconfig: %w", err)
		}
		cfg.Wrap(ha.FenceTransport(rep.elector.Fence))
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("federation kubernetes client: %w", err)
	}
	st, err := fedstore.NewKube(fedstore.KubeConfig{Client: client, Namespace: f.federation.namespace})
	if err != nil {
		return nil, err
	}
	claims, err := membership.NewTimestamps(st, fs.SubClusterID)
	if err != nil {
		return nil, err
	}
	return &federationStore{settings: fs, store: st, timestamps: claims}, nil
}

// runFederation keeps the active RM's sub-cluster in its federation when
// it is a member: registered once its ports are up (it is invoked after
// them), heartbeating while it is active, deregistered on a clean stop
// before its ports close.
func runFederation(run lifecycle.Runner, settings conf.RMSettings, f flags, r *rm.ResourceManager, fed *federationStore) error {
	if fed == nil {
		return nil
	}
	fs := fed.settings
	// The registration's start time is the cluster timestamp the RM holds
	// by then (activation holds it before the ports open); now stands in
	// for it only if none is held.
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
		var err error
		if *a.dst, err = membership.ConnectAddress(a.addr, f.federation.advertiseHost); err != nil {
			return err
		}
	}
	member, err := membership.New(membership.Config{
		Store:        fed.store,
		SubCluster:   info,
		Timestamps:   fed.timestamps,
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
