package rm

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

func TestSubmittedApplicationWaitsAcceptedForItsAMContainer(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	newApp := mustCall(t, c, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	if got := newApp.GetMaximumCapability(); got.GetMemory() != 8192 || got.GetVirtualCores() != 4 {
		t.Errorf("maximumCapability = %v, want YARN's default 8192 MB, 4 vcores", got)
	}
	id := e.mustSubmit(c, subOpts{name: "job", memory: 10})
	r := e.report(c, id)
	if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Fatalf("state = %v, want ACCEPTED", r.GetYarnApplicationState())
	}
	if r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_UNDEFINED {
		t.Errorf("final status = %v", r.GetFinalApplicationStatus())
	}
	if r.GetQueue() != "root.default" || r.GetUser() != "alice" || r.GetName() != "job" {
		t.Errorf("queue/user/name = %q/%q/%q", r.GetQueue(), r.GetUser(), r.GetName())
	}
	if !strings.Contains(r.GetDiagnostics(), "Application is Activated, waiting for resources to be assigned for AM.") {
		t.Errorf("diagnostics = %q", r.GetDiagnostics())
	}
	if _, ok := e.store.Get(appIDOf(t, id).String()); !ok {
		t.Error("submission acknowledged before it was stored")
	}
	// The AM ask is normalised to the minimum allocation (§36).
	ee := e.rm.lookup(appIDOf(t, id))
	if mb := ee.app.AMRequests()[0].GetCapability().GetMemory(); mb != 1024 {
		t.Errorf("AM ask = %d MB, want 1024", mb)
	}
	// A resubmission of the same id is accepted and changes nothing.
	sc := &yarnpb.ApplicationSubmissionContextProto{ApplicationId: id, ApplicationName: proto.String("other"),
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)}}
	mustCall(t, c, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}, &yarnpb.SubmitApplicationResponseProto{})
	if got := e.report(c, id).GetName(); got != "job" {
		t.Errorf("name after resubmission = %q", got)
	}
}

func TestSubmissionRefusals(t *testing.T) {
	tests := []struct {
		name      string
		queues    map[string]string
		acl       bool
		user      string
		sub       subOpts
		preSubmit int
		// class set: the call fails; else the application FAILs with diag.
		class     yarnerr.Class
		msg, diag string
	}{
		{name: "AM memory above maximum", sub: subOpts{memory: 100000}, user: "alice",
			class: yarnerr.InvalidResourceRequest, msg: "Invalid resource request! Cannot allocate containers as requested resource is greater than maximum allowed allocation. Requested resource type=[memory-mb], Requested resource=<memory:100000, vCores:1>, maximum allowed allocation=<memory:8192, vCores:4>, please note that maximum allowed allocation is calculated by scheduler based on maximum resource of registered NodeManagers, which might be less than configured maximum allocation=<memory:8192, vCores:4>"},
		{name: "queue ACL refuses", acl: true, user: "mallory", sub: subOpts{queue: "b"},
			queues: baseQueues(map[string]string{"yarn.scheduler.capacity.root.b.acl_submit_applications": "alice"}),
			class:  yarnerr.YarnException, msg: "org.apache.hadoop.security.AccessControlException: User mallory does not have permission to submit application_1700000000000_0001 to queue b"},
		{name: "unknown queue", user: "alice", sub: subOpts{queue: "nosuch"},
			diag: "Application application_1700000000000_0001 submitted by user alice to unknown queue: nosuch"},
		{name: "stopped queue", user: "alice", sub: subOpts{queue: "b"},
			queues: baseQueues(map[string]string{"yarn.scheduler.capacity.root.b.state": "STOPPED"}),
			diag:   "org.apache.hadoop.security.AccessControlException: Queue root.b is STOPPED. Cannot accept submission of application: application_1700000000000_0001"},
		{name: "queue maximum-applications", user: "alice", preSubmit: 1,
			queues: baseQueues(map[string]string{"yarn.scheduler.capacity.root.default.maximum-applications": "1"}),
			diag:   "org.apache.hadoop.security.AccessControlException: Queue root.default already has 1 applications, cannot accept submission of application: application_1700000000000_0002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{queues: tt.queues, aclEnable: tt.acl})
			c := e.client(tt.user)
			for range tt.preSubmit {
				e.mustSubmit(c, subOpts{})
			}
			id, err := e.submit(c, tt.sub)
			if tt.class != "" {
				wantRemote(t, err, tt.class, tt.msg)
				if e.rm.lookup(appIDOf(t, id)) != nil {
					t.Error("refused application was kept")
				}
				return
			}
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			r := e.report(c, id)
			if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED ||
				r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_FAILED {
				t.Errorf("state = %v/%v, want FAILED/FAILED", r.GetYarnApplicationState(), r.GetFinalApplicationStatus())
			}
			if r.GetDiagnostics() != tt.diag {
				t.Errorf("diagnostics = %q\nwant          %q", r.GetDiagnostics(), tt.diag)
			}
		})
	}
}

