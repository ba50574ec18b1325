package yarnapp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// File is a file the nodes localize from the submitting machine: its
// absolute path, size and modification time (ms), which the node checks.
type File struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime"`
}

// Resource is f as a FILE local resource of APPLICATION visibility.
func (f File) Resource() *yarnpb.LocalResourceProto {
	return &yarnpb.LocalResourceProto{
		Resource:   &yarnpb.URLProto{Scheme: proto.String("file"), File: proto.String(f.Path)},
		Size:       proto.Int64(f.Size),
		Timestamp:  proto.Int64(f.ModTime),
		Type:       yarnpb.LocalResourceTypeProto_FILE.Enum(),
		Visibility: yarnpb.LocalResourceVisibilityProto_APPLICATION.Enum(),
	}
}

// Describe is the file at path as the nodes check it: absolute, resolved,
// with its size and modification time.
func Describe(path string) (File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return File{}, err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return File{}, err
	}
	return File{Path: abs, Size: fi.Size(), ModTime: fi.ModTime().UnixMilli()}, nil
}

// DescribeBinary is Describe of binary, or of this executable when binary
// is empty: the program every container of the application runs.
func DescribeBinary(binary string) (File, error) {
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return File{}, fmt.Errorf("own binary: %w", err)
		}
		binary = exe
	}
	return Describe(binary)
}

// EncodeSpec is v as base64url JSON: one word of letters, digits, - and _,
// safe on a launch command line.
func EncodeSpec(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeSpec reads what EncodeSpec wrote into v; unknown fields are errors.
func DecodeSpec(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

// Command is a container's command: the binary shipped under the link name
// binaryKey, run in role with its spec, output to the container's log
// folder (the node replaces <LOG_DIR>); extra are more -name=value words
// of safe characters.
func Command(binaryKey, role, spec, stdout, stderr string, extra ...string) string {
	words := append([]string{"./" + binaryKey, role, "-spec=" + spec}, extra...)
	return strings.Join(words, " ") + " 1><LOG_DIR>/" + stdout + " 2><LOG_DIR>/" + stderr
}

// WaitForEnd polls the application's report every interval until the
// application has ended (FINISHED, FAILED or KILLED) and returns it.
func WaitForEnd(ctx context.Context, rm *client.RMClient, app *yarnpb.ApplicationIdProto, every time.Duration) (*yarnpb.ApplicationReportProto, error) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		r, err := rm.GetApplicationReport(ctx, app)
		if err != nil {
			return nil, err
		}
		switch r.GetYarnApplicationState() {
		case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
			return r, nil
		}
	}
}

// CapTo is a container capability, lowered to the cluster's maximum.
func CapTo(memoryMB int64, vcores int32, limit *yarnpb.ResourceProto) *yarnpb.ResourceProto {
	maxMem, maxVcores := yarnpb.MemoryAndVcores(limit)
	if maxMem > 0 && memoryMB > maxMem {
		memoryMB = maxMem
	}
	if maxVcores > 0 && vcores > maxVcores {
		vcores = maxVcores
	}
	return yarnpb.NewResource(memoryMB, vcores)
}

// ContainerString is the container id's text, as YARN prints it.
func ContainerString(p *yarnpb.ContainerIdProto) string {
	if id, err := yarnid.ContainerIDFromProto(p); err == nil {
		return id.String()
	}
	return fmt.Sprint(p)
}

// ClientAddresses are the RM addresses a client role dials and hands its
// AM, each from its flag when set, else from confDir/yarn-site.xml: the
// client service (else its default), and the scheduler, left empty when
// the configuration does not set it so the AM reads its node's.
func ClientAddresses(confDir string, rm, scheduler *string) error {
	if *rm == "" {
		addr, _, err := client.ConfAddress(confDir, client.KeyRMAddress, client.DefaultRMPort)
		if err != nil {
			return err
		}
		*rm = addr
	}
	if *scheduler == "" {
		addr, ok, err := client.ConfAddress(confDir, client.KeySchedulerAddress, client.DefaultSchedulerPort)
		if err != nil {
			return err
		}
		if ok {
			*scheduler = addr
		}
	}
	return nil
}

// SchedulerAddress is the AM's scheduler address: addr when set, else
// confDir/yarn-site.xml's, else its default.
func SchedulerAddress(confDir, addr string) (string, error) {
	if addr != "" {
		return addr, nil
	}
	addr, _, err := client.ConfAddress(confDir, client.KeySchedulerAddress, client.DefaultSchedulerPort)
	return addr, err
}

// WaitTick waits for the AM's next heartbeat tick, handing take each value
// that arrives on results meanwhile (the answers of the container starts
// it runs in goroutines); it returns ctx's error if ctx ends first.
func WaitTick[T any](ctx context.Context, tick <-chan time.Time, results <-chan T, take func(T)) error {
	for {
		select {
		case <-tick:
			return nil
		case r := <-results:
			take(r)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Drain hands take the values already on results, without waiting.
func Drain[T any](results <-chan T, take func(T)) {
	for {
		select {
		case r := <-results:
			take(r)
		default:
			return
		}
	}
}
