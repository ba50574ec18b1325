package dshell

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

var quiet = slog.New(slog.DiscardHandler)

const amAttempt = "appattempt_1700000000000_0001_000001"

// fakeCluster plays the RM's scheduler and one NodeManager for an AM: it
// allocates what is asked (plus extra once), the node runs each started
// container to the exit status in exits (0 if absent), and completions are
// reported on the next allocate.
type fakeCluster struct {
	mu          sync.Mutex
	node        *yarnpb.NodeIdProto
	exits       map[int64]int32
	extra       int
	nextSeq     int64
	outstanding int32
	asks        []int32
	releases    []int64
	started     []*yarnpb.StartContainerRequestProto
	completed   []*yarnpb.ContainerStatusProto
	nmUsers     []string
	finish      *yarnpb.FinishApplicationMasterRequestProto
}

func (f *fakeCluster) schedulerMethods() []ipc.Method {
	return yarnrpc.ApplicationMasterProtocolFuncs{
		RegisterApplicationMaster: func(context.Context, *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
			return &yarnpb.RegisterApplicationMasterResponseProto{MaximumCapability: yarnpb.NewResource(8192, 8)}, nil
		},
		Allocate: func(_ context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			resp := &yarnpb.AllocateResponseProto{ResponseId: proto.Int32(req.GetResponseId() + 1)}
			for _, a := range req.GetAsk() {
				f.asks = append(f.asks, a.GetNumContainers())
				f.outstanding = a.GetNumContainers()
			}
			for _, id := range req.GetRelease() {
				f.releases = append(f.releases, id.GetId())
				f.completed = append(f.completed, &yarnpb.ContainerStatusProto{ContainerId: id, State: yarnpb.ContainerStateProto_C_COMPLETE.Enum(), ExitStatus: proto.Int32(-100)})
			}
			n := int(f.outstanding)
			if n > 0 {
				n += f.extra
				f.extra = 0
			}
			for range n {
				f.nextSeq++
				resp.AllocatedContainers = append(resp.AllocatedContainers, f.container(f.nextSeq))
			}
			if n > 0 {
				resp.NmTokens = []*yarnpb.NMTokenProto{{NodeId: f.node, Token: testToken(client.KindNMToken, amAttempt).Proto()}}
			}
			f.outstanding = max(0, f.outstanding-int32(n))
			resp.CompletedContainerStatuses, f.completed = f.completed, nil
			return resp, nil
		},
		FinishApplicationMaster: func(_ context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.finish = req
			return &yarnpb.FinishApplicationMasterResponseProto{IsUnregistered: proto.Bool(true)}, nil
		},
	}.Methods()
}

func (f *fakeCluster) container(seq int64) *yarnpb.ContainerProto {
	id := testContainerID(seq + 1) // sequence 1 is the AM's
	ident, _ := proto.Marshal(&yarnpb.ContainerTokenIdentifierProto{ContainerId: id})
	return &yarnpb.ContainerProto{
		Id: id, NodeId: f.node, Resource: yarnpb.NewResource(128, 1),
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(0)},
		AllocationRequestId: proto.Int64(0),
		ContainerToken:      &commonpb.TokenProto{Identifier: ident, Password: []byte("x"), Kind: proto.String("ContainerToken"), Service: proto.String("")},
	}
}

func (f *fakeCluster) nmMethods() []ipc.Method {
	return yarnrpc.ContainerManagementProtocolFuncs{
		StartContainers: func(ctx context.Context, req *yarnpb.StartContainersRequestProto) (*yarnpb.StartContainersResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			c, _ := ipc.CallerFrom(ctx)
			f.nmUsers = append(f.nmUsers, c.User)
			resp := &yarnpb.StartContainersResponseProto{}
			for _, r := range req.GetStartContainerRequest() {
				var ident yarnpb.ContainerTokenIdentifierProto
				if err := proto.Unmarshal(r.GetContainerToken().GetIdentifier(), &ident); err != nil {
					return nil, err
				}
				id := ident.GetContainerId()
				f.started = append(f.started, r)
				resp.SucceededRequests = append(resp.SucceededRequests, id)
				f.completed = append(f.completed, &yarnpb.ContainerStatusProto{
					ContainerId: id, State: yarnpb.ContainerStateProto_C_COMPLETE.Enum(), ExitStatus: proto.Int32(f.exits[id.GetId()]),
				})
			}
			return resp, nil
		},
	}.Methods()
}

