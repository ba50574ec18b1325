package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"go.uber.org/fx"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/daemonsets/amrmproxy"
	"github.com/knitdev/knit/federation"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
)

// amrmProxy is the node's AMRMProxy when it runs; nil when it is off.
type amrmProxy struct {
	service *amrmproxy.Service
	secrets *amrmproxy.Secrets
	address string
	// confDir is the AM containers' HADOOP_CONF_DIR.
	confDir string
}

// newAMRMProxy builds the AMRMProxy when --amrmproxy or
// yarn.nodemanager.amrmproxy.enabled says so: it listens on the node's
// address at the configured port, forwards to the RM's scheduler address
// of the node's configuration, and writes the configuration AM containers
// get under the node root, which pods see.
func newAMRMProxy(lc fx.Lifecycle, f flags, conf *hadoopconf.Configuration, kube kubernetes.Interface, log *slog.Logger) (*amrmProxy, error) {
	s, err := amrmproxy.SettingsFromHadoop(conf)
	if err != nil {
		return nil, err
	}
	if !f.amrmProxy && !s.Enabled {
		return nil, nil
	}
	port, err := servicePort(f.amrmProxyPort, s.Address, 8049)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy port: %w", err)
	}
	rm, _, err := client.ConfAddress(f.hadoopConf, hadoopconf.KeyRMSchedulerAddress, 8030)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: %w", err)
	}
	throttle, err := amrmproxy.ThrottleSettingsFromHadoop(conf)
	if err != nil {
		return nil, err
	}
	stages := map[string]amrmproxy.Stage{
		amrmproxy.DefaultInterceptorName:  amrmproxy.DefaultStage(rm, nil),
		amrmproxy.ThrottleInterceptorName: amrmproxy.ThrottleStage(throttle, nil),
	}
	fed, err := federation.LoadSettings(conf)
	if err != nil {
		return nil, err
	}
	if fed.Enabled {
		// The state store is in the cluster the node is in, as knit-rm's
		// --federation-namespace has it.
		kubeStore, err := fedstore.NewKube(fedstore.KubeConfig{Client: kube, Namespace: f.federationNamespace})
		if err != nil {
			return nil, err
		}
		resolver, err := federation.LoadMachineList(fed.MachineList)
		if err != nil {
			return nil, err
		}
		stages[amrmproxy.FederationInterceptorName] = amrmproxy.FederationStage(amrmproxy.FederationSettings{
			Store:         fedstore.NewCache(kubeStore, fed.CacheTTL, nil),
			DefaultPolicy: fed.PolicyManager, DefaultPolicyParams: []byte(fed.PolicyManagerParams),
			Resolver:         resolver,
			HeartbeatMaxWait: fed.AMRMProxyHeartbeatMaxWait, SubClusterTimeout: fed.AMRMProxySubClusterTimeout,
		})
	}
	log = log.With("component", "amrmproxy")
	// Per node name: knit local's process nodes share one machine.
	state, err := amrmproxy.NewFileStore(filepath.Join(f.stateDir, "amrmproxy", f.nodeName))
	if err != nil {
		return nil, err
	}
	secrets, err := amrmproxy.NewSecrets(amrmproxy.SecretsConfig{RollInterval: s.RollInterval, ActivationDelay: s.ActivationDelay, Logger: log, Keys: state})
	if err != nil {
		return nil, err
	}
	svc, err := amrmproxy.New(amrmproxy.Config{
		Secrets:  secrets,
		Pipeline: s.Pipeline,
		Stages:   stages,
		Logger:   log,
		State:    state,
	})
	if err != nil {
		return nil, err
	}
	// At start, before the port serves (runAMRMProxy's hooks come after
	// this one): the AMs of the node's last process go on with the tokens
	// they hold.
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		n, err := svc.Recover(ctx)
		if n > 0 {
			log.Info("AMRMProxy pipelines recovered", "attempts", n)
		}
		return err
	}))
	lc.Append(fx.StopHook(svc.Close))
	p := &amrmProxy{service: svc, secrets: secrets, address: net.JoinHostPort(f.address, strconv.Itoa(port)),
		// Per node name: knit local's process nodes share one node root.
		confDir: filepath.Join(f.nodeRoot, "amrmproxy", f.nodeName, "conf")}
	if err := amrmproxy.WriteAMConf(p.confDir, f.hadoopConf, p.address); err != nil {
		return nil, err
	}
	log.Info("AMRMProxy on", "address", p.address, "scheduler", rm, "interceptors", s.Pipeline)
	return p, nil
}

// runAMRMProxy serves ApplicationMasterProtocol to the node's AMs, with
// their local tokens only, and rolls the keys that sign them.
func runAMRMProxy(run lifecycle.Runner, p *amrmProxy) error {
	if p == nil {
		return nil
	}
	srv, err := ipc.NewServer(ipc.Config{Tokens: p.secrets.SecretLookup(), Logger: run.Logger.With("component", "amrmproxy")})
	if err != nil {
		return err
	}
	if err := p.service.Register(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "AMRMProxy port (ApplicationMasterProtocol)", Address: p.address, Server: srv})
	run.Background("AMRMProxy keys", p.secrets.Run)
	return nil
}
