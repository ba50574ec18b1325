package webui

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Link is a local link that keeps the caller's user.name.
func (p *page) Link(parts ...string) string {
	path := strings.Join(parts, "")
	if !p.UserSet {
		return path
	}
	return withUser(path, p.User)
}

// AppStates are the application states the navigation links to.
func (p *page) AppStates() []string { return appStates }

// funcs are the templates' helpers; none of them builds markup, so
// html/template escapes all they return.
var funcs = template.FuncMap{
	"date":    date,
	"elapsed": elapsed,
	"appID":   appIDString,
	"attemptID": func(p *yarnpb.ApplicationAttemptIdProto) string {
		id, err := yarnid.AttemptIDFromProto(p)
		if err != nil {
			return ""
		}
		return id.String()
	},
	"containerID": func(p *yarnpb.ContainerIdProto) string {
		id, err := yarnid.ContainerIDFromProto(p)
		if err != nil {
			return ""
		}
		return id.String()
	},
	"nodeID": func(n *yarnpb.NodeIdProto) string {
		if n.GetHost() == "" {
			return ""
		}
		return n.GetHost() + ":" + strconv.Itoa(int(n.GetPort()))
	},
	"appState":  func(s yarnpb.YarnApplicationStateProto) string { return s.String() },
	"final":     func(s yarnpb.FinalApplicationStatusProto) string { return strings.TrimPrefix(s.String(), "APP_") },
	"nodeState": func(s yarnpb.NodeStateProto) string { return strings.TrimPrefix(s.String(), "NS_") },
	"attemptSt": func(s yarnpb.YarnApplicationAttemptStateProto) string {
		return strings.TrimPrefix(s.String(), "APP_ATTEMPT_")
	},
	"contState": func(s yarnpb.ContainerStateProto) string { return strings.TrimPrefix(s.String(), "C_") },
	"lower":     strings.ToLower,
	"logAgg":    func(s yarnpb.LogAggregationStatusProto) string { return strings.TrimPrefix(s.String(), "LOG_") },
	"pct":       func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" },
	"progress":  func(f float32) float64 { return clamp(float64(f) * 100) },
	"clamp":     clamp,
	"ratio":     ratio,
	"sub":       func(a, b int64) int64 { return a - b },
	"mb":        mb,
	"resource": func(r *yarnpb.ResourceProto) string {
		return fmt.Sprintf("<memory:%d, vCores:%d>", r.GetMemory(), r.GetVirtualCores())
	},
	"httpURL":       httpURL,
	"orNA":          func(s string) string { return cmpOr(s, "N/A") },
	"trackingLabel": trackingLabel,
	"indent":        func(d int) int { return d * 16 },
	"int64":         func(v int32) int64 { return int64(v) },
	"seq":           func(n int) []int { return make([]int, max(n, 0)) },
	"partitions":    partitions,
	"partitionOf":   partitionOf,
	"isTracking":    isTracking,
}

func appIDString(p *yarnpb.ApplicationIdProto) string {
	id, err := yarnid.ApplicationIDFromProto(p)
	if err != nil {
		return ""
	}
	return id.String()
}

// count is a figure of a report, where an ended application has -1.
func count[T int32 | int64](n T) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.FormatInt(int64(n), 10)
}

// isTracking reports whether a tracking URL may be a link: http(s) only.
func isTracking(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// trackingLabel names the tracking link as YARN does: the AM's UI while
// the application runs, its history after.
func trackingLabel(s yarnpb.YarnApplicationStateProto) string {
	switch s {
	case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
		return "History"
	}
	return "ApplicationMaster"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clamp(f float64) float64 {
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	return min(f, 100)
}

// ratio is a/b in percent, 0 when b is 0.
func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return clamp(float64(a) * 100 / float64(b))
}

func mb(v int64) string {
	switch {
	case v >= 1<<20:
		return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) + " TB"
	case v >= 1<<10:
		return strconv.FormatFloat(float64(v)/(1<<10), 'f', 1, 64) + " GB"
	}
	return strconv.FormatInt(v, 10) + " MB"
}

// httpURL is an http address ("host:port" or a URL) as a link, or "" for
// anything that is not http(s): a node or AM cannot make the page run a
// javascript: URL.
func httpURL(s string) string {
	if s == "" || s == "N/A" {
		return ""
	}
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		if strings.Contains(s, "://") {
			return ""
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return ""
	}
	return u.String()
}

// date is a time in milliseconds since the epoch, in UTC; "N/A" for 0.
func date(ms int64) string {
	if ms <= 0 {
		return "N/A"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 MST")
}

// elapsed is the time from start to finish, or to now before it finishes.
func elapsed(start, finish int64, now time.Time) string {
	if start <= 0 {
		return "N/A"
	}
	end := finish
	if end <= 0 {
		end = now.UnixMilli()
	}
	d := time.Duration(max(end-start, 0)) * time.Millisecond
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dhrs, %dmins, %dsec", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dmins, %dsec", m, s)
	}
	return fmt.Sprintf("%dsec", s)
}

// partitions are the labelled partitions any queue reports, by name, each
// with what its nodes hold: one section of the scheduler page each.
func partitions(qs []Queue) []QueuePartition {
	var out []QueuePartition
	for _, q := range qs {
		for _, p := range q.Partitions {
			if !slices.ContainsFunc(out, func(o QueuePartition) bool { return o.Name == p.Name }) {
				out = append(out, QueuePartition{Name: p.Name, TotalMB: p.TotalMB, TotalVcores: p.TotalVcores})
			}
		}
	}
	slices.SortFunc(out, func(a, b QueuePartition) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// partitionOf is q's figures in the named partition; nil when q does not
// report it.
func partitionOf(q Queue, name string) *QueuePartition {
	for i := range q.Partitions {
		if q.Partitions[i].Name == name {
			return &q.Partitions[i]
		}
	}
	return nil
}
