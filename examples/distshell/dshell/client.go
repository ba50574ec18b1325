package dshell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Errors RunClient wraps when the application did not end well.
var (
	// ErrNotSucceeded is an application that ended other than FINISHED
	// with final status SUCCEEDED.
	ErrNotSucceeded = errors.New("application did not succeed")
	// ErrTimeout is an application still running when the client's timeout
	// ran out; the client killed it.
	ErrTimeout = errors.New("client timeout reached, application killed")
)

// ClientOptions are the client role's settings, DistributedShell's client
// options where they make sense.
type ClientOptions struct {
	// RMAddress is the RM's client service (yarn.resourcemanager.address).
	RMAddress string
	// SchedulerAddress, if set, is handed to the AM as the RM's scheduler
	// address; empty lets the AM read its own node's configuration.
	SchedulerAddress string
	// User is the submitting user (SIMPLE authentication).
	User string
	// AppName, Queue and AppPriority go into the submission; empty name
	// and queue mean "DistributedShell" and "default".
	AppName     string
	Queue       string
	AppPriority int32
	// MaxAMAttempts is maxAppAttempts; zero leaves the RM's default.
	MaxAMAttempts int32
	// KeepContainers keeps containers across application attempts.
	KeepContainers bool
	// RollingLogPattern, if set, asks for rolling log aggregation of the
	// files it matches (DistributedShell's -rolling_log_pattern).
	RollingLogPattern string
	// AttemptFailuresValidityInterval (ms) counts only AM failures this
	// recent against MaxAMAttempts; negative leaves it unset.
	AttemptFailuresValidityInterval int64
	// MasterMemoryMB and MasterVcores size the AM container; zero means
	// 128 MB and 1 vcore.
	MasterMemoryMB int64
	MasterVcores   int32
	// Binary is the distshell binary shipped to run the AM; empty means
	// this process's own executable.
	Binary string
	// ShellScript is a script on this machine that the containers run
	// with bash instead of Task.ShellCommand (-shell_script); the client
	// stages a copy.
	ShellScript string
	// StagingDir is where the client stages the AM's files, in
	// StagingDir/AppName/<application id>, as DistributedShell stages
	// them under the filesystem's home folder; empty means this user's
	// home folder. Nodes read them as file:// resources, as they read
	// Binary.
	StagingDir string
	// Timeout bounds the application's run from the client's start; when it
	// runs out the client kills the application. Zero means no bound.
	Timeout time.Duration
	// PollInterval paces the report polling; zero means a second, as
	// DistributedShell polls.
	PollInterval time.Duration
	// Task is what the AM runs.
	Task TaskSpec
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults fills zero fields with DistributedShell's defaults.
func (o ClientOptions) withDefaults() ClientOptions {
	if o.AppName == "" {
		o.AppName = "DistributedShell"
	}
	if o.Queue == "" {
		o.Queue = "default"
	}
	if o.MasterMemoryMB == 0 {
		o.MasterMemoryMB = 128
	}
	if o.MasterVcores == 0 {
		o.MasterVcores = 1
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	o.Task = o.Task.withDefaults()
	return o
}

// RunClient submits a DistributedShell application and follows it to its
// end, as DistributedShell's Client.run and monitorApplication do. It writes
// "Submitted application <id>" to stdout once the RM accepted the
// application, and the final state, final status and diagnostics at the
// end. It returns the application id (once known) and nil only if the
// application FINISHED with final status SUCCEEDED.
func RunClient(ctx context.Context, opts ClientOptions, stdout io.Writer) (appID string, err error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	opts = opts.withDefaults()
	if err := opts.validateTask(); err != nil {
		return "", fmt.Errorf("dshell client: %w", err)
	}
	if opts.MasterMemoryMB <= 0 || opts.MasterVcores <= 0 {
		return "", fmt.Errorf("dshell client: invalid AM resources %d MB, %d vcores", opts.MasterMemoryMB, opts.MasterVcores)
	}
	binary, err := binaryResource(opts.Binary)
	if err != nil {
		return "", err
	}
	if opts.StagingDir == "" {
		if opts.StagingDir, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("dshell client: staging folder: %w", err)
		}
	}
	rm, err := client.NewRMClient(opts.RMAddress, client.RMConfig{User: opts.User, Logger: log})
	if err != nil {
		return "", fmt.Errorf("dshell client: %w", err)
	}
	defer rm.Close()

	newApp, err := rm.GetNewApplication(ctx)
	if err != nil {
		return "", fmt.Errorf("dshell client: %w", err)
	}
	id, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		return "", fmt.Errorf("dshell client: new application id: %w", err)
	}
	appID = id.String()
	log = log.With("app", appID)
	opts.MasterMemoryMB, opts.MasterVcores = capResources(log, "AM", opts.MasterMemoryMB, opts.MasterVcores, newApp.GetMaximumCapability())

	files, err := stage(opts.StagingDir, opts.AppName, appID, opts.Task, opts.ShellScript)
	if err != nil {
		if files != nil {
			_ = files.remove() // the error says what went wrong
		}
		return appID, err
	}
	asc := submissionContext(newApp.GetApplicationId(), opts, binary, files)
	if err := rm.SubmitApplication(ctx, asc); err != nil {
		_ = files.remove() // the submission's error says what went wrong
		return appID, fmt.Errorf("dshell client: %w", err)
	}
	fmt.Fprintf(stdout, "Submitted application %s\n", appID)
	err = monitor(ctx, rm, newApp.GetApplicationId(), opts, start, stdout, log)
	if err != nil && !errors.Is(err, ErrNotSucceeded) && !errors.Is(err, ErrTimeout) {
		// The application may still be running, and a new attempt of its
		// AM would localize the files again.
		log.Info("application not seen to end, leaving its staged files", "dir", files.dir)
		return appID, err
	}
	return appID, errors.Join(err, files.remove())
}

