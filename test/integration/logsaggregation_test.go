package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// TestLogsAreAggregatedToS3AndReadWithKnitLogs runs a local cluster whose
// yarn-site.xml turns log aggregation on, into an S3-compatible store the
// test serves, and ACLs on: a running application's logs are refused to a
// user without VIEW_APP, and once it ends `knit logs` prints them from the
// aggregated file, which the node no longer keeps.
func TestLogsAreAggregatedToS3AndReadWithKnitLogs(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	s3srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer s3srv.Close()

	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.log-aggregation-enable", Value: "true"},
		hadoopconf.Property{Name: "yarn.nodemanager.remote-app-log-dir", Value: "s3a://logs/app-logs"},
		hadoopconf.Property{Name: "yarn.acl.enable", Value: "true"},
		hadoopconf.Property{Name: "yarn.admin.acl", Value: "knitadmin"})
	writeConfFile(t, filepath.Join(confDir, "core-site.xml"),
		hadoopconf.Property{Name: "fs.s3a.endpoint", Value: s3srv.URL},
		hadoopconf.Property{Name: "fs.s3a.path.style.access", Value: "true"},
		hadoopconf.Property{Name: "fs.s3a.access.key", Value: "id"},
		hadoopconf.Property{Name: "fs.s3a.secret.key", Value: "secret"})
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "knit-node-*.log"))
			for _, p := range logs {
				if b, err := os.ReadFile(p); err == nil {
					t.Logf("%s:\n%s", filepath.Base(p), tail(string(b), 30))
				}
			}
		}
	})
	env := func(user string) []string {
		return append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "USER="+user, "HADOOP_USER_NAME="+user)
	}
	knitLogs := func(ctx context.Context, user string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "knit"), append([]string{"logs"}, args...)...)
		cmd.Env = env(user)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return stdout.String(), err
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ds := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "15",
		"-num_containers", "1", "-container_memory", "128", "-master_memory", "128")
	ds.Env = env("dsuser")
	var dsOut lockedBuffer
	ds.Stdout, ds.Stderr = &dsOut, &dsOut
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	var app string
	eventually.True(t, time.Minute, "distshell to submit", func() bool {
		if m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(dsOut.String()); m != nil {
			app = m[1]
		}
		return app != ""
	})
	// While it runs, its logs are the node's: the owner reads them, another
	// user is refused by the node.
	var running string
	eventually.Within(t, time.Minute, func(ctx context.Context) error {
		var err error
		running, err = knitLogs(ctx, "dsuser", "-applicationId", app, "-log_files", "directory.info")
		if err != nil {
			return err
		}
		if strings.Count(running, "\nLogType:directory.info\n") < 2 {
			return errors.New("not every container yet:\n" + running)
		}
		return nil
	})
	m := regexp.MustCompile(`Container: (\S+) on `).FindStringSubmatch(running)
	if m == nil {
		t.Fatalf("no container in:\n%s", running)
	}
	web := nodeWebAddress(t, dir, app)
	for user, want := range map[string]int{"dsuser": http.StatusOK, "mallory": http.StatusForbidden} {
		resp, err := http.Get("http://" + web + "/ws/v1/node/containers/" + m[1] + "/logs?user.name=" + user)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s reading the log list: %d, want %d", user, resp.StatusCode, want)
		}
	}
	if err := ds.Wait(); err != nil {
		t.Fatalf("distshell: %v\n%s", err, dsOut.String())
	}

	var out string
	eventually.Within(t, 2*time.Minute, func(ctx context.Context) error {
		var err error
		out, err = knitLogs(ctx, "dsuser", "-applicationId", app)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "LogAggregationType: AGGREGATED") {
			return errors.New("not aggregated yet:\n" + out)
		}
		return nil
	})
	for _, want := range []string{"LogType:stdout\n", "LogType:AppMaster.stderr\n", "registered application master"} {
		if !strings.Contains(out, want) {
			t.Errorf("knit logs lacks %q:\n%s", want, out)
		}
	}
	objects, err := backend.ListBucket("logs", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects.Contents {
		keys = append(keys, o.Key)
	}
	if len(keys) != 1 || !regexp.MustCompile(`^app-logs/dsuser/bucket-logs-tfile/\d{4}/`+app+`/127\.0\.1\.1_\d+$`).MatchString(keys[0]) {
		t.Errorf("objects in the store: %v", keys)
	}
	// The RM's report says what the node published.
	eventually.Within(t, time.Minute, func(ctx context.Context) error {
		if st := logAggregationStatus(t, dir, app); st != yarnpb.LogAggregationStatusProto_LOG_SUCCEEDED {
			return fmt.Errorf("log aggregation status %v", st)
		}
		return nil
	})
	leftovers, _ := filepath.Glob(filepath.Join(localcluster.NodeLogDir(dir, "node-1"), app))
	if len(leftovers) != 0 {
		t.Errorf("the node kept its copy: %v", leftovers)
	}
}

