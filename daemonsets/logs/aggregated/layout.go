package aggregated

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Configuration keys and defaults of log aggregation (YarnConfiguration).
const (
	ConfEnable            = "yarn.log-aggregation-enable"
	ConfRemoteDir         = "yarn.nodemanager.remote-app-log-dir"
	ConfRemoteDirSuffix   = "yarn.nodemanager.remote-app-log-dir-suffix"
	ConfFileFormats       = "yarn.log-aggregation.file-formats"
	DefaultRemoteDir      = "/tmp/logs"
	DefaultRemoteDirSufix = "logs"
)

// Layout is where one format's aggregated files go: the 3.4.1 bucket
// layout <root>/<user>/bucket-<suffix>/<app id % 10000, 4 digits>/<app id>/<host>_<port>.
type Layout struct {
	Format Format
	// Root is the remote root log folder (a path or URI).
	Root string
	// Suffix is the format's folder suffix, e.g. "logs-tfile".
	Suffix string
}

// Conf reads configuration values; ok is false for unset keys.
type Conf func(key string) (value string, ok bool)

// LayoutFor returns the layout of format f as
// LogAggregationFileController picks it: the per-format keys
// yarn.log-aggregation.<f>.remote-app-log-dir(-suffix) first, else the
// NodeManager's with "-<f lower case>" appended to the suffix.
func LayoutFor(f Format, conf Conf) Layout {
	get := func(k, def string) string {
		if v, ok := conf(k); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	root := get("yarn.log-aggregation."+string(f)+".remote-app-log-dir", get(ConfRemoteDir, DefaultRemoteDir))
	suffix := get("yarn.log-aggregation."+string(f)+".remote-app-log-dir-suffix", "")
	if suffix == "" {
		suffix = get(ConfRemoteDirSuffix, DefaultRemoteDirSufix) + "-" + strings.ToLower(string(f))
	}
	return Layout{Format: f, Root: root, Suffix: suffix}
}

// WriteFormat returns the format a NodeManager writes: the first of
// yarn.log-aggregation.file-formats (default TFile) that Knit knows.
func WriteFormat(conf Conf) (Format, error) {
	v, ok := conf(ConfFileFormats)
	if !ok || strings.TrimSpace(v) == "" {
		return FormatTFile, nil
	}
	for _, name := range strings.Split(v, ",") {
		switch name = strings.TrimSpace(name); name {
		case string(FormatTFile), string(FormatIndexed):
			return Format(name), nil
		case "":
		default:
			return "", fmt.Errorf("%s: log aggregation file format %q is not supported", ConfFileFormats, name)
		}
	}
	return FormatTFile, nil
}

// ReadFormats returns every format listed, in order, for readers.
func ReadFormats(conf Conf) []Format {
	v, ok := conf(ConfFileFormats)
	if !ok || strings.TrimSpace(v) == "" {
		return []Format{FormatTFile}
	}
	var out []Format
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name == string(FormatTFile) || name == string(FormatIndexed) {
			out = append(out, Format(name))
		}
	}
	return out
}

// AppDir returns <root>/<user>/bucket-<suffix>/<bucket>/<appID>; appID
// must be application_<cluster ts>_<seq>.
func (l Layout) AppDir(user, appID string) (string, error) {
	i := strings.LastIndexByte(appID, '_')
	seq, err := strconv.Atoi(appID[i+1:])
	if i < 0 || err != nil || !strings.HasPrefix(appID, "application_") {
		return "", fmt.Errorf("bad application id %q", appID)
	}
	return joinURI(l.Root, user, "bucket-"+l.Suffix, fmt.Sprintf("%04d", seq%10000), appID), nil
}

// NodeFile is LogAggregationUtils.getNodeString: the NodeId with ':'
// replaced by '_'.
func NodeFile(nodeID string) string { return strings.ReplaceAll(nodeID, ":", "_") }

// joinURI joins path elements onto a root that may be a URI
// (hdfs://nn:8020/x, s3a://bucket/x) or a plain path.
func joinURI(root string, elem ...string) string {
	if i := strings.Index(root, "://"); i >= 0 {
		rest := root[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return root[:i+3] + rest + path.Join(append([]string{"/"}, elem...)...)
		}
		return root[:i+3] + rest[:j] + path.Join(append([]string{rest[j:]}, elem...)...)
	}
	return path.Join(append([]string{root}, elem...)...)
}
