// Command knit-node is the node-side services a NodeManager used to host,
// one per node (a DaemonSet with the host network): the NM port relayed to
// RKS, the localizer that prepares every container started on the node, the
// aux services (the MapReduce shuffle) and, when switched on, the AMRMProxy
// the node's AMs use as their scheduler.
// This file wires them together with fx; what they do lives in daemonsets/.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/localizer"
	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/metrics"
	"github.com/knitdev/knit/daemonsets/nmrelay"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/rks/launch"
	"k8s.io/client-go/rest"
)

// flags are knit-node's command line.
type flags struct {
	kubeconfig string
	nodeName   string
	address    string
	nmPort     int
	nmWebPort  int
	rksAddress string
	nodeRoot   string
	localDirs  string
	logDirs    string
	hadoopConf string
	homeDir    string
	cacheMB    int64
	shuffle    int
	// sparkShuffle is the Spark shuffle's port; 0 means
	// spark.shuffle.service.port from the Hadoop configuration, else 7337.
	sparkShuffle int
	// auxServices is yarn.nodemanager.aux-services: the services to run.
	auxServices string
	// appsNamespace is where the RM keeps its YarnApplications (knit-rm's
	// --namespace).
	appsNamespace string
	// shuffleCert and shuffleKey are the PEM key pair the shuffle serves
	// HTTPS with when mapreduce.shuffle.ssl.enabled is set.
	shuffleCert, shuffleKey string
	// cgroupRoot is where the host's cgroup v2 hierarchy is seen, for
	// the containers' metrics.
	cgroupRoot string
	// utilizationInterval is how often the node's and its containers'
	// utilization is measured for the RM's node reports; 0 turns it off.
	utilizationInterval time.Duration
	// amrmProxy runs the AMRMProxy even when the Hadoop configuration
	// does not switch it on; amrmProxyPort is its port, 0 for the
	// configuration's.
	amrmProxy     bool
	amrmProxyPort int
	// federationNamespace holds the federation's state store, which the
	// AMRMProxy's federation interceptor reads.
	federationNamespace string
	// stateDir is the node's own state (YARN's yarn.nodemanager.recovery.dir):
	// what carries the node's AMs across a restart of knit-node. Pods never
	// see it, unlike the node root.
	stateDir string
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means the in-cluster service account")
	flag.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "the Kubernetes node this runs on")
	flag.StringVar(&f.address, "address", os.Getenv("NODE_IP"), "the node's NodeId host: the address the NM port listens on")
	flag.IntVar(&f.nmPort, "nm-port", 8041, "the NodeManager port")
	flag.IntVar(&f.nmWebPort, "nm-web-port", 8042, "the NodeManager web port")
	flag.StringVar(&f.rksAddress, "rks-address", "knit-rm:8048", "RKS's address in the RM")
	flag.StringVar(&f.nodeRoot, "node-root", "/var/lib/knit", "folder shared with pods (knit-rm's --node-root)")
	flag.StringVar(&f.stateDir, "state-dir", "/var/lib/knit-node", "the node's own state, kept across restarts and never shared with pods (yarn.nodemanager.recovery.dir): the AMRMProxy's keys and attempts")
	flag.StringVar(&f.localDirs, "local-dirs", "", "yarn.nodemanager.local-dirs, comma separated, under --node-root; empty means <node-root>/local")
	flag.StringVar(&f.logDirs, "log-dirs", "", "yarn.nodemanager.log-dirs, comma separated, under --node-root; empty means <node-root>/logs")
	flag.StringVar(&f.hadoopConf, "hadoop-conf-dir", os.Getenv("HADOOP_CONF_DIR"), "HADOOP_CONF_DIR given to containers that set none, and read by the localizer for hdfs:// resources")
	flag.StringVar(&f.homeDir, "user-home-dir", "/home/", "yarn.nodemanager.user-home-dir: HOME of containers")
	flag.Int64Var(&f.cacheMB, "cache-target-mb", 10240, "yarn.nodemanager.localizer.cache.target-size-mb")
	flag.IntVar(&f.shuffle, "shuffle-port", 0, "mapreduce.shuffle.port: where the MapReduce shuffle listens on the node's address; 0 means the Hadoop configuration's, else 13562")
	flag.IntVar(&f.sparkShuffle, "spark-shuffle-port", 0, "spark.shuffle.service.port: where Spark's external shuffle listens on the node's address; 0 means the Hadoop configuration's, else Spark's 7337")
	flag.StringVar(&f.auxServices, "aux-services", launch.ShuffleService, "yarn.nodemanager.aux-services: the aux services to run, comma separated (mapreduce_shuffle, spark_shuffle); empty for none")
	flag.StringVar(&f.appsNamespace, "applications-namespace", "knit", "namespace of the RM's YarnApplications (knit-rm's --namespace), watched to end applications on the node")
	flag.StringVar(&f.shuffleCert, "shuffle-tls-cert", "", "PEM certificate (chain) of the shuffle's HTTPS, used when mapreduce.shuffle.ssl.enabled is true")
	flag.StringVar(&f.shuffleKey, "shuffle-tls-key", "", "PEM private key of --shuffle-tls-cert")
	flag.StringVar(&f.cgroupRoot, "cgroup-root", "/sys/fs/cgroup", "where the host's cgroup v2 hierarchy is mounted, to measure the containers' pods (/metrics)")
	flag.DurationVar(&f.utilizationInterval, "utilization-interval", metrics.DefaultPublishInterval, "how often to measure the node's and its containers' utilization and publish it on the Node for the RM's node reports, when it moved; 0 turns it off")
	flag.BoolVar(&f.amrmProxy, "amrmproxy", false, "run the AMRMProxy, which the node's AMs use as their scheduler, as yarn.nodemanager.amrmproxy.enabled does")
	flag.IntVar(&f.amrmProxyPort, "amrmproxy-port", 0, "where the AMRMProxy listens on the node's address; 0 means the port of yarn.nodemanager.amrmproxy.address, else 8049")
	flag.StringVar(&f.federationNamespace, "federation-namespace", "knit-federation", "namespace of the federation's state store (knit-rm's --federation-namespace), read by the AMRMProxy's FederationInterceptor when yarn.federation.enabled")
	flag.Parse()

	app := fx.New(options(f))
	app.Run()
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "knit-node:", err)
		os.Exit(1)
	}
}

