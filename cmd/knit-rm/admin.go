package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"go.uber.org/fx"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
)

// readConf reads the RM's configuration folder as the ResourceManager and
// its CapacityScheduler do: core-site.xml, yarn-site.xml, then
// capacity-scheduler.xml over them. Missing files are skipped, and an empty
// dir reads none. The start (loadConf) and every admin refresh read through
// it, so a refresh sees exactly what a restart would.
func readConf(dir string) (*hadoopconf.Configuration, error) {
	c := hadoopconf.New(hadoopconf.Options{})
	for _, name := range []string{"core-site.xml", "yarn-site.xml", "capacity-scheduler.xml"} {
		if dir == "" {
			break
		}
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := c.AddFile(path); err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
	}
	// YARN ships a capacity-scheduler.xml with one queue, root.default, at
	// 100%; a cluster owner who brings none gets the same.
	c.SetDefault("yarn.scheduler.capacity.root.queues", "default")
	c.SetDefault("yarn.scheduler.capacity.root.default.capacity", "100")
	return c, nil
}

// daemonUser is the user knit-rm runs as, whom AdminService always admits
// as YARN admits the RM's own user; none when the process's uid has no
// name (common in containers).
func daemonUser() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
}

// serveAdminProtocol serves ResourceManagerAdministrationProtocol (`yarn
// rmadmin`) on yarn.resourcemanager.admin.address. Its refreshes re-read
// the configuration folder.
func serveAdminProtocol(run lifecycle.Runner, r *rm.ResourceManager, settings conf.RMSettings, f flags, m *rmMetrics, rep *replica) error {
	log := run.Logger
	admin, err := rm.NewAdminService(r, rm.AdminConfig{
		LoadConf: func(ctx context.Context) (*hadoopconf.Configuration, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return readConf(f.confDir)
		},
		DaemonUser: daemonUser(),
		Logger:     log.With("component", "admin"),
	})
	if err != nil {
		return err
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, AdmitCall: rep.admission().AdmitCall, Observer: m.rpc, Logger: log.With("component", "admin-rpc")})
	if err != nil {
		return err
	}
	if err := admin.Register(srv); err != nil {
		return err
	}
	// A forced transition to standby stops the active RM; its Lease is
	// released once everything has stopped, and it restarts as a standby.
	svc, err := newHAService(rep, settings, func() {
		if err := run.Shutdowner.Shutdown(fx.ExitCode(lifecycle.ExitCode)); err != nil {
			log.Error("stepping down", "err", err)
		}
	})
	if err != nil {
		return err
	}
	if err := svc.Register(srv); err != nil {
		return err
	}
	run.Serve(lifecycle.Endpoint{Name: "admin port (ResourceManagerAdministrationProtocol)", Address: settings.AdminAddress, Server: srv})
	return nil
}
