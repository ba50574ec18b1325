package wordcount

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/yarnapp"
)

// Exit codes of Main.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Main is the mrjob command line: "mrjob [client] -input PATH[,PATH...]
// [-output DIR] [-reduces N] ..." submits a job; "mrjob am", "mrjob map"
// and "mrjob reduce" are the roles the job's containers run. getenv reads
// the environment the node gives them (HADOOP_CONF_DIR, CONTAINER_ID,
// HADOOP_TOKEN_FILE_LOCATION, LOCAL_DIRS). It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	role := "client"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		role, args = args[0], args[1:]
	}
	flags := flag.NewFlagSet("mrjob "+role, flag.ContinueOnError)
	flags.SetOutput(stderr)
	var err error
	switch role {
	case "client":
		var opts ClientOptions
		var inputs string
		flags.StringVar(&inputs, "input", "", "input files or folders, comma-separated; each file is one map")
		flags.StringVar(&opts.Output, "output", "", "output folder, which must not exist; every node must see it")
		flags.IntVar(&opts.Reduces, "reduces", 2, "number of reducers (mapreduce.job.reduces)")
		flags.IntVar(&opts.MaxAttempts, "max_attempts", 4, "attempts of each task (mapreduce.map/reduce.maxattempts)")
		flags.Int64Var(&opts.TaskMemoryMB, "task_memory", 128, "memory in MB of each task container")
		flags.Int64Var(&opts.AMMemoryMB, "master_memory", 128, "memory in MB of the AM container")
		flags.BoolVar(&opts.ForgeShuffleToken, "forge_shuffle_token", false, "reducers sign their fetches with a wrong secret (the job fails as a forged job token fails)")
		flags.StringVar(&opts.Queue, "queue", "default", "queue the job is submitted to")
		flags.StringVar(&opts.User, "user", client.LoginUser(getenv), "user the job is submitted as")
		flags.StringVar(&opts.Binary, "binary", "", "mrjob binary the containers run (default: this executable)")
		flags.StringVar(&opts.RMAddress, "rm_address", "", "ResourceManager client address (default: $HADOOP_CONF_DIR/yarn-site.xml, else 127.0.0.1:8032)")
		flags.StringVar(&opts.SchedulerAddress, "scheduler_address", "", "ResourceManager scheduler address handed to the AM (default: its node's configuration)")
		if err = flags.Parse(args); err != nil {
			break
		}
		if inputs == "" {
			err = errors.New("-input is required")
			break
		}
		opts.Inputs = strings.Split(inputs, ",")
		if err = yarnapp.ClientAddresses(getenv("HADOOP_CONF_DIR"), &opts.RMAddress, &opts.SchedulerAddress); err != nil {
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
	case "map", "reduce":
		var spec TaskSpec
		var encoded string
		flags.StringVar(&encoded, "spec", "", "the task, as the AM encodes it")
		if err = flags.Parse(args); err != nil {
			break
		}
		if err = yarnapp.DecodeSpec(encoded, &spec); err != nil {
			break
		}
		var rerr error
		if role == "map" {
			var dirs []string
			if d := getenv("LOCAL_DIRS"); d != "" {
				dirs = strings.Split(d, ",")
			}
			_, rerr = RunMap(MapOptions{Spec: spec, Input: InputKey, LocalDirs: dirs, Stdout: stdout})
		} else {
			rerr = RunReduce(ctx, ReduceOptions{Spec: spec, TokenFile: getenv("HADOOP_TOKEN_FILE_LOCATION"), Stdout: stdout, Logger: log})
		}
		if rerr != nil {
			// The words a task's syslog ends with, for the AM's diagnostics.
			fmt.Fprintf(stderr, "Error: %v\n", rerr)
			return ExitFailed
		}
		return ExitOK
	default:
		err = fmt.Errorf("unknown role %q: client, am, map or reduce", role)
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintln(stderr, "mrjob:", err)
	return ExitUsage
}
