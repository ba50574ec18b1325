package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// distshell runs the distshell client against the shared knit-rm, as a
// user runs it with HADOOP_CONF_DIR pointed at the local cluster, and
// returns its output and the application id it submitted.
func distshell(t *testing.T, args ...string) (out string, app yarnid.ApplicationID, err error) {
	t.Helper()
	knitRM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), args...)
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "USER=dsuser")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatalf("distshell submitted nothing: %v\n%s", err, buf.String())
	}
	app, perr := yarnid.ParseApplicationID(m[1])
	if perr != nil {
		t.Fatal(perr)
	}
	return buf.String(), app, err
}

// containerLogs returns the named log file of every container of app, on
// whichever node it ran, keyed by container id.
func containerLogs(t *testing.T, app yarnid.ApplicationID, name string) map[string]string {
	t.Helper()
	logs := map[string]string{}
	for _, n := range cluster.Nodes {
		dir := filepath.Join(localcluster.NodeLogDir(cluster.ControlPlane.Dir, n.Name), app.String())
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name(), name)); err == nil {
				logs[e.Name()] = string(b)
			}
		}
	}
	// The node's copy is removed once uploaded: read it first, then the
	// aggregated files, complete by then if any node copy was gone.
	for _, byContainer := range aggregatedLogs(cluster.ControlPlane.Dir, app, name) {
		for id, log := range byContainer {
			logs[id] = log
		}
	}
	return logs
}

// aggregatedLogs returns the named log file of every container of app in
// the aggregated files of the cluster in dir (log aggregation is on by
// default, into localcluster.AppLogsDir), keyed by the aggregated file's
// node (address_port) and container id; with name "", one of each
// container's files. A file still being written is skipped.
func aggregatedLogs(dir string, app yarnid.ApplicationID, name string) map[string]map[string]string {
	out := map[string]map[string]string{}
	_ = filepath.WalkDir(localcluster.AppLogsDir(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) != app.String() || strings.HasSuffix(p, ".tmp") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil
		}
		var r aggregated.Reader
		if tr, err := aggregated.OpenTFile(f, st.Size(), st.ModTime()); err == nil {
			r = tr
		} else if ir, err := aggregated.OpenIndexed(f, st.Size()); err == nil {
			r = ir
		} else {
			return nil // not an aggregated file, or one being written
		}
		logs := map[string]string{}
		err = r.Walk(func(lf aggregated.LogFile, content io.Reader) error {
			if name != "" && lf.Name != name {
				return nil
			}
			b, err := io.ReadAll(content)
			logs[lf.ContainerID] = string(b)
			return err
		})
		if err == nil {
			out[filepath.Base(p)] = logs
		}
		return nil
	})
	return out
}

// dumpOnFailure logs knit-rm's and the knit-nodes' logs when t fails.
func dumpOnFailure(t *testing.T) { dumpLogsOnFailure(t, cluster.ControlPlane.Dir) }

// dumpLogsOnFailure logs knit-rm's and the knit-nodes' logs of the local
// cluster in dir when t fails.
func dumpLogsOnFailure(t *testing.T, dir string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "knit-*.log"))
		for _, p := range logs {
			if b, err := os.ReadFile(p); err == nil {
				t.Logf("%s:\n%s", filepath.Base(p), tail(string(b), 40))
			}
		}
	})
}

func TestDistributedShellRunsToFinishedWithEachContainersOutputInItsLog(t *testing.T) {
	dumpOnFailure(t)
	tests := []struct {
		name       string
		containers int
	}{
		{name: "one container", containers: 1},
		{name: "twenty containers", containers: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, app, err := distshell(t, "-shell_command", "echo", "-shell_args", "hello-from-knit",
				"-num_containers", fmt.Sprint(tt.containers), "-container_memory", "128", "-master_memory", "128")
			if err != nil {
				t.Fatalf("distshell: %v\n%s", err, out)
			}
			if !strings.Contains(out, "FINISHED") || !strings.Contains(out, "SUCCEEDED") {
				t.Errorf("distshell output lacks FINISHED/SUCCEEDED:\n%s", out)
			}
			logs := containerLogs(t, app, "stdout")
			if len(logs) != tt.containers {
				t.Fatalf("%d container stdout logs, want %d: %v", len(logs), tt.containers, logs)
			}
			for id, log := range logs {
				if log != "hello-from-knit\n" {
					t.Errorf("%s stdout %q, want the command's output", id, log)
				}
			}
			// Log aggregation is on by default: the nodes upload them.
			eventually.Within(t, 2*time.Minute, func(context.Context) error {
				n := 0
				for _, byContainer := range aggregatedLogs(cluster.ControlPlane.Dir, app, "stdout") {
					for _, log := range byContainer {
						if log == "hello-from-knit\n" {
							n++
						}
					}
				}
				if n != tt.containers {
					return fmt.Errorf("%d of %d containers' stdout aggregated", n, tt.containers)
				}
				return nil
			})
		})
	}
}

func TestDistributedShellWithAFailingCommandEndsFailedWithItsExitCode(t *testing.T) {
	dumpOnFailure(t)
	out, _, err := distshell(t, "-shell_command", "exit 3", "-num_containers", "1", "-container_memory", "128", "-master_memory", "128")
	if err == nil {
		t.Fatalf("distshell succeeded with a failing command:\n%s", out)
	}
	if !strings.Contains(out, "FAILED") || !strings.Contains(out, "exit status 3") {
		t.Errorf("output lacks FAILED and the exit status:\n%s", out)
	}
}

