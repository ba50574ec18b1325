package dshell

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// BinaryKey is the local resource key (the link name in the AM's working
// folder) under which the client ships the distshell binary.
const BinaryKey = "distshell"

// The files DistributedShell's client stages for its AM, by their local
// resource keys (Client.shellCommandPath, shellArgsPath and SCRIPT_PATH),
// and the AM environment that locates the script
// (DSConstants.DISTRIBUTEDSHELLSCRIPT*). The shell command and arguments
// travel in files rather than on the AM's command line, so that quotes,
// spaces, $ and newlines reach the AM exactly as given: the NodeManager's
// launch script runs the command line inside `bash -c "..."`.
const (
	ShellCommandKey = "shellCommands"
	ShellArgsKey    = "shellArgs"
	// ShellScriptKey is also the script's link name in each shell
	// container (ApplicationMaster.EXEC_SHELL_STRING_PATH).
	ShellScriptKey = "ExecScript.sh"

	EnvScriptLocation  = "DISTRIBUTEDSHELLSCRIPTLOCATION"
	EnvScriptTimestamp = "DISTRIBUTEDSHELLSCRIPTTIMESTAMP"
	EnvScriptLen       = "DISTRIBUTEDSHELLSCRIPTLEN"
)

// TaskSpec is what each shell container runs, and with what resources. The
// client hands the shell command, arguments and script to the AM as staged
// files (see ShellCommandKey), the rest as flags.
type TaskSpec struct {
	// ShellCommand and ShellArgs are joined by a space into the container's
	// bash command, as DistributedShell does; the shell expands them.
	ShellCommand string
	ShellArgs    string
	// Script, if set, is the staged copy of the client's -shell_script,
	// which each container runs as "bash ExecScript.sh ShellArgs" instead
	// of ShellCommand, as DistributedShell's AM does.
	Script *yarnpb.LocalResourceProto
	// ShellEnv is the containers' environment.
	ShellEnv map[string]string
	// NumContainers is how many containers run the command; zero means 1.
	NumContainers int
	// MemoryMB and Vcores are each container's capability; zero means
	// 128 MB and 1 vcore.
	MemoryMB int64
	Vcores   int32
	// Priority is the priority the containers are asked at.
	Priority int32
}

// withDefaults fills zero fields with DistributedShell's defaults: one
// container of 128 MB and one vcore.
func (s TaskSpec) withDefaults() TaskSpec {
	if s.NumContainers == 0 {
		s.NumContainers = 1
	}
	if s.MemoryMB == 0 {
		s.MemoryMB = 128
	}
	if s.Vcores == 0 {
		s.Vcores = 1
	}
	return s
}

// errNoCommand is DistributedShell's words for a run with nothing to run.
var errNoCommand = errors.New("No shell command or shell script specified to be executed by application master")

// validate checks what the AM cannot do without: something to run, and
// containers to run it in.
func (s TaskSpec) validate() error {
	if s.ShellCommand == "" && s.Script == nil {
		return errNoCommand
	}
	return s.validateContainers()
}

// validateContainers checks the containers' number, resources and
// environment.
func (s TaskSpec) validateContainers() error {
	switch {
	case s.NumContainers < 1:
		return fmt.Errorf("invalid number of containers %d", s.NumContainers)
	case s.MemoryMB <= 0 || s.Vcores <= 0:
		return fmt.Errorf("invalid container resources %d MB, %d vcores", s.MemoryMB, s.Vcores)
	}
	for k := range s.ShellEnv {
		if k == "" || strings.Contains(k, "=") {
			return fmt.Errorf("invalid environment name %q", k)
		}
	}
	return nil
}

