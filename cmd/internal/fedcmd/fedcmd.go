// Package fedcmd is the command line the federation's own binaries
// (knit-router, knit-gpg) share: where the federation's state store is and
// where their Hadoop configuration is.
package fedcmd

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/federation/router"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/hadoopconf"
)

// Flags are the store's cluster and namespace, and the configuration
// folder.
type Flags struct {
	Kubeconfig, Namespace, ConfDir string
}

// Register adds the flags to fs; settings names, for the help, the keys
// the binary reads from yarn-site.xml.
func (f *Flags) Register(fs *flag.FlagSet, settings string) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster hosting the federation's state store; empty means the in-cluster service account")
	fs.StringVar(&f.Namespace, "namespace", "knit-federation", "namespace of the federation's state store (knit-rm's --federation-namespace)")
	fs.StringVar(&f.ConfDir, "conf-dir", os.Getenv("HADOOP_CONF_DIR"), "folder with yarn-site.xml: the "+settings+" settings")
}

// Conf reads core-site.xml and yarn-site.xml from the configuration
// folder, each if it is there.
func (f Flags) Conf() (*hadoopconf.Configuration, error) {
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddDir(f.ConfDir, "core-site.xml", "yarn-site.xml"); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Store is the federation's state store in Kubernetes.
func (f Flags) Store() (*fedstore.Kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return fedstore.NewKube(fedstore.KubeConfig{Client: client, Namespace: f.Namespace})
}

// AdvertiseHost is the host a federation process names for its addresses
// bound to a wildcard: $POD_IP, else the host name, as YARN's
// NetUtils.getConnectAddress gives the local host.
func AdvertiseHost() string {
	if ip := os.Getenv("POD_IP"); ip != "" {
		return ip
	}
	h, _ := os.Hostname()
	return h
}

// Main parses the command line into Flags and runs the fx app options
// makes of them until a signal ends it; an error starts with name.
func Main(name, settings string, options func(Flags) fx.Option) {
	var f Flags
	f.Register(flag.CommandLine, settings)
	flag.Parse()
	app := fx.New(options(f), Logging(),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger { return &fxevent.SlogLogger{Logger: log.With("component", "fx")} }))
	app.Run()
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Logging is what Main adds to an app: its logger, for tests that check
// an app's graph with fx.ValidateApp.
func Logging() fx.Option { return fx.Provide(newLogger) }

func newLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// RunCleaner runs, for the app's life, the cleaner that marks sub-clusters
// silent for expiration SC_LOST, every interval: the Router's and the
// GPG's, each under its own settings.
func RunCleaner(run lifecycle.Runner, s *fedstore.Kube, expiration, interval time.Duration) error {
	c, err := router.NewCleaner(router.CleanerConfig{Store: s, Expiration: expiration, Interval: interval,
		Logger: run.Logger.With("component", "subcluster-cleaner")})
	if err != nil {
		return err
	}
	run.Background("sub-cluster cleaner", c.Run)
	return nil
}
