package wordcount

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/mrjob/mapred"
	"github.com/knitdev/knit/examples/yarnapp"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ErrJobFailed is returned by RunAM when tasks ran out of attempts and the
// job finished FAILED.
var ErrJobFailed = errors.New("job failed as tasks failed")

// AMOptions are the AM role's settings.
type AMOptions struct {
	yarnapp.AMEnv
	// Spec is the job.
	Spec JobSpec
	// Rand makes the shuffle secret; nil means crypto/rand.
	Rand io.Reader
}

// taskState is where a task is.
type taskState int

const (
	// waiting: the task needs a container.
	waiting taskState = iota + 1
	// launching: a container is being started for it.
	launching
	// running: its container runs.
	running
	succeeded
	failed
)

// task is one map or reduce and its current attempt.
type task struct {
	id       mapred.TaskID
	state    taskState
	attempts int // attempts started so far; the current is attempts-1
	attempt  mapred.AttemptID
	// container runs the current attempt; host and port are its node's
	// shuffle address (maps).
	container *yarnpb.ContainerProto
	host      string
	port      int
	// exited is the current attempt's container's completion when it came
	// before the answer to its start.
	exited *yarnpb.ContainerStatusProto
	// diagnostics of the failed attempts.
	diagnostics []string
}

// startResult is how starting a task's container went.
type startResult struct {
	t       *task
	attempt mapred.AttemptID
	meta    map[string][]byte
	err     error
}

// am is the job's state between heartbeats.
type am struct {
	opts       AMOptions
	log        *slog.Logger
	job        mapred.JobID
	secret     []byte
	taskTokens []byte
	capability *yarnpb.ResourceProto
	maps       []*task
	reduces    []*task
	// byContainer finds the task a container runs.
	byContainer map[string]*task
	// reducesAsked is true once every map succeeded.
	reducesAsked bool
	held         yarnapp.Asks
}

// RunAM is the job's ApplicationMaster; see the package comment.
func RunAM(ctx context.Context, opts AMOptions) error {
	// The MR AM heartbeats every second too
	// (yarn.app.mapreduce.am.scheduler.heartbeat.interval-ms).
	opts.AMEnv = opts.AMEnv.WithDefaults()
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if err := opts.Spec.validate(); err != nil {
		return fmt.Errorf("mrjob am: %w", err)
	}
	started, err := yarnapp.RegisterAM(ctx, opts.AMEnv)
	if err != nil {
		return fmt.Errorf("mrjob am: %w", err)
	}
	defer started.Close()
	rm, nm := started.RM, started.NM
	a := &am{opts: opts, job: mapred.JobID{App: started.Container.Attempt.App}, byContainer: map[string]*task{}}
	a.log = opts.Logger.With("job", a.job.String())
	if err := a.makeSecrets(started.Credentials); err != nil {
		return fmt.Errorf("mrjob am: %w", err)
	}
	for i := range opts.Spec.Splits {
		a.maps = append(a.maps, &task{id: mapred.TaskID{Job: a.job, Type: mapred.Map, Index: i}, state: waiting})
	}
	for i := range opts.Spec.Reduces {
		a.reduces = append(a.reduces, &task{id: mapred.TaskID{Job: a.job, Type: mapred.Reduce, Index: i}})
	}
	if opts.Spec.Output != "" {
		// FileOutputCommitter.setupJob.
		if err := os.MkdirAll(filepath.Join(opts.Spec.Output, "_temporary"), 0o755); err != nil {
			return fmt.Errorf("mrjob am: job setup: %w", err)
		}
	}
	a.capability = yarnapp.CapTo(opts.Spec.TaskMemoryMB, opts.Spec.TaskVcores, started.MaxCapability)

	final, diag, err := a.loop(ctx, rm, nm)
	if err != nil {
		return fmt.Errorf("mrjob am: %w", err)
	}
	if final == client.StatusSucceeded && opts.Spec.Output != "" {
		// FileOutputCommitter.commitJob: the task outputs are in place.
		if err := commitJob(opts.Spec.Output); err != nil {
			final, diag = client.StatusFailed, "Job commit failed: "+err.Error()
		}
	}
	if err := rm.Finish(ctx, final, diag, ""); err != nil {
		return fmt.Errorf("mrjob am: %w", err)
	}
	if final != client.StatusSucceeded {
		return fmt.Errorf("mrjob am: %s: %w", diag, ErrJobFailed)
	}
	a.log.Info("job completed successfully", "maps", len(a.maps), "reduces", len(a.reduces))
	return nil
}

