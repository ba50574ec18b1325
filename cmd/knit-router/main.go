// Command knit-router is the Router of a Knit YARN Federation: it serves
// ApplicationClientProtocol on yarn.router.clientrm.address in front of
// the sub-cluster RMs the federation store lists, so that unchanged
// clients submit to and watch the federation as one cluster, serves the
// federation's admin calls on yarn.router.rmadmin.address, serves the
// federation's REST API and page on yarn.router.webapp.address, and marks
// silent sub-clusters LOST. It names new applications itself, under a
// cluster timestamp it claims in the store. It issues, renews and cancels
// RM delegation tokens on keys every Router shares through the store, and
// its client port accepts them for authentication. This file wires the
// pieces with fx; what they do lives in federation/.
package main

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"go.uber.org/fx"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/cmd/internal/fedcmd"
	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/cmd/internal/tokenroll"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/membership"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/routerweb"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/rm/tokens"
)

// flags are knit-router's command line.
type flags = fedcmd.Flags

func main() { fedcmd.Main("knit-router", "yarn.router.* and yarn.federation.*", options) }

// options is the whole app: main runs it, and a test checks its graph
// with fx.ValidateApp.
func options(f flags) fx.Option {
	return fx.Options(
		fx.Supply(f),
		fx.Provide(loadSettings, newStore, newCache, newTokens, newRouter),
		fx.Invoke(serveClientProtocol, serveAdminProtocol, serveWeb, runCleaner),
	)
}

// loadSettings reads core-site.xml and yarn-site.xml from the conf dir.
func loadSettings(f flags) (federation.Settings, error) {
	c, err := f.Conf()
	if err != nil {
		return federation.Settings{}, err
	}
	return federation.LoadSettings(c)
}

func newStore(f flags) (*fedstore.Kube, error) { return f.Store() }

// newCache is the Router's view of the store, as YARN's Router reads
// through FederationStateStoreFacade; its admin protocol writes through it.
func newCache(s *fedstore.Kube, settings federation.Settings) *fedstore.Cache {
	return fedstore.NewCache(s, settings.CacheTTL, nil)
}

// newTokens is the Router's delegation token secret manager, as YARN's
// Router makes its RouterDelegationTokenSecretManager: on the RM's
// delegation token schedule, its keys and tokens in the store, shared with
// every other Router. It takes up the stored keys (making the first ones
// if there are none) when the app starts, before the client port opens,
// and rolls its key and drops expired tokens and keys every remove-scan
// interval, or every key-update interval where that is shorter.
func newTokens(run lifecycle.Runner, c *fedstore.Cache, settings federation.Settings) (*tokens.Manager, error) {
	m, err := tokens.New(tokens.Config{
		Store: router.NewKeyStore(c), Shared: true, DelegationOnly: true,
		Delegation: tokens.DelegationPolicy{
			KeyUpdateInterval: settings.DelegationKeyUpdateInterval,
			MaxLifetime:       settings.DelegationTokenMaxLifetime,
			RenewInterval:     settings.DelegationTokenRenewInterval,
		},
	})
	if err != nil {
		return nil, err
	}
	// The Router signs no container token: its identifier is never read.
	run.Lifecycle.Append(fx.StartHook(func(ctx context.Context) error { return m.Activate(ctx, 0) }))
	run.Background("delegation token key rolling", tokenroll.Loop(run.Logger.With("loop", "delegation-keys"), m,
		min(settings.DelegationTokenRemoveScanInterval, settings.DelegationKeyUpdateInterval)))
	return m, nil
}

func newRouter(c *fedstore.Cache, m *tokens.Manager, settings federation.Settings, log *slog.Logger) (*router.Router, error) {
	machines, err := federation.LoadMachineList(settings.MachineList)
	if err != nil {
		return nil, err
	}
	service, err := membership.ConnectAddress(settings.RouterClientRMAddress, fedcmd.AdvertiseHost())
	if err != nil {
		return nil, err
	}
	// Each Router process claims timestamps as a claimant of its own: a
	// name two processes never share, so that a restarted Router or a
	// second one never holds another's timestamp.
	ids, err := membership.NewTimestamps(c, "router-"+rand.Text())
	if err != nil {
		return nil, err
	}
	return router.New(router.Config{
		Store:        c,
		IDs:          ids,
		Tokens:       m,
		TokenService: service,
		DefaultPolicy: fedstore.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: settings.PolicyManager,
			Params: []byte(settings.PolicyManagerParams)},
		SubmitRetry:    settings.SubmitRetry,
		SubmitInterval: settings.SubmitInterval,
		Machines:       machines,
		Logger:         log.With("component", "router"),
	})
}

// serveClientProtocol serves ApplicationClientProtocol on
// yarn.router.clientrm.address, to SIMPLE callers and to callers holding
// a delegation token a Router of the federation issued.
func serveClientProtocol(run lifecycle.Runner, r *router.Router, m *tokens.Manager, settings federation.Settings) error {
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Tokens: m.Delegation().SecretLookup(), Logger: run.Logger.With("component", "client-rpc")})
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
	return fedcmd.RunCleaner(run, s, settings.SubClusterExpiration, settings.SubClusterCleanerInterval)
}