func testToken(kind, user string) token.Token {
	return token.Token{Identifier: []byte(user), Password: []byte("pw-" + user), Kind: kind}
}

// startCluster serves the fake scheduler and node and writes the AM's
// credentials file.
func startCluster(t *testing.T, f *fakeCluster) (schedulerAddr, tokenFile string) {
	t.Helper()
	nmAddr := ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ContainerManagementProtocolName, f.nmMethods()...)
	host, port, _ := net.SplitHostPort(nmAddr)
	p, _ := strconv.Atoi(port)
	f.node = &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(int32(p))}
	schedulerAddr = ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ApplicationMasterProtocolName, f.schedulerMethods()...)

	var creds token.Credentials
	creds.AddToken("", testToken(client.KindAMRMToken, amAttempt))
	creds.AddToken("hdfs", token.Token{Identifier: []byte("hd"), Password: []byte("pw"), Kind: "HDFS_DELEGATION_TOKEN"})
	b, err := creds.Marshal(token.FormatWritable)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile = filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokenFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return schedulerAddr, tokenFile
}

func TestRunAM(t *testing.T) {
	tests := []struct {
		name         string
		containers   int
		extra        int
		exits        map[int64]int32
		wantErr      error
		wantStatus   yarnpb.FinalApplicationStatusProto
		wantDiag     string
		wantAsks     []int32
		wantReleases int
	}{
		{"every container exits 0: SUCCEEDED, the extra container released", 2, 1, nil,
			nil, yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED, "", []int32{2, 0}, 1},
		{"a failing container: FAILED, named with its exit status", 3, 0, map[int64]int32{3: 1},
			ErrTasksFailed, yarnpb.FinalApplicationStatusProto_APP_FAILED,
			"Diagnostics., total=3, completed=3, allocated=3, failed=1; container_1700000000000_0001_01_000003 exit status 1", []int32{3, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{exits: tt.exits, extra: tt.extra}
			scheduler, tokenFile := startCluster(t, f)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			err := RunAM(ctx, AMOptions{
				SchedulerAddress:  scheduler,
				ContainerID:       "container_1700000000000_0001_01_000001",
				TokenFile:         tokenFile,
				Host:              "am-host",
				Task:              TaskSpec{ShellCommand: "exit", ShellArgs: "0", ShellEnv: map[string]string{"K": "v"}, NumContainers: tt.containers, MemoryMB: 128, Vcores: 1},
				HeartbeatInterval: 5 * time.Millisecond,
				Logger:            quiet,
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("RunAM: %v, want %v", err, tt.wantErr)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.finish.GetFinalApplicationStatus() != tt.wantStatus || f.finish.GetDiagnostics() != tt.wantDiag {
				t.Errorf("finished %s %q, want %s %q", f.finish.GetFinalApplicationStatus(), f.finish.GetDiagnostics(), tt.wantStatus, tt.wantDiag)
			}
			if !slices.Equal(f.asks, tt.wantAsks) {
				t.Errorf("asks %v, want %v", f.asks, tt.wantAsks)
			}
			if len(f.releases) != tt.wantReleases {
				t.Errorf("released %v, want %d", f.releases, tt.wantReleases)
			}
			if len(f.started) != tt.containers {
				t.Fatalf("started %d containers, want %d", len(f.started), tt.containers)
			}
			for _, u := range f.nmUsers {
				if u != amAttempt {
					t.Errorf("node called by %q, want the NMToken's attempt", u)
				}
			}
			clc := f.started[0].GetContainerLaunchContext()
			if got := clc.GetCommand(); len(got) != 1 || got[0] != "exit 0 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr" {
				t.Errorf("command %q", got)
			}
			creds, err := token.ParseCredentials(clc.GetTokens())
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range creds.Tokens() {
				if tok.Kind == client.KindAMRMToken {
					t.Error("a task got the AMRMToken")
				}
			}
			if creds.NumTokens() != 1 {
				t.Errorf("task credentials hold %d tokens, want the HDFS one", creds.NumTokens())
			}
		})
	}
}

// fakeRM plays the RM's client service for RunClient: reports walk
// through states.
type fakeRM struct {
	mu        sync.Mutex
	states    []yarnpb.YarnApplicationStateProto
	final     yarnpb.FinalApplicationStatusProto
	reports   int
	kills     int
	submitted *yarnpb.ApplicationSubmissionContextProto
	// staged holds the AM's local resources other than the binary, as
	// read when the application was submitted.
	staged map[string][]byte
	user   string
}

func (f *fakeRM) methods() []ipc.Method {
	app := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}.Proto()
	return yarnrpc.ApplicationClientProtocolFuncs{
		GetNewApplication: func(context.Context, *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			return &yarnpb.GetNewApplicationResponseProto{ApplicationId: app, MaximumCapability: yarnpb.NewResource(1024, 2)}, nil
		},
		SubmitApplication: func(ctx context.Context, req *yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			c, _ := ipc.CallerFrom(ctx)
			f.user = c.User
			f.submitted = req.GetApplicationSubmissionContext()
			f.staged = map[string][]byte{}
			for _, r := range f.submitted.GetAmContainerSpec().GetLocalResources() {
				if r.GetKey() == BinaryKey {
					continue
				}
				b, err := os.ReadFile(r.GetValue().GetResource().GetFile())
				if err != nil {
					return nil, err
				}
				f.staged[r.GetKey()] = b
			}
			return &yarnpb.SubmitApplicationResponseProto{}, nil
		},
		GetApplicationReport: func(context.Context, *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			state := f.states[min(f.reports, len(f.states)-1)]
			f.reports++
			final := yarnpb.FinalApplicationStatusProto_APP_UNDEFINED
			if state >= yarnpb.YarnApplicationStateProto_FINISHED {
				final = f.final
			}
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
				ApplicationId: app, YarnApplicationState: state.Enum(), FinalApplicationStatus: final.Enum(),
				Diagnostics: proto.String("the diagnostics"),
			}}, nil
		},
		ForceKillApplication: func(context.Context, *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.kills++
			return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
		},
	}.Methods()
}