// amArgs are the AM's flags for spec, each as one -name=value word. The
// shell command, arguments and script are not among them: they travel as
// files. The environment does travel as flags, as DistributedShell's
// client passes it.
func amArgs(spec TaskSpec, schedulerAddress string) []string {
	args := []string{
		"-num_containers=" + strconv.Itoa(spec.NumContainers),
		"-container_memory=" + strconv.FormatInt(spec.MemoryMB, 10),
		"-container_vcores=" + strconv.Itoa(int(spec.Vcores)),
		"-priority=" + strconv.Itoa(int(spec.Priority)),
	}
	for _, k := range slices.Sorted(maps.Keys(spec.ShellEnv)) {
		args = append(args, "-shell_env="+k+"="+spec.ShellEnv[k])
	}
	if schedulerAddress != "" {
		args = append(args, "-scheduler_address="+schedulerAddress)
	}
	return args
}

// amCommand is the AM container's command: the shipped binary in the am
// role, output to the container's log folder (the NodeManager replaces
// <LOG_DIR>). Each flag is quoted for the launch script, which runs the
// command inside `exec /bin/bash -c "..."`, so that an environment value
// reaches the AM as given.
func amCommand(spec TaskSpec, schedulerAddress string) string {
	words := []string{"./" + BinaryKey, "am"}
	for _, a := range amArgs(spec, schedulerAddress) {
		words = append(words, launchQuote(a))
	}
	return strings.Join(words, " ") + " 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
}

// taskCommand is a shell container's command. Command and arguments go in
// unquoted: like DistributedShell, the user writes shell. A script runs
// with bash from its link in the container's folder.
func taskCommand(spec TaskSpec) string {
	cmd := spec.ShellCommand
	if spec.Script != nil {
		cmd = "bash " + ShellScriptKey
	}
	if spec.ShellArgs != "" {
		cmd += " " + spec.ShellArgs
	}
	return cmd + " 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"
}

// environment turns env into the launch context's list, sorted by name.
func environment(env map[string]string) []*yarnpb.StringStringMapProto {
	var list []*yarnpb.StringStringMapProto
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, &yarnpb.StringStringMapProto{Key: proto.String(k), Value: proto.String(env[k])})
	}
	return list
}

// taskLaunchContext is the launch context of every shell container.
// tokens is a Credentials stream (taskCredentials).
func taskLaunchContext(spec TaskSpec, tokens []byte) *yarnpb.ContainerLaunchContextProto {
	clc := &yarnpb.ContainerLaunchContextProto{
		Command:     []string{taskCommand(spec)},
		Environment: environment(spec.ShellEnv),
		Tokens:      tokens,
	}
	if spec.Script != nil {
		clc.LocalResources = []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(ShellScriptKey), Value: spec.Script}}
	}
	return clc
}

// taskCredentials are the AM's credentials for its containers, without the
// AMRMToken: a task holding it could act as the AM.
func taskCredentials(creds *token.Credentials) ([]byte, error) {
	c := creds.Clone()
	c.RemoveTokensOfKind(client.KindAMRMToken)
	b, err := c.Marshal(token.FormatWritable)
	if err != nil {
		return nil, fmt.Errorf("dshell: task credentials: %w", err)
	}
	return b, nil
}

// shellQuote quotes s as one bash word; words of only safe characters stay
// as they are, for a readable command line.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=./:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// launchQuote quotes s as one bash word of a command that the launch
// script puts inside double quotes (`exec /bin/bash -c "..."`, as YARN's
// UnixShellScriptBuilder writes it): a backslash before each \, $, ` and "
// is what the double quotes take off, leaving the single-quoted word for
// the inner bash.
func launchQuote(s string) string {
	var b strings.Builder
	for _, r := range shellQuote(s) {
		if strings.ContainsRune("\\$`\"", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// askFor is the ask for n containers of spec: anywhere ("*"), with
// locality relaxed, allocation request id 0 as DistributedShell asks.
func askFor(spec TaskSpec, capability *yarnpb.ResourceProto, n int) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority:             &yarnpb.PriorityProto{Priority: proto.Int32(spec.Priority)},
		ResourceName:         proto.String("*"),
		Capability:           capability,
		NumContainers:        proto.Int32(int32(n)),
		RelaxLocality:        proto.Bool(true),
		ExecutionTypeRequest: &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum()},
		AllocationRequestId:  proto.Int64(0),
	}
}
