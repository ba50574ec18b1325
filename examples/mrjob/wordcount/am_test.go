package wordcount

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/examples/mrjob/mapred"
	"github.com/knitdev/knit/examples/yarnapp"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

const amAttempt = "appattempt_1700000000000_0007_000001"

// fakeCluster plays the RM's scheduler and one NodeManager with a real
// shuffle service for the AM. The node runs each started task in process,
// as the container's command says, registering the container's
// mapreduce_shuffle service data with the shuffle service as knit-node
// does, and reports its exit on the next allocate.
type fakeCluster struct {
	t    *testing.T
	node *node
	id   *yarnpb.NodeIdProto
	// noPort makes the node answer startContainers without the shuffle's
	// metadata, as a node without the service would.
	noPort bool

	mu          sync.Mutex
	nextSeq     int64
	outstanding map[int32]int32
	asks        []string
	completed   []*yarnpb.ContainerStatusProto
	started     []*yarnpb.ContainerLaunchContextProto
	reduceOut   map[string]string
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
				p := a.GetPriority().GetPriority()
				f.asks = append(f.asks, strconv.Itoa(int(p))+":"+strconv.Itoa(int(a.GetNumContainers())))
				f.outstanding[p] = a.GetNumContainers()
			}
			for _, id := range req.GetRelease() {
				f.completed = append(f.completed, &yarnpb.ContainerStatusProto{ContainerId: id, State: yarnpb.ContainerStateProto_C_COMPLETE.Enum(), ExitStatus: proto.Int32(-100)})
			}
			for p, n := range f.outstanding {
				for range n {
					f.nextSeq++
					resp.AllocatedContainers = append(resp.AllocatedContainers, f.container(f.nextSeq, p))
				}
				f.outstanding[p] = 0
			}
			if len(resp.AllocatedContainers) > 0 {
				resp.NmTokens = []*yarnpb.NMTokenProto{{NodeId: f.id, Token: testToken(client.KindNMToken, amAttempt).Proto()}}
			}
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

func (f *fakeCluster) container(seq int64, priority int32) *yarnpb.ContainerProto {
	id := yarnid.ContainerID{Attempt: yarnid.AttemptID{App: testApp, ID: 1}, Sequence: seq + 1}.Proto()
	ident, _ := proto.Marshal(&yarnpb.ContainerTokenIdentifierProto{ContainerId: id})
	return &yarnpb.ContainerProto{
		Id: id, NodeId: f.id, NodeHttpAddress: proto.String("127.0.0.1:8042"), Resource: yarnpb.NewResource(128, 1),
		Priority:       &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		ContainerToken: &commonpb.TokenProto{Identifier: ident, Password: []byte("x"), Kind: proto.String("ContainerToken"), Service: proto.String("")},
	}
}

var commandRE = regexp.MustCompile(`^\./mrjob (map|reduce) -spec=(\S+) 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr$`)

func (f *fakeCluster) nmMethods() []ipc.Method {
	return yarnrpc.ContainerManagementProtocolFuncs{
		StartContainers: func(ctx context.Context, req *yarnpb.StartContainersRequestProto) (*yarnpb.StartContainersResponseProto, error) {
			resp := &yarnpb.StartContainersResponseProto{}
			if !f.noPort {
				resp.ServicesMetaData = []*yarnpb.StringBytesMapProto{{Key: proto.String(mapred.ServiceName), Value: f.node.svc.Metadata()}}
			}
			for _, r := range req.GetStartContainerRequest() {
				var ident yarnpb.ContainerTokenIdentifierProto
				if err := proto.Unmarshal(r.GetContainerToken().GetIdentifier(), &ident); err != nil {
					return nil, err
				}
				resp.SucceededRequests = append(resp.SucceededRequests, ident.GetContainerId())
				exit := f.run(ctx, r.GetContainerLaunchContext())
				f.mu.Lock()
				f.started = append(f.started, r.GetContainerLaunchContext())
				f.completed = append(f.completed, &yarnpb.ContainerStatusProto{
					ContainerId: ident.GetContainerId(), State: yarnpb.ContainerStateProto_C_COMPLETE.Enum(), ExitStatus: proto.Int32(exit),
				})
				f.mu.Unlock()
			}
			return resp, nil
		},
		// A node answers the stop of a container that already ended, as
		// the AM sends one after a launch it failed.
		StopContainers: func(_ context.Context, req *yarnpb.StopContainersRequestProto) (*yarnpb.StopContainersResponseProto, error) {
			return &yarnpb.StopContainersResponseProto{SucceededRequests: req.GetContainerId()}, nil
		},
	}.Methods()
}