// options is the whole app: main runs it, and a test checks its graph
// with fx.ValidateApp.
func options(f flags) fx.Option {
	return fx.Options(
		fx.Supply(f),
		fx.Provide(newLogger, newRESTConfig, newKubernetes, newMetadata, newNodeDirs, newHadoopConf, newAuxServices, newAuxHost, newLocalizer, newLogSettings, newStatusPublisher, newAggregator, newAMRMProxy),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger { return &fxevent.SlogLogger{Logger: log.With("component", "fx")} }),
		fx.Invoke(runRelay, runAuxHost, runLocalizer, runNodeWeb, runAMRMProxy),
	)
}

func newLogger(f flags) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", f.nodeName)
}

func newRESTConfig(f flags) (*rest.Config, error) {
	// With no kubeconfig this is the in-cluster service account.
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	return cfg, nil
}

func newKubernetes(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

func newMetadata(cfg *rest.Config) (metadata.Interface, error) { return metadata.NewForConfig(cfg) }

// nodeDirs are the node's YARN local and log dirs.
type nodeDirs struct{ local, logs []string }

func newNodeDirs(f flags) (nodeDirs, error) {
	local, err := dirs(f.localDirs, f.nodeRoot, "local")
	if err != nil {
		return nodeDirs{}, err
	}
	logs, err := dirs(f.logDirs, f.nodeRoot, "logs")
	if err != nil {
		return nodeDirs{}, err
	}
	return nodeDirs{local: local, logs: logs}, nil
}

// newHadoopConf reads the node's Hadoop configuration, as a NodeManager
// reads yarn-site.xml and its ShuffleHandler mapred-site.xml; files that
// are not there are skipped.
func newHadoopConf(f flags) (*hadoopconf.Configuration, error) {
	c := hadoopconf.New(hadoopconf.Options{})
	if f.hadoopConf == "" {
		return c, nil
	}
	for _, name := range []string{"core-site.xml", "yarn-site.xml", "mapred-site.xml"} {
		path := filepath.Join(f.hadoopConf, name)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := c.AddFile(path); err != nil {
			return nil, fmt.Errorf("hadoop configuration: %w", err)
		}
	}
	return c, nil
}

// newAuxServices starts listening for each aux service named.
func newAuxServices(lc fx.Lifecycle, f flags, d nodeDirs, conf *hadoopconf.Configuration, log *slog.Logger) ([]auxservice.Service, error) {
	var out []auxservice.Service
	for _, name := range strings.Split(f.auxServices, ",") {
		switch name = strings.TrimSpace(name); name {
		case "":
		case launch.ShuffleService:
			cfg, err := shuffle.ConfigFromHadoop(hadoopLookup(conf))
			if err != nil {
				return nil, err
			}
			if cfg.SSLEnabled {
				if f.shuffleCert == "" || f.shuffleKey == "" {
					return nil, errors.New("mapreduce.shuffle.ssl.enabled is true: --shuffle-tls-cert and --shuffle-tls-key are required")
				}
				pair, err := tls.LoadX509KeyPair(f.shuffleCert, f.shuffleKey)
				if err != nil {
					return nil, fmt.Errorf("shuffle TLS: %w", err)
				}
				cfg.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
			}
			port, err := servicePort(f.shuffle, cfg.Address, shuffle.DefaultPort)
			if err != nil {
				return nil, fmt.Errorf("shuffle port: %w", err)
			}
			cfg.Address = net.JoinHostPort(f.address, strconv.Itoa(port))
			cfg.LocalDirs = d.local
			cfg.Logger = log.With("component", "shuffle")
			svc, err := shuffle.New(cfg)
			if err != nil {
				return nil, fmt.Errorf("shuffle port: %w", err)
			}
			lc.Append(fx.StopHook(svc.Close))
			log.Info("serving", "service", name, "address", svc.Addr().String())
			out = append(out, svc)
		case launch.SparkShuffleService:
			svc, err := newSparkShuffle(f, d, conf, log)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(svc.Close))
			log.Info("serving", "service", name, "address", svc.Addr().String())
			out = append(out, svc)
		default:
			return nil, fmt.Errorf("aux service %q is not one knit-node runs (it runs %s and %s)", name, launch.ShuffleService, launch.SparkShuffleService)
		}
	}
	return out, nil
}

