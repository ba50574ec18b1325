package logs

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	nodelogs "github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

type fakeRM struct {
	state      yarnpb.YarnApplicationStateProto
	user       string
	containers []*yarnpb.ContainerReportProto
}

func (f *fakeRM) GetApplicationReport(_ context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
	return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
		ApplicationId: req.GetApplicationId(), User: proto.String(f.user), YarnApplicationState: f.state.Enum(),
	}}, nil
}

func (f *fakeRM) GetApplicationAttempts(_ context.Context, req *yarnpb.GetApplicationAttemptsRequestProto) (*yarnpb.GetApplicationAttemptsResponseProto, error) {
	app, _ := yarnid.ApplicationIDFromProto(req.GetApplicationId())
	attempt := yarnid.AttemptID{App: app, ID: 1}
	return &yarnpb.GetApplicationAttemptsResponseProto{ApplicationAttempts: []*yarnpb.ApplicationAttemptReportProto{
		{ApplicationAttemptId: attempt.Proto(), AmContainerId: yarnid.ContainerID{Attempt: attempt, Sequence: 1}.Proto()},
	}}, nil
}

func (f *fakeRM) GetContainers(context.Context, *yarnpb.GetContainersRequestProto) (*yarnpb.GetContainersResponseProto, error) {
	return &yarnpb.GetContainersResponseProto{Containers: f.containers}, nil
}

