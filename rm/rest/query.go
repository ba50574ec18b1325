package rest

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

// appsQuery is GET /apps's query, read as ApplicationsRequestBuilder does.
type appsQuery struct {
	filter      apps.Filter
	finalStatus string
	deSelects   deSelects
}

// parseAppsQuery reads the query; errors are 400 answers with Hadoop's
// messages.
func parseAppsQuery(v url.Values) (appsQuery, error) {
	var q appsQuery
	f := &q.filter
	for _, s := range splitAll(v["states"]) {
		f.States = append(f.States, s)
	}
	if s := v.Get("state"); s != "" {
		f.States = append(f.States, s)
	}
	if err := f.Validate(); err != nil {
		return q, badRequest(err.Error())
	}
	if s := v.Get("finalStatus"); s != "" {
		if _, ok := yarnpb.FinalApplicationStatusProto_value["APP_"+s]; !ok {
			return q, illegalArgument("No enum constant org.apache.hadoop.yarn.api.records.FinalApplicationStatus." + s)
		}
		q.finalStatus = s
	}
	if u := v.Get("user"); u != "" {
		f.Users = []string{u}
	}
	if qu := v.Get("queue"); qu != "" {
		f.Queues = []string{qu}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return q, badRequest("limit value must be a number!")
		}
		if n <= 0 {
			return q, badRequest("limit value must be greater then 0")
		}
		f.Limit = n
	}
	var err error
	if f.StartBegin, f.StartEnd, err = timeRange(v, "startedTimeBegin", "startedTimeEnd", "startedTimeEnd must be greater than startTimeBegin"); err != nil {
		return q, err
	}
	if f.FinishBegin, f.FinishEnd, err = timeRange(v, "finishedTimeBegin", "finishedTimeEnd", "finishedTimeEnd must be greater than finishedTimeBegin"); err != nil {
		return q, err
	}
	for _, t := range splitAll(v["applicationTypes"]) {
		f.Types = append(f.Types, strings.ToLower(t))
	}
	for _, t := range splitAll(v["applicationTags"]) {
		f.Tags = append(f.Tags, strings.ToLower(t))
	}
	f.Name = v.Get("name")
	q.deSelects, err = parseDeSelects(v["deSelects"])
	return q, err
}

func timeRange(v url.Values, beginName, endName, order string) (begin, end time.Time, err error) {
	var b, e int64 = 0, -1
	if s := v.Get(beginName); s != "" {
		if b, err = parseMillis(s, beginName); err != nil {
			return
		}
		begin = time.UnixMilli(b)
	}
	if s := v.Get(endName); s != "" {
		if e, err = parseMillis(s, endName); err != nil {
			return
		}
		end = time.UnixMilli(e)
		if e < b {
			err = badRequest(order)
		}
	}
	return
}

func parseMillis(s, name string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, badRequest(name + " value must be a number!")
	}
	if n < 0 {
		return 0, badRequest(name + " must be greater than 0")
	}
	return n, nil
}

const deSelectNames = "resourceRequests, appNodeLabelExpression, amNodeLabelExpression, resourceInfo, timeouts"

func parseDeSelects(vals []string) (deSelects, error) {
	var d deSelects
	for _, s := range splitAll(vals) {
		switch strings.ToLower(s) {
		case "resourcerequests":
			d.resourceRequests = true
		case "appnodelabelexpression":
			d.appNodeLabelExpression = true
		case "amnodelabelexpression":
			d.amNodeLabelExpression = true
		case "resourceinfo":
			d.resourceInfo = true
		case "timeouts":
			d.timeouts = true
		default:
			return d, badRequest("Invalid deSelects string " + s + " specified. It should be one of " + deSelectNames)
		}
	}
	return d, nil
}

// parseNodeStates reads the states filter of GET /nodes: NodeState names,
// any case; an unknown one is NodeState.valueOf's IllegalArgumentException.
func parseNodeStates(vals []string) ([]string, error) {
	var out []string
	for _, s := range splitAll(vals) {
		u := strings.ToUpper(s)
		if _, ok := yarnpb.NodeStateProto_value["NS_"+u]; !ok {
			return nil, illegalArgument("No enum constant org.apache.hadoop.yarn.api.records.NodeState." + u)
		}
		out = append(out, u)
	}
	return out, nil
}

// splitAll splits comma-separated values, trimmed, dropping empty ones.
func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
