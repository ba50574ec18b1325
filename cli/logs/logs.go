// Package logs is `knit logs`, Hadoop 3.4's `yarn logs` (LogsCLI) for
// Knit: the logs of a running application come from the NodeManager web
// services of its containers' nodes (knit-node), those of a finished one
// from the aggregated files in yarn.nodemanager.remote-app-log-dir, read
// with daemonsets/logs/aggregated. The output is yarn's, byte for byte.
package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	nodelogs "github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// RM is the part of ApplicationClientProtocol `logs` calls.
type RM interface {
	GetApplicationReport(ctx context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error)
	GetApplicationAttempts(ctx context.Context, req *yarnpb.GetApplicationAttemptsRequestProto) (*yarnpb.GetApplicationAttemptsResponseProto, error)
	GetContainers(ctx context.Context, req *yarnpb.GetContainersRequestProto) (*yarnpb.GetContainersResponseProto, error)
}

// Config is what the command needs besides its arguments.
type Config struct {
	RM RM
	// User is the caller (SIMPLE auth), sent to the nodes as user.name.
	User string
	// Conf reads the client's Hadoop configuration (remote app log dir,
	// file formats).
	Conf aggregated.Conf
	// HTTP fetches from the nodes; nil means http.DefaultClient.
	HTTP *http.Client
	// Location prints times; nil means time.Local.
	Location *time.Location
}

// options are the command line, as LogsCLI names them.
type options struct {
	app, container, owner string
	files                 []string
	size                  int64
	showAppInfo           bool
	showContainerInfo     bool
	// patterns is -log_files_pattern: regular expressions any of which a
	// file name contains.
	patterns []*regexp.Regexp
	// outDir is -out: one file per container under <out>/<node>/.
	outDir string
	// am is -am: AM attempts, 1-based, -1 for the last.
	am []int
}

const usage = `usage: knit logs -applicationId <application ID> [-containerId <container ID>] [-log_files <file1,file2> | -log_files_pattern <regex,...>] [-size <bytes>]
       [-appOwner <user>] [-am <AM numbers, -1 for the last>] [-out <dir>] [-show_application_log_info] [-show_container_log_info]`

func parse(args []string) (options, error) {
	o := options{size: math.MaxInt64}
	for i := 0; i < len(args); i++ {
		name := strings.TrimLeft(args[i], "-")
		switch name {
		case "show_application_log_info":
			o.showAppInfo = true
			continue
		case "show_container_log_info":
			o.showContainerInfo = true
			continue
		}
		if i+1 >= len(args) {
			return o, fmt.Errorf("option %s needs a value", args[i])
		}
		v := args[i+1]
		i++
		switch name {
		case "applicationId":
			o.app = v
		case "containerId":
			o.container = v
		case "appOwner":
			o.owner = v
		case "log_files_pattern":
			for _, p := range strings.Split(v, ",") {
				re, err := regexp.Compile(strings.TrimSpace(p))
				if err != nil {
					return o, fmt.Errorf("-log_files_pattern %q: %w", p, err)
				}
				o.patterns = append(o.patterns, re)
			}
		case "log_files", "logFiles":
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.files = append(o.files, f)
				}
			}
		case "out":
			o.outDir = v
		case "am":
			for _, a := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(a), "ALL") {
					o.am = []int{0}
					break
				}
				n, err := strconv.Atoi(strings.TrimSpace(a))
				if err != nil || n == 0 || n < -1 {
					return o, errors.New("Invalid input for option -am. Valid inputs are 'ALL', -1 and any other integer which is larger than 0.")
				}
				o.am = append(o.am, n)
			}
		case "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return o, fmt.Errorf("-size %q is not a number", v)
			}
			o.size = n
		default:
			return o, fmt.Errorf("unknown option %s", args[i-1])
		}
	}
	if o.app == "" && o.container != "" {
		c, err := yarnid.ParseContainerID(o.container)
		if err != nil {
			return o, fmt.Errorf("invalid ContainerId: %s", o.container)
		}
		o.app = c.Attempt.App.String()
	}
	if o.app == "" {
		return o, errors.New("Both applicationId and containerId are missing,  one of them must be specified.")
	}
	if len(o.files) > 0 && len(o.patterns) > 0 {
		return o, errors.New("Invalid options. Can only accept one of log_files/log_files_pattern.")
	}
	if o.showAppInfo && o.showContainerInfo {
		return o, errors.New("Invalid options. Can only accept one of show_application_log_info/show_container_log_info.")
	}
	return o, nil
}

