package webui

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/rest"
)

// appStates are the states the navigation lists, in YARN's order.
var appStates = []string{"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED"}

// appColumn is one sortable column of the applications table.
type appColumn struct {
	Key, Title string
	less       func(a, b *yarnpb.ApplicationReportProto) int
}

var appColumns = []appColumn{
	{"id", "ID", func(a, b *yarnpb.ApplicationReportProto) int {
		if c := cmp.Compare(a.GetApplicationId().GetClusterTimestamp(), b.GetApplicationId().GetClusterTimestamp()); c != 0 {
			return c
		}
		return cmp.Compare(a.GetApplicationId().GetId(), b.GetApplicationId().GetId())
	}},
	{"user", "User", func(a, b *yarnpb.ApplicationReportProto) int { return cmp.Compare(a.GetUser(), b.GetUser()) }},
	{"name", "Name", func(a, b *yarnpb.ApplicationReportProto) int { return cmp.Compare(a.GetName(), b.GetName()) }},
	{"type", "Application Type", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetApplicationType(), b.GetApplicationType())
	}},
	{"queue", "Queue", func(a, b *yarnpb.ApplicationReportProto) int { return cmp.Compare(a.GetQueue(), b.GetQueue()) }},
	{"priority", "Application Priority", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetPriority().GetPriority(), b.GetPriority().GetPriority())
	}},
	{"start", "StartTime", func(a, b *yarnpb.ApplicationReportProto) int { return cmp.Compare(a.GetStartTime(), b.GetStartTime()) }},
	{"finish", "FinishTime", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetFinishTime(), b.GetFinishTime())
	}},
	{"state", "State", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetYarnApplicationState().String(), b.GetYarnApplicationState().String())
	}},
	{"final", "FinalStatus", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetFinalApplicationStatus().String(), b.GetFinalApplicationStatus().String())
	}},
	{"containers", "Running Containers", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetAppResource_Usage().GetNumUsedContainers(), b.GetAppResource_Usage().GetNumUsedContainers())
	}},
	{"vcores", "Allocated CPU VCores", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetAppResource_Usage().GetUsedResources().GetVirtualCores(), b.GetAppResource_Usage().GetUsedResources().GetVirtualCores())
	}},
	{"memory", "Allocated Memory MB", func(a, b *yarnpb.ApplicationReportProto) int {
		return cmp.Compare(a.GetAppResource_Usage().GetUsedResources().GetMemory(), b.GetAppResource_Usage().GetUsedResources().GetMemory())
	}},
	{"progress", "Progress", func(a, b *yarnpb.ApplicationReportProto) int { return cmp.Compare(a.GetProgress(), b.GetProgress()) }},
}

// appsPage is the applications table and the form that filters it.
type appsPage struct {
	State, Queue, User string
	Sort               string
	Desc               bool
	States             []string
	Columns            []sortLink
	Apps               []*yarnpb.ApplicationReportProto
	// Rows are the page's applications as the table shows them.
	Rows []appRow
	// Queues and Users are the values seen, for the filter's choices.
	Queues, Users []string
	// Total counts the applications the filter selects; Apps holds those
	// of page Page (from 1) of Pages, PageSize a page.
	Total, Page, Pages int
	// Prev and Next link to the pages around this one; empty at an end.
	Prev, Next string
}

// PageSize is how many applications one page of the list shows.
const PageSize = 500

// sortLink is a column header: its title and the link that sorts by it.
type sortLink struct {
	Title, Href string
	// Mark is "▲" or "▼" on the column sorted by.
	Mark string
}

