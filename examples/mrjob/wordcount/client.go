package wordcount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/mrjob/mapred"
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
	// Inputs are input files or folders (each file in a folder, not
	// recursing, names starting with "_" or "." skipped as
	// FileInputFormat skips them); each file is one map.
	Inputs []string
	// Output, if set, is a folder that must not exist yet; the reducers
	// write their part-r-NNNNN files there, and the client prints them.
	Output string
	// Reduces is the number of reducers; zero means 1.
	Reduces int
	// Binary is the mrjob binary; empty means this executable.
	Binary string
	// AppName and Queue go into the submission; empty means "word count"
	// and "default".
	AppName, Queue string
	// AMMemoryMB and TaskMemoryMB size the containers; zero means 128.
	AMMemoryMB, TaskMemoryMB int64
	// MaxAttempts is each task's attempts; zero means 4, as MapReduce's.
	MaxAttempts int
	// ForgeShuffleToken makes the reducers sign with a wrong secret.
	ForgeShuffleToken bool
	// PollInterval paces the report polling; zero means a second.
	PollInterval time.Duration
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// RunClient submits the job and follows it to its end, as JobClient's
// waitForCompletion does. It writes "Submitted application <id>" once the
// RM accepted it, then the end state and diagnostics and, if the job
// succeeded with an output folder, the output. It returns the application
// id once known, and nil only if the job SUCCEEDED.
func RunClient(ctx context.Context, opts ClientOptions, stdout io.Writer) (string, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	spec, err := jobSpec(opts)
	if err != nil {
		return "", fmt.Errorf("mrjob client: %w", err)
	}
	if opts.AMMemoryMB == 0 {
		opts.AMMemoryMB = 128
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	rm, err := client.NewRMClient(opts.RMAddress, client.RMConfig{User: opts.User, Logger: log})
	if err != nil {
		return "", fmt.Errorf("mrjob client: %w", err)
	}
	defer rm.Close()
	newApp, err := rm.GetNewApplication(ctx)
	if err != nil {
		return "", fmt.Errorf("mrjob client: %w", err)
	}
	id, err := yarnid.ApplicationIDFromProto(newApp.GetApplicationId())
	if err != nil {
		return "", fmt.Errorf("mrjob client: new application id: %w", err)
	}
	encoded, err := yarnapp.EncodeSpec(spec)
	if err != nil {
		return id.String(), fmt.Errorf("mrjob client: %w", err)
	}
	var extra []string
	if opts.SchedulerAddress != "" {
		extra = append(extra, "-scheduler_address="+opts.SchedulerAddress)
	}
	asc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.GetApplicationId(),
		ApplicationName: proto.String(cmp(opts.AppName, "word count")),
		Queue:           proto.String(cmp(opts.Queue, "default")),
		ApplicationType: proto.String("MAPREDUCE"),
		MaxAppAttempts:  proto.Int32(1),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{
			LocalResources: []*yarnpb.StringLocalResourceMapProto{{Key: proto.String(BinaryKey), Value: spec.Binary.Resource()}},
			Command:        []string{roleCommand("am", encoded, "AppMaster.stdout", "AppMaster.stderr", extra...)},
		},
		Resource: yarnpb.NewResource(opts.AMMemoryMB, 1),
	}
	if err := rm.SubmitApplication(ctx, asc); err != nil {
		return id.String(), fmt.Errorf("mrjob client: %w", err)
	}
	fmt.Fprintf(stdout, "Submitted application %s\n", id)
	fmt.Fprintf(stdout, "Running job: %s\n", mapred.JobID{App: id})
	report, err := yarnapp.WaitForEnd(ctx, rm, newApp.GetApplicationId(), opts.PollInterval)
	if err != nil {
		return id.String(), fmt.Errorf("mrjob client: %w", err)
	}
	state, final := report.GetYarnApplicationState(), report.GetFinalApplicationStatus()
	fmt.Fprintf(stdout, "Job %s completed with state %s, final status %s\n", mapred.JobID{App: id}, state, strings.TrimPrefix(final.String(), "APP_"))
	if d := report.GetDiagnostics(); d != "" {
		fmt.Fprintf(stdout, "Diagnostics: %s\n", d)
	}
	if state != yarnpb.YarnApplicationStateProto_FINISHED || final != yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED {
		return id.String(), fmt.Errorf("mrjob client: %s: %w", id, ErrNotSucceeded)
	}
	if opts.Output != "" {
		for r := range spec.Reduces {
			b, err := os.ReadFile(filepath.Join(opts.Output, PartName(r)))
			if err != nil {
				return id.String(), fmt.Errorf("mrjob client: output: %w", err)
			}
			stdout.Write(b) //nolint:errcheck // best effort, the job succeeded
		}
	}
	return id.String(), nil
}

// jobSpec checks the options and describes the job for the AM.
func jobSpec(opts ClientOptions) (JobSpec, error) {
	spec := JobSpec{
		Reduces:           max(opts.Reduces, 1),
		Output:            opts.Output,
		TaskMemoryMB:      opts.TaskMemoryMB,
		TaskVcores:        1,
		MaxAttempts:       opts.MaxAttempts,
		ForgeShuffleToken: opts.ForgeShuffleToken,
	}
	if spec.TaskMemoryMB == 0 {
		spec.TaskMemoryMB = 128
	}
	if spec.MaxAttempts == 0 {
		spec.MaxAttempts = 4
	}
	if spec.Output != "" {
		abs, err := filepath.Abs(spec.Output)
		if err != nil {
			return JobSpec{}, err
		}
		spec.Output = abs
		// FileOutputFormat.checkOutputSpecs.
		if _, err := os.Stat(abs); err == nil {
			return JobSpec{}, fmt.Errorf("Output directory %s already exists", abs)
		}
	}
	var err error
	if spec.Binary, err = yarnapp.DescribeBinary(opts.Binary); err != nil {
		return JobSpec{}, err
	}
	for _, in := range opts.Inputs {
		files, err := inputFiles(in)
		if err != nil {
			return JobSpec{}, err
		}
		for _, f := range files {
			split, err := yarnapp.Describe(f)
			if err != nil {
				return JobSpec{}, err
			}
			spec.Splits = append(spec.Splits, split)
		}
	}
	if len(spec.Splits) == 0 {
		return JobSpec{}, errors.New("no input files")
	}
	return spec, spec.validate()
}

// inputFiles is path itself, or the files of the folder path.
func inputFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	var files []string
	for _, e := range entries {
		if e.Type()&fs.ModeType != 0 || strings.HasPrefix(e.Name(), "_") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files = append(files, filepath.Join(path, e.Name()))
	}
	slices.Sort(files)
	return files, nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