// Run runs `knit logs args…` and returns its exit code (0, or -1 as
// LogsCLI returns when it finds nothing or fails).
func Run(ctx context.Context, args []string, out, errOut io.Writer, cfg Config) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintln(errOut, err)
		fmt.Fprintln(errOut, usage)
		return -1
	}
	if err := run(ctx, o, out, errOut, cfg); err != nil {
		fmt.Fprintln(errOut, err)
		return -1
	}
	return 0
}

func run(ctx context.Context, o options, out, errOut io.Writer, cfg Config) error {
	appID, err := yarnid.ParseApplicationID(o.app)
	if err != nil {
		return fmt.Errorf("Invalid ApplicationId specified")
	}
	rep, err := cfg.RM.GetApplicationReport(ctx, &yarnpb.GetApplicationReportRequestProto{ApplicationId: appID.Proto()})
	if err != nil {
		return fmt.Errorf("Unable to get ApplicationState. Attempting to fetch logs directly from the filesystem.: %w", err)
	}
	report := rep.GetApplicationReport()
	owner := o.owner
	if owner == "" {
		owner = report.GetUser()
	}
	switch report.GetYarnApplicationState() {
	case yarnpb.YarnApplicationStateProto_NEW, yarnpb.YarnApplicationStateProto_NEW_SAVING, yarnpb.YarnApplicationStateProto_SUBMITTED:
		return errors.New("Logs are not available right now.")
	}
	var ams []string
	if len(o.am) > 0 {
		if ams, err = amContainers(ctx, cfg.RM, appID, o.am); err != nil {
			return err
		}
	}
	switch report.GetYarnApplicationState() {
	case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
		err := aggregatedLogs(ctx, o, owner, ams, out, cfg)
		if !errors.Is(err, errNoAggregatedLogs) {
			return err
		}
		// Unlike LogsCLI, which stops here: without aggregation the
		// logs stay on the nodes for yarn.nodemanager.log.retain-seconds,
		// and their web services still serve them.
		if nerr := runningLogs(ctx, o, appID, ams, true, out, cfg); nerr == nil {
			return nil
		}
		return err
	}
	return runningLogs(ctx, o, appID, ams, false, out, cfg)
}

// amContainers returns the AM containers of the attempts -am names
// (1-based; -1 is the last).
func amContainers(ctx context.Context, rm RM, app yarnid.ApplicationID, which []int) ([]string, error) {
	resp, err := rm.GetApplicationAttempts(ctx, &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: app.Proto()})
	if err != nil {
		return nil, err
	}
	var all []string
	for _, at := range resp.GetApplicationAttempts() {
		if id, err := yarnid.ContainerIDFromProto(at.GetAmContainerId()); err == nil && at.GetAmContainerId() != nil {
			all = append(all, id.String())
		}
	}
	var out []string
	for _, n := range which {
		switch {
		case n == 0: // ALL
			out = append(out, all...)
		case n == -1 && len(all) > 0:
			out = append(out, all[len(all)-1])
		case n >= 1 && n <= len(all):
			out = append(out, all[n-1])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("Can not get AMContainers logs for the application:%s", app)
	}
	return out, nil
}

// errNoAggregatedLogs is LogsCLI's message when no aggregated file is
// there.
var errNoAggregatedLogs = errors.New("Can not find the logs")

