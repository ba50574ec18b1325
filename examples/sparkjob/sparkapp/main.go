package sparkapp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/examples/yarnapp"
	"github.com/knitdev/knit/hadoopconf"
)

// Exit codes of Main.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Main is the sparkjob command line: "sparkjob [client] [-executors N]
// ..." submits a job; "sparkjob am" and "sparkjob executor" are the roles
// the job's containers run. getenv reads the environment the node gives
// them (HADOOP_CONF_DIR, CONTAINER_ID, HADOOP_TOKEN_FILE_LOCATION,
// LOCAL_DIRS, NM_HOST). It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	role := "client"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		role, args = args[0], args[1:]
	}
	flags := flag.NewFlagSet("sparkjob "+role, flag.ContinueOnError)
	flags.SetOutput(stderr)
	var err error
	switch role {
	case "client":
		var opts ClientOptions
		flags.IntVar(&opts.Spec.Executors, "executors", 3, "executors of each stage (spark.executor.instances)")
		flags.IntVar(&opts.Spec.MapsPerExecutor, "maps_per_executor", 2, "map tasks each stage-1 executor runs")
		flags.IntVar(&opts.Spec.Partitions, "partitions", 6, "reduce partitions of the shuffle")
		flags.IntVar(&opts.Spec.BlockBytes, "block_bytes", 64<<10, "about the size of each shuffle block")
		flags.IntVar(&opts.Spec.ShufflePort, "shuffle_port", 0, "spark.shuffle.service.port (default: $HADOOP_CONF_DIR/yarn-site.xml's, else 7337)")
		flags.BoolVar(&opts.Spec.OldFetchProtocol, "old_fetch_protocol", false, "fetch with OpenBlocks (spark.shuffle.useOldFetchProtocol)")
		flags.BoolVar(&opts.Spec.WrongSecret, "wrong_secret", false, "stage-2 executors authenticate with a secret not the application's (the job fails)")
		flags.Int64Var(&opts.Spec.ExecutorMemoryMB, "executor_memory", 128, "memory in MB of each executor container")
		flags.Int64Var(&opts.AMMemoryMB, "master_memory", 128, "memory in MB of the AM container")
		flags.StringVar(&opts.Queue, "queue", "default", "queue the job is submitted to")
		flags.StringVar(&opts.User, "user", client.LoginUser(getenv), "user the job is submitted as")
		flags.StringVar(&opts.Binary, "binary", "", "sparkjob binary the containers run (default: this executable)")
		flags.StringVar(&opts.RMAddress, "rm_address", "", "ResourceManager client address (default: $HADOOP_CONF_DIR/yarn-site.xml, else 127.0.0.1:8032)")
		flags.StringVar(&opts.SchedulerAddress, "scheduler_address", "", "ResourceManager scheduler address handed to the AM (default: its node's configuration)")
		if err = flags.Parse(args); err != nil {
			break
		}
		confDir := getenv("HADOOP_CONF_DIR")
		if opts.Spec.ShufflePort == 0 {
			if opts.Spec.ShufflePort, err = shufflePort(confDir); err != nil {
				break
			}
		}
		if err = yarnapp.ClientAddresses(confDir, &opts.RMAddress, &opts.SchedulerAddress); err != nil {
			break
		}
		opts.Logger = log
		if _, rerr := RunClient(ctx, opts, stdout); rerr != nil {
			log.Error("job failed", "err", rerr)
			return ExitFailed
		}
		return ExitOK
	case "am":
		var opts AMOptions
		var spec string
		flags.StringVar(&spec, "spec", "", "the job, as the client encodes it")
		flags.StringVar(&opts.SchedulerAddress, "scheduler_address", "", "ResourceManager scheduler address (default: $HADOOP_CONF_DIR/yarn-site.xml, else 127.0.0.1:8030)")
		if err = flags.Parse(args); err != nil {
			break
		}
		if err = yarnapp.DecodeSpec(spec, &opts.Spec); err != nil {
			break
		}
		if err = opts.FromContainer(getenv); err != nil {
			break
		}
		opts.Logger = log
		if rerr := RunAM(ctx, opts); rerr != nil {
			log.Error("application master failed", "err", rerr)
			return ExitFailed
		}
		return ExitOK
	case "executor":
		var opts ExecutorOptions
		var encoded string
		flags.StringVar(&encoded, "spec", "", "the executor, as the AM encodes it")
		if err = flags.Parse(args); err != nil {
			break
		}
		if err = yarnapp.DecodeSpec(encoded, &opts.Spec); err != nil {
			break
		}
		if d := getenv("LOCAL_DIRS"); d != "" {
			opts.LocalDirs = strings.Split(d, ",")
		}
		opts.Host, opts.TokenFile, opts.Stdout, opts.Logger = getenv("NM_HOST"), getenv("HADOOP_TOKEN_FILE_LOCATION"), stdout, log
		if rerr := RunExecutor(ctx, opts); rerr != nil {
			// The words an executor's log ends with, for the diagnostics.
			fmt.Fprintf(stderr, "Error: %v\n", rerr)
			return ExitFailed
		}
		return ExitOK
	default:
		err = fmt.Errorf("unknown role %q: client, am or executor", role)
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintln(stderr, "sparkjob:", err)
	return ExitUsage
}

// shufflePort is spark.shuffle.service.port as a Spark executor on YARN
// finds it when its SparkConf does not set it: from the YARN
// configuration (Utils.getSparkOrYarnConfig), else Spark's default.
func shufflePort(confDir string) (int, error) {
	path := filepath.Join(confDir, "yarn-site.xml")
	if _, err := os.Stat(path); confDir == "" || errors.Is(err, fs.ErrNotExist) {
		return sparkshuffle.DefaultPort, nil
	}
	conf := hadoopconf.New(hadoopconf.Options{})
	if err := conf.AddFile(path); err != nil {
		return 0, fmt.Errorf("yarn configuration: %w", err)
	}
	v, ok, err := conf.Lookup(sparkshuffle.PropPort)
	if err != nil || !ok {
		return sparkshuffle.DefaultPort, err
	}
	port, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", sparkshuffle.PropPort, err)
	}
	return port, nil
}