func (u *UI) apps(c echo.Context) error {
	q := c.QueryParams()
	v := appsPage{
		State: strings.ToUpper(firstOf(c.Param("state"), q.Get("state"))),
		Queue: q.Get("queue"), User: q.Get("user"),
		Sort: q.Get("sort"), Desc: q.Get("order") != "asc",
		States: appStates,
	}
	col := slices.IndexFunc(appColumns, func(c appColumn) bool { return c.Key == v.Sort })
	if col < 0 {
		col, v.Sort = 0, "id"
	}
	title := "All Applications"
	var f apps.Filter
	if v.State != "" {
		f.States = []string{v.State}
		if err := f.Validate(); err != nil {
			return u.fail(c, yarnerr.BadRequest.New(err.Error()))
		}
		title = "Applications " + v.State
	}
	if v.Queue != "" {
		f.Queues = []string{v.Queue}
	}
	if v.User != "" {
		f.Users = []string{v.User}
	}
	p := u.newPage(c, title, "apps")
	if err := u.withMetrics(c, p); err != nil {
		return u.fail(c, err)
	}
	user, _ := u.user(c)
	ctx := c.Request().Context()
	list, err := u.cfg.Cluster.Applications(ctx, user, f)
	if err != nil {
		return u.fail(c, err)
	}
	for _, a := range list {
		v.Apps = append(v.Apps, a.Report)
	}
	less := appColumns[col].less
	slices.SortStableFunc(v.Apps, func(a, b *yarnpb.ApplicationReportProto) int {
		if v.Desc {
			return less(b, a)
		}
		return less(a, b)
	})
	// The filter's choices come from every application, not the filtered
	// ones, so that a choice can be changed.
	all := list
	if v.Queue != "" || v.User != "" || v.State != "" {
		if all, err = u.cfg.Cluster.Applications(ctx, user, apps.Filter{}); err != nil {
			return u.fail(c, err)
		}
	}
	v.Queues, v.Users = choices(all)
	base := c.Request().URL.Path
	v.Total = len(v.Apps)
	v.Pages = max(1, (v.Total+PageSize-1)/PageSize)
	v.Page = min(max(1, atoi(q.Get("page"))), v.Pages)
	v.Apps = v.Apps[(v.Page-1)*PageSize : min(v.Page*PageSize, v.Total)]
	v.Rows = make([]appRow, 0, len(v.Apps))
	for _, a := range v.Apps {
		v.Rows = append(v.Rows, newAppRow(a))
	}
	pageLink := func(n int) string {
		qs := url.Values{}
		for k, vs := range q {
			qs[k] = vs
		}
		qs.Set("page", strconv.Itoa(n))
		return base + "?" + qs.Encode()
	}
	if v.Page > 1 {
		v.Prev = pageLink(v.Page - 1)
	}
	if v.Page < v.Pages {
		v.Next = pageLink(v.Page + 1)
	}
	for _, ac := range appColumns {
		l := sortLink{Title: ac.Title}
		order := "asc"
		if ac.Key == v.Sort {
			l.Mark = "▲"
			if v.Desc {
				l.Mark = "▼"
			} else {
				order = "desc"
			}
		}
		qs := url.Values{}
		for _, k := range []string{"queue", "user", "state", "user.name"} {
			if s := q.Get(k); s != "" {
				qs.Set(k, s)
			}
		}
		qs.Set("sort", ac.Key)
		qs.Set("order", order)
		l.Href = base + "?" + qs.Encode()
		v.Columns = append(v.Columns, l)
	}
	p.Data = v
	return u.render(c, http.StatusOK, "apps", p)
}

func choices(list []rest.App) (queues, users []string) {
	for _, a := range list {
		queues = append(queues, a.Report.GetQueue())
		users = append(users, a.Report.GetUser())
	}
	slices.Sort(queues)
	slices.Sort(users)
	return slices.Compact(queues), slices.Compact(users)
}

// atoi is s as a number, 0 when it is none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// appPage is an application's page.
type appPage struct {
	ID         string
	App        rest.App
	Attempts   []rest.Attempt
	Containers []Container
	// Denied explains why attempts and containers are not shown.
	Denied string
	Now    time.Time
}

// appRow is one row of the applications table, its cells computed once
// (a template's method calls go through reflection).
type appRow struct {
	ID, User, Name, Type, Queue    string
	Priority                       int32
	Start, Finish, State, Final    string
	Containers, VCores, Memory     string
	Progress                       float64
	Tracking, TrackingLabel, Class string
}

func newAppRow(a *yarnpb.ApplicationReportProto) appRow {
	u := a.GetAppResource_Usage()
	r := appRow{
		ID: appIDString(a.GetApplicationId()), User: a.GetUser(), Name: a.GetName(), Type: a.GetApplicationType(),
		Queue: a.GetQueue(), Priority: a.GetPriority().GetPriority(),
		Start: date(a.GetStartTime()), Finish: date(a.GetFinishTime()),
		State: a.GetYarnApplicationState().String(), Final: strings.TrimPrefix(a.GetFinalApplicationStatus().String(), "APP_"),
		Containers: count(u.GetNumUsedContainers()), VCores: count(u.GetUsedResources().GetVirtualCores()),
		Memory: count(u.GetUsedResources().GetMemory()), Progress: clamp(float64(a.GetProgress()) * 100),
	}
	r.Class = strings.ToLower(r.State)
	if t := a.GetTrackingUrl(); isTracking(t) {
		r.Tracking, r.TrackingLabel = t, trackingLabel(a.GetYarnApplicationState())
	}
	return r
}