// validateTask checks the task as DistributedShell's client does: a shell
// command or a script, not both, and containers to run it in.
func (o ClientOptions) validateTask() error {
	switch {
	case o.Task.ShellCommand == "" && o.ShellScript == "":
		return errNoCommand
	case o.Task.ShellCommand != "" && o.ShellScript != "":
		return errors.New("Can not specify shell_command option and shell_script option at the same time")
	}
	return o.Task.validateContainers()
}

// monitor polls the report until the application ends or the timeout
// runs out (then it kills the application).
func monitor(ctx context.Context, rm *client.RMClient, app *yarnpb.ApplicationIdProto, opts ClientOptions, start time.Time, stdout io.Writer, log *slog.Logger) error {
	lastState := yarnpb.YarnApplicationStateProto(0)
	tick := time.NewTicker(opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("dshell client: monitor: %w", ctx.Err())
		case <-tick.C:
		}
		report, err := rm.GetApplicationReport(ctx, app)
		if err != nil {
			return fmt.Errorf("dshell client: monitor: %w", err)
		}
		state, final := report.GetYarnApplicationState(), report.GetFinalApplicationStatus()
		if state != lastState {
			log.Info("application report", "state", state.String(), "final_status", finalStatusName(final),
				"host", report.GetHost(), "tracking_url", report.GetTrackingUrl())
			lastState = state
		}
		switch state {
		case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
			fmt.Fprintf(stdout, "Application %s finished with state %s, final status %s\n",
				appString(app), state.String(), finalStatusName(final))
			fmt.Fprintf(stdout, "Diagnostics: %s\n", report.GetDiagnostics())
			if state == yarnpb.YarnApplicationStateProto_FINISHED && final == yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED {
				return nil
			}
			return fmt.Errorf("dshell client: %s ended %s with final status %s: %w",
				appString(app), state.String(), finalStatusName(final), ErrNotSucceeded)
		}
		if opts.Timeout > 0 && time.Since(start) > opts.Timeout {
			log.Info("reached client specified timeout for application, killing it", "timeout", opts.Timeout)
			if err := rm.KillApplication(ctx, app, "killed by the DistributedShell client at its timeout"); err != nil {
				return fmt.Errorf("dshell client: kill at timeout: %w", err)
			}
			fmt.Fprintf(stdout, "Application %s killed: the client's timeout of %s ran out\n", appString(app), opts.Timeout)
			return fmt.Errorf("dshell client: %s: %w", appString(app), ErrTimeout)
		}
	}
}

// binaryResource describes the distshell binary at path (empty: this
// executable) as the AM's local resource.
func binaryResource(path string) (*yarnpb.LocalResourceProto, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("dshell client: find own binary: %w", err)
		}
		path = exe
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("dshell client: binary path: %w", err)
	}
	// The node checks size and modification time against the file it
	// fetches, so they must be the file's own, not a link's.
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dshell client: binary: %w", err)
	}
	return fileResource(path, fi.Size(), fi.ModTime().UnixMilli()), nil
}