// logAggregationStatus is app's status in the RM's report to its owner.
func logAggregationStatus(t *testing.T, dir, app string) yarnpb.LogAggregationStatusProto {
	t.Helper()
	ctx, rm, id := dsuserRM(t, dir, app)
	r, err := rm.GetApplicationReport(ctx, &yarnpb.GetApplicationReportRequestProto{ApplicationId: id.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetApplicationReport().GetLogAggregationStatus()
}

// nodeWebAddress is the NodeManager web address of app's containers, as
// the RM reports it.
func nodeWebAddress(t *testing.T, dir, app string) string {
	t.Helper()
	ctx, rm, id := dsuserRM(t, dir, app)
	attempts, err := rm.GetApplicationAttempts(ctx, &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: id.Proto()})
	if err != nil || len(attempts.GetApplicationAttempts()) == 0 {
		t.Fatalf("attempts of %s: %v", app, err)
	}
	cs, err := rm.GetContainers(ctx, &yarnpb.GetContainersRequestProto{ApplicationAttemptId: attempts.GetApplicationAttempts()[0].GetApplicationAttemptId()})
	if err != nil || len(cs.GetContainers()) == 0 {
		t.Fatalf("containers of %s: %v", app, err)
	}
	return strings.TrimPrefix(cs.GetContainers()[0].GetNodeHttpAddress(), "http://")
}

// dsuserRM is the RM of the cluster in dir as dsuser, for calls bounded by
// the returned context, and app's id.
func dsuserRM(t *testing.T, dir, app string) (context.Context, *yarnrpc.ApplicationClientProtocolClient, yarnid.ApplicationID) {
	t.Helper()
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := ipc.Dial(ctx, settings.Address, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "dsuser", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	id, err := yarnid.ParseApplicationID(app)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, yarnrpc.NewApplicationClientProtocolClient(c), id
}

// TestRollingAggregationUploadsWhileTheApplicationRuns runs a local cluster
// (aggregation into its own folder, as by default) whose nodes roll every
// 2 s (debug mode lifts the hour's minimum), and a distshell job that asks
// for the rolling of directory.info: while it runs, the node uploads each
// container's directory.info into a <node>_<ms> file and deletes it from
// the node; once it ends, `knit logs` prints the rolled and the final
// files together.
func TestRollingAggregationUploadsWhileTheApplicationRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.nodemanager.log-aggregation.roll-monitoring-interval-seconds", Value: "2"},
		hadoopconf.Property{Name: "yarn.nodemanager.log-aggregation.debug-enabled", Value: "true"})
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	env := append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "USER=dsuser", "HADOOP_USER_NAME=dsuser")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ds := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "20",
		"-num_containers", "1", "-container_memory", "128", "-master_memory", "128", "-rolling_log_pattern", `^directory\.info$`)
	ds.Env = env
	var dsOut lockedBuffer
	ds.Stdout, ds.Stderr = &dsOut, &dsOut
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	var app string
	eventually.True(t, time.Minute, "distshell to submit", func() bool {
		if m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(dsOut.String()); m != nil {
			app = m[1]
		}
		return app != ""
	})
	rolledName := regexp.MustCompile(`^127\.0\.1\.1_\d+_\d{13}$`)
	rolled := func() []string {
		var out []string
		_ = filepath.WalkDir(localcluster.AppLogsDir(dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) == app && rolledName.MatchString(d.Name()) {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	// Both containers' directory.info are rolled while the job runs (the
	// task's sleep keeps it running).
	eventually.Within(t, 2*time.Minute, func(context.Context) error {
		left, _ := filepath.Glob(filepath.Join(localcluster.NodeLogDir(dir, "node-1"), app, "container_*", "directory.info"))
		if files := rolled(); len(files) == 0 || len(left) != 0 {
			return fmt.Errorf("rolled files %v; directory.info left on the node %v", files, left)
		}
		return nil
	})
	if err := ds.Wait(); err != nil {
		t.Fatalf("distshell: %v\n%s", err, dsOut.String())
	}
	var out string
	eventually.Within(t, 2*time.Minute, func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "knit"), "logs", "-applicationId", app)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		out = string(b)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if !strings.Contains(out, "LogType:AppMaster.stderr\n") || strings.Count(out, "LogType:directory.info\n") < 2 {
			return errors.New("not every log aggregated yet:\n" + out)
		}
		return nil
	})
	if n := len(rolled()); n < 2 {
		t.Errorf("%d files in the application's folder, want a rolled one and the final one", n)
	}
}