// makeSecrets makes the job's shuffle secret and job token password and
// the credentials every task gets: the AM's own without the AMRMToken,
// plus the JobToken and the MapReduceShuffleToken secret, as
// TaskAttemptImpl gives them.
func (a *am) makeSecrets(creds *token.Credentials) error {
	a.secret = make([]byte, mapred.SecretLength)
	jobTokenPassword := make([]byte, 20) // an HMAC-SHA1's length
	if _, err := io.ReadFull(a.opts.Rand, a.secret); err != nil {
		return fmt.Errorf("shuffle secret: %w", err)
	}
	if _, err := io.ReadFull(a.opts.Rand, jobTokenPassword); err != nil {
		return fmt.Errorf("job token: %w", err)
	}
	c := creds.Clone()
	c.RemoveTokensOfKind(client.KindAMRMToken)
	c.AddToken(mapred.JobTokenAlias, mapred.JobToken(a.job.String(), jobTokenPassword))
	c.AddSecret(mapred.ShuffleSecretAlias, a.secret)
	b, err := c.Marshal(token.FormatWritable)
	if err != nil {
		return fmt.Errorf("task credentials: %w", err)
	}
	a.taskTokens = b
	return nil
}

// loop heartbeats until the job has ended and returns its final status.
func (a *am) loop(ctx context.Context, rm *client.AMRMClient, nm *client.NMClient) (client.FinalStatus, string, error) {
	results := make(chan startResult, len(a.maps)*a.opts.Spec.MaxAttempts+len(a.reduces)*a.opts.Spec.MaxAttempts)
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
			t := a.assign(c)
			if t == nil {
				release = append(release, c.GetId())
				continue
			}
			clc, err := a.launchContext(t)
			if err != nil {
				return 0, "", err
			}
			a.log.Info("starting task attempt", "attempt", t.attempt.String(), "container", yarnapp.ContainerString(c.GetId()), "node", client.NodeAddress(c.GetNodeId()))
			starts.Add(1)
			go func() {
				defer starts.Done()
				meta, err := nm.StartContainer(startCtx, c, clc)
				results <- startResult{t: t, attempt: t.attempt, meta: meta, err: err}
			}()
		}
		yarnapp.Drain(results, func(r startResult) { a.started(ctx, r, nm) })
		for _, st := range resp.GetCompletedContainerStatuses() {
			a.completed(st)
		}
		if t := a.failedTask(); t != nil {
			a.stopRunning(ctx, nm)
			return client.StatusFailed, a.failureDiagnostics(t), nil
		}
		if !a.reducesAsked && allSucceeded(a.maps) {
			a.startReducePhase()
		}
		if a.reducesAsked && allSucceeded(a.reduces) {
			return client.StatusSucceeded, "", nil
		}
		if err := yarnapp.WaitTick(ctx, tick.C, results, func(r startResult) { a.started(ctx, r, nm) }); err != nil {
			return 0, "", err
		}
	}
}

// asks are the ResourceRequests whose totals changed since the last
// heartbeat: at each task type's priority, the number of tasks waiting for
// a container.
func (a *am) asks() []*yarnpb.ResourceRequestProto {
	var out []*yarnpb.ResourceRequestProto
	for _, p := range []struct {
		priority int32
		tasks    []*task
	}{{PriorityMap, a.maps}, {PriorityReduce, a.reduces}} {
		n := 0
		for _, t := range p.tasks {
			if t.state == waiting {
				n++
			}
		}
		if ask := a.held.Want(p.priority, n, a.capability); ask != nil {
			out = append(out, ask)
		}
	}
	return out
}

