package logs

import (
	"bytes"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// TestAggregatedLogsFromS3 reads the recorded TFile file from an
// S3-compatible store at its 3.4.1 layout path, through ranged reads.
func TestAggregatedLogsFromS3(t *testing.T) {
	const app = "application_1795680442682_0005"
	mtime := time.Date(2026, 11, 26, 8, 12, 35, 0, time.UTC)
	backend := s3mem.New(s3mem.WithTimeSource(gofakes3.FixedTimeSource(mtime)))
	if err := backend.CreateBucket("logs"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(recordings.Path(t, "hadoop-logs", "tfile", app+".localhost_8241"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backend.PutObject("logs", "app-logs/root/bucket-logs-tfile/0005/"+app+"/localhost_8241", nil, bytes.NewReader(b), int64(len(b)), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	c := conf(map[string]string{
		aggregated.ConfRemoteDir: "s3a://logs/app-logs", "fs.s3a.endpoint": srv.URL, "fs.s3a.path.style.access": "true",
		"fs.s3a.access.key": "id", "fs.s3a.secret.key": "secret",
	})
	var out, errOut bytes.Buffer
	cfg := Config{RM: &fakeRM{state: yarnpb.YarnApplicationStateProto_FINISHED, user: "root"}, User: "root", Conf: c, Location: time.UTC}
	if code := Run(t.Context(), []string{"-applicationId", app}, &out, &errOut, cfg); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want, err := os.ReadFile(recordings.Path(t, "hadoop-logs", "tfile", "yarn-logs-app.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("output from S3 differs from the recorded yarn logs:\n%.600s", out.String())
	}
}