// run runs a task's container in process and returns its exit status.
func (f *fakeCluster) run(ctx context.Context, clc *yarnpb.ContainerLaunchContextProto) int32 {
	t := f.t
	for _, sd := range clc.GetServiceData() {
		if sd.GetKey() == mapred.ServiceName {
			if err := f.node.svc.InitializeApplication(ctx, auxservice.Application{User: testUser, ID: testApp, ServiceData: sd.GetValue()}); err != nil {
				t.Errorf("service data: %v", err)
				return 1
			}
		}
	}
	m := commandRE.FindStringSubmatch(strings.Join(clc.GetCommand(), " "))
	if m == nil {
		t.Errorf("command %q", clc.GetCommand())
		return 1
	}
	var spec TaskSpec
	if err := yarnapp.DecodeSpec(m[2], &spec); err != nil {
		t.Error(err)
		return 1
	}
	tokens := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokens, clc.GetTokens(), 0o600); err != nil {
		t.Error(err)
		return 1
	}
	var stdout bytes.Buffer
	var err error
	if m[1] == "map" {
		var input string
		for _, r := range clc.GetLocalResources() {
			if r.GetKey() == InputKey {
				input = r.GetValue().GetResource().GetFile()
			}
		}
		_, err = RunMap(MapOptions{Spec: spec, Input: input, LocalDirs: []string{f.node.appDir}, Stdout: &stdout})
	} else {
		err = RunReduce(ctx, ReduceOptions{Spec: spec, TokenFile: tokens, Stdout: &stdout, Logger: quiet})
		f.mu.Lock()
		f.reduceOut[spec.Attempt] = stdout.String()
		f.mu.Unlock()
	}
	if err != nil {
		return 1
	}
	return 0
}

func testToken(kind, user string) token.Token {
	return token.Token{Identifier: []byte(user), Password: []byte("pw-" + user), Kind: kind}
}