func TestRunClient(t *testing.T) {
	const (
		accepted = yarnpb.YarnApplicationStateProto_ACCEPTED
		running  = yarnpb.YarnApplicationStateProto_RUNNING
		finished = yarnpb.YarnApplicationStateProto_FINISHED
		failed   = yarnpb.YarnApplicationStateProto_FAILED
	)
	binary := filepath.Join(t.TempDir(), "distshell")
	if err := os.WriteFile(binary, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		states    []yarnpb.YarnApplicationStateProto
		final     yarnpb.FinalApplicationStatusProto
		timeout   time.Duration
		wantErr   error
		wantOut   []string
		wantKills int
	}{
		{"FINISHED and SUCCEEDED is success", []yarnpb.YarnApplicationStateProto{accepted, running, finished}, yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED, time.Minute, nil,
			[]string{"Submitted application application_1700000000000_0001\n", "finished with state FINISHED, final status SUCCEEDED", "Diagnostics: the diagnostics"}, 0},
		{"FINISHED and FAILED is an error", []yarnpb.YarnApplicationStateProto{accepted, finished}, yarnpb.FinalApplicationStatusProto_APP_FAILED, time.Minute, ErrNotSucceeded,
			[]string{"final status FAILED"}, 0},
		{"FAILED is an error", []yarnpb.YarnApplicationStateProto{accepted, failed}, yarnpb.FinalApplicationStatusProto_APP_FAILED, time.Minute, ErrNotSucceeded,
			[]string{"with state FAILED"}, 0},
		{"the client kills the application at its timeout", []yarnpb.YarnApplicationStateProto{accepted, running}, 0, 30 * time.Millisecond, ErrTimeout,
			[]string{"killed"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRM{states: tt.states, final: tt.final}
			addr := ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, f.methods()...)
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			appID, err := RunClient(ctx, ClientOptions{
				RMAddress: addr, SchedulerAddress: "rm:8030", User: "alice", AppName: "DistributedShell", Queue: "default",
				MaxAMAttempts: 2, AttemptFailuresValidityInterval: -1, MasterMemoryMB: 4096, MasterVcores: 1,
				Binary: binary, StagingDir: t.TempDir(), Timeout: tt.timeout, PollInterval: 5 * time.Millisecond, Logger: quiet,
				Task: TaskSpec{ShellCommand: "date", NumContainers: 1, MemoryMB: 128, Vcores: 1},
			}, &out)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("RunClient: %v, want %v", err, tt.wantErr)
			}
			if appID != "application_1700000000000_0001" {
				t.Errorf("application id %q", appID)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.kills != tt.wantKills {
				t.Errorf("kills %d, want %d", f.kills, tt.wantKills)
			}
			if f.user != "alice" {
				t.Errorf("submitted by %q", f.user)
			}
			// The AM asked 4096 MB of a cluster whose maximum is 1024.
			if mem, _ := yarnpb.MemoryAndVcores(f.submitted.GetAmContainerResourceRequest()[0].GetCapability()); mem != 1024 {
				t.Errorf("AM memory %d, want the cluster maximum 1024", mem)
			}
			if cmd := f.submitted.GetAmContainerSpec().GetCommand()[0]; !strings.Contains(cmd, "-scheduler_address=rm:8030") {
				t.Errorf("AM command %q does not pass the scheduler address", cmd)
			}
		})
	}
}