func TestKillEndsTheApplicationAndTheClientPollsUntilComplete(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})
	req := &yarnpb.KillApplicationRequestProto{ApplicationId: id, Diagnostics: proto.String("  no longer needed ")}
	first := mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{})
	if first.GetIsKillCompleted() {
		t.Error("first kill answered complete; YARN answers false until the final state is stored")
	}
	second := mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{})
	if !second.GetIsKillCompleted() {
		t.Error("second kill not complete")
	}
	r := e.report(c, id)
	if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED ||
		r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_KILLED {
		t.Errorf("state = %v/%v", r.GetYarnApplicationState(), r.GetFinalApplicationStatus())
	}
	want := "Application " + appIDOf(t, id).String() + " was killed by user alice at 127.0.0.1 with diagnostic message: no longer needed"
	if r.GetDiagnostics() != want {
		t.Errorf("diagnostics = %q\nwant %q", r.GetDiagnostics(), want)
	}
	if rec, _ := e.store.Get(appIDOf(t, id).String()); rec.State != "KILLED" {
		t.Errorf("stored state = %q", rec.State)
	}
}

func TestUnknownApplicationIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	absent := (apps.ApplicationID{ClusterTimestamp: 1700000000000, ID: 99}).Proto()
	attempt := (apps.AttemptID{App: apps.ApplicationID{ClusterTimestamp: 1700000000000, ID: 99}, ID: 1}).Proto()
	container := (apps.ContainerID{Attempt: apps.AttemptID{App: apps.ApplicationID{ClusterTimestamp: 1700000000000, ID: 99}, ID: 1}, Sequence: 1}).Proto()
	const notFound = "Application with id 'application_1700000000000_0099' doesn't exist in RM. Please check that the job submission was successful."
	tests := []struct {
		method    string
		req, resp proto.Message
		class     yarnerr.Class
		msg       string
	}{
		{"getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: absent}, &yarnpb.GetApplicationReportResponseProto{}, yarnerr.ApplicationNotFound, notFound},
		{"getApplicationReport", &yarnpb.GetApplicationReportRequestProto{}, &yarnpb.GetApplicationReportResponseProto{}, yarnerr.ApplicationNotFound, "Invalid application id: null"},
		{"forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: absent}, &yarnpb.KillApplicationResponseProto{}, yarnerr.ApplicationNotFound, "Trying to kill an absent application application_1700000000000_0099"},
		{"forceKillApplication", &yarnpb.KillApplicationRequestProto{}, &yarnpb.KillApplicationResponseProto{}, yarnerr.ApplicationNotFound, "Trying to kill an absent application null"},
		{"moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: absent, TargetQueue: proto.String("b")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{}, yarnerr.ApplicationNotFound, notFound},
		{"updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: absent, ApplicationPriority: &yarnpb.PriorityProto{}}, &yarnpb.UpdateApplicationPriorityResponseProto{}, yarnerr.ApplicationNotFound, notFound},
		{"updateApplicationTimeouts", &yarnpb.UpdateApplicationTimeoutsRequestProto{ApplicationId: absent}, &yarnpb.UpdateApplicationTimeoutsResponseProto{}, yarnerr.ApplicationNotFound, notFound},
		{"failApplicationAttempt", &yarnpb.FailApplicationAttemptRequestProto{ApplicationAttemptId: attempt}, &yarnpb.FailApplicationAttemptResponseProto{}, yarnerr.ApplicationNotFound, "Trying to fail an attempt appattempt_1700000000000_0099_000001 of an absent application application_1700000000000_0099"},
		{"getApplicationAttemptReport", &yarnpb.GetApplicationAttemptReportRequestProto{ApplicationAttemptId: attempt}, &yarnpb.GetApplicationAttemptReportResponseProto{}, yarnerr.ApplicationNotFound, "Application with id 'application_1700000000000_0099' doesn't exist in RM."},
		{"getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: absent}, &yarnpb.GetApplicationAttemptsResponseProto{}, yarnerr.ApplicationNotFound, "Application with id 'application_1700000000000_0099' doesn't exist in RM."},
		{"getContainerReport", &yarnpb.GetContainerReportRequestProto{ContainerId: container}, &yarnpb.GetContainerReportResponseProto{}, yarnerr.ApplicationNotFound, "Application with id 'application_1700000000000_0099' doesn't exist in RM."},
		{"getContainers", &yarnpb.GetContainersRequestProto{ApplicationAttemptId: attempt}, &yarnpb.GetContainersResponseProto{}, yarnerr.ApplicationNotFound, ""},
		{"getContainers", &yarnpb.GetContainersRequestProto{}, &yarnpb.GetContainersResponseProto{}, yarnerr.ApplicationNotFound, ""},
		{"signalToContainer", &yarnpb.SignalContainerRequestProto{ContainerId: container, Command: yarnpb.SignalContainerCommandProto_OUTPUT_THREAD_DUMP.Enum()}, &yarnpb.SignalContainerResponseProto{}, yarnerr.YarnException, "Trying to signal an absent container container_1700000000000_0099_01_000001"},
		{"submitApplication", &yarnpb.SubmitApplicationRequestProto{}, &yarnpb.SubmitApplicationResponseProto{}, yarnerr.ApplicationIDNotProvided, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			_, err := call(t, c, tt.method, tt.req, tt.resp)
			wantRemote(t, err, tt.class, tt.msg)
		})
	}
	// An attempt the application does not have.
	id := e.mustSubmit(c, subOpts{})
	a := apps.AttemptID{App: appIDOf(t, id), ID: 7}
	_, err := call(t, c, "getApplicationAttemptReport", &yarnpb.GetApplicationAttemptReportRequestProto{ApplicationAttemptId: a.Proto()}, &yarnpb.GetApplicationAttemptReportResponseProto{})
	wantRemote(t, err, yarnerr.ApplicationAttemptNotFound, "ApplicationAttempt with id '"+a.String()+"' doesn't exist in RM.")
}

func TestGetApplicationsFilters(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice, bob := e.client("alice"), e.client("bob")
	a1 := e.mustSubmit(alice, subOpts{name: "one", appType: "MAPREDUCE", tags: []string{"Nightly"}})
	e.clock.Add(time.Minute)
	a2 := e.mustSubmit(bob, subOpts{name: "two", appType: "SPARK", queue: "b"})
	e.clock.Add(time.Minute)
	a3 := e.mustSubmit(alice, subOpts{name: "three", queue: "nosuch"}) // FAILED
	mustCall(t, alice, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: a1}, &yarnpb.KillApplicationResponseProto{})
	start2 := e.report(alice, a2).GetStartTime()

	tests := []struct {
		name string
		req  *yarnpb.GetApplicationsRequestProto
		want []*yarnpb.ApplicationIdProto
	}{
		{"all", &yarnpb.GetApplicationsRequestProto{}, []*yarnpb.ApplicationIdProto{a1, a2, a3}},
		{"type any case", &yarnpb.GetApplicationsRequestProto{ApplicationTypes: []string{"spark"}}, []*yarnpb.ApplicationIdProto{a2}},
		{"state", &yarnpb.GetApplicationsRequestProto{ApplicationStates: []yarnpb.YarnApplicationStateProto{yarnpb.YarnApplicationStateProto_KILLED, yarnpb.YarnApplicationStateProto_FAILED}}, []*yarnpb.ApplicationIdProto{a1, a3}},
		{"user", &yarnpb.GetApplicationsRequestProto{Users: []string{"bob"}}, []*yarnpb.ApplicationIdProto{a2}},
		{"queue", &yarnpb.GetApplicationsRequestProto{Queues: []string{"root.b"}}, []*yarnpb.ApplicationIdProto{a2}},
		{"tag", &yarnpb.GetApplicationsRequestProto{ApplicationTags: []string{"nightly"}}, []*yarnpb.ApplicationIdProto{a1}},
		{"name", &yarnpb.GetApplicationsRequestProto{Name: proto.String("three")}, []*yarnpb.ApplicationIdProto{a3}},
		{"limit", &yarnpb.GetApplicationsRequestProto{Limit: proto.Int64(2)}, []*yarnpb.ApplicationIdProto{a1, a2}},
		{"start range", &yarnpb.GetApplicationsRequestProto{StartBegin: proto.Int64(start2), StartEnd: proto.Int64(start2)}, []*yarnpb.ApplicationIdProto{a2}},
		{"scope own", &yarnpb.GetApplicationsRequestProto{Scope: yarnpb.ApplicationsRequestScopeProto_OWN.Enum()}, []*yarnpb.ApplicationIdProto{a1, a3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := mustCall(t, alice, "getApplications", tt.req, &yarnpb.GetApplicationsResponseProto{})
			var got []string
			for _, r := range resp.GetApplications() {
				got = append(got, appIDOf(t, r.GetApplicationId()).String())
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, appIDOf(t, w).String())
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestACLsEnabled(t *testing.T) {
	e := newEnv(t, envOptions{aclEnable: true})
	alice, bob := e.client("alice"), e.client("bob")
	viewers := "carol"
	id := e.mustSubmit(alice, subOpts{viewACL: &viewers})
	appID := appIDOf(t, id)

	t.Run("another user's kill is refused", func(t *testing.T) {
		_, err := call(t, bob, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "org.apache.hadoop.security.AccessControlException: User bob cannot perform operation MODIFY_APP on "+appID.String())
	})
	t.Run("another user's move and priority are refused", func(t *testing.T) {
		_, err := call(t, bob, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id, TargetQueue: proto.String("b")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "org.apache.hadoop.security.AccessControlException: User bob cannot perform operation MODIFY_APP on "+appID.String())
		_, err = call(t, bob, "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(0)}}, &yarnpb.UpdateApplicationPriorityResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "org.apache.hadoop.security.AccessControlException: User bob cannot perform operation MODIFY_APP on "+appID.String())
	})
	t.Run("report without VIEW_APP hides private fields", func(t *testing.T) {
		mine := e.report(alice, id)
		theirs := e.report(bob, id)
		if theirs.GetYarnApplicationState() != mine.GetYarnApplicationState() {
			t.Error("state differs")
		}
		if theirs.GetDiagnostics() == mine.GetDiagnostics() {
			t.Errorf("diagnostics not hidden: %q", theirs.GetDiagnostics())
		}
	})
	t.Run("VIEW_APP ACL grants the attempt list", func(t *testing.T) {
		carol := e.client("carol")
		mustCall(t, carol, "getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: id}, &yarnpb.GetApplicationAttemptsResponseProto{})
		_, err := call(t, bob, "getApplicationAttempts", &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: id}, &yarnpb.GetApplicationAttemptsResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "User bob does not have privilage to see this application "+appID.String())
	})
	t.Run("viewable scope skips what the caller cannot see", func(t *testing.T) {
		resp := mustCall(t, bob, "getApplications", &yarnpb.GetApplicationsRequestProto{Scope: yarnpb.ApplicationsRequestScopeProto_VIEWABLE.Enum()}, &yarnpb.GetApplicationsResponseProto{})
		if n := len(resp.GetApplications()); n != 0 {
			t.Errorf("bob sees %d applications", n)
		}
	})
}

func TestMoveAndPriority(t *testing.T) {
	e := newEnv(t, envOptions{queues: baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.queues":           "default,b,p",
		"yarn.scheduler.capacity.root.default.capacity": "40",
		"yarn.scheduler.capacity.root.p.capacity":       "10",
		"yarn.scheduler.capacity.root.p.queues":         "x",
		"yarn.scheduler.capacity.root.p.x.capacity":     "100",
	})})
	e.rm.live.maxPriority.Store(5)
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})

	tests := []struct {
		name, target string
		class        yarnerr.Class
		msg          string
	}{
		{"unknown target", "nosuch", yarnerr.YarnException, ""},
		{"parent target", "p", yarnerr.YarnException, ""},
		{"same queue", "default", yarnerr.YarnException, ""},
		{"leaf by short name", "b", "", ""},
	}
	for _, tt := range tests {
		t.Run("move "+tt.name, func(t *testing.T) {
			_, err := call(t, c, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id, TargetQueue: proto.String(tt.target)}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
			if tt.class != "" {
				wantRemote(t, err, tt.class, tt.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := e.report(c, id).GetQueue(); q != "root.b" {
				t.Errorf("queue = %q", q)
			}
		})
	}
	t.Run("priority is capped at the cluster maximum", func(t *testing.T) {
		resp := mustCall(t, c, "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(9)}}, &yarnpb.UpdateApplicationPriorityResponseProto{})
		if resp.GetApplicationPriority().GetPriority() != 5 {
			t.Errorf("answer priority = %v", resp.GetApplicationPriority())
		}
		if p := e.report(c, id).GetPriority().GetPriority(); p != 5 {
			t.Errorf("report priority = %d", p)
		}
	})
	t.Run("finished application cannot be moved", func(t *testing.T) {
		mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		_, err := call(t, c, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id, TargetQueue: proto.String("default")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "App in KILLED state cannot be moved.")
		resp := mustCall(t, c, "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}, &yarnpb.UpdateApplicationPriorityResponseProto{})
		if resp.GetApplicationPriority().GetPriority() != 5 {
			t.Errorf("priority of a killed application changed to %v", resp.GetApplicationPriority())
		}
	})
}

func TestClusterQueriesAndDisabledFeatures(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	m := mustCall(t, c, "getClusterMetrics", &yarnpb.GetClusterMetricsRequestProto{}, &yarnpb.GetClusterMetricsResponseProto{}).GetClusterMetrics()
	if m.GetNumNodeManagers() != 2 || m.GetNumActiveNms() != 1 || m.GetNumUnhealthyNms() != 1 || m.NumShutdownNms == nil {
		t.Errorf("metrics = %v", m)
	}
	all := mustCall(t, c, "getClusterNodes", &yarnpb.GetClusterNodesRequestProto{}, &yarnpb.GetClusterNodesResponseProto{})
	if len(all.GetNodeReports()) != 2 {
		t.Errorf("nodes = %v", all)
	}
	running := mustCall(t, c, "getClusterNodes", &yarnpb.GetClusterNodesRequestProto{NodeStates: []yarnpb.NodeStateProto{yarnpb.NodeStateProto_NS_RUNNING}}, &yarnpb.GetClusterNodesResponseProto{})
	if n := running.GetNodeReports(); len(n) != 1 || n[0].GetNodeId().GetHost() != "node1" || n[0].GetNumContainers() != 1 {
		t.Errorf("running nodes = %v", running)
	}

	id := e.mustSubmit(c, subOpts{})
	qi := mustCall(t, c, "getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("default"), IncludeApplications: proto.Bool(true)}, &yarnpb.GetQueueInfoResponseProto{})
	if qi.GetQueueInfo().GetQueueName() != "default" || len(qi.GetQueueInfo().GetApplications()) != 1 ||
		!proto.Equal(qi.GetQueueInfo().GetApplications()[0].GetApplicationId(), id) {
		t.Errorf("queue info = %v", qi)
	}
	if s := qi.GetQueueInfo().GetQueueStatistics(); s.GetNumAppsPending() != 1 || s.GetNumAppsSubmitted() != 1 {
		t.Errorf("statistics = %v", s)
	}
	unknown := mustCall(t, c, "getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("nosuch")}, &yarnpb.GetQueueInfoResponseProto{})
	if unknown.QueueInfo != nil {
		t.Errorf("unknown queue answered %v", unknown)
	}
	acls := mustCall(t, c, "getQueueUserAcls", &yarnpb.GetQueueUserAclsInfoRequestProto{}, &yarnpb.GetQueueUserAclsInfoResponseProto{})
	if len(acls.GetQueueUserAcls()) != 3 {
		t.Errorf("queue ACLs = %v", acls)
	}

	empties := []struct {
		method    string
		req, resp proto.Message
	}{
		{"getNodeToLabels", &yarnpb.GetNodesToLabelsRequestProto{}, &yarnpb.GetNodesToLabelsResponseProto{}},
		{"getLabelsToNodes", &yarnpb.GetLabelsToNodesRequestProto{NodeLabels: []string{"gpu"}}, &yarnpb.GetLabelsToNodesResponseProto{}},
		{"getClusterNodeLabels", &yarnpb.GetClusterNodeLabelsRequestProto{}, &yarnpb.GetClusterNodeLabelsResponseProto{}},
		{"getClusterNodeAttributes", &yarnpb.GetClusterNodeAttributesRequestProto{}, &yarnpb.GetClusterNodeAttributesResponseProto{}},
		{"getAttributesToNodes", &yarnpb.GetAttributesToNodesRequestProto{}, &yarnpb.GetAttributesToNodesResponseProto{}},
		{"getNodesToAttributes", &yarnpb.GetNodesToAttributesRequestProto{}, &yarnpb.GetNodesToAttributesResponseProto{}},
		{"getResourceTypeInfo", &yarnpb.GetAllResourceTypeInfoRequestProto{}, &yarnpb.GetAllResourceTypeInfoResponseProto{}},
	}
	for _, tt := range empties {
		t.Run(tt.method, func(t *testing.T) { mustCall(t, c, tt.method, tt.req, tt.resp) })
	}
	refusals := []struct {
		method    string
		req, resp proto.Message
		class     yarnerr.Class
		msg       string
	}{
		{"getResourceProfiles", &yarnpb.GetAllResourceProfilesRequestProto{}, &yarnpb.GetAllResourceProfilesResponseProto{}, yarnerr.YARNFeatureNotEnabled, msgResourceProfilesDisabled},
		{"getResourceProfile", &yarnpb.GetResourceProfileRequestProto{Profile: proto.String("small")}, &yarnpb.GetResourceProfileResponseProto{}, yarnerr.YARNFeatureNotEnabled, msgResourceProfilesDisabled},
		{"getNewReservation", &yarnpb.GetNewReservationRequestProto{}, &yarnpb.GetNewReservationResponseProto{}, yarnerr.YarnException, "Reservation is not enabled. Please enable & try again"},
		{"listReservations", &yarnpb.ReservationListRequestProto{}, &yarnpb.ReservationListResponseProto{}, yarnerr.YarnException, "Reservation is not enabled. Please enable & try again"},
		{"getDelegationToken", &commonpb.GetDelegationTokenRequestProto{Renewer: proto.String("yarn")}, &commonpb.GetDelegationTokenResponseProto{}, yarnerr.YarnException, "java.io.IOException: Delegation Token can be issued only with kerberos authentication"},
		{"renewDelegationToken", &commonpb.RenewDelegationTokenRequestProto{Token: &commonpb.TokenProto{Identifier: []byte{}, Password: []byte{}, Kind: proto.String(""), Service: proto.String("")}}, &commonpb.RenewDelegationTokenResponseProto{}, yarnerr.YarnException, "java.io.IOException: Delegation Token can be renewed only with kerberos authentication"},
	}
	for _, tt := range refusals {
		t.Run(tt.method, func(t *testing.T) {
			_, err := call(t, c, tt.method, tt.req, tt.resp)
			wantRemote(t, err, tt.class, tt.msg)
		})
	}
}

func TestUpdateApplicationTimeouts(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})
	future := e.clock.Now().Add(time.Hour).UTC().Format(iso8601Layout)
	req := func(s string) *yarnpb.UpdateApplicationTimeoutsRequestProto {
		return &yarnpb.UpdateApplicationTimeoutsRequestProto{ApplicationId: id, ApplicationTimeouts: []*yarnpb.ApplicationUpdateTimeoutMapProto{
			{ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(), ExpireTime: proto.String(s)}}}
	}
	mustCall(t, c, "updateApplicationTimeouts", req(future), &yarnpb.UpdateApplicationTimeoutsResponseProto{})
	_, err := call(t, c, "updateApplicationTimeouts", req("tomorrow"), &yarnpb.UpdateApplicationTimeoutsResponseProto{})
	wantRemote(t, err, yarnerr.YarnException, "Expire time is not in ISO8601 format. ISO8601 supported format is yyyy-MM-dd'T'HH:mm:ss.SSSZ")
	_, err = call(t, c, "updateApplicationTimeouts", &yarnpb.UpdateApplicationTimeoutsRequestProto{ApplicationId: id}, &yarnpb.UpdateApplicationTimeoutsResponseProto{})
	wantRemote(t, err, yarnerr.YarnException, "At least one ApplicationTimeoutType should be configured for updating timeouts.")

	// The lifetime timer kills the application once it expires.
	e.clock.Add(2 * time.Hour)
	e.rm.fireTimeouts(context.Background())
	r := e.report(c, id)
	if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED || r.GetDiagnostics() != apps.DiagLifetimeExceeded {
		t.Errorf("after lifetime: %v %q", r.GetYarnApplicationState(), r.GetDiagnostics())
	}
}

func TestRestartAnswersTheSameReportsAndNeverRepeatsIDs(t *testing.T) {
	store, ids := newMemStore(), &testIDs{clusterTimestamp: 1700000000000}
	clock := &testClock{now: time.UnixMilli(1700000100000)}
	e := newEnv(t, envOptions{store: store, ids: ids, clock: clock})
	c := e.client("alice")
	accepted := e.mustSubmit(c, subOpts{name: "accepted", tags: []string{"x"}})
	killed := e.mustSubmit(c, subOpts{name: "killed"})
	mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: killed}, &yarnpb.KillApplicationResponseProto{})
	failed := e.mustSubmit(c, subOpts{name: "failed", queue: "nosuch"})
	moved := e.mustSubmit(c, subOpts{name: "moved"})
	mustCall(t, c, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: moved, TargetQueue: proto.String("b")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
	// The clock stands still across the restart: an accepted application's
	// scheduler note carries the time its attempt was (re)added, which a
	// restart renews, as in YARN.

	ids2 := []*yarnpb.ApplicationIdProto{accepted, killed, failed, moved}
	before := map[string]*yarnpb.ApplicationReportProto{}
	for _, id := range ids2 {
		before[appIDOf(t, id).String()] = e.report(c, id)
	}

	e2 := newEnv(t, envOptions{store: store, ids: ids, clock: clock})
	c2 := e2.client("alice")
	for _, id := range ids2 {
		got := e2.report(c2, id)
		want := before[appIDOf(t, id).String()]
		if got.GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_KILLED && got.GetProgress() == 1 {
			// YARN's AttemptRecoveredTransition sets a recovered final
			// attempt's progress to 1; before the restart a killed AM that
			// never ran reports 0.
			got.Progress = want.Progress
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s after restart:\n got %v\nwant %v", appIDOf(t, id), got, want)
		}
	}
	next := mustCall(t, c2, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	for _, id := range ids2 {
		if proto.Equal(next.GetApplicationId(), id) {
			t.Errorf("new id %v repeats", id)
		}
	}
}

func TestCompletedApplicationsBeyondTheLimitAreForgotten(t *testing.T) {
	e := newEnv(t, envOptions{maxDone: 2})
	c := e.client("alice")
	var ids []*yarnpb.ApplicationIdProto
	for range 3 {
		id := e.mustSubmit(c, subOpts{})
		mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		ids = append(ids, id)
		e.clock.Add(time.Second)
	}
	_, err := call(t, c, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: ids[0]}, &yarnpb.GetApplicationReportResponseProto{})
	wantRemote(t, err, yarnerr.ApplicationNotFound, "")
	if _, ok := e.store.Get(appIDOf(t, ids[0]).String()); ok {
		t.Error("oldest completed application still stored")
	}
	e.report(c, ids[1])
	e.report(c, ids[2])
}

// The store retries what is worth retrying itself; a write it refuses for
// good fails the submission once, with the store's reason, and the
// application with it, instead of being tried again until the client gives
// up.
func TestASubmissionTheStoreRefusesForGoodFailsAndIsNotRetried(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	e.store.failNextPuts(1)
	before := e.store.putCount()
	id, err := e.submit(c, subOpts{})
	wantRemote(t, err, yarnerr.YarnException, "")
	if !strings.Contains(err.Error(), "is invalid") {
		t.Errorf("error %v does not give the store's reason", err)
	}
	if n := e.store.putCount() - before; n != 1 {
		t.Errorf("the store was written %d times, want the refused write once", n)
	}
	if r := e.report(c, id); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED {
		t.Errorf("state = %v, want FAILED", r.GetYarnApplicationState())
	}
}

func TestSubmissionIsAcknowledgedOnlyOnceStored(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})
	stored, ok := e.store.Get(appIDOf(t, id).String())
	if !ok {
		t.Fatal("an acknowledged submission is not stored")
	}
	if stored.State == "" {
		t.Error("stored without a state")
	}
	if r := e.report(c, id); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Errorf("state = %v", r.GetYarnApplicationState())
	}
}

// A deposed RM's store refuses its writes for good: the submission is
// written once, not retried until the client gives up, and the client is
// told to find the active RM, as a standby tells it, so that a failover
// client submits again there.
func TestASubmissionTheStoreRefusesAsFencedIsSentToTheActiveRM(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	e.store.fence()
	_, err := e.submit(c, subOpts{})
	wantRemote(t, err, yarnerr.Standby, "")
	if n := e.store.fence(); n != 1 {
		t.Errorf("the fenced store was written %d times, want once", n)
	}
}

func TestNilAndEmptyRequestsDoNotPanic(t *testing.T) {
	e := newEnv(t, envOptions{})
	rm := e.rm
	ctx := context.Background() // no caller at all
	calls := map[string]func() error{
		"getNewApplication": func() error { _, err := rm.GetNewApplication(ctx, nil); return err },
		"submitApplication": func() error { _, err := rm.SubmitApplication(ctx, nil); return err },
		"submitApplication empty ctx": func() error {
			_, err := rm.SubmitApplication(ctx, &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{ApplicationId: &yarnpb.ApplicationIdProto{}}})
			return err
		},
		"getApplicationReport":        func() error { _, err := rm.GetApplicationReport(ctx, nil); return err },
		"getApplications":             func() error { _, err := rm.GetApplications(ctx, nil); return err },
		"forceKillApplication":        func() error { _, err := rm.ForceKillApplication(ctx, nil); return err },
		"failApplicationAttempt":      func() error { _, err := rm.FailApplicationAttempt(ctx, nil); return err },
		"getApplicationAttemptReport": func() error { _, err := rm.GetApplicationAttemptReport(ctx, nil); return err },
		"getApplicationAttempts":      func() error { _, err := rm.GetApplicationAttempts(ctx, nil); return err },
		"getContainerReport":          func() error { _, err := rm.GetContainerReport(ctx, nil); return err },
		"getContainers":               func() error { _, err := rm.GetContainers(ctx, nil); return err },
		"getClusterMetrics":           func() error { _, err := rm.GetClusterMetrics(ctx, nil); return err },
		"getClusterNodes":             func() error { _, err := rm.GetClusterNodes(ctx, nil); return err },
		"getQueueInfo":                func() error { _, err := rm.GetQueueInfo(ctx, nil); return err },
		"getQueueUserAcls":            func() error { _, err := rm.GetQueueUserAcls(ctx, nil); return err },
		"moveApplicationAcrossQueues": func() error { _, err := rm.MoveApplicationAcrossQueues(ctx, nil); return err },
		"updateApplicationPriority":   func() error { _, err := rm.UpdateApplicationPriority(ctx, nil); return err },
		"updateApplicationTimeouts":   func() error { _, err := rm.UpdateApplicationTimeouts(ctx, nil); return err },
		"signalToContainer":           func() error { _, err := rm.SignalToContainer(ctx, nil); return err },
		"getDelegationToken":          func() error { _, err := rm.GetDelegationToken(ctx, nil); return err },
		"renewDelegationToken":        func() error { _, err := rm.RenewDelegationToken(ctx, nil); return err },
		"cancelDelegationToken":       func() error { _, err := rm.CancelDelegationToken(ctx, nil); return err },
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			_ = f()
		})
	}
}