// newSparkShuffle listens for Spark's external shuffle service with its
// settings from the node's Hadoop configuration, as YarnShuffleService reads
// them; its registered executors are kept under the node root, in a
// folder of the node's.
func newSparkShuffle(f flags, d nodeDirs, conf *hadoopconf.Configuration, log *slog.Logger) (*sparkshuffle.Service, error) {
	cfg, err := sparkshuffle.ConfigFromHadoop(hadoopLookup(conf))
	if err != nil {
		return nil, err
	}
	port, err := servicePort(f.sparkShuffle, cfg.Address, sparkshuffle.DefaultPort)
	if err != nil {
		return nil, fmt.Errorf("spark shuffle port: %w", err)
	}
	cfg.Name = launch.SparkShuffleService
	cfg.Address = net.JoinHostPort(f.address, strconv.Itoa(port))
	cfg.LocalDirs = d.local
	// Per node name: knit local's process nodes share one node root.
	cfg.StateFile = filepath.Join(f.nodeRoot, "spark-shuffle", f.nodeName, "executors.json")
	cfg.Logger = log.With("component", "spark-shuffle")
	svc, err := sparkshuffle.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("spark shuffle: %w", err)
	}
	return svc, nil
}

// servicePort is where a service listens on the node's address: the flag
// when set, else the port of the address its configuration read (":<port>"
// when the Hadoop configuration names one), else the service's default, as
// a NodeManager's aux service takes its port from the configuration.
func servicePort(flag int, configured string, def int) (int, error) {
	if flag != 0 {
		return flag, nil
	}
	if configured == "" {
		return def, nil
	}
	_, p, err := net.SplitHostPort(configured)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

func newAuxHost(f flags, client kubernetes.Interface, services []auxservice.Service, log *slog.Logger) (*auxservice.Host, error) {
	return auxservice.NewHost(auxservice.HostConfig{Client: client, NodeName: f.nodeName, Services: services, Logger: log.With("component", "auxservices")})
}

func runAuxHost(run lifecycle.Runner, h *auxservice.Host) {
	run.Background("aux services", h.Run)
}

// dirs splits a folder list, defaulting to one folder under the node root,
// and checks every folder is under it: pods see the node root only.
func dirs(list, root, def string) ([]string, error) {
	if list == "" {
		return []string{filepath.Join(root, def)}, nil
	}
	var out []string
	for _, d := range strings.Split(list, ",") {
		d = filepath.Clean(strings.TrimSpace(d))
		rel, err := filepath.Rel(root, d)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("folder %s is not under the node root %s, which pods see", d, root)
		}
		out = append(out, d)
	}
	return out, nil
}