// nodeFiles is one format's aggregated files of the application.
type nodeFiles struct {
	format aggregated.Format
	fs     nodelogs.Lister
	files  []nodelogs.RemoteFile
}

// find returns the first format (in yarn.log-aggregation.file-formats
// order) whose application folder has files, as
// LogAggregationFileControllerFactory.getFileControllerForRead does.
func find(ctx context.Context, app, owner string, conf aggregated.Conf) (nodeFiles, error) {
	for _, f := range aggregated.ReadFormats(conf) {
		layout := aggregated.LayoutFor(f, conf)
		dir, err := layout.AppDir(owner, app)
		if err != nil {
			return nodeFiles{}, err
		}
		fs, err := nodelogs.ListerFor(layout.Root, conf)
		if err != nil {
			return nodeFiles{}, err
		}
		all, err := fs.List(ctx, dir)
		if err != nil {
			return nodeFiles{}, err
		}
		nf := nodeFiles{format: f, fs: fs}
		for _, rf := range all {
			if !strings.HasSuffix(rf.Name, ".tmp") && !strings.HasSuffix(rf.Name, "-checksum") {
				nf.files = append(nf.files, rf)
			}
		}
		if len(nf.files) > 0 {
			return nf, nil
		}
	}
	return nodeFiles{}, fmt.Errorf("%w for the application: %s with the appOwner: %s", errNoAggregatedLogs, app, owner)
}

// open opens one aggregated file.
func (nf nodeFiles) open(ctx context.Context, rf nodelogs.RemoteFile) (aggregated.Reader, io.Closer, error) {
	f, err := nf.fs.Open(ctx, rf)
	if err != nil {
		return nil, nil, err
	}
	r, err := aggregated.Open(nf.format, f, rf.Size, rf.ModTime)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", rf.Path, err)
	}
	return r, f, nil
}

// wants reports whether the options select container c (-containerId,
// or -am's AM containers).
func (o options) wants(c string, ams []string) bool {
	if o.container != "" && c != o.container {
		return false
	}
	return len(o.am) == 0 || slices.Contains(ams, c)
}

func (o options) wantsFile(name string) bool {
	if len(o.patterns) > 0 {
		return slices.ContainsFunc(o.patterns, func(re *regexp.Regexp) bool { return re.MatchString(name) })
	}
	return len(o.files) == 0 || slices.Contains(o.files, "ALL") || slices.Contains(o.files, "*") || slices.Contains(o.files, name)
}

// perContainer hands out the writer of each container: out, or with -out
// a file <out>/<node>/<container> (LogToolUtils.createPrintStream).
type perContainer struct {
	out, dir string
	stdout   io.Writer
	current  string
	file     *os.File
}

func (p *perContainer) writer(node, container string) (io.Writer, error) {
	if p.dir == "" {
		return p.stdout, nil
	}
	key := node + "/" + container
	if key == p.current && p.file != nil {
		return p.file, nil
	}
	if err := p.close(); err != nil {
		return nil, err
	}
	dir := filepath.Join(p.dir, aggregated.NodeFile(node))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, container), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p.current, p.file = key, f
	return f, nil
}

func (p *perContainer) close() error {
	if p.file == nil {
		return nil
	}
	err := p.file.Close()
	p.file = nil
	return err
}

