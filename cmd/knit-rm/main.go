// Command knit-rm is Knit's ResourceManager: ApplicationClientProtocol on the
// RM client port and the REST API on the web port, with its state in the
// Kubernetes API. This file wires the pieces together with fx; what they do
// lives in rm/ and its sub-packages.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rgs/nodes"
	"github.com/knitdev/knit/rks"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/apptrace"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/ha"
	"github.com/knitdev/knit/rm/queues"
	rmrest "github.com/knitdev/knit/rm/rest"
	"github.com/knitdev/knit/rm/store"
	"github.com/knitdev/knit/rm/tokens"
	"github.com/knitdev/knit/rm/webui"
)

// flags are knit-rm's command line.
type flags struct {
	kubeconfig string
	namespace  string
	confDir    string
	nmPort     int
	nmWebPort  int
	// The launcher every pod starts with, and how vcores become CPU.
	launcherImage      string
	launcherBinary     string
	millicoresPerVcore int
	// nodeRoot is the folder knit-node shares with every pod; rksAddress is
	// where RKS serves the NM protocol that knit-node relays.
	nodeRoot   string
	rksAddress string
	// nodeSelector are the labels of the RM's own nodes, "key=value,...";
	// empty for every node of the cluster.
	nodeSelector string
	// The cluster owner's bounds on the RM's load on the API server.
	kubeQPS, podCreateQPS         float64
	kubeBurst, podCreateBurst     int
	podCreateConcurrency, workers int
	// pprof serves Go's profiles on the web address.
	pprof bool
	// otlpEndpoint, when set, turns on the applications' traces, sent
	// there over OTLP/HTTP.
	otlpEndpoint string
	// ha is the election among the RM's replicas.
	ha haFlags
	// federation is where the federation's store is, if the RM joins one.
	federation federationFlags
	// queueAdmission holds every pod behind a scheduling gate until its
	// queue's limits admit it (rgs/admission).
	queueAdmission bool
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means the in-cluster service account")
	flag.StringVar(&f.namespace, "namespace", "knit", "namespace of the RM's state (applications, keys, cluster identity)")
	flag.StringVar(&f.confDir, "conf-dir", os.Getenv("HADOOP_CONF_DIR"), "folder with yarn-site.xml and capacity-scheduler.xml")
	flag.IntVar(&f.nmPort, "nm-port", 8041, "the NodeManager port knit-node serves on every node")
	flag.IntVar(&f.nmWebPort, "nm-web-port", 8042, "the NodeManager web port knit-node serves on every node")
	flag.StringVar(&f.launcherImage, "launcher-image", "ghcr.io/knitdev/knit-launcher:latest", "image holding knit-launcher, the entrypoint of every container's pod")
	flag.StringVar(&f.launcherBinary, "launcher-binary", "/knit-launcher", "path of knit-launcher inside the launcher image")
	flag.IntVar(&f.millicoresPerVcore, "millicores-per-vcore", 1000, "CPU millicores a pod gets per YARN vcore")
	flag.StringVar(&f.nodeRoot, "node-root", "/var/lib/knit", "folder on every node that knit-node shares with pods (launch files, local and log dirs)")
	flag.StringVar(&f.rksAddress, "rks-address", ":8048", "address RKS serves ContainerManagementProtocol on, for knit-node's relays")
	flag.StringVar(&f.nodeSelector, "node-selector", "", "labels of the RM's own nodes, key=value[,key=value...]: its node reports and cluster metrics count only them and its pods are placed only on them, so that RMs (the sub-clusters of a federation) can share one Kubernetes cluster; empty means every node")
	flag.Float64Var(&f.kubeQPS, "kube-api-qps", 200, "requests per second the RM sends the Kubernetes API server, all callers together")
	flag.IntVar(&f.kubeBurst, "kube-api-burst", 400, "burst above --kube-api-qps")
	flag.Float64Var(&f.podCreateQPS, "pod-create-qps", 200, "pods per second RGS creates for containers asked for, within --kube-api-qps")
	flag.IntVar(&f.podCreateBurst, "pod-create-burst", 400, "burst above --pod-create-qps")
	flag.IntVar(&f.podCreateConcurrency, "pod-create-concurrency", 32, "pod creations RGS has in flight at once")
	flag.IntVar(&f.workers, "rgs-workers", 16, "RGS workers for bound pods and for asks, each")
	flag.BoolVar(&f.pprof, "pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the RM web address (yarn.resourcemanager.webapp.address); they expose stacks and heap contents to anyone who reaches the port")
	flag.StringVar(&f.otlpEndpoint, "otlp-endpoint", otlpEndpointFromEnv(), "OTLP/HTTP endpoint URL the applications' traces go to (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT); empty turns tracing off")
	flag.BoolVar(&f.queueAdmission, "queue-admission", true, "hold each pod behind a scheduling gate until its queue's capacity, user limits and ordering admit it, as the CapacityScheduler allocates; false leaves the order to the Kubernetes scheduler")
	f.ha.register(flag.CommandLine)
	f.federation.register(flag.CommandLine)
	flag.Parse()
	if _, set := os.LookupEnv("GOGC"); !set {
		// The RM's heap is mostly what lives long (every Knit pod of the
		// cluster, its own records) and it makes little garbage, so it
		// collects when the heap has grown by half rather than Go's
		// doubling: less memory held for a few more, short collections.
		// GOGC in the environment still decides.
		debug.SetGCPercent(defaultGCPercent)
	}
	os.Exit(run(f))
}