func TestRunClientStagesTheShellTextForTheAM(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "distshell")
	if err := os.WriteFile(binary, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("echo \"$@\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := "\"a  b\" 'c' $HOME\nline two"
	tests := []struct {
		name    string
		command string
		script  string
		final   yarnpb.FinalApplicationStatusProto
		want    map[string]string // staged file → its text
		wantEnv bool              // the script's location in the AM's environment
	}{
		{"a command and its arguments", "printf '%s\\n'", "", yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED,
			map[string]string{ShellCommandKey: "printf '%s\\n'", ShellArgsKey: args}, false},
		{"a script and its arguments", "", script, yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED,
			map[string]string{ShellArgsKey: args}, true},
		{"the files go even when the application fails", "false", "", yarnpb.FinalApplicationStatusProto_APP_FAILED,
			map[string]string{ShellCommandKey: "false", ShellArgsKey: args}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRM{states: []yarnpb.YarnApplicationStateProto{yarnpb.YarnApplicationStateProto_FINISHED}, final: tt.final}
			addr := ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, f.methods()...)
			staging := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := RunClient(ctx, ClientOptions{
				RMAddress: addr, User: "alice", Binary: binary, StagingDir: staging, ShellScript: tt.script,
				PollInterval: 5 * time.Millisecond, Logger: quiet,
				Task: TaskSpec{ShellCommand: tt.command, ShellArgs: args},
			}, io.Discard)
			if (err == nil) != (tt.final == yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED) {
				t.Fatalf("RunClient: %v", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			got := map[string]string{}
			for k, b := range f.staged {
				if k == ShellScriptKey {
					t.Errorf("the script shipped to the AM, which only hands it on")
				}
				if got[k], err = readJavaUTF(b); err != nil {
					t.Errorf("%s: %v", k, err)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("staged %q, want %q", got, tt.want)
			}
			env := map[string]string{}
			for _, kv := range f.submitted.GetAmContainerSpec().GetEnvironment() {
				env[kv.GetKey()] = kv.GetValue()
			}
			if hasScript := env[EnvScriptLocation] != ""; hasScript != tt.wantEnv || hasScript && (env[EnvScriptLen] != "10" || env[EnvScriptTimestamp] == "") {
				t.Errorf("AM environment %q", env)
			}
			if cmd := f.submitted.GetAmContainerSpec().GetCommand()[0]; strings.Contains(cmd, "shell_") {
				t.Errorf("AM command %q carries the shell text", cmd)
			}
			if left, _ := os.ReadDir(staging); len(left) != 0 {
				t.Errorf("the staging folder still holds %v after the application ended", left)
			}
		})
	}
}