// assign gives an allocated container to the first task of its priority's
// type that waits for one, starting a new attempt; nil means release it.
func (a *am) assign(c *yarnpb.ContainerProto) *task {
	tasks := a.maps
	if c.GetPriority().GetPriority() == PriorityReduce {
		tasks = a.reduces
	}
	for _, t := range tasks {
		if t.state != waiting {
			continue
		}
		t.state = launching
		t.attempt = mapred.AttemptID{Task: t.id, N: t.attempts}
		t.attempts++
		t.container = c
		a.byContainer[yarnapp.ContainerString(c.GetId())] = t
		return t
	}
	return nil
}

// launchContext is the container launch context of t's current attempt:
// the binary (and a map's split), the role's command with its spec, the
// task credentials, and the job token as the shuffle's service data.
func (a *am) launchContext(t *task) (*yarnpb.ContainerLaunchContextProto, error) {
	spec := TaskSpec{Job: a.job.String(), Attempt: t.attempt.String(), Output: a.opts.Spec.Output}
	resources := []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(BinaryKey), Value: a.opts.Spec.Binary.Resource()}}
	role := "map"
	if t.id.Type == mapred.Map {
		spec.Reduces = len(a.reduces)
		resources = append(resources, &yarnpb.StringLocalResourceMapProto{Key: proto.String(InputKey), Value: a.opts.Spec.Splits[t.id.Index].Resource()})
	} else {
		role = "reduce"
		spec.Hosts = a.mapHosts()
		spec.ForgeShuffleToken = a.opts.Spec.ForgeShuffleToken
	}
	encoded, err := yarnapp.EncodeSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("task spec: %w", err)
	}
	return &yarnpb.ContainerLaunchContextProto{
		LocalResources: resources,
		Command:        []string{roleCommand(role, encoded, "stdout", "stderr")},
		Tokens:         a.taskTokens,
		ServiceData: []*yarnpb.StringBytesMapProto{{
			Key:   proto.String(mapred.ServiceName),
			Value: mapred.ServiceData(a.job.String(), a.secret),
		}},
	}, nil
}

// mapHosts are the succeeded maps grouped by node, in the order of their
// first map, as the reducers fetch them.
func (a *am) mapHosts() []MapHost {
	var out []MapHost
	at := map[string]int{}
	for _, t := range a.maps {
		key := net.JoinHostPort(t.host, fmt.Sprint(t.port))
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, MapHost{Host: t.host, Port: t.port})
		}
		out[i].Maps = append(out[i].Maps, t.attempt.String())
	}
	return out
}

// stopTimeout bounds the stop of a container whose launch failed.
const stopTimeout = 10 * time.Second

// started takes in a container start: the task runs, with its node's
// shuffle port from the services metadata, or its attempt failed.
func (a *am) started(ctx context.Context, r startResult, nm *client.NMClient) {
	t := r.t
	if t.state != launching || t.attempt != r.attempt {
		return // the attempt failed before its start answered
	}
	if r.err != nil {
		a.attemptFailed(t, "Container launch failed for "+yarnapp.ContainerString(t.container.GetId())+" : "+r.err.Error())
		return
	}
	port, err := mapred.ParsePort(r.meta[mapred.ServiceName])
	if err != nil {
		// ContainerLauncherImpl: the launch fails, and the container goes.
		a.attemptFailed(t, fmt.Sprintf("Container launch failed for %s : %v", yarnapp.ContainerString(t.container.GetId()), err))
		// Bounded, as ContainerLauncherImpl's calls are: a node that does
		// not answer must not hold up the job.
		stopCtx, cancel := context.WithTimeout(ctx, stopTimeout)
		defer cancel()
		if err := nm.StopContainer(stopCtx, t.container.GetId(), t.container.GetNodeId()); err != nil {
			a.log.Warn("stopping a container whose launch failed", "container", yarnapp.ContainerString(t.container.GetId()), "err", err)
		}
		return
	}
	t.state = running
	t.port = port
	t.host = httpHost(t.container)
	if st := t.exited; st != nil {
		t.exited = nil
		a.completed(st)
	}
}

// httpHost is the host part of the container's node HTTP address, where
// TaskImpl points reducers, else the node id's host.
func httpHost(c *yarnpb.ContainerProto) string {
	if h, _, err := net.SplitHostPort(c.GetNodeHttpAddress()); err == nil && h != "" {
		return h
	}
	return c.GetNodeId().GetHost()
}

