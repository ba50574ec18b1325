package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/rks/relay"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/ha"
)

// haFlags are the command line of the election.
type haFlags struct {
	// id is this RM's id (yarn.resourcemanager.ha.id); it picks the
	// addresses of yarn.resourcemanager.ha.rm-ids to serve on.
	id                                        string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	// standbyRKS serves the RKS port on a standby too; off where the
	// replicas share one RKS address that only the active may hold.
	standbyRKS bool
	// podName, when set, is this replica's pod in --namespace, labelled
	// with its role so that the RM's Service selects only the active.
	podName string
}

func (h *haFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.id, "ha-id", os.Getenv("KNIT_RM_ID"), "this RM's id among yarn.resourcemanager.ha.rm-ids (default $KNIT_RM_ID, else yarn.resourcemanager.ha.id); without HA, the replica's name in the Lease (default the host name)")
	fs.DurationVar(&h.leaseDuration, "lease-duration", ha.DefaultLeaseDuration, "how long standbys wait after the leader's last renewal before taking its Lease")
	fs.DurationVar(&h.renewDeadline, "lease-renew-deadline", ha.DefaultRenewDeadline, "how long the leader tries to renew before it stops writing and exits; below --lease-duration")
	fs.DurationVar(&h.retryPeriod, "lease-retry-period", ha.DefaultRetryPeriod, "how often replicas try to take or renew the Lease")
	fs.StringVar(&h.podName, "pod-name", os.Getenv("POD_NAME"), "this replica's pod in --namespace (default $POD_NAME): labelled "+labelRole+"=active or standby, for the Service that sends clients, AMs and node relays to the active RM only")
	fs.BoolVar(&h.standbyRKS, "standby-rks", true, "a standby serves --rks-address too, answering StandbyException; false where the replicas share one RKS address only the active holds (knit local, as a Service selecting the active would)")
}

// labelRole is the pod label saying whether a replica is the active RM.
const labelRole = "knit.io/rm-role"

// labelPod sets this replica's pod's role label, when it knows its pod: a
// merge patch of its own pod, through the election's client (it is no
// write of the RM's state, and a standby makes it too). A failure is
// logged: the RM still serves, and a client configured with every RM id
// finds it anyway.
func (r *replica) labelPod(ctx context.Context, role string, log *slog.Logger) {
	if r.podName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelRole, role))
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond)), ctx)
	err := backoff.Retry(func() error {
		_, err := r.kube.CoreV1().Pods(r.namespace).Patch(ctx, r.podName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "knit-rm"})
		return err
	}, b)
	if err != nil {
		log.Error("labelling the pod", "pod", r.podName, "role", role, "err", err)
		return
	}
	log.Info("labelled the pod", "pod", r.podName, "role", role)
}

