package apps

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// filterApp builds an application for filtering: user, queue, type, tags,
// the path it took, and its start time.
func filterApp(t *testing.T, id int32, user, queue, typ string, tags []string, path []Event, start time.Time) *Application {
	t.Helper()
	ctx := dsContext()
	ctx.ApplicationId = ApplicationID{ClusterTimestamp: clusterTS, ID: id}.Proto()
	ctx.ApplicationType = proto.String(typ)
	ctx.ApplicationTags = tags
	a, err := NewApplication(testCfg, Submission{ID: ApplicationID{ClusterTimestamp: clusterTS, ID: id}, User: user, Queue: queue, Context: ctx, SubmitTime: start})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range path {
		// The paths name attempt 1 of application 2; point them at this one.
		if _, err := a.Handle(retarget(ev, a.ID()), start.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
	}
	return a
}

func retarget(ev Event, app ApplicationID) Event {
	if e, ok := ev.(AttemptAdded); ok {
		e.Attempt = AttemptID{App: app, ID: 1}
		return e
	}
	return ev
}

func TestFilterSelectsAsGetApplicationsDoes(t *testing.T) {
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	spark := filterApp(t, 1, "alice", "root.etl.daily", "SPARK", []string{"Nightly"}, toScheduled[:4], base)
	mr := filterApp(t, 2, "bob", "root.default", "MAPREDUCE", nil, toSubmitted, base.Add(time.Hour))
	done := filterApp(t, 3, "alice", "root.default", "YARN", []string{"adhoc"}, toFailed, base.Add(2*time.Hour))
	all := []*Application{spark, mr, done}

	tests := []struct {
		name   string
		filter Filter
		want   []*Application
	}{
		{"everything", Filter{}, all},
		{"type in any case", Filter{Types: []string{"spark", "MapReduce"}}, []*Application{spark, mr}},
		{"client-visible state", Filter{States: []string{"ACCEPTED"}}, []*Application{spark}},
		{"state in any case", Filter{States: []string{"failed", "submitted"}}, []*Application{mr, done}},
		{"user", Filter{Users: []string{"alice"}}, []*Application{spark, done}},
		{"full queue path", Filter{Queues: []string{"root.default"}}, []*Application{mr, done}},
		{"leaf queue's short name", Filter{Queues: []string{"default"}}, []*Application{mr, done}},
		{"parent queue covers its children", Filter{Queues: []string{"root.etl"}}, []*Application{spark}},
		{"parent queue's short name", Filter{Queues: []string{"etl"}}, []*Application{spark}},
		{"partial name is no queue", Filter{Queues: []string{"daily.x", "efault"}}, nil},
		{"tag in any case, any of them", Filter{Tags: []string{"NIGHTLY", "other"}}, []*Application{spark}},
		{"name", Filter{Name: "DistributedShell"}, all},
		{"other name", Filter{Name: "distributedshell"}, nil},
		{"start range is inclusive", Filter{StartBegin: base.Add(time.Hour), StartEnd: base.Add(2 * time.Hour)}, []*Application{mr, done}},
		{"open start range", Filter{StartEnd: base}, []*Application{spark}},
		{"finish range from a time excludes unfinished apps", Filter{FinishBegin: base}, []*Application{done}},
		{"finish range up to a time includes unfinished apps", Filter{FinishEnd: base.Add(time.Minute)}, []*Application{spark, mr}},
		{"limit", Filter{Limit: 2}, []*Application{spark, mr}},
		{"limit counts matches only", Filter{Users: []string{"alice"}, Limit: 1}, []*Application{spark}},
		{"own scope", Filter{Scope: yarnpb.ApplicationsRequestScopeProto_OWN, Caller: "bob"}, []*Application{mr}},
		{"viewable scope", Filter{Scope: yarnpb.ApplicationsRequestScopeProto_VIEWABLE, CanView: func(a *Application) bool { return a.User() == "alice" }}, []*Application{spark, done}},
		{"all scope ignores the view check", Filter{CanView: func(*Application) bool { return false }}, all},
		{"conditions combine", Filter{Users: []string{"alice"}, Queues: []string{"default"}}, []*Application{done}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.filter.Apply(all)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d applications %v, want %v", len(got), ids(got), ids(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", ids(got), ids(tt.want))
				}
			}
		})
	}
}

func ids(apps []*Application) []string {
	var out []string
	for _, a := range apps {
		out = append(out, a.ID().String())
	}
	return out
}

func TestFilterFromRequestReadsEveryField(t *testing.T) {
	req := &yarnpb.GetApplicationsRequestProto{
		ApplicationTypes:  []string{"SPARK"},
		ApplicationStates: []yarnpb.YarnApplicationStateProto{yarnpb.YarnApplicationStateProto_RUNNING, yarnpb.YarnApplicationStateProto_NEW_SAVING},
		Users:             []string{"alice"},
		Queues:            []string{"default"},
		Limit:             proto.Int64(10),
		StartBegin:        proto.Int64(1000),
		StartEnd:          proto.Int64(2000),
		FinishBegin:       proto.Int64(3000),
		FinishEnd:         proto.Int64(4000),
		ApplicationTags:   []string{"x"},
		Scope:             yarnpb.ApplicationsRequestScopeProto_OWN.Enum(),
		Name:              proto.String("job"),
	}
	f := FilterFromRequest(req, "alice", nil)
	if f.States[0] != "RUNNING" || f.States[1] != "NEW_SAVING" || f.Types[0] != "SPARK" || f.Users[0] != "alice" ||
		f.Queues[0] != "default" || f.Tags[0] != "x" || f.Name != "job" || f.Limit != 10 || f.Caller != "alice" ||
		f.Scope != yarnpb.ApplicationsRequestScopeProto_OWN || f.StartBegin.UnixMilli() != 1000 || f.StartEnd.UnixMilli() != 2000 ||
		f.FinishBegin.UnixMilli() != 3000 || f.FinishEnd.UnixMilli() != 4000 {
		t.Errorf("filter %+v", f)
	}
	if err := f.Validate(); err != nil {
		t.Error(err)
	}
	empty := FilterFromRequest(&yarnpb.GetApplicationsRequestProto{}, "bob", nil)
	if !empty.StartBegin.IsZero() || !empty.FinishEnd.IsZero() || empty.Limit != 0 {
		t.Errorf("unset fields became bounds: %+v", empty)
	}
}

func TestFilterValidateRejectsAnUnknownStateAsTheRESTAPIDoes(t *testing.T) {
	err := Filter{States: []string{"running", "BOGUS"}}.Validate()
	want := "Invalid application-state BOGUS specified. It should be one of [NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED]"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