// completed takes in a completed container of a task.
func (a *am) completed(st *yarnpb.ContainerStatusProto) {
	id := yarnapp.ContainerString(st.GetContainerId())
	t, ok := a.byContainer[id]
	if !ok {
		return // released
	}
	if t.state == launching && st.GetExitStatus() == 0 {
		t.exited = st // its start's answer comes next
		return
	}
	delete(a.byContainer, id)
	if t.state != launching && t.state != running {
		return
	}
	if st.GetExitStatus() == 0 {
		t.state = succeeded
		a.log.Info("task attempt succeeded", "attempt", t.attempt.String(), "node", t.host)
		return
	}
	a.attemptFailed(t, fmt.Sprintf("%s exit status %d: %s", id, st.GetExitStatus(), strings.TrimSpace(st.GetDiagnostics())))
}

// attemptFailed ends t's current attempt: it runs again while it has
// attempts left, else the task fails.
func (a *am) attemptFailed(t *task, diag string) {
	a.log.Warn("task attempt failed", "attempt", t.attempt.String(), "diagnostics", diag)
	t.diagnostics = append(t.diagnostics, t.attempt.String()+": "+diag)
	if t.container != nil {
		delete(a.byContainer, yarnapp.ContainerString(t.container.GetId()))
	}
	t.container = nil
	t.exited = nil
	if t.attempts < a.opts.Spec.MaxAttempts {
		t.state = waiting
		return
	}
	t.state = failed
}

// startReducePhase makes every reducer wait for a container, now that each
// map's output is known.
func (a *am) startReducePhase() {
	a.reducesAsked = true
	for _, t := range a.reduces {
		t.state = waiting
	}
	a.log.Info("all maps succeeded, asking for the reducers", "maps", len(a.maps), "reduces", len(a.reduces))
}

func (a *am) failedTask() *task {
	for _, t := range append(append([]*task{}, a.maps...), a.reduces...) {
		if t.state == failed {
			return t
		}
	}
	return nil
}

// failureDiagnostics are JobImpl's words for a job whose task failed, and
// the task's attempts' diagnostics.
func (a *am) failureDiagnostics(t *task) string {
	count := func(tasks []*task) int {
		n := 0
		for _, t := range tasks {
			if t.state == failed {
				n++
			}
		}
		return n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Task failed %s\nJob failed as tasks failed. failedMaps:%d failedReduces:%d killedMaps:0 killedReduces: 0\n",
		t.id, count(a.maps), count(a.reduces))
	for _, d := range t.diagnostics {
		b.WriteString(d)
		b.WriteString("\n")
	}
	return b.String()
}

// stopRunning stops the containers of a failed job's other tasks.
func (a *am) stopRunning(ctx context.Context, nm *client.NMClient) {
	for _, t := range a.byContainer {
		// Bounded, as ContainerLauncherImpl's calls are: a node that does
		// not answer must not hold up the job.
		stopCtx, cancel := context.WithTimeout(ctx, stopTimeout)
		defer cancel()
		if err := nm.StopContainer(stopCtx, t.container.GetId(), t.container.GetNodeId()); err != nil {
			a.log.Warn("stopping a task of the failed job", "attempt", t.attempt.String(), "err", err)
		}
	}
}

// progress is MapReduce's: maps the first half, reduces the second.
func (a *am) progress() float32 {
	done := func(tasks []*task) float32 {
		n := 0
		for _, t := range tasks {
			if t.state == succeeded {
				n++
			}
		}
		return float32(n) / float32(len(tasks))
	}
	return done(a.maps)/2 + done(a.reduces)/2
}

func allSucceeded(tasks []*task) bool {
	for _, t := range tasks {
		if t.state != succeeded {
			return false
		}
	}
	return true
}

// commitJob marks the output complete as FileOutputCommitter.commitJob
// does: the temporary folder goes and _SUCCESS appears.
func commitJob(output string) error {
	if err := os.RemoveAll(filepath.Join(output, "_temporary")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(output, "_SUCCESS"), nil, 0o644)
}