func conf(m map[string]string) aggregated.Conf {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// layOut copies a recorded aggregated file to where the 3.4.1 layout puts
// it under a fresh remote app log dir.
func layOut(t *testing.T, format aggregated.Format, dir, app string, mtime time.Time) aggregated.Conf {
	t.Helper()
	root := t.TempDir()
	c := conf(map[string]string{aggregated.ConfRemoteDir: "file://" + root, aggregated.ConfFileFormats: string(format)})
	appDir, err := aggregated.LayoutFor(format, c).AppDir("root", app)
	if err != nil {
		t.Fatal(err)
	}
	local := strings.TrimPrefix(appDir, "file://")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(recordings.Path(t, "hadoop-logs", dir, app+".localhost_8241"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(local, "localhost_8241")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAggregatedLogsPrintAsYarnLogs(t *testing.T) {
	for _, tc := range []struct {
		format aggregated.Format
		dir    string
		app    string
		cid    string
	}{
		{aggregated.FormatTFile, "tfile", "application_1795680442682_0005", "container_1795680442682_0005_01_000002"},
		{aggregated.FormatIndexed, "indexed", "application_1795680855678_0001", "container_1795680855678_0001_01_000002"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			c := layOut(t, tc.format, tc.dir, tc.app, time.Date(2026, 11, 26, 8, 12, 35, 0, time.UTC))
			cfg := Config{RM: &fakeRM{state: yarnpb.YarnApplicationStateProto_FINISHED, user: "root"}, User: "root", Conf: c, Location: time.UTC}
			for _, cmd := range []struct {
				args []string
				file string
			}{
				{[]string{"-applicationId", tc.app}, "yarn-logs-app.stdout"},
				{[]string{"-applicationId", tc.app, "-show_application_log_info"}, "yarn-logs-app-show_application_log_info.stdout"},
				{[]string{"-applicationId", tc.app, "-containerId", tc.cid, "-log_files", "stdout"}, "yarn-logs-container-stdout.stdout"},
			} {
				var out, errOut bytes.Buffer
				if code := Run(t.Context(), cmd.args, &out, &errOut, cfg); code != 0 {
					t.Fatalf("%v: exit %d: %s", cmd.args, code, errOut.String())
				}
				want, err := os.ReadFile(recordings.Path(t, "hadoop-logs", tc.dir, cmd.file))
				if err != nil {
					t.Fatal(err)
				}
				if out.String() != string(want) {
					t.Errorf("%v: output differs from the recorded yarn logs", cmd.args)
				}
			}
		})
	}
}

func TestRunningApplicationLogsComeFromTheNodes(t *testing.T) {
	const app, cid = "application_1795680442682_0004", "container_1795680442682_0004_01_000005"
	dirs := nodelogs.Dirs{t.TempDir()}
	dir := filepath.Join(dirs[0], app, cid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stdout"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dirs.SetRecord(app, nodelogs.AppRecord{Owner: "root"}); err != nil {
		t.Fatal(err)
	}
	src := staticSource{{ID: cid, App: app, User: "root", State: "RUNNING"}}
	e, err := nodelogs.New(nodelogs.Config{NodeID: "localhost:8241", WebAddress: "x", Dirs: dirs, Source: src,
		Access: nodelogs.Access{Enabled: true, Admin: acl.Parse(" "), Groups: func(string) []string { return nil }}, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	id, _ := yarnid.ParseContainerID(cid)
	rm := &fakeRM{state: yarnpb.YarnApplicationStateProto_RUNNING, user: "root", containers: []*yarnpb.ContainerReportProto{
		{ContainerId: id.Proto(), NodeHttpAddress: proto.String(srv.URL), NodeId: &yarnpb.NodeIdProto{Host: proto.String("localhost"), Port: proto.Int32(8241)}},
	}}
	var out, errOut bytes.Buffer
	if code := Run(t.Context(), []string{"-applicationId", app}, &out, &errOut, Config{RM: rm, User: "root", Location: time.UTC}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "Container: "+cid+" on localhost:8241\nLogAggregationType: LOCAL\n") || !strings.Contains(out.String(), "LogContents:\nhello\nEnd of LogType:stdout.This log file belongs to a running container") {
		t.Errorf("output:\n%s", out.String())
	}
	// Ended, with no aggregated file: the node still serves the logs.
	rm.state = yarnpb.YarnApplicationStateProto_FINISHED
	out.Reset()
	if code := Run(t.Context(), []string{"-applicationId", app}, &out, &errOut, Config{RM: rm, User: "root", Location: time.UTC,
		Conf: conf(map[string]string{aggregated.ConfRemoteDir: t.TempDir()})}); code != 0 {
		t.Fatalf("ended: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "LogContents:\nhello\nEnd of LogType:stdout.") {
		t.Errorf("ended application's logs from the node:\n%s", out.String())
	}
	rm.state = yarnpb.YarnApplicationStateProto_RUNNING
	// Another user, not on the application's ACL, is refused.
	out.Reset()
	errOut.Reset()
	if code := Run(t.Context(), []string{"-applicationId", app}, &out, &errOut, Config{RM: rm, User: "mallory"}); code == 0 || !strings.Contains(errOut.String(), "403") {
		t.Errorf("mallory: exit %d, %s", code, errOut.String())
	}
}

type staticSource []nodelogs.Container

func (s staticSource) Containers() []nodelogs.Container { return s }

func TestOutAMAndContainerInfoOptions(t *testing.T) {
	const app = "application_1795680442682_0005"
	c := layOut(t, aggregated.FormatTFile, "tfile", app, time.Date(2026, 11, 26, 8, 12, 35, 0, time.UTC))
	cfg := Config{RM: &fakeRM{state: yarnpb.YarnApplicationStateProto_FINISHED, user: "root"}, User: "root", Conf: c, Location: time.UTC}
	full, err := os.ReadFile(recordings.Path(t, "hadoop-logs", "tfile", "yarn-logs-app.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	// -am 1 prints the AM container's part of the full output.
	var out, errOut bytes.Buffer
	if code := Run(t.Context(), []string{"-applicationId", app, "-am", "1"}, &out, &errOut, cfg); code != 0 {
		t.Fatalf("-am: exit %d: %s", code, errOut.String())
	}
	am := string(full[strings.Index(string(full), "Container: container_1795680442682_0005_01_000001"):])
	if out.String() != am {
		t.Errorf("-am 1 output is not the AM container's part of the recorded output")
	}
	// -out writes <out>/<node file>/<container>, together the full output.
	dir := t.TempDir()
	out.Reset()
	if code := Run(t.Context(), []string{"-applicationId", app, "-out", dir}, &out, &errOut, cfg); code != 0 {
		t.Fatalf("-out: exit %d: %s", code, errOut.String())
	}
	var joined string
	for _, seq := range []string{"000003", "000002", "000001"} {
		b, err := os.ReadFile(filepath.Join(dir, "localhost_8241", "container_1795680442682_0005_01_"+seq))
		if err != nil {
			t.Fatal(err)
		}
		joined += string(b)
	}
	if joined != string(full) {
		t.Errorf("-out files do not hold the recorded output")
	}
	out.Reset()
	if code := Run(t.Context(), []string{"-applicationId", app, "-containerId", "container_1795680442682_0005_01_000002", "-show_container_log_info"}, &out, &errOut, cfg); code != 0 {
		t.Fatalf("-show_container_log_info: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "                        stdout\t                             4\tThu Nov 26 08:12:35 +0000 2026\t                    AGGREGATED\n") {
		t.Errorf("-show_container_log_info:\n%s", out.String())
	}
}

func TestLogFilesPattern(t *testing.T) {
	const app = "application_1795680442682_0005"
	c := layOut(t, aggregated.FormatTFile, "tfile", app, time.Date(2026, 11, 26, 8, 12, 35, 0, time.UTC))
	cfg := Config{RM: &fakeRM{state: yarnpb.YarnApplicationStateProto_FINISHED, user: "root"}, User: "root", Conf: c, Location: time.UTC}
	var out, errOut bytes.Buffer
	if code := Run(t.Context(), []string{"-applicationId", app, "-log_files_pattern", "^std,AppMaster"}, &out, &errOut, cfg); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := regexp.MustCompile(`(?m)^LogType:(.*)$`).FindAllStringSubmatch(out.String(), -1)
	var names []string
	for _, m := range got {
		names = append(names, m[1])
	}
	if want := "stderr stdout stderr stdout AppMaster.stderr AppMaster.stdout"; strings.Join(names, " ") != want {
		t.Errorf("files %v, want %s", names, want)
	}
	if code := Run(t.Context(), []string{"-applicationId", app, "-log_files", "stdout", "-log_files_pattern", "x"}, &out, &errOut, cfg); code == 0 {
		t.Error("-log_files with -log_files_pattern accepted")
	}
}
