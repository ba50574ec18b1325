package dshell

import (
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

// TaskSpec is what each shell container runs, and with what resources. The
// client hands it to the AM as flags.
type TaskSpec struct {
	// ShellCommand and ShellArgs are joined by a space into the container's
	// bash command, as DistributedShell does; the shell expands them.
	ShellCommand string
	ShellArgs    string
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

// validate checks what a submission cannot do without.
func (s TaskSpec) validate() error {
	switch {
	case s.ShellCommand == "":
		return fmt.Errorf("no shell command to run")
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

// amArgs are the AM's flags for spec, each as one -name=value word.
func amArgs(spec TaskSpec, schedulerAddress string) []string {
	args := []string{
		"-num_containers=" + strconv.Itoa(spec.NumContainers),
		"-container_memory=" + strconv.FormatInt(spec.MemoryMB, 10),
		"-container_vcores=" + strconv.Itoa(int(spec.Vcores)),
		"-priority=" + strconv.Itoa(int(spec.Priority)),
		"-shell_command=" + spec.ShellCommand,
	}
	if spec.ShellArgs != "" {
		args = append(args, "-shell_args="+spec.ShellArgs)
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
// <LOG_DIR>).
func amCommand(spec TaskSpec, schedulerAddress string) string {
	words := []string{"./" + BinaryKey, "am"}
	for _, a := range amArgs(spec, schedulerAddress) {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ") + " 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
}

// taskCommand is a shell container's command. Command and arguments go in
// unquoted: like DistributedShell, the user writes shell.
func taskCommand(spec TaskSpec) string {
	cmd := spec.ShellCommand
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
	return &yarnpb.ContainerLaunchContextProto{
		Command:     []string{taskCommand(spec)},
		Environment: environment(spec.ShellEnv),
		Tokens:      tokens,
	}
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