func newLocalizer(lc fx.Lifecycle, f flags, d nodeDirs, aux *auxservice.Host, proxy *amrmProxy, log *slog.Logger) (*localizer.Localizer, error) {
	var whitelist []launch.EnvVar
	if f.hadoopConf != "" {
		whitelist = append(whitelist, launch.EnvVar{Name: "HADOOP_CONF_DIR", Value: f.hadoopConf})
	}
	for _, name := range []string{"JAVA_HOME", "HADOOP_COMMON_HOME", "HADOOP_HDFS_HOME", "HADOOP_YARN_HOME", "HADOOP_HOME", "PATH", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(name); ok {
			whitelist = append(whitelist, launch.EnvVar{Name: name, Value: v})
		}
	}
	cfg := localizer.Config{
		LocalDirs:        d.local,
		LogDirs:          d.logs,
		HomeDir:          f.homeDir,
		Whitelist:        whitelist,
		AuxServices:      aux.Metadata(),
		HDFS:             localizer.HDFSConfig{ConfDir: f.hadoopConf},
		CacheTargetBytes: f.cacheMB << 20,
		Logger:           log.With("component", "localizer"),
	}
	if proxy != nil {
		cfg.AMRMProxy, cfg.AMConfDir = proxy.service, proxy.confDir
	}
	l, err := localizer.New(cfg)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(l.Close))
	return l, nil
}

func runRelay(run lifecycle.Runner, f flags) error {
	node := net.JoinHostPort(f.address, strconv.Itoa(f.nmPort))
	r, err := nmrelay.New(nmrelay.Config{Node: node, Upstream: f.rksAddress, Logger: run.Logger.With("component", "nmrelay")})
	if err != nil {
		return err
	}
	run.ServeContext("nm port (relayed to "+f.rksAddress+")", node, r.Serve)
	return nil
}

func runLocalizer(run lifecycle.Runner, f flags, client kubernetes.Interface, meta metadata.Interface, aux *auxservice.Host, l *localizer.Localizer, agg *logs.Aggregator, proxy *amrmProxy) error {
	var appLogs localizer.ApplicationLogs
	if agg != nil {
		appLogs = agg
	}
	var amrm localizer.AMRMProxy
	if proxy != nil {
		amrm = proxy.service
	}
	c, err := localizer.NewController(localizer.ControllerConfig{
		AMRMProxy:             amrm,
		Client:                client,
		Metadata:              meta,
		ApplicationsNamespace: f.appsNamespace,
		Services:              aux,
		Logs:                  appLogs,
		NodeName:              f.nodeName,
		LaunchDir:             launch.Dir(f.nodeRoot),
		Preparer:              l,
		Logger:                run.Logger.With("component", "localizer"),
	})
	if err != nil {
		return err
	}
	run.Background("localizer", c.Run)
	return nil
}

// hadoopLookup reads the node's Hadoop configuration for daemonsets' own
// settings parsers.
func hadoopLookup(conf *hadoopconf.Configuration) func(string) (string, bool) {
	return func(key string) (string, bool) {
		v, ok, err := conf.Lookup(key)
		return v, ok && err == nil
	}
}

