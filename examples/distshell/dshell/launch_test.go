package dshell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestAMCommand(t *testing.T) {
	tests := []struct {
		name      string
		spec      TaskSpec
		scheduler string
		want      string
	}{
		{"plain flags stay readable; the command travels as a file",
			TaskSpec{ShellCommand: "date", NumContainers: 2, MemoryMB: 256, Vcores: 1, Priority: 3}, "10.0.0.1:8030",
			"./distshell am -num_containers=2 -container_memory=256 -container_vcores=1 -priority=3 -scheduler_address=10.0.0.1:8030 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"},
		{"environment sorted, each quoted as one word for the launch script's double quotes",
			TaskSpec{ShellCommand: "echo $HOME", ShellArgs: "it's here", ShellEnv: map[string]string{"B": "2", "A": `x "$y"`}, NumContainers: 1, MemoryMB: 128, Vcores: 1}, "",
			`./distshell am -num_containers=1 -container_memory=128 -container_vcores=1 -priority=0 '-shell_env=A=x \"\$y\"' -shell_env=B=2 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := amCommand(tt.spec, tt.scheduler); got != tt.want {
				t.Errorf("amCommand =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// The client stages the shell command and arguments and puts the rest on
// the AM's command line, which the node's launch script runs inside
// `exec /bin/bash -c "..."`; what the AM reads back, from its flags, its
// environment and the staged files, must be what the client was given.
func TestShellTextSurvivesTheTripToTheAM(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	tricky := "say \"hi\" to 'them'\n\t$HOME ${X:-y} `date` \\ $(id) ; * é 😀"
	tests := []struct {
		name   string
		spec   TaskSpec
		script string // the -shell_script's text, if any
	}{
		{"quotes, dollars, spaces and newlines in the command and arguments",
			TaskSpec{ShellCommand: "echo \"$X\" 'a  b'\necho done", ShellArgs: tricky, NumContainers: 3, MemoryMB: 512, Vcores: 2, Priority: 1}, ""},
		{"the same in environment values, and an empty one",
			TaskSpec{ShellCommand: "env", ShellEnv: map[string]string{"X": tricky, "EMPTY": "", "Y": "it's $1"}, NumContainers: 1, MemoryMB: 128, Vcores: 1}, ""},
		{"arguments that look like flags", TaskSpec{ShellCommand: "ls", ShellArgs: "-l -a --num_containers=9", NumContainers: 1, MemoryMB: 128, Vcores: 1}, ""},
		{"a script and its arguments", TaskSpec{ShellArgs: tricky, NumContainers: 1, MemoryMB: 128, Vcores: 1}, "#!/bin/bash\necho \"$@\"\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scriptPath := ""
			if tt.script != "" {
				scriptPath = filepath.Join(t.TempDir(), "job.sh")
				if err := os.WriteFile(scriptPath, []byte(tt.script), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			appID := fmt.Sprintf("application_1700000000000_%04d", i+1)
			files, err := stage(t.TempDir(), "DistributedShell", appID, tt.spec, scriptPath)
			if err != nil {
				t.Fatal(err)
			}

			// The AM's working folder: a stand-in distshell that records its
			// words, run as the launch script runs the AM's command.
			work := t.TempDir()
			fake := "#!/bin/bash\nprintf '%s\\0' \"$@\" > args\n"
			if err := os.WriteFile(filepath.Join(work, BinaryKey), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			command := strings.ReplaceAll(amCommand(tt.spec, "rm:8030"), "<LOG_DIR>", work)
			launch := "set -o pipefail -e\nexec /bin/bash -c \"" + command + "\"\n"
			run := exec.Command(bash, "-c", launch)
			run.Dir = work
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("the launch script: %v\n%s", err, out)
			}
			out, err := os.ReadFile(filepath.Join(work, "args"))
			if err != nil {
				t.Fatal(err)
			}
			words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			if words[0] != "am" {
				t.Fatalf("the AM ran with %q, want the am role first", words)
			}

			amEnv := map[string]string{"CONTAINER_ID": "container_1700000000000_0001_01_000001"}
			for _, kv := range files.env {
				amEnv[kv.GetKey()] = kv.GetValue()
			}
			opts, err := parseAMFlags(words[1:], func(k string) string { return amEnv[k] }, os.DirFS(files.dir), os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			want := normalEnv(tt.spec)
			if tt.script != "" {
				want.Script = fileResource(filepath.Join(files.dir, ShellScriptKey), int64(len(tt.script)), opts.Task.Script.GetTimestamp())
			}
			if got := normalEnv(opts.Task); !reflect.DeepEqual(got.ShellEnv, want.ShellEnv) || !proto.Equal(got.Script, want.Script) ||
				got.ShellCommand != want.ShellCommand || got.ShellArgs != want.ShellArgs || got.NumContainers != want.NumContainers ||
				got.MemoryMB != want.MemoryMB || got.Vcores != want.Vcores || got.Priority != want.Priority {
				t.Errorf("the AM read\n%+v\nwant\n%+v", got, want)
			}
			if opts.SchedulerAddress != "rm:8030" {
				t.Errorf("scheduler %q", opts.SchedulerAddress)
			}
		})
	}
}

// normalEnv makes an empty environment nil, so specs compare by content.
func normalEnv(s TaskSpec) TaskSpec {
	if len(s.ShellEnv) == 0 {
		s.ShellEnv = nil
	}
	return s
}

func TestTaskLaunchContext(t *testing.T) {
	tokens := []byte("HDTS\x00\x00\x00")
	script := fileResource("/staging/ExecScript.sh", 12, 1700000000123)
	tests := []struct {
		name    string
		spec    TaskSpec
		wantCmd string
		wantEnv []string
	}{
		{"command alone", TaskSpec{ShellCommand: "date"}, "date 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr", nil},
		{"command and arguments joined by a space", TaskSpec{ShellCommand: "ls", ShellArgs: "-l /tmp"}, "ls -l /tmp 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr", nil},
		{"environment sorted by name", TaskSpec{ShellCommand: "env", ShellEnv: map[string]string{"Z": "1", "A": "$HOME/x"}},
			"env 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr", []string{"A=$HOME/x", "Z=1"}},
		{"quotes, dollars and newlines go in as the user wrote them", TaskSpec{ShellCommand: "printf '%s\\n'", ShellArgs: "\"a  b\" $HOME\nc"},
			"printf '%s\\n' \"a  b\" $HOME\nc 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr", nil},
		{"a script runs with bash from its link", TaskSpec{Script: script, ShellArgs: "1 2"}, "bash ExecScript.sh 1 2 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clc := taskLaunchContext(tt.spec, tokens)
			if len(clc.GetCommand()) != 1 || clc.GetCommand()[0] != tt.wantCmd {
				t.Errorf("command %q, want %q", clc.GetCommand(), tt.wantCmd)
			}
			var env []string
			for _, kv := range clc.GetEnvironment() {
				env = append(env, kv.GetKey()+"="+kv.GetValue())
			}
			if !reflect.DeepEqual(env, tt.wantEnv) {
				t.Errorf("environment %q, want %q", env, tt.wantEnv)
			}
			if string(clc.GetTokens()) != string(tokens) {
				t.Errorf("tokens %q, want %q", clc.GetTokens(), tokens)
			}
			var wantResources []*yarnpb.StringLocalResourceMapProto
			if tt.spec.Script != nil {
				wantResources = []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(ShellScriptKey), Value: script}}
			}
			if got := clc.GetLocalResources(); len(got) != len(wantResources) ||
				len(got) == 1 && (got[0].GetKey() != ShellScriptKey || !proto.Equal(got[0].GetValue(), script)) {
				t.Errorf("local resources %v, want %v", got, wantResources)
			}
		})
	}
}

func TestTaskCredentials(t *testing.T) {
	amrm := token.Token{Identifier: []byte("am"), Password: []byte("pw"), Kind: client.KindAMRMToken}
	hdfs := token.Token{Identifier: []byte("hd"), Password: []byte("pw2"), Kind: "HDFS_DELEGATION_TOKEN", Service: "nn:8020"}
	tests := []struct {
		name       string
		tokens     map[string]token.Token
		secrets    map[string][]byte
		wantTokens []string // kinds left
	}{
		{"the AMRMToken is stripped, other tokens and secrets kept",
			map[string]token.Token{"": amrm, "hdfs": hdfs}, map[string][]byte{"s": []byte("v")}, []string{"HDFS_DELEGATION_TOKEN"}},
		{"credentials of only the AMRMToken become empty credentials",
			map[string]token.Token{"": amrm}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var creds token.Credentials
			for a, tok := range tt.tokens {
				creds.AddToken(a, tok)
			}
			for a, s := range tt.secrets {
				creds.AddSecret(a, s)
			}
			b, err := taskCredentials(&creds)
			if err != nil {
				t.Fatal(err)
			}
			got, err := token.ParseCredentials(b)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, tok := range got.Tokens() {
				kinds = append(kinds, tok.Kind)
			}
			if !reflect.DeepEqual(kinds, tt.wantTokens) {
				t.Errorf("token kinds %q, want %q", kinds, tt.wantTokens)
			}
			if got.NumSecrets() != len(tt.secrets) {
				t.Errorf("%d secrets, want %d", got.NumSecrets(), len(tt.secrets))
			}
			if _, ok := creds.Token(""); !ok && tt.tokens[""].Kind != "" {
				t.Error("stripping changed the AM's own credentials")
			}
		})
	}
}

func containerStatus(seq int64, exit int32) *yarnpb.ContainerStatusProto {
	return &yarnpb.ContainerStatusProto{
		ContainerId: testContainerID(seq),
		State:       yarnpb.ContainerStateProto_C_COMPLETE.Enum(),
		ExitStatus:  proto.Int32(exit),
	}
}

func testContainerID(seq int64) *yarnpb.ContainerIdProto {
	return yarnid.ContainerID{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}, ID: 1}, Sequence: seq}.Proto()
}

func cid(seq int64) string { return containerIDString(testContainerID(seq)) }

func TestTracker(t *testing.T) {
	tests := []struct {
		name          string
		total         int
		run           func(tr *tracker)
		wantTaken     []bool
		wantDone      bool
		wantSucceeded bool
		wantDiag      string
	}{
		{"all exit 0: done and succeeded", 2, func(tr *tracker) {
			tr.take(cid(2))
			tr.take(cid(3))
			tr.containerCompleted(containerStatus(2, 0))
			tr.containerCompleted(containerStatus(3, 0))
		}, nil, true, true, "Diagnostics., total=2, completed=2, allocated=2, failed=0"},
		{"a failing command is named with its exit status", 2, func(tr *tracker) {
			tr.take(cid(2))
			tr.take(cid(3))
			tr.containerCompleted(containerStatus(2, 0))
			tr.containerCompleted(containerStatus(3, 127))
		}, nil, true, false, "Diagnostics., total=2, completed=2, allocated=2, failed=1; " + cid(3) + " exit status 127"},
		{"a container killed by the RM counts as failed, not retried", 1, func(tr *tracker) {
			tr.take(cid(2))
			tr.containerCompleted(containerStatus(2, -100))
		}, nil, true, false, "Diagnostics., total=1, completed=1, allocated=1, failed=1; " + cid(2) + " exit status -100"},
		{"a refused start counts once, even when later reported complete", 1, func(tr *tracker) {
			tr.take(cid(2))
			tr.startFailed(cid(2), errors.New("InvalidContainerException: expired"))
			tr.containerCompleted(containerStatus(2, -100))
		}, nil, true, false, "Diagnostics., total=1, completed=1, allocated=1, failed=1; " + cid(2) + " failed to start: InvalidContainerException: expired"},
		{"extra containers are released and their completion ignored", 1, func(tr *tracker) {
			tr.take(cid(2))
			tr.take(cid(3))
			tr.containerCompleted(containerStatus(3, -100))
		}, nil, false, false, "Diagnostics., total=1, completed=0, allocated=1, failed=0"},
		{"the same container allocated twice is taken once", 2, func(tr *tracker) {
			tr.take(cid(2))
			tr.take(cid(2))
		}, nil, false, false, "Diagnostics., total=2, completed=0, allocated=1, failed=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(tt.total)
			tt.run(tr)
			if tr.done() != tt.wantDone || tr.succeeded() != tt.wantSucceeded {
				t.Errorf("done %v succeeded %v, want %v %v", tr.done(), tr.succeeded(), tt.wantDone, tt.wantSucceeded)
			}
			if got := tr.diagnostics(); got != tt.wantDiag {
				t.Errorf("diagnostics\n%q\nwant\n%q", got, tt.wantDiag)
			}
		})
	}
}

func TestTrackerOutstanding(t *testing.T) {
	tr := newTracker(3)
	steps := []struct {
		name     string
		take     string
		wantTake bool
		wantOut  int
	}{
		{"first container taken", cid(2), true, 2},
		{"second container taken", cid(3), true, 1},
		{"third container taken", cid(4), true, 0},
		{"fourth container is one too many", cid(5), false, 0},
	}
	for _, s := range steps {
		if got := tr.take(s.take); got != s.wantTake || tr.outstanding() != s.wantOut {
			t.Errorf("%s: take %v outstanding %d, want %v %d", s.name, got, tr.outstanding(), s.wantTake, s.wantOut)
		}
	}
}

func TestSubmissionContext(t *testing.T) {
	app := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}.Proto()
	binary := fileResource("/opt/bin/distshell", 1234, 1700000000123)
	commands := fileResource("/staging/DistributedShell/application_1700000000000_0007/shellCommands", 6, 1700000000456)
	files := &staged{
		resources: []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(ShellCommandKey), Value: commands}},
		env:       []*yarnpb.StringStringMapProto{{Key: proto.String(EnvScriptLocation), Value: proto.String("file:///x/ExecScript.sh")}},
	}
	base := ClientOptions{
		AppName: "DistributedShell", Queue: "default", AppPriority: 2, MaxAMAttempts: 2,
		AttemptFailuresValidityInterval: -1, MasterMemoryMB: 256, MasterVcores: 1,
		Task: TaskSpec{ShellCommand: "date", NumContainers: 1, MemoryMB: 128, Vcores: 1},
	}
	tests := []struct {
		name  string
		opts  func(o ClientOptions) ClientOptions
		check func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto)
	}{
		{"AM resources as one * request in field 17, none in field 9", func(o ClientOptions) ClientOptions { return o },
			func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
				reqs := asc.GetAmContainerResourceRequest()
				if len(reqs) != 1 || reqs[0].GetResourceName() != "*" || reqs[0].GetNumContainers() != 1 || !reqs[0].GetRelaxLocality() {
					t.Fatalf("AM requests %v", reqs)
				}
				if mem, vc := yarnpb.MemoryAndVcores(reqs[0].GetCapability()); mem != 256 || vc != 1 {
					t.Errorf("AM capability %d MB %d vcores", mem, vc)
				}
				if asc.Resource != nil {
					t.Errorf("resource (9) set: %v", asc.Resource)
				}
			}},
		{"type YARN, name, queue, priority and attempts as given", func(o ClientOptions) ClientOptions { return o },
			func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
				if asc.GetApplicationType() != "YARN" || asc.GetApplicationName() != "DistributedShell" || asc.GetQueue() != "default" ||
					asc.GetPriority().GetPriority() != 2 || asc.GetMaxAppAttempts() != 2 || !proto.Equal(asc.GetApplicationId(), app) {
					t.Errorf("submission %v", asc)
				}
				if asc.AttemptFailuresValidityInterval != nil {
					t.Errorf("validity interval set to %d though not asked", asc.GetAttemptFailuresValidityInterval())
				}
			}},
		{"the binary ships as an APPLICATION FILE resource named distshell", func(o ClientOptions) ClientOptions { return o },
			func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
				lr := asc.GetAmContainerSpec().GetLocalResources()
				if len(lr) != 2 || lr[0].GetKey() != BinaryKey {
					t.Fatalf("local resources %v", lr)
				}
				r := lr[0].GetValue()
				if r.GetResource().GetScheme() != "file" || r.GetResource().GetFile() != "/opt/bin/distshell" || r.GetSize() != 1234 ||
					r.GetTimestamp() != 1700000000123 || r.GetType() != yarnpb.LocalResourceTypeProto_FILE ||
					r.GetVisibility() != yarnpb.LocalResourceVisibilityProto_APPLICATION {
					t.Errorf("binary resource %v", r)
				}
				cmd := asc.GetAmContainerSpec().GetCommand()
				if len(cmd) != 1 || !strings.HasPrefix(cmd[0], "./distshell am ") {
					t.Errorf("AM command %q", cmd)
				}
			}},
		{"the staged files ship next to the binary, the script's location in the environment", func(o ClientOptions) ClientOptions { return o },
			func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
				clc := asc.GetAmContainerSpec()
				lr := clc.GetLocalResources()
				if len(lr) != 2 || lr[1].GetKey() != ShellCommandKey || !proto.Equal(lr[1].GetValue(), commands) {
					t.Errorf("local resources %v", lr)
				}
				env := clc.GetEnvironment()
				if len(env) != 1 || env[0].GetKey() != EnvScriptLocation || env[0].GetValue() != "file:///x/ExecScript.sh" {
					t.Errorf("environment %v", env)
				}
				if strings.Contains(clc.GetCommand()[0], "shell_command") {
					t.Errorf("AM command %q carries the shell command", clc.GetCommand()[0])
				}
			}},
		{"keep containers and validity interval when asked", func(o ClientOptions) ClientOptions {
			o.KeepContainers = true
			o.AttemptFailuresValidityInterval = 60000
			return o
		}, func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
			if !asc.GetKeepContainersAcrossApplicationAttempts() || asc.GetAttemptFailuresValidityInterval() != 60000 {
				t.Errorf("submission %v", asc)
			}
		}},
		{"a rolling log pattern asks for rolling aggregation as DistributedShell does", func(o ClientOptions) ClientOptions {
			o.RollingLogPattern = "stdout"
			return o
		}, func(t *testing.T, asc *yarnpb.ApplicationSubmissionContextProto) {
			lac := asc.GetLogAggregationContext()
			if lac.GetRolledLogsIncludePattern() != "stdout" || lac.RolledLogsExcludePattern == nil || lac.GetRolledLogsExcludePattern() != "" || lac.IncludePattern != nil {
				t.Errorf("log aggregation context %v", lac)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, submissionContext(app, tt.opts(base), binary, files))
		})
	}
}

func TestBinaryResource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "distshell")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mtime := time.UnixMilli(1700000000123)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"a file is described by its own size and time", path},
		{"a link is described by the file it points at", link},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := binaryResource(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if r.GetResource().GetFile() != path || r.GetSize() != 10 || r.GetTimestamp() != 1700000000123 {
				t.Errorf("resource %v", r)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"safe words stay bare", "-num_containers=2", "-num_containers=2"},
		{"spaces are quoted", "a b", "'a b'"},
		{"single quotes are closed, escaped and reopened", "it's", `'it'\''s'`},
		{"the empty word is two quotes", "", "''"},
		{"dollars are kept from the shell", "$HOME", "'$HOME'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellQuote(tt.in); got != tt.want {
				t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