// TestQueueLimitsFollowApplicationsThatFinishOrMove checks that a finished
// application frees its queue's slot and a moved one takes its slot along.
func TestQueueLimitsFollowApplicationsThatFinishOrMove(t *testing.T) {
	e := newEnv(t, envOptions{queues: baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.default.maximum-applications": "1",
		"yarn.scheduler.capacity.root.b.maximum-applications":       "1",
	})})
	c := e.client("alice")
	accepted := func(queue string) (*yarnpb.ApplicationIdProto, bool) {
		t.Helper()
		id := e.mustSubmit(c, subOpts{queue: queue})
		return id, e.report(c, id).GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED
	}
	first, ok := accepted("default")
	if !ok {
		t.Fatal("first application in default refused")
	}
	if _, ok := accepted("default"); ok {
		t.Fatal("second application in default accepted above maximum-applications 1")
	}
	mustCall(t, c, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{
		ApplicationId: first, TargetQueue: proto.String("b")}, &yarnpb.MoveApplicationAcrossQueuesResponseProto{})
	if _, ok := accepted("default"); !ok {
		t.Error("default still full after its application moved to b")
	}
	if _, ok := accepted("b"); ok {
		t.Error("b accepted a second application after the move")
	}
	mustCall(t, c, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: first}, &yarnpb.KillApplicationResponseProto{})
	if _, ok := accepted("b"); !ok {
		t.Error("b still full after its application was killed")
	}
}

