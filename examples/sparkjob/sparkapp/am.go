package sparkapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/yarnapp"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ErrJobFailed is returned by RunAM when an executor failed and the job
// finished FAILED.
var ErrJobFailed = errors.New("job failed as an executor failed")

// shuffleID is the one shuffle of the job.
const shuffleID int32 = 0

// AMOptions are the AM role's settings.
type AMOptions struct {
	yarnapp.AMEnv
	// Spec is the job.
	Spec JobSpec
	// Rand makes the secret; nil means crypto/rand.
	Rand io.Reader
}

// execState is where an executor is.
type execState int

const (
	launching execState = iota + 1
	running
	exited
)

// executor is one executor container of a stage.
type executor struct {
	spec      ExecutorSpec
	container *yarnpb.ContainerProto
	state     execState
}

// startResult is how starting an executor's container went.
type startResult struct {
	e   *executor
	err error
}

// am is the job's state between heartbeats.
type am struct {
	opts       AMOptions
	log        *slog.Logger
	app        string
	secret     string
	tokens     []byte
	capability *yarnpb.ResourceProto
	// stage is the stage whose executors run (1 or 2); wanted is how many
	// of its executors still wait for a container.
	stage, wanted int
	stages        [3][]*executor
	byContainer   map[string]*executor
	held          yarnapp.Asks
	// failure, once set, fails the job.
	failure string
}

// RunAM is the job's ApplicationMaster; see the package comment.
func RunAM(ctx context.Context, opts AMOptions) error {
	opts.AMEnv = opts.AMEnv.WithDefaults()
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if err := opts.Spec.validate(); err != nil {
		return fmt.Errorf("sparkjob am: %w", err)
	}
	started, err := yarnapp.RegisterAM(ctx, opts.AMEnv)
	if err != nil {
		return fmt.Errorf("sparkjob am: %w", err)
	}
	defer started.Close()
	rm, nm := started.RM, started.NM
	a := &am{opts: opts, app: started.Container.Attempt.App.String(), byContainer: map[string]*executor{}}
	a.log = opts.Logger.With("app", a.app)
	if err := a.makeSecret(started.Credentials); err != nil {
		return fmt.Errorf("sparkjob am: %w", err)
	}
	a.capability = yarnapp.CapTo(opts.Spec.ExecutorMemoryMB, 1, started.MaxCapability)
	a.stage, a.wanted = 1, opts.Spec.Executors

	final, diag, err := a.loop(ctx, rm, nm)
	if err != nil {
		return fmt.Errorf("sparkjob am: %w", err)
	}
	if err := rm.Finish(ctx, final, diag, ""); err != nil {
		return fmt.Errorf("sparkjob am: %w", err)
	}
	if final != client.StatusSucceeded {
		return fmt.Errorf("sparkjob am: %s: %w", diag, ErrJobFailed)
	}
	a.log.Info("job succeeded", "executors", len(a.stages[1])+len(a.stages[2]))
	return nil
}

// makeSecret makes the application's secret as Spark's SecurityManager
// does (Utils.createSecret: 256 bits, lowercase hex) and the credentials
// every executor gets: the AM's own without the AMRMToken, plus the
// secret under "sparkCookie".
func (a *am) makeSecret(creds *token.Credentials) error {
	b := make([]byte, 32)
	if _, err := io.ReadFull(a.opts.Rand, b); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	a.secret = hex.EncodeToString(b)
	c := creds.Clone()
	c.RemoveTokensOfKind(client.KindAMRMToken)
	c.AddSecret(SecretAlias, []byte(a.secret))
	tokens, err := c.Marshal(token.FormatWritable)
	if err != nil {
		return fmt.Errorf("executor credentials: %w", err)
	}
	a.tokens = tokens
	return nil
}