func aggregatedLogs(ctx context.Context, o options, owner string, ams []string, out io.Writer, cfg Config) error {
	nf, err := find(ctx, o.app, owner, cfg.Conf)
	if err != nil {
		return err
	}
	if o.showAppInfo {
		return showAppInfo(ctx, o, nf, out)
	}
	if o.showContainerInfo {
		return showContainerInfo(ctx, o, ams, nf, out, cfg.Location)
	}
	pc := &perContainer{dir: o.outDir, stdout: out}
	found := false
	for _, rf := range nf.files {
		r, f, err := nf.open(ctx, rf)
		if err != nil {
			continue // LogsCLI skips files it cannot read
		}
		err = r.Walk(func(lf aggregated.LogFile, content io.Reader) error {
			if !o.wants(lf.ContainerID, ams) || !o.wantsFile(lf.Name) {
				return nil
			}
			w, err := pc.writer(rf.Name, lf.ContainerID)
			if err != nil {
				return err
			}
			found = true
			return aggregated.WriteLog(w, aggregated.Envelope{
				ContainerID: lf.ContainerID, Node: rf.Name, Type: aggregated.Aggregated, Name: lf.Name,
				Length: lf.Length, ModTime: lf.ModTime, Location: cfg.Location,
			}, o.size, content)
		})
		f.Close()
		if err != nil {
			pc.close()
			return err
		}
	}
	if err := pc.close(); err != nil {
		return err
	}
	if !found {
		files := "ALL"
		if len(o.files) > 0 {
			files = strings.Join(o.files, ", ")
		}
		return fmt.Errorf("Can not find any log file matching the pattern: [%s] for the application: %s", files, o.app)
	}
	return nil
}

// showContainerInfo is -show_container_log_info: per container, its log
// files with lengths and times (LogsCLI.outputContainerLogMeta).
func showContainerInfo(ctx context.Context, o options, ams []string, nf nodeFiles, out io.Writer, loc *time.Location) error {
	if loc == nil {
		loc = time.Local
	}
	const row = "%30s\t%30s\t%30s\t%30s\n"
	for _, rf := range nf.files {
		r, f, err := nf.open(ctx, rf)
		if err != nil {
			continue
		}
		current := ""
		err = r.Walk(func(lf aggregated.LogFile, _ io.Reader) error {
			if !o.wants(lf.ContainerID, ams) {
				return nil
			}
			if lf.ContainerID != current {
				current = lf.ContainerID
				head := fmt.Sprintf("Container: %s on %s", lf.ContainerID, rf.Name)
				fmt.Fprintln(out, head)
				fmt.Fprintln(out, strings.Repeat("=", len(head)))
				fmt.Fprintf(out, row, "LogFile", "LogLength", "LastModificationTime", "LogAggregationType")
				fmt.Fprintln(out, strings.Repeat("=", 2*len(head)))
			}
			fmt.Fprintf(out, row, lf.Name, strconv.FormatInt(lf.Length, 10), lf.ModTime.In(loc).Format(aggregated.TimeLayout), aggregated.Aggregated)
			return nil
		})
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// showAppInfo is -show_application_log_info for a finished application:
// each container and the node it ran on (the file name for TFile, the
// NodeId for the Indexed format, sorted by container id).
func showAppInfo(ctx context.Context, o options, nf nodeFiles, out io.Writer) error {
	fmt.Fprintln(out, "Application State: Completed.")
	type line struct{ container, node string }
	var lines []line
	for _, rf := range nf.files {
		r, f, err := nf.open(ctx, rf)
		if err != nil {
			continue
		}
		node := rf.Name
		if nf.format == aggregated.FormatIndexed {
			node = r.Header().NodeID
		}
		var seen []string
		err = r.Walk(func(lf aggregated.LogFile, _ io.Reader) error {
			if !slices.Contains(seen, lf.ContainerID) && (o.container == "" || o.container == lf.ContainerID) {
				seen = append(seen, lf.ContainerID)
				lines = append(lines, line{lf.ContainerID, node})
			}
			return nil
		})
		f.Close()
		if err != nil {
			return err
		}
	}
	if nf.format == aggregated.FormatIndexed {
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].container < lines[j].container })
	}
	for _, l := range lines {
		fmt.Fprintf(out, "Container: %s on %s\n", l.container, l.node)
	}
	return nil
}

