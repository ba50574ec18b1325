package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/supervise"
)

// runLocal is `knit local up|status|down|run`.
func runLocal(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("local: home folder: %w", err)
	}
	fs := flag.NewFlagSet("local "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(home, ".knit", "local"), "folder for everything the local cluster keeps")
	nodes := fs.Int("nodes", 2, "number of process nodes (up and run)")
	rms := fs.Int("rms", 1, "number of knit-rm replicas; 2 or more run RM HA (one active through the Lease, the others standby) and hadoop-conf/ lists them all (up and run)")
	subClusters := fs.Int("subclusters", 1, "number of knit-rm sub-clusters; 2 or more run a YARN Federation on the one control plane (each RM with its own namespace and its own pool of the nodes, at least one each, whose knit-nodes run the AMRMProxy with the FederationInterceptor; knit-router in front, knit-gpg weighing them) and hadoop-conf/ points clients at the Router (up and run)")
	binDir := fs.String("bin-dir", "", "folder of the Kubernetes binaries (default: the `make tools` cache)")
	rmBinary := fs.String("rm-binary", besideMe("knit-rm"), "knit-rm program to run against the cluster; empty runs none")
	confDir := fs.String("conf-dir", "", "your Hadoop configuration folder (yarn-site.xml, capacity-scheduler.xml, mapred-site.xml, ...) for knit-rm, the nodes and clients (up and run)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *dir, err = filepath.Abs(*dir); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if *subClusters > 1 && *rms > 1 {
		return errors.New("local: --subclusters runs one knit-rm per sub-cluster; it does not combine with --rms")
	}
	opts := localcluster.Options{Dir: *dir, Nodes: *nodes, BinDir: *binDir, RMs: *rms, SubClusters: *subClusters}
	if *confDir != "" {
		if opts.ConfDir, err = filepath.Abs(*confDir); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		if fi, err := os.Stat(opts.ConfDir); err != nil {
			return fmt.Errorf("local: conf dir: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("local: conf dir %s is not a folder", opts.ConfDir)
		}
	}
	if *rmBinary != "" {
		opts.RMCommand = []string{*rmBinary}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "up":
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("local up: %w", err)
		}
		st, err := localcluster.Up(ctx, opts, []string{self, "local", "run"})
		if errors.Is(err, localcluster.ErrAlreadyUp) {
			fmt.Fprintf(out, "local cluster is already up (pid %d, %d nodes)\nkubectl --kubeconfig %s get nodes\n", st.PID, len(st.Nodes), st.Kubeconfig)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "local cluster up: API server %s, %d nodes, logs in %s\nkubectl --kubeconfig %s get nodes\n",
			st.Server, len(st.Nodes), filepath.Join(*dir, "logs"), st.Kubeconfig)
		printRM(out, st)
		return nil
	case "status":
		st, err := localcluster.StatusOf(ctx, *dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "up since %s (pid %d)\nAPI server %s\nkubeconfig %s\n", st.Started.Format("2006-01-02 15:04:05 MST"), st.PID, st.Server, st.Kubeconfig)
		for _, n := range st.NodeStatus {
			ready := "NotReady"
			if n.Ready {
				ready = "Ready"
			}
			fmt.Fprintf(out, "node %s %s %s\n", n.Name, n.Address, ready)
		}
		for _, c := range st.Components {
			printComponent(out, c)
		}
		printRM(out, &st.State)
		return nil
	case "down":
		err := localcluster.Down(ctx, *dir)
		if errors.Is(err, localcluster.ErrNotUp) {
			fmt.Fprintln(out, "local cluster is not up")
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "local cluster down")
		return nil
	case "run":
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		return localcluster.Run(ctx, opts)
	default:
		return fmt.Errorf("unknown local command %q\n%s", args[0], usage)
	}
}

// printComponent is one supervised process: running or not, its restarts
// and how its last run ended.
func printComponent(out io.Writer, c supervise.Status) {
	state := fmt.Sprintf("running (pid %d)", c.PID)
	if !c.Running {
		state = "down"
		if !c.NextRestart.IsZero() {
			state += ", restarting at " + c.NextRestart.Local().Format("15:04:05")
		}
	}
	line := fmt.Sprintf("%s %s, %d restarts", c.Name, state, c.Restarts)
	if c.LastExit != "" {
		line += fmt.Sprintf(", last exit %s at %s", c.LastExit, c.LastExitAt.Local().Format("2006-01-02 15:04:05"))
	}
	fmt.Fprintln(out, line)
}

func printRM(out io.Writer, st *localcluster.State) {
	if f := st.Federation; f != nil {
		fmt.Fprintf(out, "federation: knit-router client %s, admin %s, web http://%s; knit-gpg\n", f.Router, f.RouterAdmin, f.RouterWeb)
		for _, sc := range f.SubClusters {
			fmt.Fprintf(out, "sub-cluster %s: knit-rm client %s, web http://%s, namespace %s, nodes %s\n", sc.ID, sc.RM.Client, sc.RM.Web, sc.Namespace, strings.Join(sc.Nodes, ","))
		}
		fmt.Fprintf(out, "export HADOOP_CONF_DIR=%s\n", st.HadoopConf)
		return
	}
	if st.RM == nil {
		return
	}
	fmt.Fprintf(out, "knit-rm: client %s, web http://%s\nexport HADOOP_CONF_DIR=%s\n", st.RM.Client, st.RM.Web, st.HadoopConf)
}

// besideMe is the path of a program installed next to this one, or empty.
func besideMe(name string) string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	path := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}