// fileResource is a local file shipped to the AM: a FILE resource with
// APPLICATION visibility at file://path.
func fileResource(path string, size, modMillis int64) *yarnpb.LocalResourceProto {
	return &yarnpb.LocalResourceProto{
		Resource:   &yarnpb.URLProto{Scheme: proto.String("file"), File: proto.String(path)},
		Size:       proto.Int64(size),
		Timestamp:  proto.Int64(modMillis),
		Type:       yarnpb.LocalResourceTypeProto_FILE.Enum(),
		Visibility: yarnpb.LocalResourceVisibilityProto_APPLICATION.Enum(),
	}
}

// submissionContext is the application's submission: type YARN, the AM's
// resources as one "*" request in am_container_resource_request (as
// DistributedShell sends them), and an AM launch context that runs the
// shipped binary in the am role, with the staged files as local resources
// and the script's location in its environment.
func submissionContext(app *yarnpb.ApplicationIdProto, opts ClientOptions, binary *yarnpb.LocalResourceProto, files *staged) *yarnpb.ApplicationSubmissionContextProto {
	clc := &yarnpb.ContainerLaunchContextProto{
		LocalResources: append([]*yarnpb.StringLocalResourceMapProto{{Key: proto.String(BinaryKey), Value: binary}}, files.resources...),
		Environment:    files.env,
		Command:        []string{amCommand(opts.Task, opts.SchedulerAddress)},
	}
	asc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   app,
		ApplicationName: proto.String(opts.AppName),
		Queue:           proto.String(opts.Queue),
		Priority:        &yarnpb.PriorityProto{Priority: proto.Int32(opts.AppPriority)},
		AmContainerSpec: clc,
		ApplicationType: proto.String("YARN"),
		AmContainerResourceRequest: []*yarnpb.ResourceRequestProto{{
			Priority:             &yarnpb.PriorityProto{Priority: proto.Int32(0)},
			ResourceName:         proto.String("*"),
			Capability:           yarnpb.NewResource(opts.MasterMemoryMB, opts.MasterVcores),
			NumContainers:        proto.Int32(1),
			RelaxLocality:        proto.Bool(true),
			ExecutionTypeRequest: &yarnpb.ExecutionTypeRequestProto{ExecutionType: yarnpb.ExecutionTypeProto_GUARANTEED.Enum()},
		}},
		KeepContainersAcrossApplicationAttempts: proto.Bool(opts.KeepContainers),
	}
	if opts.MaxAMAttempts > 0 {
		asc.MaxAppAttempts = proto.Int32(opts.MaxAMAttempts)
	}
	if opts.RollingLogPattern != "" {
		// LogAggregationContext.newInstance(null, null, pattern, ""), as
		// DistributedShell's Client sets it.
		asc.LogAggregationContext = &yarnpb.LogAggregationContextProto{
			RolledLogsIncludePattern: proto.String(opts.RollingLogPattern),
			RolledLogsExcludePattern: proto.String(""),
		}
	}
	if opts.AttemptFailuresValidityInterval >= 0 {
		asc.AttemptFailuresValidityInterval = proto.Int64(opts.AttemptFailuresValidityInterval)
	}
	return asc
}

// capResources lowers a request to the cluster's maximum, as
// DistributedShell does for the AM and its containers.
func capResources(log *slog.Logger, what string, memoryMB int64, vcores int32, limit *yarnpb.ResourceProto) (int64, int32) {
	maxMem, maxVcores := yarnpb.MemoryAndVcores(limit)
	if maxMem > 0 && memoryMB > maxMem {
		log.Info("memory above the cluster's maximum, using the maximum", "for", what, "asked_mb", memoryMB, "max_mb", maxMem)
		memoryMB = maxMem
	}
	if maxVcores > 0 && vcores > maxVcores {
		log.Info("vcores above the cluster's maximum, using the maximum", "for", what, "asked", vcores, "max", maxVcores)
		vcores = maxVcores
	}
	return memoryMB, vcores
}

// finalStatusName is a final status as Java's FinalApplicationStatus
// prints it (SUCCEEDED, not APP_SUCCEEDED).
func finalStatusName(s yarnpb.FinalApplicationStatusProto) string {
	return strings.TrimPrefix(s.String(), "APP_")
}

func appString(p *yarnpb.ApplicationIdProto) string {
	if id, err := yarnid.ApplicationIDFromProto(p); err == nil {
		return id.String()
	}
	return fmt.Sprint(p)
}
