package dshell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/knitdev/knit/client"
)

// Exit codes of Main.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Main is the distshell command line: "distshell [client] <flags>" submits
// an application, "distshell am <flags>" is its application master (what
// the client's AM command runs). getenv reads the environment
// (HADOOP_CONF_DIR, USER, CONTAINER_ID, HADOOP_TOKEN_FILE_LOCATION). It
// returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	role := "client"
	if len(args) > 0 && (args[0] == "am" || args[0] == "client") {
		role, args = args[0], args[1:]
	}
	switch role {
	case "am":
		// The NodeManager links the AM's local resources into its working
		// folder, where DistributedShell's AM reads its staged files.
		opts, err := parseAMFlags(args, getenv, os.DirFS("."), stderr)
		if err != nil {
			return usageExit(err, stderr)
		}
		opts.Logger = log
		if err := RunAM(ctx, opts); err != nil {
			log.Error("application master failed", "err", err)
			return ExitFailed
		}
		return ExitOK
	default:
		opts, err := parseClientFlags(args, getenv, stderr)
		if err != nil {
			return usageExit(err, stderr)
		}
		opts.Logger = log
		if _, err := RunClient(ctx, opts, stdout); err != nil {
			log.Error("application failed", "err", err)
			return ExitFailed
		}
		fmt.Fprintln(stdout, "Application completed successfully")
		return ExitOK
	}
}

func usageExit(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintln(stderr, "distshell:", err)
	return ExitUsage
}

// envFlag collects repeated -shell_env KEY=VALUE flags as DistributedShell
// reads them: the flag trimmed, split at its first "=", a bare KEY set to
// the empty value.
type envFlag map[string]string

func (e envFlag) String() string { return fmt.Sprint(map[string]string(e)) }

func (e envFlag) Set(s string) error {
	k, v, _ := strings.Cut(strings.TrimSpace(s), "=")
	if k == "" {
		return fmt.Errorf("environment %q without a name", s)
	}
	e[k] = v
	return nil
}

// argsFlag collects -shell_args values joined by a space, as
// DistributedShell's client joins its multi-valued option
// (StringUtils.join(shellArgs, " ")).
type argsFlag struct{ s *string }

func (a argsFlag) String() string {
	if a.s == nil {
		return ""
	}
	return *a.s
}

func (a argsFlag) Set(v string) error {
	if *a.s != "" {
		v = *a.s + " " + v
	}
	*a.s = v
	return nil
}

// gatherShellArgs rewrites DistributedShell's "-shell_args a b c" (an
// option with unlimited values in Apache Commons CLI: every word up to the
// next option flags knows) into one -shell_args=VALUE word that package flag
// reads.
func gatherShellArgs(flags *flag.FlagSet, args []string) []string {
	known := func(w string) bool {
		if w == "--" {
			return true
		}
		name, ok := strings.CutPrefix(w, "-")
		if !ok {
			return false
		}
		name = strings.TrimPrefix(name, "-")
		name, _, _ = strings.Cut(name, "=")
		return flags.Lookup(name) != nil
	}
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] != "-shell_args" && args[i] != "--shell_args" {
			out = append(out, args[i])
			continue
		}
		j := i + 1
		for j < len(args) && !known(args[j]) {
			j++
		}
		if j == i+1 {
			out = append(out, args[i]) // no value: package flag says so
			continue
		}
		out = append(out, "-shell_args="+strings.Join(args[i+1:j], " "))
		i = j - 1
	}
	return out
}

// taskFlags declares the flags the client and the AM share, into spec;
// container_vcores goes to the returned int for a range check after
// parsing.
func taskFlags(flags *flag.FlagSet, spec *TaskSpec) (vcores *int) {
	spec.ShellEnv = map[string]string{}
	flags.StringVar(&spec.ShellCommand, "shell_command", "", "shell command to be executed by the containers")
	flags.Var(argsFlag{&spec.ShellArgs}, "shell_args", "command line arguments for the shell command; the words up to the next flag, repeatable")
	flags.Var(envFlag(spec.ShellEnv), "shell_env", "environment for the shell command, KEY=VALUE (repeatable)")
	flags.IntVar(&spec.NumContainers, "num_containers", 1, "number of containers on which the shell command runs")
	flags.Int64Var(&spec.MemoryMB, "container_memory", 128, "memory in MB of each shell container")
	return flags.Int("container_vcores", 1, "virtual cores of each shell container")
}