func startCluster(t *testing.T, f *fakeCluster) (schedulerAddr, tokenFile string) {
	t.Helper()
	f.t = t
	f.outstanding = map[int32]int32{}
	f.reduceOut = map[string]string{}
	nmAddr := ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ContainerManagementProtocolName, f.nmMethods()...)
	host, port, _ := net.SplitHostPort(nmAddr)
	p, _ := strconv.Atoi(port)
	f.id = &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(int32(p))}
	schedulerAddr = ipctest.Serve(t, ipc.Config{Tokens: ipctest.TokenLookup}, yarnrpc.ApplicationMasterProtocolName, f.schedulerMethods()...)
	var creds token.Credentials
	creds.AddToken("", testToken(client.KindAMRMToken, amAttempt))
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
		name       string
		forge      bool
		noPort     bool
		wantErr    error
		wantStatus yarnpb.FinalApplicationStatusProto
		wantDiag   []string
		wantAsks   []string
	}{
		{name: "maps, then reducers once every map succeeded: SUCCEEDED",
			wantStatus: yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED,
			wantAsks:   []string{"20:4", "20:0", "10:2", "10:0"}},
		{name: "a forged shuffle token: each reducer fails its attempts, the job FAILED",
			forge: true, wantErr: ErrJobFailed, wantStatus: yarnpb.FinalApplicationStatusProto_APP_FAILED,
			wantDiag: []string{"Task failed task_1700000000000_0007_r_00000", "Job failed as tasks failed. failedMaps:0 failedReduces:",
				// Whichever reducer fails first ends the job: its second attempt is named.
				"attempt_1700000000000_0007_r_00000", "_1: container_"}},
		{name: "a node without the shuffle's port: map launches fail as the MR AM fails them",
			noPort: true, wantErr: ErrJobFailed, wantStatus: yarnpb.FinalApplicationStatusProto_APP_FAILED,
			wantDiag: []string{"Task failed task_1700000000000_0007_m_00000", "failedMaps:", "Invalid shuffle port number -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{node: startNode(t, []byte("not the job's secret")), noPort: tt.noPort}
			scheduler, tokenFile := startCluster(t, f)
			var splits []File
			for i, text := range texts {
				p := filepath.Join(t.TempDir(), "in-"+strconv.Itoa(i))
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				splits = append(splits, File{Path: p, Size: int64(len(text))})
			}
			output := filepath.Join(t.TempDir(), "out")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := RunAM(ctx, AMOptions{
				AMEnv: yarnapp.AMEnv{
					SchedulerAddress:  scheduler,
					ContainerID:       "container_1700000000000_0007_01_000001",
					TokenFile:         tokenFile,
					Host:              "am-host",
					HeartbeatInterval: 5 * time.Millisecond,
					Logger:            quiet,
				},
				Spec: JobSpec{Splits: splits, Reduces: 2, Binary: File{Path: "/bin/mrjob"}, Output: output,
					TaskMemoryMB: 128, TaskVcores: 1, MaxAttempts: 2, ForgeShuffleToken: tt.forge},
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("RunAM: %v, want %v", err, tt.wantErr)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := f.finish.GetFinalApplicationStatus(); got != tt.wantStatus {
				t.Errorf("finished %s, want %s: %s", got, tt.wantStatus, f.finish.GetDiagnostics())
			}
			for _, d := range tt.wantDiag {
				if !strings.Contains(f.finish.GetDiagnostics(), d) {
					t.Errorf("diagnostics %q lack %q", f.finish.GetDiagnostics(), d)
				}
			}
			if tt.wantAsks != nil && strings.Join(f.asks, " ") != strings.Join(tt.wantAsks, " ") {
				t.Errorf("asks %v, want %v", f.asks, tt.wantAsks)
			}
			_, succeeded := os.Stat(filepath.Join(output, "_SUCCESS"))
			if (succeeded == nil) != (tt.wantErr == nil) {
				t.Errorf("_SUCCESS present: %v, want %v", succeeded == nil, tt.wantErr == nil)
			}
			if tt.wantErr != nil {
				return
			}
			got := map[string]int{}
			for _, out := range f.reduceOut {
				parseOutput(t, out, got)
			}
			if want := wordCount(texts); !maps.Equal(got, want) {
				t.Errorf("counts %v\nwant %v", got, want)
			}
			// Every task got the job token as the shuffle's service data and
			// the same secret in its credentials, never the AMRMToken.
			job := mapred.JobID{App: testApp}.String()
			for _, clc := range f.started {
				if len(clc.GetServiceData()) != 1 || clc.GetServiceData()[0].GetKey() != mapred.ServiceName {
					t.Fatalf("service data %v", clc.GetServiceData())
				}
				gotJob, secret, err := mapred.ParseServiceData(clc.GetServiceData()[0].GetValue())
				if err != nil || gotJob != job || len(secret) != mapred.SecretLength {
					t.Errorf("service data for %q with a %d-byte secret (%v)", gotJob, len(secret), err)
				}
				creds, err := token.ParseCredentials(clc.GetTokens())
				if err != nil {
					t.Fatal(err)
				}
				if s, ok := creds.Secret(mapred.ShuffleSecretAlias); !ok || !bytes.Equal(s, secret) {
					t.Errorf("credentials' %s %x, service data's secret %x", mapred.ShuffleSecretAlias, s, secret)
				}
				if jt, ok := creds.Token(mapred.JobTokenAlias); !ok || jt.Kind != mapred.JobTokenKind || jt.Service != job {
					t.Errorf("credentials' job token %v", jt)
				}
				if creds.RemoveTokensOfKind(client.KindAMRMToken) != 0 {
					t.Error("a task got the AMRMToken")
				}
			}
		})
	}
}