func newLogSettings(conf *hadoopconf.Configuration) (logs.Settings, error) {
	return logs.SettingsFromHadoop(hadoopLookup(conf))
}

// newAggregator is what becomes of an ended application's logs: log
// aggregation when yarn.log-aggregation-enable is set (and the remote app
// log dir is one knit-node writes), else deletion after
// yarn.nodemanager.log.retain-seconds; nil when that is not positive.
func newAggregator(f flags, d nodeDirs, conf *hadoopconf.Configuration, s logs.Settings, status *logs.StatusPublisher, log *slog.Logger) (*logs.Aggregator, error) {
	cfg := logs.AggregatorConfig{
		Dirs: logs.Dirs(d.logs), NodeID: net.JoinHostPort(f.address, strconv.Itoa(f.nmPort)),
		Format: s.Format, Layout: s.Layout, Retain: s.Retain, RollInterval: s.RollInterval, FilesPerApp: s.FilesPerApp, Status: status, Logger: log.With("component", "log-aggregation"),
	}
	if s.Aggregate {
		store, err := logs.StoreFor(s.Layout.Root, hadoopLookup(conf))
		if err != nil {
			log.Error("log aggregation is off; container logs stay on the node for yarn.nodemanager.log.retain-seconds", "err", err)
		}
		cfg.Store = store
	}
	if cfg.Store == nil && cfg.Retain <= 0 {
		return nil, nil
	}
	return logs.NewAggregator(cfg)
}

// newStatusPublisher publishes the node's log aggregation statuses on its
// Node, for the RM's application reports.
func newStatusPublisher(f flags, client kubernetes.Interface, log *slog.Logger) *logs.StatusPublisher {
	return logs.NewStatusPublisher(client, f.nodeName, log.With("component", "log-aggregation"))
}

// runNodeWeb serves the NodeManager web port (node web services and log
// pages) and runs log aggregation when it is on.
func runNodeWeb(run lifecycle.Runner, f flags, d nodeDirs, client kubernetes.Interface, conf *hadoopconf.Configuration, s logs.Settings, agg *logs.Aggregator, status *logs.StatusPublisher, aux []auxservice.Service, loc *localizer.Localizer) error {
	src, err := logs.NewPodSource(client, f.nodeName, logs.Dirs(d.logs), run.Logger.With("component", "logs"))
	if err != nil {
		return err
	}
	run.Background("container pods (logs)", src.Run)
	web := net.JoinHostPort(f.address, strconv.Itoa(f.nmWebPort))
	// The pages of containers whose logs have left the node read the
	// aggregated files.
	remote, err := logs.AggregatedFromHadoop(hadoopLookup(conf))
	if err != nil {
		run.Logger.Warn("log pages will not show aggregated logs", "err", err)
	}
	e, err := logs.New(logs.Config{
		NodeID: net.JoinHostPort(f.address, strconv.Itoa(f.nmPort)), WebAddress: web,
		Dirs: logs.Dirs(d.logs), Source: src, Access: s.Access, RMWebAddress: s.RMWebAddress,
		Aggregated: remote, Logger: run.Logger.With("component", "nm-web"),
	})
	if err != nil {
		return err
	}
	col, err := serveNodeMetrics(e, src, nodeServices{aux: aux, localizer: loc, aggregator: agg}, f.cgroupRoot, run.Logger.With("component", "metrics"))
	if err != nil {
		return err
	}
	if f.utilizationInterval > 0 {
		pub, err := metrics.NewPublisher(metrics.PublisherConfig{Client: client, NodeName: f.nodeName, Collector: col,
			Interval: f.utilizationInterval, Logger: run.Logger.With("component", "utilization")})
		if err != nil {
			return err
		}
		run.Background("utilization", pub.Run)
	}
	run.Serve(lifecycle.Endpoint{Name: "nm web port", Address: web, Server: &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}})
	if agg != nil {
		run.Background("log aggregation", agg.Run)
	}
	if s.Aggregate {
		run.Background("log aggregation statuses", status.Run)
	}
	return nil
}
