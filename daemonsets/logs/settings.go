package logs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/hadoopconf"
)

// Settings are the node's log settings, read from its Hadoop
// configuration.
type Settings struct {
	Access       Access
	RMWebAddress string
	// Aggregate is yarn.log-aggregation-enable.
	Aggregate bool
	// Retain is yarn.nodemanager.log.retain-seconds (default 3 hours):
	// without aggregation, how long logs stay after their application.
	Retain time.Duration
	Format aggregated.Format
	Layout aggregated.Layout
	// RollInterval is how often the logs of running applications that
	// asked for it (a rolled-logs include pattern) are aggregated; zero
	// for never, as LogAggregationService.calculateRollingMonitorInterval
	// reads it.
	RollInterval time.Duration
	// FilesPerApp is yarn.nodemanager.log-aggregation.num-log-files-per-app
	// (30; a value under 1 means 30, as the file controllers read it).
	FilesPerApp int
}

// Rolling aggregation's keys and YARN's defaults.
const (
	confRollInterval    = "yarn.nodemanager.log-aggregation.roll-monitoring-interval-seconds"
	confRollIntervalMin = "yarn.nodemanager.log-aggregation.roll-monitoring-interval-seconds.min"
	confDebugEnabled    = "yarn.nodemanager.log-aggregation.debug-enabled"
	confFilesPerApp     = "yarn.nodemanager.log-aggregation.num-log-files-per-app"
	defaultRollMin      = 3600
)

// SettingsFromHadoop reads yarn.acl.enable, yarn.admin.acl (default "*"),
// yarn.resourcemanager.webapp.address and the log aggregation keys.
func SettingsFromHadoop(conf aggregated.Conf) (Settings, error) {
	get := func(k, def string) string {
		if v, ok := conf(k); ok {
			return strings.TrimSpace(v)
		}
		return def
	}
	var s Settings
	s.Access.Enabled = strings.EqualFold(get("yarn.acl.enable", "false"), "true")
	s.Access.Admin = acl.Parse(get("yarn.admin.acl", "*"))
	s.RMWebAddress = get("yarn.resourcemanager.webapp.address", "")
	s.Aggregate = strings.EqualFold(get(aggregated.ConfEnable, "false"), "true")
	secs, err := hadoopconf.ParseJavaInt(get("yarn.nodemanager.log.retain-seconds", "10800"), 64)
	if err != nil {
		return s, fmt.Errorf("yarn.nodemanager.log.retain-seconds: %w", err)
	}
	s.Retain = time.Duration(secs) * time.Second
	f, err := aggregated.WriteFormat(conf)
	if err != nil {
		return s, err
	}
	s.Format = f
	s.Layout = aggregated.LayoutFor(f, conf)
	if s.RollInterval, err = rollInterval(get); err != nil {
		return s, err
	}
	n, err := hadoopconf.ParseJavaInt(get(confFilesPerApp, strconv.Itoa(defaultFilesPerApp)), 32)
	if err != nil {
		return s, fmt.Errorf("%s: %w", confFilesPerApp, err)
	}
	s.FilesPerApp = int(max(n, 0))
	return s, nil
}

// rollInterval is the rolling interval: off when not positive, and never
// under its minimum (an hour) unless debugging is on.
func rollInterval(get func(k, def string) string) (time.Duration, error) {
	secs, err := hadoopconf.ParseJavaInt(get(confRollInterval, "-1"), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", confRollInterval, err)
	}
	if secs <= 0 {
		return 0, nil
	}
	minSecs, err := hadoopconf.ParseJavaInt(get(confRollIntervalMin, strconv.Itoa(defaultRollMin)), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", confRollIntervalMin, err)
	}
	if secs < minSecs && !strings.EqualFold(get(confDebugEnabled, "false"), "true") {
		secs = minSecs
	}
	return time.Duration(secs) * time.Second, nil
}

// StoreFor returns the Store of a remote app log dir: a plain path or a
// file:// URI (LocalStore), or s3a:// and s3:// (S3Store, configured by
// the fs.s3a.* keys). hdfs:// is not written yet.
func StoreFor(root string, conf func(string) (string, bool)) (Store, error) {
	switch {
	case strings.HasPrefix(root, "s3a://"), strings.HasPrefix(root, "s3://"):
		return NewS3Store(S3ConfigFromHadoop(conf)), nil
	}
	if _, err := localPath(root); err != nil {
		return nil, fmt.Errorf("remote app log dir %s: only local paths, file://, s3a:// and s3:// are written for now", root)
	}
	return LocalStore{}, nil
}

// AggregatedFromHadoop is where the log pages read aggregated logs, every
// format yarn.log-aggregation.file-formats lists; nil when aggregation is
// off or its store cannot be read.
func AggregatedFromHadoop(conf aggregated.Conf) (*Aggregated, error) {
	s, err := SettingsFromHadoop(conf)
	if err != nil || !s.Aggregate {
		return nil, err
	}
	l, err := ListerFor(s.Layout.Root, conf)
	if err != nil {
		return nil, err
	}
	a := &Aggregated{Lister: l}
	for _, f := range aggregated.ReadFormats(conf) {
		a.Layouts = append(a.Layouts, aggregated.LayoutFor(f, conf))
	}
	return a, nil
}
