package sparkapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/yarnapp"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ErrNotSucceeded is an application that ended other than FINISHED with
// final status SUCCEEDED.
var ErrNotSucceeded = errors.New("job did not succeed")

// ClientOptions are the client role's settings.
type ClientOptions struct {
	// RMAddress is the RM's client service; SchedulerAddress, if set, is
	// handed to the AM.
	RMAddress        string
	SchedulerAddress string
	// User is the submitting user (SIMPLE authentication).
	User string
	// Spec is the job; its Binary is filled from Binary.
	Spec JobSpec
	// Binary is the sparkjob binary; empty means this executable.
	Binary string
	// Queue goes into the submission; empty means "default".
	Queue string
	// AMMemoryMB sizes the AM container; zero means 128.
	AMMemoryMB int64
	// PollInterval paces the report polling; zero means a second.
	PollInterval time.Duration
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// RunClient submits the job and follows it to its end, as spark-submit's
// YARN client does. It writes "Submitted application <id>" once the RM
// accepted it, then the final state and diagnostics. It returns the
// application id once known, and nil only if the job SUCCEEDED.
func RunClient(ctx context.Context, opts ClientOptions, stdout io.Writer) (string, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.AMMemoryMB == 0 {
		opts.AMMemoryMB = 128
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Queue == "" {
		opts.Queue = "default"
	}
	var err error
	if opts.Spec.Binary, err = yarnapp.DescribeBinary(opts.Binary); err != nil {
		return "", fmt.Errorf("sparkjob client: %w", err)
	}
	if err := opts.Spec.validate(); err != nil {
		return "", fmt.Errorf("sparkjob client: %w", err)
	}
	rm, err := client.NewRMClient(opts.RMAddress, client.RMConfig{User: opts.User, Logger: log})
	if err != nil {
		return "", fmt.Errorf("sparkjob client: %w", err)
	}
	defer rm.Close()
	newApp, err := rm.GetNewApplication(ctx)
	if err != nil {
		return "", fmt.Errorf("sparkjob client: %w", err)
	}
	id, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		return "", fmt.Errorf("sparkjob client: new application id: %w", err)
	}
	encoded, err := yarnapp.EncodeSpec(opts.Spec)
	if err != nil {
		return id.String(), fmt.Errorf("sparkjob client: %w", err)
	}
	var extra []string
	if opts.SchedulerAddress != "" {
		extra = append(extra, "-scheduler_address="+opts.SchedulerAddress)
	}
	asc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.GetApplicationId(),
		ApplicationName: proto.String("spark shuffle"),
		Queue:           proto.String(opts.Queue),
		ApplicationType: proto.String("SPARK"),
		MaxAppAttempts:  proto.Int32(1),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{
			LocalResources: []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(BinaryKey), Value: opts.Spec.Binary.Resource()}},
			Command:        []string{roleCommand("am", encoded, "stdout", "stderr", extra...)},
		},
		Resource: yarnpb.NewResource(opts.AMMemoryMB, 1),
	}
	if err := rm.SubmitApplication(ctx, asc); err != nil {
		return id.String(), fmt.Errorf("sparkjob client: %w", err)
	}
	fmt.Fprintf(stdout, "Submitted application %s\n", id)
	report, err := yarnapp.WaitForEnd(ctx, rm, newApp.GetApplicationId(), opts.PollInterval)
	if err != nil {
		return id.String(), fmt.Errorf("sparkjob client: %w", err)
	}
	state, final := report.GetYarnApplicationState(), report.GetFinalApplicationStatus()
	fmt.Fprintf(stdout, "Application report for %s (state: %s)\n\t final status: %s\n", id, state, strings.TrimPrefix(final.String(), "APP_"))
	if d := report.GetDiagnostics(); d != "" {
		fmt.Fprintf(stdout, "\t diagnostics: %s\n", d)
	}
	if state != yarnpb.YarnApplicationStateProto_FINISHED || final != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED {
		return id.String(), fmt.Errorf("sparkjob client: %s: %w", id, ErrNotSucceeded)
	}
	return id.String(), nil
}