// loop heartbeats until the job has ended and returns its final status.
func (a *am) loop(ctx context.Context, rm *client.AMRMClient, nm *client.NMClient) (client.FinalStatus, string, error) {
	results := make(chan startResult, 2*a.opts.Spec.Executors)
	var starts sync.WaitGroup
	defer starts.Wait()
	startCtx, cancelStarts := context.WithCancel(ctx)
	defer cancelStarts()
	tick := time.NewTicker(a.opts.HeartbeatInterval)
	defer tick.Stop()
	var release []*yarnpb.ContainerIdProto
	for {
		req := &yarnpb.AllocateRequestProto{Progress: proto.Float32(a.progress()), Release: release, Ask: a.asks()}
		release = nil
		resp, err := rm.Allocate(ctx, req)
		if err != nil {
			return 0, "", err
		}
		if resp.GetAMCommand() == yarnpb.AMCommandProto_AM_SHUTDOWN {
			return 0, "", errors.New("the ResourceManager asked the AM to shut down")
		}
		for _, c := range resp.GetAllocatedContainers() {
			a.held.Allocated(c)
			e := a.assign(c)
			if e == nil {
				release = append(release, c.GetId())
				continue
			}
			clc, err := a.launchContext(e)
			if err != nil {
				return 0, "", err
			}
			a.log.Info("starting executor", "exec", e.spec.ExecID, "stage", e.spec.Stage, "container", yarnapp.ContainerString(c.GetId()), "node", client.NodeAddress(c.GetNodeId()))
			starts.Add(1)
			go func() {
				defer starts.Done()
				_, err := nm.StartContainer(startCtx, c, clc)
				results <- startResult{e: e, err: err}
			}()
		}
		yarnapp.Drain(results, a.started)
		for _, st := range resp.GetCompletedContainerStatuses() {
			a.completed(st)
		}
		if a.failure != "" {
			a.stopRunning(ctx, nm)
			return client.StatusFailed, a.failure, nil
		}
		if a.stageDone() {
			if a.stage == 2 {
				return client.StatusSucceeded, "", nil
			}
			a.startStage2()
		}
		if err := yarnapp.WaitTick(ctx, tick.C, results, a.started); err != nil {
			return 0, "", err
		}
	}
}

// asks is the current stage's ResourceRequest when its total changed: the
// executors still waiting for a container, at the stage's priority.
func (a *am) asks() []*yarnpb.ResourceRequestProto {
	var out []*yarnpb.ResourceRequestProto
	for stage, priority := range map[int]int32{1: PriorityStage1, 2: PriorityStage2} {
		n := 0
		if stage == a.stage {
			n = a.wanted
		}
		if ask := a.held.Want(priority, n, a.capability); ask != nil {
			out = append(out, ask)
		}
	}
	return out
}

// assign makes an allocated container the current stage's next executor;
// nil means release it.
func (a *am) assign(c *yarnpb.ContainerProto) *executor {
	want := PriorityStage1
	if a.stage == 2 {
		want = PriorityStage2
	}
	if a.wanted == 0 || c.GetPriority().GetPriority() != want || a.failure != "" {
		return nil
	}
	a.wanted--
	n := len(a.stages[a.stage]) // this stage's index of the executor
	spec := ExecutorSpec{
		App:              a.app,
		ExecID:           strconv.Itoa(len(a.stages[1]) + len(a.stages[2]) + 1),
		Stage:            a.stage,
		ShufflePort:      a.opts.Spec.ShufflePort,
		ShuffleID:        shuffleID,
		OldFetchProtocol: a.opts.Spec.OldFetchProtocol,
	}
	if a.stage == 1 {
		for m := range a.opts.Spec.MapsPerExecutor {
			spec.MapIDs = append(spec.MapIDs, int64(n*a.opts.Spec.MapsPerExecutor+m))
		}
		spec.Partitions, spec.BlockBytes = a.opts.Spec.Partitions, a.opts.Spec.BlockBytes
	} else {
		for r := n; r < a.opts.Spec.Partitions; r += a.opts.Spec.Executors {
			spec.Reduces = append(spec.Reduces, int32(r))
		}
		spec.BlockBytes = a.opts.Spec.BlockBytes
		spec.Writers = a.mapStatuses()
		spec.WrongSecret = a.opts.Spec.WrongSecret
	}
	e := &executor{spec: spec, container: c, state: launching}
	a.stages[a.stage] = append(a.stages[a.stage], e)
	a.byContainer[yarnapp.ContainerString(c.GetId())] = e
	return e
}