// parseClientFlags reads the client role's flags. The RM and scheduler
// addresses default to $HADOOP_CONF_DIR/yarn-site.xml.
func parseClientFlags(args []string, getenv func(string) string, stderr io.Writer) (ClientOptions, error) {
	flags := flag.NewFlagSet("distshell", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var o ClientOptions
	var masterVcores, shellPriority, appPriority, maxAttempts int
	var timeoutMS int64
	vcores := taskFlags(flags, &o.Task)
	flags.IntVar(&shellPriority, "shell_cmd_priority", 0, "priority of the shell containers' asks")
	flags.Int64Var(&o.MasterMemoryMB, "master_memory", 128, "memory in MB of the application master")
	flags.IntVar(&masterVcores, "master_vcores", 1, "virtual cores of the application master")
	flags.IntVar(&appPriority, "priority", 0, "application priority")
	flags.StringVar(&o.Queue, "queue", "default", "queue the application is submitted to")
	flags.StringVar(&o.AppName, "appname", "DistributedShell", "application name")
	flags.Int64Var(&timeoutMS, "timeout", 600000, "application timeout in milliseconds; the client kills the application after it")
	flags.BoolVar(&o.KeepContainers, "keep_containers_across_application_attempts", false, "keep containers across application attempts")
	flags.StringVar(&o.RollingLogPattern, "rolling_log_pattern", "", "pattern of the log files aggregated while the application runs")
	flags.Int64Var(&o.AttemptFailuresValidityInterval, "attempt_failures_validity_interval", -1, "only AM failures within this many milliseconds count against the attempts")
	flags.IntVar(&maxAttempts, "max_am_attempts", 2, "maximum application attempts")
	flags.StringVar(&o.RMAddress, "rm_address", "", "ResourceManager client address (default: yarn.resourcemanager.address of $HADOOP_CONF_DIR/yarn-site.xml, else 127.0.0.1:8032)")
	flags.StringVar(&o.SchedulerAddress, "scheduler_address", "", "ResourceManager scheduler address handed to the AM (default: yarn.resourcemanager.scheduler.address of $HADOOP_CONF_DIR/yarn-site.xml if set there)")
	flags.StringVar(&o.User, "user", client.LoginUser(getenv), "user the application is submitted as (default: $HADOOP_USER_NAME, else the login user)")
	flags.StringVar(&o.Binary, "binary", "", "distshell binary shipped to run the AM (default: this executable)")
	flags.StringVar(&o.ShellScript, "shell_script", "", "shell script the containers run, instead of a shell command")
	if err := flags.Parse(gatherShellArgs(flags, args)); err != nil {
		return ClientOptions{}, err
	}
	if flags.NArg() > 0 {
		return ClientOptions{}, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	var err error
	if o.Task.Vcores, err = int32Flag("container_vcores", *vcores); err != nil {
		return ClientOptions{}, err
	}
	if o.MasterVcores, err = int32Flag("master_vcores", masterVcores); err != nil {
		return ClientOptions{}, err
	}
	if o.Task.Priority, err = int32Flag("shell_cmd_priority", shellPriority); err != nil {
		return ClientOptions{}, err
	}
	if o.AppPriority, err = int32Flag("priority", appPriority); err != nil {
		return ClientOptions{}, err
	}
	if o.MaxAMAttempts, err = int32Flag("max_am_attempts", maxAttempts); err != nil {
		return ClientOptions{}, err
	}
	o.Timeout = time.Duration(timeoutMS) * time.Millisecond
	confDir := getenv("HADOOP_CONF_DIR")
	if o.RMAddress == "" {
		if o.RMAddress, _, err = client.ConfAddress(confDir, client.KeyRMAddress, client.DefaultRMPort); err != nil {
			return ClientOptions{}, err
		}
	}
	if o.SchedulerAddress == "" {
		addr, ok, err := client.ConfAddress(confDir, client.KeySchedulerAddress, client.DefaultSchedulerPort)
		if err != nil {
			return ClientOptions{}, err
		}
		if ok {
			o.SchedulerAddress = addr
		}
	}
	if o.User == "" {
		return ClientOptions{}, errors.New("no user: set -user or $USER")
	}
	if err := o.validateTask(); err != nil {
		return ClientOptions{}, err
	}
	return o, nil
}

// parseAMFlags reads the AM role's flags (those amArgs writes), its
// container environment, and the files the client staged for it, in dir.
// -shell_command and -shell_args serve an AM started by hand.
func parseAMFlags(args []string, getenv func(string) string, dir fs.FS, stderr io.Writer) (AMOptions, error) {
	flags := flag.NewFlagSet("distshell am", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var o AMOptions
	var priority int
	vcores := taskFlags(flags, &o.Task)
	flags.IntVar(&priority, "priority", 0, "priority of the shell containers' asks")
	flags.StringVar(&o.SchedulerAddress, "scheduler_address", "", "ResourceManager scheduler address (default: yarn.resourcemanager.scheduler.address of $HADOOP_CONF_DIR/yarn-site.xml, else 127.0.0.1:8030)")
	if err := flags.Parse(gatherShellArgs(flags, args)); err != nil {
		return AMOptions{}, err
	}
	if flags.NArg() > 0 {
		return AMOptions{}, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if err := readStaged(dir, getenv, &o.Task); err != nil {
		return AMOptions{}, err
	}
	var err error
	if o.Task.Vcores, err = int32Flag("container_vcores", *vcores); err != nil {
		return AMOptions{}, err
	}
	if o.Task.Priority, err = int32Flag("priority", priority); err != nil {
		return AMOptions{}, err
	}
	if o.SchedulerAddress == "" {
		if o.SchedulerAddress, _, err = client.ConfAddress(getenv("HADOOP_CONF_DIR"), client.KeySchedulerAddress, client.DefaultSchedulerPort); err != nil {
			return AMOptions{}, err
		}
	}
	o.ContainerID = getenv("CONTAINER_ID")
	o.TokenFile = getenv("HADOOP_TOKEN_FILE_LOCATION")
	if err := o.Task.validate(); err != nil {
		return AMOptions{}, err
	}
	return o, nil
}

func int32Flag(name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("-%s %d out of range", name, v)
	}
	return int32(v), nil
}
