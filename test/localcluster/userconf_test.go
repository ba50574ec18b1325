package localcluster

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knitdev/knit/hadoopconf"
)

func writeSite(t *testing.T, path string, props ...hadoopconf.Property) {
	t.Helper()
	var buf bytes.Buffer
	if err := hadoopconf.Write(&buf, props); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfDirIsMergedAndLinkedIntoTheClientFolder(t *testing.T) {
	dir, user := t.TempDir(), t.TempDir()
	writeSite(t, filepath.Join(user, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.resourcemanager.address", Value: "elsewhere:1"},
		hadoopconf.Property{Name: "yarn.resourcemanager.max-completed-applications", Value: "7"},
		hadoopconf.Property{Name: "yarn.log-aggregation-enable", Value: "false"})
	writeSite(t, filepath.Join(user, "capacity-scheduler.xml"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.queues", Value: "alpha"})
	writeSite(t, filepath.Join(user, "mapred-site.xml"),
		hadoopconf.Property{Name: "mapreduce.framework.name", Value: "yarn"})

	u, err := readUserConf(user)
	if err != nil {
		t.Fatal(err)
	}
	a := RMAddresses{Client: "127.0.0.1:1", Scheduler: "127.0.0.1:2", Admin: "127.0.0.1:3", Web: "127.0.0.1:4"}
	confDir, err := writeRMConf(slog.New(slog.DiscardHandler), dir, []RMAddresses{a}, nodePorts{}, u, []hadoopconf.Property{{Name: "test.extra", Value: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if confDir != HadoopConfDir(dir) {
		t.Errorf("knit-rm reads %s, want the client folder %s", confDir, HadoopConfDir(dir))
	}
	c := hadoopconf.New(hadoopconf.Options{})
	for _, name := range []string{"yarn-site.xml", "capacity-scheduler.xml", "mapred-site.xml"} {
		if err := c.AddFile(filepath.Join(confDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"yarn.resourcemanager.address":                    a.Client, // the cluster's
		"yarn.resourcemanager.max-completed-applications": "7",      // the user's over the local default
		"yarn.log-aggregation-enable":                     "false",  // the user's over the local default
		"yarn.nodemanager.remote-app-log-dir":             appLogsURI(dir),
		"yarn.timeline-service.enabled":                   "false",
		"test.extra":                                      "x",
		"yarn.scheduler.capacity.root.queues":             "alpha",
		"mapreduce.framework.name":                        "yarn",
	} {
		if got, _ := c.Raw(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// An edit in the conf dir is what the RM reads next.
	writeSite(t, filepath.Join(user, "capacity-scheduler.xml"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.queues", Value: "beta"})
	c = hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(filepath.Join(confDir, "capacity-scheduler.xml")); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Raw("yarn.scheduler.capacity.root.queues"); got != "beta" {
		t.Errorf("after an edit in the conf dir the RM would read queues %q, want beta", got)
	}

	// A start without --conf-dir keeps none of its files, and aggregates
	// logs into the cluster's folder.
	if _, err := writeRMConf(slog.New(slog.DiscardHandler), dir, []RMAddresses{a}, nodePorts{}, userConf{}, nil); err != nil {
		t.Fatal(err)
	}
	c = hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(filepath.Join(confDir, "yarn-site.xml")); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Raw("yarn.log-aggregation-enable"); got != "true" {
		t.Errorf("log aggregation by default: %q, want true", got)
	}
	if got, _ := c.Raw("yarn.nodemanager.remote-app-log-dir"); got != "file://"+AppLogsDir(dir) {
		t.Errorf("remote app log dir by default: %q, want file://%s", got, AppLogsDir(dir))
	}
	if _, err := os.Lstat(filepath.Join(confDir, "capacity-scheduler.xml")); !os.IsNotExist(err) {
		t.Errorf("a conf dir's capacity-scheduler.xml outlived a start without it: %v", err)
	}
}

func TestCapacitySchedulerPutInTheClientFolderIsUsedOrRefused(t *testing.T) {
	dir, user := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(HadoopConfDir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSite(t, filepath.Join(HadoopConfDir(dir), "capacity-scheduler.xml"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.queues", Value: "byhand"})
	// Alone, it is the RM's: knit-rm reads the client folder.
	if err := CheckConfDir(dir, ""); err != nil {
		t.Errorf("a hand-placed capacity-scheduler.xml without --conf-dir: %v", err)
	}
	if RMConfDir(dir) != HadoopConfDir(dir) {
		t.Errorf("knit-rm reads %s, not the client folder", RMConfDir(dir))
	}
	// With a conf dir that has one too, the start is refused.
	writeSite(t, filepath.Join(user, "capacity-scheduler.xml"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.root.queues", Value: "fromdir"})
	err := CheckConfDir(dir, user)
	if err == nil || !strings.Contains(err.Error(), "capacity-scheduler.xml was put in") {
		t.Errorf("conflicting capacity-scheduler.xml files: %v, want a refusal naming the file", err)
	}
	// A capacity-scheduler.xml left in the old rm-conf/ is refused, not ignored.
	old := t.TempDir()
	if err := os.MkdirAll(filepath.Join(old, "rm-conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSite(t, filepath.Join(old, "rm-conf", "capacity-scheduler.xml"))
	if err := CheckConfDir(old, ""); err == nil || !strings.Contains(err.Error(), "no longer read") {
		t.Errorf("rm-conf/capacity-scheduler.xml: %v, want a refusal", err)
	}
}
