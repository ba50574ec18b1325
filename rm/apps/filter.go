package apps

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Filter selects applications for getApplications and the REST apps list,
// with GetApplicationsRequestProto's meaning (ClientRMService.getApplications).
// Each set matches when it is empty or contains the application's value.
type Filter struct {
	Types  []string // application types, any case
	States []string // client-visible states (YarnApplicationState names), any case
	Users  []string
	Queues []string // full queue paths or short names, see Matches
	Tags   []string // any case; an application matches with any one tag
	Name   string   // exact name; empty matches all

	// Limit caps how many applications Apply returns; zero or less means no
	// cap.
	Limit int64

	// Time ranges are inclusive; a zero bound is open. An application that
	// has not finished has finish time 0, so it matches a finish range only
	// when FinishBegin is zero, as in YARN.
	StartBegin, StartEnd   time.Time
	FinishBegin, FinishEnd time.Time

	// Scope OWN keeps the Caller's applications; VIEWABLE keeps those
	// CanView allows (a nil CanView allows all).
	Scope   yarnpb.ApplicationsRequestScopeProto
	Caller  string
	CanView func(*Application) bool
}

// FilterFromRequest reads a getApplications request for the calling user.
func FilterFromRequest(req *yarnpb.GetApplicationsRequestProto, caller string, canView func(*Application) bool) Filter {
	f := Filter{
		Types:   req.GetApplicationTypes(),
		Users:   req.GetUsers(),
		Queues:  req.GetQueues(),
		Tags:    req.GetApplicationTags(),
		Name:    req.GetName(),
		Limit:   req.GetLimit(),
		Scope:   req.GetScope(),
		Caller:  caller,
		CanView: canView,
	}
	for _, s := range req.GetApplicationStates() {
		f.States = append(f.States, s.String())
	}
	if req.StartBegin != nil {
		f.StartBegin = time.UnixMilli(req.GetStartBegin())
	}
	if req.StartEnd != nil {
		f.StartEnd = time.UnixMilli(req.GetStartEnd())
	}
	if req.FinishBegin != nil {
		f.FinishBegin = time.UnixMilli(req.GetFinishBegin())
	}
	if req.FinishEnd != nil {
		f.FinishEnd = time.UnixMilli(req.GetFinishEnd())
	}
	return f
}

// Validate checks the state names. The error text is the one the RM's REST
// API returns for an unknown state (capital letter included), so the REST
// layer can pass it on unchanged.
func (f Filter) Validate() error {
	for _, s := range f.States {
		if _, ok := yarnpb.YarnApplicationStateProto_value[strings.ToUpper(s)]; !ok {
			return fmt.Errorf("Invalid application-state %s specified. It should be one of [NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED]", s)
		}
	}
	return nil
}

// Matches reports whether the application passes every condition but Limit.
func (f Filter) Matches(a *Application) bool {
	if f.Scope == yarnpb.ApplicationsRequestScopeProto_OWN && f.Caller != a.user {
		return false
	}
	if len(f.Queues) > 0 && !anyOf(f.Queues, func(q string) bool { return queueMatches(q, a.queue) }) {
		return false
	}
	if len(f.Types) > 0 && !anyOf(f.Types, func(t string) bool { return strings.EqualFold(t, a.appType) }) {
		return false
	}
	state := a.ClientState().String()
	if len(f.States) > 0 && !anyOf(f.States, func(s string) bool { return strings.EqualFold(s, state) }) {
		return false
	}
	if len(f.Users) > 0 && !anyOf(f.Users, func(u string) bool { return u == a.user }) {
		return false
	}
	if !inRange(millis(a.startTime), f.StartBegin, f.StartEnd) || !inRange(millis(a.finishTime), f.FinishBegin, f.FinishEnd) {
		return false
	}
	if len(f.Tags) > 0 && !anyOf(f.Tags, func(t string) bool { return hasTag(a.tags, t) }) {
		return false
	}
	if f.Scope == yarnpb.ApplicationsRequestScopeProto_VIEWABLE && f.CanView != nil && !f.CanView(a) {
		return false
	}
	return f.Name == "" || f.Name == a.name
}

// Apply returns the applications that match, in the given order, at most
// Limit of them.
func (f Filter) Apply(apps []*Application) []*Application {
	var out []*Application
	for _, a := range apps {
		if f.Limit > 0 && int64(len(out)) >= f.Limit {
			break
		}
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// queueMatches reports whether a queue named in a request covers an
// application's queue path: the path itself or an ancestor, each also by
// its short name (the CapacityScheduler accepts "default" for
// "root.default", and a parent queue lists its children's applications).
func queueMatches(q, path string) bool {
	for p := path; p != ""; {
		if p == q || strings.HasSuffix(p, "."+q) {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

func hasTag(tags []string, t string) bool {
	t = strings.ToLower(t)
	for _, x := range tags {
		if x == t {
			return true
		}
	}
	return false
}

func inRange(ms int64, begin, end time.Time) bool {
	lo, hi := int64(0), int64(math.MaxInt64)
	if !begin.IsZero() {
		lo = begin.UnixMilli()
	}
	if !end.IsZero() {
		hi = end.UnixMilli()
	}
	return lo <= ms && ms <= hi
}

func anyOf(set []string, match func(string) bool) bool {
	for _, s := range set {
		if match(s) {
			return true
		}
	}
	return false
}