// An application's store write in flight (a slow or unreachable API
// server) holds its events, in order, but none of its readers: a client
// polling the report is answered at once, with the state the stored record
// would bring back, and the kill waiting on the write ends it after.
func TestAStoreWriteInFlightHoldsTheApplicationsEventsButNotItsReports(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})
	entered, release := e.store.holdPuts()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	killed := make(chan error, 1)
	killer := e.client("alice")
	go func() {
		_, err := call(t, killer, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		killed <- err
	}()
	if got := <-entered; got != appIDOf(t, id).String() {
		t.Fatalf("write of %s began, want the kill's of %s", got, appIDOf(t, id))
	}

	// The kill's final write is in flight: readers answer meanwhile.
	if r := e.report(c, id); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED {
		t.Errorf("report while the kill is being stored: state %v, want ACCEPTED (FINAL_SAVING shows the state before it)", r.GetYarnApplicationState())
	}
	// The application's next event waits for its turn: a priority change
	// sent now cannot be answered before the kill's write is done.
	moved := make(chan error, 1)
	mover := e.client("alice")
	go func() {
		_, err := call(t, mover, "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id,
			ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}, &yarnpb.UpdateApplicationPriorityResponseProto{})
		moved <- err
	}()
	list := mustCall(t, c, "getApplications", &yarnpb.GetApplicationsRequestProto{}, &yarnpb.GetApplicationsResponseProto{})
	if n := len(list.GetApplications()); n != 1 {
		t.Errorf("getApplications listed %d applications while a write was in flight, want 1", n)
	}
	select {
	case err := <-moved:
		t.Errorf("a priority change was answered (%v) while the kill's write was in flight", err)
	default:
	}

	release()
	released = true
	if err := <-killed; err != nil {
		t.Fatalf("kill: %v", err)
	}
	// Taken after the kill, on an application that has ended: answered
	// with its priority, as YARN answers it.
	if err := <-moved; err != nil {
		t.Errorf("priority change after the kill: %v", err)
	}
	if r := e.report(c, id); r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_KILLED {
		t.Errorf("state after the write = %v, want KILLED", r.GetYarnApplicationState())
	}
	if rec, _ := e.store.Get(appIDOf(t, id).String()); rec.State != "KILLED" {
		t.Errorf("stored state = %q, want KILLED", rec.State)
	}
}