// submitShellAM submits an application whose AM is a shell command, with
// the given local resources, through Knit's client library.
func submitShellAM(t *testing.T, command string, attempts int32, resources map[string]*yarnpb.LocalResourceProto) (*client.RMClient, *yarnpb.ApplicationIdProto) {
	t.Helper()
	rmc, err := client.NewRMClient(knitRM(t).addrs.Client, client.RMConfig{User: "dsuser"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rmc.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	newApp, err := rmc.GetNewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clc := &yarnpb.ContainerLaunchContextProto{Command: []string{command}}
	for k, r := range resources {
		clc.LocalResources = append(clc.LocalResources, &yarnpb.StringLocalResourceMapProto{Key: proto.String(k), Value: r})
	}
	err = rmc.SubmitApplication(ctx, &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.GetApplicationId(),
		ApplicationName: proto.String("shell-am"),
		Queue:           proto.String("default"),
		MaxAppAttempts:  proto.Int32(attempts),
		AmContainerSpec: clc,
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rmc, newApp.GetApplicationId()
}

// waitFinal polls the report until the application has ended.
func waitFinal(t *testing.T, rmc *client.RMClient, app *yarnpb.ApplicationIdProto) *yarnpb.ApplicationReportProto {
	t.Helper()
	var r *yarnpb.ApplicationReportProto
	eventually.WithinEvery(t, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		var err error
		if r, err = rmc.GetApplicationReport(ctx, app); err != nil {
			t.Fatal(err)
		}
		switch r.GetYarnApplicationState() {
		case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
			return nil
		}
		return fmt.Errorf("application still %s", r.GetYarnApplicationState())
	})
	return r
}

func TestAnAMThatCrashesGetsASecondAttempt(t *testing.T) {
	dumpOnFailure(t)
	rmc, app := submitShellAM(t, "echo attempt $CONTAINER_ID 1><LOG_DIR>/stdout; exit 1", 2, nil)
	r := waitFinal(t, rmc, app)
	if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED {
		t.Errorf("state %s, want FAILED", r.GetYarnApplicationState())
	}
	attempts, err := rmc.GetApplicationAttempts(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 {
		t.Errorf("%d attempts, want 2", len(attempts))
	}
	if !strings.Contains(r.GetDiagnostics(), "exitCode: 1") {
		t.Errorf("diagnostics %q lack the AM's exit code", r.GetDiagnostics())
	}
	id, _ := yarnid.ApplicationIDFromProto(app)
	if logs := containerLogs(t, id, "stdout"); len(logs) != 2 {
		t.Errorf("AM logs %v, want one per attempt", logs)
	}
}

func TestLocalizationOfHTTPResourcesAndChangedSources(t *testing.T) {
	dumpOnFailure(t)
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "data.txt", modified, strings.NewReader("payload over http\n"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	resource := func(ts int64) *yarnpb.LocalResourceProto {
		host, port, _ := strings.Cut(u.Host, ":")
		var p int32
		fmt.Sscan(port, &p)
		return &yarnpb.LocalResourceProto{
			Resource:   &yarnpb.URLProto{Scheme: proto.String("http"), Host: proto.String(host), Port: proto.Int32(p), File: proto.String("/data.txt")},
			Size:       proto.Int64(int64(len("payload over http\n"))),
			Timestamp:  proto.Int64(ts),
			Type:       yarnpb.LocalResourceTypeProto_FILE.Enum(),
			Visibility: yarnpb.LocalResourceVisibilityProto_APPLICATION.Enum(),
		}
	}
	t.Run("an http resource is linked into the work folder", func(t *testing.T) {
		rmc, app := submitShellAM(t, "cat data.txt 1><LOG_DIR>/stdout", 1, map[string]*yarnpb.LocalResourceProto{"data.txt": resource(modified.UnixMilli())})
		waitFinal(t, rmc, app)
		id, _ := yarnid.ApplicationIDFromProto(app)
		logs := containerLogs(t, id, "stdout")
		if len(logs) != 1 {
			t.Fatalf("logs %v", logs)
		}
		for _, l := range logs {
			if l != "payload over http\n" {
				t.Errorf("stdout %q, want the resource's content", l)
			}
		}
	})
	t.Run("a resource whose timestamp changed fails with YARN's message", func(t *testing.T) {
		rmc, app := submitShellAM(t, "cat data.txt", 1, map[string]*yarnpb.LocalResourceProto{"data.txt": resource(modified.UnixMilli() - 60_000)})
		r := waitFinal(t, rmc, app)
		if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED || !strings.Contains(r.GetDiagnostics(), "changed on src filesystem") {
			t.Errorf("state %s diagnostics %q, want FAILED with YARN's message", r.GetYarnApplicationState(), r.GetDiagnostics())
		}
	})
}

func TestKillingAnApplicationStopsEveryPod(t *testing.T) {
	dumpOnFailure(t)
	rmc, app := submitShellAM(t, "sleep 600", 1, nil)
	id, _ := yarnid.ApplicationIDFromProto(app)
	sel := metav1.ListOptions{LabelSelector: "knit.io/application=" + id.String()}
	eventually.WithinEvery(t, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		r, err := rmc.GetApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := cluster.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if r.GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_ACCEPTED && len(pods.Items) > 0 && pods.Items[0].Status.Phase == "Running" {
			return nil
		}
		return fmt.Errorf("AM pod not running: state %s, %d pods", r.GetYarnApplicationState(), len(pods.Items))
	})
	if err := rmc.KillApplication(t.Context(), app, "killed by the test"); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods left after the kill", len(pods.Items))
		}
		return nil
	})
}