// mapStatuses are where stage 1's maps are: each executor, the host of its
// node and its maps.
func (a *am) mapStatuses() []MapStatus {
	var out []MapStatus
	for _, e := range a.stages[1] {
		out = append(out, MapStatus{ExecID: e.spec.ExecID, Host: e.container.GetNodeId().GetHost(), MapIDs: e.spec.MapIDs})
	}
	return out
}

// launchContext is an executor's container launch context: the binary,
// the executor's command and spec, the credentials with the secret, and
// the secret's bytes as the spark_shuffle service data, as Spark's
// ExecutorRunnable sets them with spark.shuffle.service.enabled.
func (a *am) launchContext(e *executor) (*yarnpb.ContainerLaunchContextProto, error) {
	encoded, err := yarnapp.EncodeSpec(e.spec)
	if err != nil {
		return nil, fmt.Errorf("executor spec: %w", err)
	}
	return &yarnpb.ContainerLaunchContextProto{
		LocalResources: []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(BinaryKey), Value: a.opts.Spec.Binary.Resource()}},
		Command:        []string{roleCommand("executor", encoded, "stdout", "stderr")},
		Tokens:         a.tokens,
		ServiceData: []*yarnpb.StringBytesMapProto{{
			Key:   proto.String(ServiceName),
			Value: []byte(a.secret),
		}},
	}, nil
}

// started takes in a container start.
func (a *am) started(r startResult) {
	if r.e.state != launching {
		return // it ended before its start answered
	}
	if r.err != nil {
		a.fail(r.e, "launch failed: "+r.err.Error())
		return
	}
	r.e.state = running
}

// completed takes in an executor container's end.
func (a *am) completed(st *yarnpb.ContainerStatusProto) {
	id := yarnapp.ContainerString(st.GetContainerId())
	e, ok := a.byContainer[id]
	if !ok || e.state == exited {
		return
	}
	e.state = exited
	if st.GetExitStatus() != 0 {
		a.fail(e, fmt.Sprintf("exit status %d: %s", st.GetExitStatus(), strings.TrimSpace(st.GetDiagnostics())))
		return
	}
	a.log.Info("executor exited", "exec", e.spec.ExecID, "stage", e.spec.Stage, "node", e.container.GetNodeId().GetHost())
}

// fail fails the job for executor e.
func (a *am) fail(e *executor, why string) {
	e.state = exited
	a.log.Warn("executor failed", "exec", e.spec.ExecID, "stage", e.spec.Stage, "why", why)
	if a.failure == "" {
		a.failure = fmt.Sprintf("Stage %d failed: executor %s on %s (%s) %s", e.spec.Stage, e.spec.ExecID,
			e.container.GetNodeId().GetHost(), yarnapp.ContainerString(e.container.GetId()), why)
	}
}

// stageDone reports whether every executor of the current stage has run
// and exited.
func (a *am) stageDone() bool {
	if a.wanted > 0 {
		return false
	}
	for _, e := range a.stages[a.stage] {
		if e.state != exited {
			return false
		}
	}
	return true
}

// startStage2 asks for the executors that read the shuffle.
func (a *am) startStage2() {
	a.stage, a.wanted = 2, a.opts.Spec.Executors
	a.log.Info("stage 1 done, asking for the stage 2 executors", "writers", len(a.stages[1]), "executors", a.wanted)
}

// stopRunning stops the containers of a failed job's other executors.
func (a *am) stopRunning(ctx context.Context, nm *client.NMClient) {
	for _, e := range a.byContainer {
		if e.state == exited {
			continue
		}
		if err := nm.StopContainer(ctx, e.container.GetId(), e.container.GetNodeId()); err != nil {
			a.log.Warn("stopping an executor of the failed job", "exec", e.spec.ExecID, "err", err)
		}
	}
}

// progress is the share of executors that have exited.
func (a *am) progress() float32 {
	n := 0
	for _, s := range a.stages {
		for _, e := range s {
			if e.state == exited {
				n++
			}
		}
	}
	return float32(n) / float32(2*a.opts.Spec.Executors)
}