// rmID is this replica's id: the flag, else yarn.resourcemanager.ha.id,
// else (HA off) the host name. With HA on it must be one of ids.
func rmID(h haFlags, c *hadoopconf.Configuration, ids []string) (string, error) {
	id := h.id
	if id == "" {
		id, _ = c.GetTrimmed(hadoopconf.KeyRMHAID, "")
	}
	if ids == nil {
		if id == "" {
			return os.Hostname()
		}
		return id, nil
	}
	for _, x := range ids {
		if x == id {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s: this RM's id %q (--ha-id or %s) is not one of %v", hadoopconf.KeyRMHAIDs, id, hadoopconf.KeyRMHAID, ids)
}

// replica is what both phases of the process share: which RM it is and
// its part in the election.
type replica struct {
	id      string
	ids     []string // nil without HA
	elector *ha.Elector
	// conf is the configuration as read, before ForRM picked this RM's
	// addresses: the standby finds the active's web address in it.
	conf *hadoopconf.Configuration
	// kube is the election's client; podName and namespace name this
	// replica's pod, if known.
	kube               kubernetes.Interface
	podName, namespace string
}

// active reports whether this replica leads and may write.
func (r *replica) active() bool { return r.elector.Leading() }

// admission is the gate of every RPC port: StandbyException unless this
// replica is the active RM.
func (r *replica) admission() ha.Admission { return ha.Admission{ID: r.id, Active: r.active} }

// webURL is RM id's web address as a URL, for the standby's redirects.
func (r *replica) webURL(id string) string {
	if id == "" || r.ids == nil {
		// Without rm-ids no replica has an address of its own to name.
		return ""
	}
	c := hadoopconf.ForRM(r.conf, id)
	for _, p := range hadoopconf.YarnDefaults() {
		c.SetDefault(p.Name, p.Value)
	}
	addr, err := c.GetTrimmed(hadoopconf.KeyRMWebappAddress, "")
	if err != nil || addr == "" {
		return ""
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + addr
}

// run is the process: a standby until this replica wins the Lease, then
// the active RM until it loses it or is told to stop. A replica leads once:
// after losing the Lease it exits, and its restart is a standby again, so
// no state of a past term survives into a new one.
func run(f flags) int {
	log := newLogger()
	fail := func(err error) int {
		log.Error("knit-rm", "err", err)
		fmt.Fprintln(os.Stderr, "knit-rm:", err)
		return 1
	}
	r, err := newReplica(f, log)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	electionCtx, endElection := context.WithCancel(context.Background())
	var election sync.WaitGroup
	election.Add(1)
	go func() {
		defer election.Done()
		if err := r.elector.Run(electionCtx); err != nil {
			log.Error("election", "err", err)
		}
	}()
	// The Lease is released only once nothing of this replica writes.
	defer func() { endElection(); election.Wait() }()

	log.Info("standby", "id", r.id, "rmIDs", r.ids)
	standby := fx.New(standbyOptions(f, r))
	if err := startApp(ctx, standby); err != nil {
		return fail(err)
	}
	r.labelPod(ctx, "standby", log)
	select {
	case <-r.elector.Elected():
	case <-ctx.Done():
		stopApp(standby, log)
		return 0
	}
	stopApp(standby, log)
	if ctx.Err() != nil {
		return 0
	}

	log.Info("transitioning to active", "id", r.id)
	app := fx.New(options(f, r))
	if err := startApp(ctx, app); err != nil {
		return fail(err)
	}
	r.labelPod(ctx, "active", log)
	sig := <-app.Wait()
	stopApp(app, log)
	return sig.ExitCode
}

func startApp(ctx context.Context, app *fx.App) error {
	if err := app.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, app.StartTimeout())
	defer cancel()
	return app.Start(ctx)
}

func stopApp(app *fx.App, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancel()
	if err := app.Stop(ctx); err != nil {
		log.Error("stopping", "err", err)
	}
}

// newReplica reads which RM this is and prepares its elector, with a
// Kubernetes client of its own that no fence stops.
func newReplica(f flags, log *slog.Logger) (*replica, error) {
	c, err := readConf(f.confDir)
	if err != nil {
		return nil, err
	}
	ids, err := hadoopconf.RMHAIDs(c)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	id, err := rmID(f.ha, c, ids)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	// A renewal every retry period, and a read besides when one fails:
	// at the default 250 ms that is up to 8 requests a second, over
	// client-go's default limit of 5, and a renewal left waiting on its
	// own client's rate limiter past the renew deadline loses the Lease
	// (seen while the RM created pods at 1,000 a second).
	lc := rest.CopyConfig(cfg)
	if f.ha.retryPeriod > 0 {
		lc.QPS = max(rest.DefaultQPS, float32(2*time.Second/f.ha.retryPeriod))
		lc.Burst = max(rest.DefaultBurst, 2*int(lc.QPS))
	}
	client, err := kubernetes.NewForConfig(lc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	// With rm-ids, the Lease names this process, not only this RM id: a
	// replica restarted at once after a crash is a standby like the others,
	// and the one that has waited longest for the dead leader's Lease takes
	// it. Without, the name is the replica's (its host, a pod's name), so a
	// restarted replica takes its own Lease back at once, as a lone RM
	// restarting must.
	identity := id
	if ids != nil {
		var nonce [4]byte
		if _, err := rand.Read(nonce[:]); err != nil {
			return nil, err
		}
		identity = id + "/" + hex.EncodeToString(nonce[:])
	}
	el, err := ha.NewElector(ha.Config{
		Client: client, Namespace: f.namespace, Identity: identity,
		LeaseDuration: f.ha.leaseDuration, RenewDeadline: f.ha.renewDeadline, RetryPeriod: f.ha.retryPeriod,
		Logger: log.With("component", "election"),
	})
	if err != nil {
		return nil, err
	}
	return &replica{id: id, ids: ids, elector: el, conf: c, kube: client, podName: f.ha.podName, namespace: f.namespace}, nil
}

// rmConf is this RM's view of the configuration: with HA, its own
// addresses among the rm-ids' (HAUtil.verifyAndSetConfiguration).
func (r *replica) rmConf(c *hadoopconf.Configuration) *hadoopconf.Configuration {
	if r.ids == nil {
		return c
	}
	return hadoopconf.ForRM(c, r.id)
}

// runLeadership stops the active RM when its Lease is lost: the app stops
// (nothing more is written: the fence already refuses) and the process
// exits for its Deployment, or knit local, to start it again as a standby.
func runLeadership(run lifecycle.Runner, r *replica) {
	run.Background("leader lease", func(ctx context.Context) error {
		select {
		case <-r.elector.Lost():
			return ha.ErrLost
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// newHAService is HAServiceProtocol for the admin port, answering for the
// replica whichever phase it is in.
func newHAService(r *replica, settings conf.RMSettings, shutdown func()) (*ha.Service, error) {
	admins := acl.Parse(settings.AdminACL)
	self := daemonUser()
	return ha.NewService(ha.ServiceConfig{
		Active: r.active,
		Authorize: func(_ context.Context, user string) bool {
			return (self != "" && user == self) || admins.Allows(user, nil)
		},
		StepDown: shutdown,
	})
}

// standbyOptions is the standby: every port the active RM serves, each
// answering StandbyException (HAServiceProtocol aside), and the web port
// redirecting to the active. It reads and writes nothing of the RM's
// state.
func standbyOptions(f flags, r *replica) fx.Option {
	return fx.Options(
		fx.Supply(f, r),
		fx.Provide(newLogger, loadConf),
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger { return &fxevent.SlogLogger{Logger: log.With("component", "fx")} }),
		fx.Invoke(serveStandby),
	)
}

func serveStandby(run lifecycle.Runner, r *replica, settings conf.RMSettings, f flags) error {
	a := r.admission()
	rpc := func(name, address string, cfg ipc.Config, register func(*ipc.Server) error, wrap func(net.Listener) net.Listener) error {
		cfg.AdmitCall = a.AdmitCall
		cfg.Logger = run.Logger.With("component", "standby-rpc", "port", name)
		srv, err := ipc.NewServer(cfg)
		if err != nil {
			return err
		}
		if register != nil {
			if err := register(srv); err != nil {
				return err
			}
		}
		run.Serve(lifecycle.Endpoint{Name: name + " (standby)", Address: address, Server: srv, Wrap: wrap})
		return nil
	}
	svc, err := newHAService(r, settings, nil)
	if err != nil {
		return err
	}
	err = errors.Join(
		rpc("client port", settings.Address, ipc.Config{Simple: true}, nil, nil),
		rpc("scheduler port", settings.SchedulerAddress, ipc.Config{Tokens: a.Tokens(nil)}, nil, nil),
		rpc("admin port", settings.AdminAddress, ipc.Config{Simple: true}, svc.Register, nil),
	)
	if err == nil && f.ha.standbyRKS {
		err = rpc("RKS port", f.rksAddress, ipc.Config{Tokens: a.Tokens(nil), ConnContext: relay.ConnContext}, nil,
			func(l net.Listener) net.Listener { return relay.NewListener(l) })
	}
	if err != nil {
		return err
	}
	web := ha.StandbyWeb(ha.WebConfig{
		Info: rm.StandbyClusterInfo(time.Now().UnixMilli()),
		ActiveURL: func() string {
			leader, _, _ := strings.Cut(r.elector.Leader(), "/")
			return r.webURL(leader)
		},
	})
	srv := &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second}
	run.Serve(lifecycle.Endpoint{Name: "web port (standby)", Address: settings.WebappAddress, Server: srv})
	return nil
}
