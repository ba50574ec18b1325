// Command knit-router is the Router of a Knit YARN Federation: it serves
// ApplicationClientProtocol on yarn.router.clientrm.address in front of
// the sub-cluster RMs the federation store lists, so that unchanged
// clients submit to and watch the federation as one cluster, serves the
// federation's admin calls on yarn.router.rmadmin.address, serves the
// federation's REST API and page on yarn.router.webapp.address, and marks
// silent sub-clusters LOST. This file wires the pieces with fx; what they
// do lives in federation/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/routerweb"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
)

// flags are knit-router's command line.
type flags struct {
	kubeconfig string
	namespace  string
	confDir    string
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster hosting the federation's state store; empty means the in-cluster service account")
	flag.StringVar(&f.namespace, "namespace", "knit-federation", "namespace of the federation's state store (knit-rm's --federation-namespace)")
	flag.StringVar(&f.confDir, "conf-dir", os.Getenv("HADOOP_CONF_DIR"), "folder with yarn-site.xml: the yarn.router.* and yarn.federation.* settings")
	flag.Parse()
	app := fx.New(options(f))
	app.Run()
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "knit-router:", err)
		os.Exit(1)
	}
}

// options is the whole app: main runs it, and a test checks its graph
// with fx.ValidateApp.
func options(f flags) fx.Option {
	return fx.Options(
		fx.Supply(f),
		fx.Provide(newLogger, loadSettings, newStore, newCache, newRouter),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger { return &fxevent.SlogLogger{Logger: log.With("component", "fx")} }),
		fx.Invoke(serveClientProtocol, serveAdminProtocol, serveWeb, runCleaner),
	)
}

func newLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// loadSettings reads core-site.xml and yarn-site.xml from the conf dir.
func loadSettings(f flags) (federation.Settings, error) {
	c := hadoopconf.New(hadoopconf.Options{})
	for _, name := range []string{"core-site.xml", "yarn-site.xml"} {
		if f.confDir == "" {
			break
		}
		path := filepath.Join(f.confDir, name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := c.AddFile(path); err != nil {
			return federation.Settings{}, fmt.Errorf("configuration: %w", err)
		}
	}
	return federation.LoadSettings(c)
}

func newStore(f flags) (*fedstore.Kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return fedstore.NewKube(fedstore.KubeConfig{Client: client, Namespace: f.namespace})
}

// newCache is the Router's view of the store, as YARN's Router reads
// through FederationStateStoreFacade; its admin protocol writes through it.
func newCache(s *fedstore.Kube, settings federation.Settings) *fedstore.Cache {
	return fedstore.NewCache(s, settings.CacheTTL, nil)
}

func newRouter(c *fedstore.Cache, settings federation.Settings, log *slog.Logger) (*router.Router, error) {
	return router.New(router.Config{
		Store: c,
		DefaultPolicy: fedstore.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: settings.PolicyManager,
			Params: []byte(settings.PolicyManagerParams)},
		SubmitRetry:    settings.SubmitRetry,
		SubmitInterval: settings.SubmitInterval,
		Logger:         log.With("component", "router"),
	})
}

func serveClientProtocol(run lifecycle.Runner, r *router.Router, settings federation.Settings) error {
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Logger: run.Logger.With("component", "client-rpc")})
	if err != nil {
		return err
	}
	if err := r.Register(srv); err != nil {
		return err
	}
	// Appended before the port, the connections to the sub-clusters close
	// after it: no call in flight loses its connection.
	run.Lifecycle.Append(fx.StopHook(r.Close))
	run.Serve(lifecycle.Endpoint{Name: "Router client port (ApplicationClientProtocol)", Address: settings.RouterClientRMAddress, Server: srv})
	return nil
}

// serveAdminProtocol serves the federation's admin calls (`yarn
// routeradmin`) on yarn.router.rmadmin.address.
func serveAdminProtocol(run lifecycle.Runner, c *fedstore.Cache, settings federation.Settings) error {
	a, err := router.NewAdmin(router.AdminConfig{Store: c, AdminACL: acl.Parse(settings.AdminACL), Expiration: settings.SubClusterExpiration,
		Logger: run.Logger.With("component", "router-admin")})
	if err != nil {
		return err
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Logger: run.Logger.With("component", "admin-rpc")})
	if err != nil {
		return err
	}
	if err := a.Register(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "Router admin port (ResourceManagerAdministrationProtocol)", Address: settings.RouterRMAdminAddress, Server: srv})
	return nil
}

// serveWeb serves the federation's REST API and page
// (yarn.router.webapp.address), placing applications through the Router.
func serveWeb(run lifecycle.Runner, c *fedstore.Cache, r *router.Router, settings federation.Settings) error {
	w, err := routerweb.New(routerweb.Config{Store: c, Placer: r, Logger: run.Logger.With("component", "router-web")})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
	run.Serve(lifecycle.Endpoint{Name: "Router web port (REST, federation page)", Address: settings.RouterWebappAddress, Server: srv})
	return nil
}

// runCleaner marks silent sub-clusters LOST, reading the store itself:
// its cache may be a TTL behind the heartbeats.
func runCleaner(run lifecycle.Runner, s *fedstore.Kube, settings federation.Settings) error {
	if !settings.DeregisterSubClusters {
		return nil
	}
	c, err := router.NewCleaner(router.CleanerConfig{Store: s, Expiration: settings.SubClusterExpiration, Interval: settings.SubClusterCleanerInterval,
		Logger: run.Logger.With("component", "subcluster-cleaner")})
	if err != nil {
		return err
	}
	run.Background("sub-cluster cleaner", c.Run)
	return nil
}
