package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// TestAggregatedLogsGoAfterTheRetainTime runs a local cluster with
// yarn.log-aggregation.retain-seconds set: an ended application's logs are
// aggregated into the cluster's app-logs folder, and knit-rm deletes its
// folder once it is older than the retain time.
func TestAggregatedLogsGoAfterTheRetainTime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.log-aggregation.retain-seconds", Value: "15"},
		hadoopconf.Property{Name: "yarn.log-aggregation.retain-check-interval-seconds", Value: "1"})
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ds := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "true",
		"-num_containers", "1", "-container_memory", "128", "-master_memory", "128")
	ds.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "USER=dsuser", "HADOOP_USER_NAME=dsuser")
	out, err := ds.CombinedOutput()
	if err != nil {
		t.Fatalf("distshell: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no application in:\n%s", out)
	}
	pattern := filepath.Join(localcluster.AppLogsDir(dir), "dsuser", "bucket-*", "*", string(m[1]))
	var appDir string
	eventually.True(t, 2*time.Minute, "the application's logs to be aggregated", func() bool {
		found, _ := filepath.Glob(pattern)
		if len(found) == 1 {
			appDir = found[0]
		}
		return appDir != ""
	})
	eventually.True(t, 2*time.Minute, "knit-rm to delete the aggregated logs after the retain time", func() bool {
		_, err := os.Stat(appDir)
		return errors.Is(err, os.ErrNotExist)
	})
}
