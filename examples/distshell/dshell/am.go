package dshell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ErrTasksFailed is returned by RunAM when the application finished FAILED
// because containers failed.
var ErrTasksFailed = errors.New("shell containers failed")

// AMOptions are the AM role's settings: the container environment the
// NodeManager gives it, the flags the client passed and the files it
// staged.
type AMOptions struct {
	// SchedulerAddress is the RM's scheduler service
	// (yarn.resourcemanager.scheduler.address).
	SchedulerAddress string
	// ContainerID is the AM's container id ($CONTAINER_ID).
	ContainerID string
	// TokenFile is the container's credentials file
	// ($HADOOP_TOKEN_FILE_LOCATION), which holds the AMRMToken.
	TokenFile string
	// Host is the host the AM registers; empty means this host's name.
	Host string
	// Task is what the shell containers run.
	Task TaskSpec
	// HeartbeatInterval paces allocate; zero means a second, as
	// DistributedShell's AM heartbeats.
	HeartbeatInterval time.Duration
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// startResult is how starting one container went.
type startResult struct {
	id  string
	err error
}

// RunAM is DistributedShell's ApplicationMaster: it registers, asks for
// the shell containers, starts each allocated one (releasing any beyond the
// number wanted), waits until all have completed and finishes the
// application SUCCEEDED if every one exited 0, else FAILED with
// diagnostics naming the failed containers (and returns an error wrapping
// ErrTasksFailed). Failed containers are not run again.
func RunAM(ctx context.Context, opts AMOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = time.Second
	}
	opts.Task = opts.Task.withDefaults()
	if err := opts.Task.validate(); err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	if opts.ContainerID == "" {
		return errors.New("dshell am: ContainerId not set in the environment")
	}
	cid, err := yarnid.ParseContainerID(opts.ContainerID)
	if err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	log = log.With("attempt", cid.Attempt.String())
	if opts.TokenFile == "" {
		return errors.New("dshell am: no credentials file (HADOOP_TOKEN_FILE_LOCATION not set)")
	}
	creds, err := client.ReadCredentialsFile(opts.TokenFile)
	if err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	amrmToken, err := client.AMRMToken(creds)
	if err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	taskTokens, err := taskCredentials(creds)
	if err != nil {
		return err
	}
	host := opts.Host
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("dshell am: host name: %w", err)
		}
	}

	rm, err := client.NewAMRMClient(opts.SchedulerAddress, client.AMRMConfig{Token: amrmToken, Logger: log})
	if err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	defer rm.Close()
	nm := client.NewNMClient(rm.NMTokens(), client.NMConfig{Logger: log})
	defer nm.Close()

	reg, err := rm.Register(ctx, host, -1, "")
	if err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	memoryMB, vcores := capResources(log, "containers", opts.Task.MemoryMB, opts.Task.Vcores, reg.GetMaximumCapability())
	capability := yarnpb.NewResource(memoryMB, vcores)
	clc := taskLaunchContext(opts.Task, taskTokens)

	t := newTracker(opts.Task.NumContainers)
	// Buffered for every container the AM can start, so no start waits on
	// the loop, even after it ended.
	results := make(chan startResult, opts.Task.NumContainers)
	var starts sync.WaitGroup
	defer starts.Wait()
	startCtx, cancelStarts := context.WithCancel(ctx)
	defer cancelStarts()

	lastAsk := -1
	var release []*yarnpb.ContainerIdProto
	tick := time.NewTicker(opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		req := &yarnpb.AllocateRequestProto{Progress: proto.Float32(t.progress()), Release: release}
		if n := t.outstanding(); n != lastAsk {
			req.Ask = []*yarnpb.ResourceRequestProto{askFor(opts.Task, capability, n)}
			lastAsk = n
		}
		release = nil
		resp, err := rm.Allocate(ctx, req)
		if err != nil {
			return fmt.Errorf("dshell am: %w", err)
		}
		if resp.GetAMCommand() == yarnpb.AMCommandProto_AM_SHUTDOWN {
			return errors.New("dshell am: the ResourceManager asked the AM to shut down")
		}
		for _, c := range resp.GetAllocatedContainers() {
			id := containerIDString(c.GetId())
			if !t.take(id) {
				log.Info("releasing a container beyond those wanted", "container", id)
				release = append(release, c.GetId())
				continue
			}
			log.Info("starting shell container", "container", id, "node", client.NodeAddress(c.GetNodeId()))
			starts.Add(1)
			go func() {
				defer starts.Done()
				_, err := nm.StartContainer(startCtx, c, clc)
				results <- startResult{id: id, err: err}
			}()
		}
		for _, st := range resp.GetCompletedContainerStatuses() {
			log.Info("container completed", "container", containerIDString(st.GetContainerId()),
				"exit_status", st.GetExitStatus(), "diagnostics", st.GetDiagnostics())
			t.containerCompleted(st)
		}
		if t.done() {
			break
		}
		if err := waitTick(ctx, tick, results, t, log); err != nil {
			return fmt.Errorf("dshell am: %w", err)
		}
	}

	if t.succeeded() {
		if err := rm.Finish(ctx, client.StatusSucceeded, "", ""); err != nil {
			return fmt.Errorf("dshell am: %w", err)
		}
		log.Info("application completed successfully", "containers", t.total)
		return nil
	}
	diag := t.diagnostics()
	if err := rm.Finish(ctx, client.StatusFailed, diag, ""); err != nil {
		return fmt.Errorf("dshell am: %w", err)
	}
	return fmt.Errorf("dshell am: %s: %w", diag, ErrTasksFailed)
}

// waitTick waits for the next heartbeat, taking in start results meanwhile.
func waitTick(ctx context.Context, tick *time.Ticker, results <-chan startResult, t *tracker, log *slog.Logger) error {
	for {
		select {
		case <-tick.C:
			return nil
		case r := <-results:
			if r.err != nil {
				log.Warn("container failed to start", "container", r.id, "err", r.err)
				t.startFailed(r.id, r.err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