// defaultGCPercent is knit-rm's GOGC when the environment sets none.
const defaultGCPercent = 50

// options is the active RM: run starts it once the replica leads, and a
// test checks its graph with fx.ValidateApp.
func options(f flags, r *replica) fx.Option {
	return fx.Options(
		fx.Supply(f, r),
		fx.Provide(newLogger, loadConf, newKubernetes, newFederationStore, newStore, newQueues, rm.NewLiveAttempts, rm.NewContainerReports, newTokens, newPool, newPodFactory, newNodes, newScheduler, newRKS, newRM, newMetrics, newTracer, newActivation),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger { return &fxevent.SlogLogger{Logger: log.With("component", "fx")} }),
		// The constructors above read and write nothing: runActive's
		// activation, invoked first, is where the active RM's I/O begins,
		// and its loops and the ports start after it. fx stops in the
		// reverse order of starting, and RKS's port is invoked last so
		// that it closes first: in knit local the replicas share its
		// address, and a deposed leader whose other parts take their time
		// stopping (calls to an API server it is cut off from) must not
		// hold it from its successor.
		fx.Invoke(runActive, serveClientProtocol, serveAMProtocol, serveAdminProtocol, serveREST, runFederation, runLogRetention, runLeadership, serveRKS),
	)
}

func newLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// loaded is the RM's Hadoop configuration: yarn-site.xml with
// capacity-scheduler.xml over it, as the CapacityScheduler reads them.
type loaded struct {
	fx.Out
	Conf     *hadoopconf.Configuration
	Settings conf.RMSettings
}

func loadConf(f flags, r *replica) (loaded, error) {
	c, err := readConf(f.confDir)
	if err != nil {
		return loaded{}, err
	}
	c = r.rmConf(c)
	settings, err := conf.LoadRMSettings(c)
	if err != nil {
		return loaded{}, fmt.Errorf("configuration: %w", err)
	}
	return loaded{Conf: c, Settings: settings}, nil
}

// kube is the RM's way into the Kubernetes API.
type kube struct {
	fx.Out
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
}

func newKubernetes(f flags, r *replica) (kube, error) {
	// With no kubeconfig this is the in-cluster service account.
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return kube{}, fmt.Errorf("kubernetes config: %w", err)
	}
	// Every write of the RM (its state, pods, secrets, events) is fenced:
	// a replica that no longer leads sends none.
	cfg.Wrap(ha.FenceTransport(r.elector.Fence))
	cfg.QPS, cfg.Burst = float32(f.kubeQPS), f.kubeBurst
	// The typed client speaks protobuf, as Kubernetes' own components do:
	// decoding a watched pod costs a fraction of JSON's time and garbage.
	// The dynamic client keeps JSON, which custom resources need.
	typed := rest.CopyConfig(cfg)
	typed.ContentType = runtime.ContentTypeProtobuf
	typed.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(typed)
	if err != nil {
		return kube{}, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return kube{}, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return kube{Config: cfg, Client: client, Dynamic: dyn}, nil
}

func newStore(f flags, client kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, r *replica, fed *federationStore) (*store.Store, error) {
	cfg := store.Config{Dynamic: dyn, Core: client, Namespace: f.namespace, Logger: log.With("component", "store"), Fence: r.elector.Fence}
	if fed != nil {
		cfg.Timestamps = fed.timestamps
	}
	return store.New(cfg)
}

func newQueues(c *hadoopconf.Configuration, settings conf.RMSettings, f flags) (*queues.Tree, error) {
	return queues.Build(c, queues.Options{DefaultNamespace: f.namespace, ACLsEnabled: settings.ACLEnable, AdminACL: acl.Parse(settings.AdminACL),
		Preemption: settings.Preemption.Enabled, IntraQueuePreemption: settings.Preemption.IntraQueue})
}

func newTokens(s *store.Store, settings conf.RMSettings, live *rm.LiveAttempts) (*tokens.Manager, error) {
	return tokens.New(tokens.Config{
		Store:                  keyStore{blob: s.TokenKeys()},
		ContainerTokenLifetime: settings.ContainerAllocationExpiry,
		AttemptValid:           live.Valid,
	})
}