// runningLogs fetches each running container's logs from its node, as
// LogsCLI does for a running application: the log list, then each file
// with size, printed as the node sends it.
func runningLogs(ctx context.Context, o options, app yarnid.ApplicationID, ams []string, completed bool, out io.Writer, cfg Config) error {
	attempts, err := cfg.RM.GetApplicationAttempts(ctx, &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: app.Proto()})
	if err != nil {
		return err
	}
	client := cfg.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	if o.showAppInfo {
		if completed {
			fmt.Fprintln(out, "Application State: Completed.")
		} else {
			fmt.Fprintln(out, "Application State: Running.")
		}
	}
	pc := &perContainer{dir: o.outDir, stdout: out}
	defer pc.close()
	found := false
	// LogsCLI keeps the containers of every attempt in a TreeMap: each
	// once, ordered by ContainerId.
	type report struct {
		id yarnid.ContainerID
		c  *yarnpb.ContainerReportProto
	}
	var reports []report
	seen := map[string]bool{}
	for _, at := range attempts.GetApplicationAttempts() {
		cs, err := cfg.RM.GetContainers(ctx, &yarnpb.GetContainersRequestProto{ApplicationAttemptId: at.GetApplicationAttemptId()})
		if err != nil {
			return err
		}
		for _, c := range cs.GetContainers() {
			id, err := yarnid.ContainerIDFromProto(c.GetContainerId())
			if err == nil && !seen[id.String()] {
				seen[id.String()] = true
				reports = append(reports, report{id, c})
			}
		}
	}
	sort.Slice(reports, func(i, j int) bool {
		a, b := reports[i].id, reports[j].id
		if a.Attempt.App != b.Attempt.App {
			return a.Attempt.App.ClusterTimestamp < b.Attempt.App.ClusterTimestamp ||
				(a.Attempt.App.ClusterTimestamp == b.Attempt.App.ClusterTimestamp && a.Attempt.App.ID < b.Attempt.App.ID)
		}
		if a.Attempt.ID != b.Attempt.ID {
			return a.Attempt.ID < b.Attempt.ID
		}
		return a.ProtoID() < b.ProtoID()
	})
	for _, r := range reports {
		id, c := r.id, r.c
		if !o.wants(id.String(), ams) || c.GetNodeHttpAddress() == "" {
			continue
		}
		if o.showAppInfo {
			fmt.Fprintf(out, "Container: %s on %s:%d\n", id, c.GetNodeId().GetHost(), c.GetNodeId().GetPort())
			continue
		}
		w, err := pc.writer(fmt.Sprintf("%s:%d", c.GetNodeId().GetHost(), c.GetNodeId().GetPort()), id.String())
		if err != nil {
			return err
		}
		ok, err := containerLogs(ctx, client, o, c.GetNodeHttpAddress(), id.String(), cfg.User, w)
		if err != nil {
			return err
		}
		found = found || ok
	}
	if !found && !o.showAppInfo {
		return fmt.Errorf("Can not find any log file matching the pattern: [ALL] for the application: %s", o.app)
	}
	return nil
}

func containerLogs(ctx context.Context, client *http.Client, o options, node, container, user string, out io.Writer) (bool, error) {
	base := node
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	base += "/ws/v1/node/containers/" + container + "/logs"
	q := "?user.name=" + url.QueryEscape(user)
	body, err := fetch(ctx, client, base+q, "application/json")
	if err != nil {
		return false, err
	}
	var list struct {
		ContainerLogsInfo struct {
			ContainerLogInfo []struct {
				FileName string `json:"fileName"`
			} `json:"containerLogInfo"`
		} `json:"containerLogsInfo"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, fmt.Errorf("log list of %s from %s: %w", container, node, err)
	}
	found := false
	for _, f := range list.ContainerLogsInfo.ContainerLogInfo {
		if !o.wantsFile(f.FileName) {
			continue
		}
		if err := fetchTo(ctx, client, base+"/"+url.PathEscape(f.FileName)+q+"&size="+strconv.FormatInt(o.size, 10), out); err != nil {
			return found, err
		}
		found = true
	}
	return found, nil
}

func fetch(ctx context.Context, client *http.Client, u, accept string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// fetchTo streams a log file's answer to out.
func fetchTo(ctx context.Context, client *http.Client, u string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(out, resp.Body)
	return err
}