// newPodFactory is the one informer of Knit's pods, shared by the node view
// and RGS: the RM's own, in a federation, whose sub-clusters may share the
// cluster.
func newPodFactory(client kubernetes.Interface, p pool) informers.SharedInformerFactory {
	return rgs.NewPodInformerFactory(client, p.subCluster)
}

// pool is the part of the Kubernetes cluster that is the RM's: its nodes
// (--node-selector) and, in a federation, its sub-cluster's pods.
type pool struct {
	nodes      map[string]string
	subCluster string
}

func newPool(f flags, c *hadoopconf.Configuration) (pool, error) {
	var p pool
	if f.nodeSelector != "" {
		set, err := labels.ConvertSelectorToLabelsMap(f.nodeSelector)
		if err != nil {
			return pool{}, fmt.Errorf("--node-selector %q: %w", f.nodeSelector, err)
		}
		p.nodes = set
	}
	fs, err := federation.LoadSettings(c)
	if err != nil {
		return pool{}, err
	}
	if fs.Enabled {
		p.subCluster = fs.SubClusterID
	}
	return p, nil
}

// nodeView is the RM's view of nodes, with the informers it reads, which
// the activation starts.
type nodeView struct {
	fx.Out
	Lister    *nodes.Lister
	Informers nodeInformers
}

// nodeInformers are the informers of nodes and of Knit's pods.
type nodeInformers struct {
	nodes, pods informers.SharedInformerFactory
}

func newNodes(client kubernetes.Interface, podFactory informers.SharedInformerFactory, f flags, p pool) (nodeView, error) {
	l, nodeFactory, err := nodes.New(client, podFactory, nodes.Config{NMPort: int32(f.nmPort), NMWebPort: int32(f.nmWebPort), Selector: p.nodes})
	if err != nil {
		return nodeView{}, err
	}
	return nodeView{Lister: l, Informers: nodeInformers{nodes: nodeFactory, pods: podFactory}}, nil
}

func newRM(log *slog.Logger, settings conf.RMSettings, q *queues.Tree, tm *tokens.Manager, s *store.Store, l *nodes.Lister, sched *rgs.Controller, containers *rks.Service, live *rm.LiveAttempts, reports *rm.ContainerReports, tracer *apptrace.Recorder) (*rm.ResourceManager, error) {
	cfg := rm.Config{
		Settings:  settings,
		Queues:    q,
		Tokens:    tm,
		Store:     appStore{s},
		IDs:       store.NewIDs(s, store.DefaultIDBlockSize),
		Nodes:     l,
		Scheduler: sched,
		Launcher:  containers,
		Signaler:  containers,
		// The token manager and RKS were built with these before the RM:
		// it keeps the live attempts and takes RKS's reports.
		LiveAttempts:     live,
		ContainerReports: reports,
		Logger:           log.With("component", "rm"),
	}
	if tracer != nil {
		// A nil *Recorder in the interface would not be nil.
		cfg.Tracer = tracer
	}
	return rm.New(cfg)
}

func serveClientProtocol(run lifecycle.Runner, r *rm.ResourceManager, settings conf.RMSettings, m *rmMetrics, rep *replica) error {
	srv, err := ipc.NewServer(ipc.Config{Simple: true, AdmitCall: rep.admission().AdmitCall, Observer: m.rpc, Logger: run.Logger.With("component", "client-rpc")})
	if err != nil {
		return err
	}
	if err := r.Register(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "client port (ApplicationClientProtocol)", Address: settings.Address, Server: srv})
	return nil
}

func serveREST(run lifecycle.Runner, r *rm.ResourceManager, settings conf.RMSettings, c *hadoopconf.Configuration, m *rmMetrics, sched *rgs.Controller, f flags, kc *rest.Config, client kubernetes.Interface, rep *replica) error {
	e := rmrest.New(rmrest.Config{Cluster: r.REST(), Logger: run.Logger.With("component", "rest")})
	e.GET(ha.IsActivePath, echo.WrapHandler(ha.IsActive(rep.active)))
	proxy, err := newWebProxy(r, settings, c, run.Logger.With("component", "webproxy"))
	if err != nil {
		return err
	}
	proxy.Register(e)
	var links shellLinks
	ui, err := webui.New(webui.Config{Cluster: r.WebUI(sched), Logger: run.Logger.With("component", "webui"), Shells: &links})
	if err != nil {
		return err
	}
	ui.Register(e)
	shell, err := newWebShell(run, r, ui, sched, settings, c, kc, client, f, run.Logger.With("component", "webshell"))
	if err != nil {
		return err
	}
	links.server = shell
	shell.Register(e)
	if err := m.register(e, r, sched); err != nil {
		return err
	}
	if f.pprof {
		registerPprof(e)
	}
	run.Lifecycle.Append(fx.StopHook(proxy.Close))
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	run.Serve(lifecycle.Endpoint{Name: "web port (REST, web UI, web proxy, metrics)", Address: settings.WebappAddress, Server: srv})
	return nil
}
