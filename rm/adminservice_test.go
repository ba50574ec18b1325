package rm

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/queues"
)

// siteFiles stands for the RM's configuration folder: what LoadConf reads
// is whatever the test last wrote.
type siteFiles struct {
	mu    sync.Mutex
	props map[string]string
	err   error
}

func (f *siteFiles) write(props map[string]string) {
	f.mu.Lock()
	f.props, f.err = maps.Clone(props), nil
	f.mu.Unlock()
}

func (f *siteFiles) breakWith(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *siteFiles) load(context.Context) (*hadoopconf.Configuration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range f.props {
		c.Set(k, v)
	}
	return c, nil
}

// serveAdmin serves the env's RM's admin protocol on a loopback port, with
// "yarn" as the RM's own user, and returns the address and the files its
// refreshes read (at first, the env's queues).
func (e *env) serveAdmin(queueProps map[string]string) (string, *siteFiles) {
	e.t.Helper()
	if queueProps == nil {
		queueProps = baseQueues(nil)
	}
	files := &siteFiles{}
	files.write(queueProps)
	a, err := NewAdminService(e.rm, AdminConfig{LoadConf: files.load, DaemonUser: "yarn", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := a.Register(srv); err != nil {
		e.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), files
}

// admin dials the admin port as user, as `yarn rmadmin` does.
func (e *env) admin(addr, user string) *ipc.Client {
	e.t.Helper()
	c, err := ipc.Dial(context.Background(), addr, ipc.ClientConfig{Protocol: yarnrpc.ResourceManagerAdministrationProtocolName, User: user})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func deniedAdmin(user, method string) string {
	return "org.apache.hadoop.security.AccessControlException: User " + user + " doesn't have permission to call '" + method + "'"
}

func TestEveryAdminCallAnswersAsAYARNRMWithTheSameFeatures(t *testing.T) {
	e := newEnv(t, envOptions{adminACL: "admin"})
	addr, _ := e.serveAdmin(baseQueues(map[string]string{hadoopconf.KeyAdminACL: "admin"}))
	admin, bob := e.admin(addr, "admin"), e.admin(addr, "bob")
	const (
		labelsOff  = "java.io.IOException: Node-label-based scheduling is disabled. Please check yarn.node-labels.enabled"
		serviceOff = "java.io.IOException: Service Authorization (hadoop.security.authorization) not enabled."
	)
	node := &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)}
	tests := []struct {
		method    string
		req, resp proto.Message
		// The admin's answer: success when adminClass is empty.
		adminClass yarnerr.Class
		adminMsg   string
		// The answer to bob, who is not on yarn.admin.acl.
		bobClass yarnerr.Class
		bobMsg   string
	}{
		{method: "refreshQueues", req: &yarnpb.RefreshQueuesRequestProto{}, resp: &yarnpb.RefreshQueuesResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshQueues")},
		{method: "refreshNodes", req: &yarnpb.RefreshNodesRequestProto{DecommissionType: yarnpb.DecommissionTypeProto_GRACEFUL.Enum()}, resp: &yarnpb.RefreshNodesResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshNodes")},
		{method: "refreshSuperUserGroupsConfiguration", req: &yarnpb.RefreshSuperUserGroupsConfigurationRequestProto{}, resp: &yarnpb.RefreshSuperUserGroupsConfigurationResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshSuperUserGroupsConfiguration")},
		{method: "refreshUserToGroupsMappings", req: &yarnpb.RefreshUserToGroupsMappingsRequestProto{}, resp: &yarnpb.RefreshUserToGroupsMappingsResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshUserToGroupsMappings")},
		{method: "refreshAdminAcls", req: &yarnpb.RefreshAdminAclsRequestProto{}, resp: &yarnpb.RefreshAdminAclsResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshAdminAcls")},
		{method: "refreshServiceAcls", req: &yarnpb.RefreshServiceAclsRequestProto{}, resp: &yarnpb.RefreshServiceAclsResponseProto{},
			adminClass: yarnerr.YarnException, adminMsg: serviceOff, bobClass: yarnerr.YarnException, bobMsg: serviceOff},
		{method: "getGroupsForUser", req: &yarnpb.GetGroupsForUserRequestProto{User: proto.String("carol")}, resp: &yarnpb.GetGroupsForUserResponseProto{},
			bobClass: yarnerr.IOException, bobMsg: string(yarnerr.YarnException) + ": " + deniedAdmin("bob", "getGroupsForUser")},
		{method: "updateNodeResource", req: &yarnpb.UpdateNodeResourceRequestProto{}, resp: &yarnpb.UpdateNodeResourceResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "updateNodeResource")},
		{method: "refreshNodesResources", req: &yarnpb.RefreshNodesResourcesRequestProto{}, resp: &yarnpb.RefreshNodesResourcesResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshNodesResources")},
		{method: "addToClusterNodeLabels", req: &yarnpb.AddToClusterNodeLabelsRequestProto{NodeLabels: []*yarnpb.NodeLabelProto{{Name: proto.String("gpu")}}}, resp: &yarnpb.AddToClusterNodeLabelsResponseProto{},
			adminClass: yarnerr.YarnException, adminMsg: labelsOff, bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "addToClusterNodeLabels")},
		{method: "removeFromClusterNodeLabels", req: &yarnpb.RemoveFromClusterNodeLabelsRequestProto{NodeLabels: []string{"gpu"}}, resp: &yarnpb.RemoveFromClusterNodeLabelsResponseProto{},
			adminClass: yarnerr.YarnException, adminMsg: labelsOff, bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "removeFromClusterNodeLabels")},
		{method: "replaceLabelsOnNodes", req: &yarnpb.ReplaceLabelsOnNodeRequestProto{NodeToLabels: []*yarnpb.NodeIdToLabelsProto{{NodeId: node, NodeLabels: []string{"gpu"}}}}, resp: &yarnpb.ReplaceLabelsOnNodeResponseProto{},
			adminClass: yarnerr.YarnException, adminMsg: labelsOff, bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "replaceLabelsOnNode")},
		{method: "checkForDecommissioningNodes", req: &yarnpb.CheckForDecommissioningNodesRequestProto{}, resp: &yarnpb.CheckForDecommissioningNodesResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "checkForDecommissioningNodes")},
		{method: "refreshClusterMaxPriority", req: &yarnpb.RefreshClusterMaxPriorityRequestProto{}, resp: &yarnpb.RefreshClusterMaxPriorityResponseProto{},
			bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "refreshClusterMaxPriority")},
		{method: "mapAttributesToNodes", req: &yarnpb.NodesToAttributesMappingRequestProto{}, resp: &yarnpb.NodesToAttributesMappingResponseProto{},
			adminClass: yarnerr.YarnException, adminMsg: "java.io.IOException: " + msgNodeAttributesUnsupported, bobClass: yarnerr.YarnException, bobMsg: deniedAdmin("bob", "mapAttributesToNodes")},
		{method: "deregisterSubCluster", req: &yarnpb.DeregisterSubClusterRequestProto{}, resp: &yarnpb.DeregisterSubClusterResponseProto{},
			adminClass: yarnerr.Class(ipc.ClassNoSuchMethod), bobClass: yarnerr.Class(ipc.ClassNoSuchMethod)},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			_, err := call(t, bob, tt.method, tt.req, proto.Clone(tt.resp))
			wantRemote(t, err, tt.bobClass, tt.bobMsg)
			_, err = call(t, admin, tt.method, tt.req, proto.Clone(tt.resp))
			if tt.adminClass == "" {
				if err != nil {
					t.Fatalf("admin: %v", err)
				}
				return
			}
			wantRemote(t, err, tt.adminClass, tt.adminMsg)
		})
	}
	t.Run("the RM's own user is always an admin", func(t *testing.T) {
		mustCall(t, e.admin(addr, "yarn"), "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
	})
}

func TestRefreshQueuesReloadsTheHierarchyWithoutARestart(t *testing.T) {
	e := newEnv(t, envOptions{adminACL: "admin"})
	addr, files := e.serveAdmin(nil)
	admin, alice := e.admin(addr, "admin"), e.client("alice")
	inB := e.mustSubmit(alice, subOpts{queue: "b"})

	threeQueues := baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.queues":                    "default,b,c",
		"yarn.scheduler.capacity.root.default.capacity":          "40",
		"yarn.scheduler.capacity.root.b.capacity":                "30",
		"yarn.scheduler.capacity.root.c.capacity":                "30",
		"yarn.scheduler.capacity.root.c.acl_submit_applications": "*",
		"yarn.scheduler.capacity.root.c.maximum-applications":    "1",
	})
	withStopped := func(q string) map[string]string {
		p := maps.Clone(threeQueues)
		p["yarn.scheduler.capacity.root."+q+".state"] = "STOPPED"
		return p
	}
	steps := []struct {
		name  string
		files map[string]string
		// msg is the refusal; empty means the refresh succeeds.
		msg string
		// A submission to queue after the refresh ends in state with
		// diagnostics diag (checked when not empty).
		queue string
		state yarnpb.YarnApplicationStateProto
		diag  string
	}{
		{name: "a new queue takes submissions", files: threeQueues,
			queue: "c", state: yarnpb.YarnApplicationStateProto_ACCEPTED},
		{name: "the new queue's limit holds", files: threeQueues,
			queue: "c", state: yarnpb.YarnApplicationStateProto_FAILED,
			diag: "org.apache.hadoop.security.AccessControlException: Queue root.c already has 1 applications, cannot accept submission of application: application_1700000000000_0003"},
		{name: "an invalid configuration changes nothing",
			files: baseQueues(map[string]string{"yarn.scheduler.capacity.root.b.capacity": "70"}),
			msg:   "java.io.IOException: Failed to re-init queues : Illegal capacity sum of 1.2 for children of queue root for label=. It should be either 0 or 1.0",
			queue: "c", state: yarnpb.YarnApplicationStateProto_FAILED},
		{name: "a queue holding applications cannot be removed",
			files: baseQueues(map[string]string{"yarn.scheduler.capacity.root.queues": "default", "yarn.scheduler.capacity.root.default.capacity": "100"}),
			msg:   "java.io.IOException: Failed to re-init queues : root.b cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : RUNNING",
			queue: "b", state: yarnpb.YarnApplicationStateProto_ACCEPTED},
		{name: "a stopped queue refuses submissions", files: withStopped("default"),
			queue: "default", state: yarnpb.YarnApplicationStateProto_FAILED,
			diag: "org.apache.hadoop.security.AccessControlException: Queue root.default is STOPPED. Cannot accept submission of application: application_1700000000000_0006"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			files.write(s.files)
			_, err := call(t, admin, "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
			if s.msg != "" {
				wantRemote(t, err, yarnerr.YarnException, s.msg)
			} else if err != nil {
				t.Fatalf("refreshQueues: %v", err)
			}
			r := e.report(alice, e.mustSubmit(alice, subOpts{queue: s.queue}))
			if r.GetYarnApplicationState() != s.state || (s.diag != "" && r.GetDiagnostics() != s.diag) {
				t.Errorf("submission to %s: %v %q, want %v %q", s.queue, r.GetYarnApplicationState(), r.GetDiagnostics(), s.state, s.diag)
			}
		})
	}
	if q := e.report(alice, inB).GetQueue(); q != "root.b" {
		t.Errorf("the application in b now reports queue %q", q)
	}
	t.Run("unreadable files answer an IOException", func(t *testing.T) {
		files.breakWith(errors.New("capacity-scheduler.xml: unexpected EOF"))
		_, err := call(t, admin, "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
		wantRemote(t, err, yarnerr.YarnException, "java.io.IOException: capacity-scheduler.xml: unexpected EOF")
	})
}

func TestRefreshAdminAclsChangesWhoAdministersTheRMAndItsApplications(t *testing.T) {
	e := newEnv(t, envOptions{aclEnable: true, adminACL: "admin"})
	addr, files := e.serveAdmin(nil)
	id := e.mustSubmit(e.client("alice"), subOpts{})
	kill := func(user string) error {
		_, err := call(t, e.client(user), "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
		return err
	}
	if err := kill("carol"); err == nil {
		t.Fatal("carol killed alice's application before she was an admin")
	}

	files.write(baseQueues(map[string]string{hadoopconf.KeyAdminACL: "carol"}))
	mustCall(t, e.admin(addr, "admin"), "refreshAdminAcls", &yarnpb.RefreshAdminAclsRequestProto{}, &yarnpb.RefreshAdminAclsResponseProto{})

	_, err := call(t, e.admin(addr, "admin"), "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
	wantRemote(t, err, yarnerr.YarnException, deniedAdmin("admin", "refreshQueues"))
	mustCall(t, e.admin(addr, "carol"), "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
	// refreshQueues keeps the refreshed admin ACL.
	if err := kill("carol"); err != nil {
		t.Errorf("the new admin cannot kill another user's application: %v", err)
	}
}

func TestRefreshClusterMaxPriorityCapsLaterUpdates(t *testing.T) {
	e := newEnv(t, envOptions{adminACL: "admin"})
	addr, files := e.serveAdmin(nil)
	alice := e.client("alice")
	id := e.mustSubmit(alice, subOpts{})
	update := func() int32 {
		return mustCall(t, alice, "updateApplicationPriority", &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(9)}},
			&yarnpb.UpdateApplicationPriorityResponseProto{}).GetApplicationPriority().GetPriority()
	}
	if p := update(); p != 0 {
		t.Fatalf("priority before the refresh = %d, want YARN's default maximum 0", p)
	}
	files.write(baseQueues(map[string]string{hadoopconf.KeyClusterMaxApplicationPriority: "7"}))
	mustCall(t, e.admin(addr, "admin"), "refreshClusterMaxPriority", &yarnpb.RefreshClusterMaxPriorityRequestProto{}, &yarnpb.RefreshClusterMaxPriorityResponseProto{})
	if p := update(); p != 7 {
		t.Errorf("priority after the refresh = %d, want 7", p)
	}
}

func TestNodeAdminCallsAnswerForTheKubernetesNodes(t *testing.T) {
	nodes := fixedNodes{
		{Name: "n1", Host: "node1", NMPort: 8041, State: yarnpb.NodeStateProto_NS_RUNNING},
		{Name: "n2", Host: "node2", NMPort: 8041, State: yarnpb.NodeStateProto_NS_DECOMMISSIONING},
	}
	e := newEnv(t, envOptions{adminACL: "admin", nodes: nodes})
	addr, _ := e.serveAdmin(nil)
	admin := e.admin(addr, "admin")
	id := func(host string, port int32) *yarnpb.NodeIdProto {
		return &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(port)}
	}
	resize := func(ids ...*yarnpb.NodeIdProto) *yarnpb.UpdateNodeResourceRequestProto {
		req := &yarnpb.UpdateNodeResourceRequestProto{}
		for _, n := range ids {
			req.NodeResourceMap = append(req.NodeResourceMap, &yarnpb.NodeResourceMapProto{NodeId: n,
				ResourceOption: &yarnpb.ResourceOptionProto{Resource: yarnpb.NewResource(4096, 4)}})
		}
		return req
	}
	relabel := func(ids ...*yarnpb.NodeIdProto) *yarnpb.ReplaceLabelsOnNodeRequestProto {
		req := &yarnpb.ReplaceLabelsOnNodeRequestProto{FailOnUnknownNodes: proto.Bool(true)}
		for _, n := range ids {
			req.NodeToLabels = append(req.NodeToLabels, &yarnpb.NodeIdToLabelsProto{NodeId: n, NodeLabels: []string{"gpu"}})
		}
		return req
	}
	tests := []struct {
		name, method string
		req, resp    proto.Message
		msg          string
	}{
		{"resizing an unknown node", "updateNodeResource", resize(id("node1", 8041), id("node9", 8041)), &yarnpb.UpdateNodeResourceResponseProto{},
			"Resource update get failed on all nodes due to change resource on an unrecognized node: node9:8041"},
		{"resizing a Kubernetes node", "updateNodeResource", resize(id("node1", 8041)), &yarnpb.UpdateNodeResourceResponseProto{},
			"Knit takes a node's resources from its Kubernetes allocatable; change that to resize node1:8041"},
		{"labelling unknown nodes", "replaceLabelsOnNodes", relabel(id("node1", 0), id("node9", 0), id("node2", 1)), &yarnpb.ReplaceLabelsOnNodeResponseProto{},
			"java.io.IOException: Failed to replace labels as there are unknown nodes:[node9:0, node2:1]"},
		{"labelling known nodes", "replaceLabelsOnNodes", relabel(id("node1", 0), id("node2", 8041)), &yarnpb.ReplaceLabelsOnNodeResponseProto{},
			"java.io.IOException: Node-label-based scheduling is disabled. Please check yarn.node-labels.enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, admin, tt.method, tt.req, tt.resp)
			wantRemote(t, err, yarnerr.YarnException, tt.msg)
		})
	}
	t.Run("a cordoned node is decommissioning", func(t *testing.T) {
		resp := mustCall(t, admin, "checkForDecommissioningNodes", &yarnpb.CheckForDecommissioningNodesRequestProto{}, &yarnpb.CheckForDecommissioningNodesResponseProto{})
		if got := resp.GetDecommissioningNodes(); len(got) != 1 || yarnid.NodeString(got[0]) != "node2:8041" {
			t.Errorf("decommissioning nodes = %v", got)
		}
	})
}

func TestGetGroupsForUserAnswersTheRMsGroupMapping(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range baseQueues(nil) {
		c.Set(k, v)
	}
	groups := map[string][]string{"carol": {"analysts", "etl"}}
	tree, err := queues.Build(c, queues.Options{AdminACL: acl.AllowAll(), Groups: func(u string) []string { return groups[u] }})
	if err != nil {
		t.Fatal(err)
	}
	e.rm.live.tree.Store(tree)
	addr, _ := e.serveAdmin(nil)
	admin := e.admin(addr, "admin")
	for user, want := range map[string][]string{"carol": {"analysts", "etl"}, "dave": nil} {
		resp := mustCall(t, admin, "getGroupsForUser", &yarnpb.GetGroupsForUserRequestProto{User: proto.String(user)}, &yarnpb.GetGroupsForUserResponseProto{})
		if got := resp.GetGroups(); !slices.Equal(got, want) {
			t.Errorf("groups of %s = %q, want %q", user, got, want)
		}
	}
}

func TestRefreshesAndSubmissionsRunConcurrently(t *testing.T) {
	e := newEnv(t, envOptions{adminACL: "admin"})
	addr, _ := e.serveAdmin(nil)
	admin, alice := e.admin(addr, "admin"), e.client("alice")
	// submit is env.submit without t.Fatal, which only the test's own
	// goroutine may call.
	submit := func(queue string) error {
		ctx := context.Background()
		newApp := &yarnpb.GetNewApplicationResponseProto{}
		if err := alice.Call(ctx, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, newApp); err != nil {
			return err
		}
		sc := &yarnpb.ApplicationSubmissionContextProto{ApplicationId: newApp.GetApplicationId(), Queue: proto.String(queue),
			Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)}}
		return alice.Call(ctx, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}, &yarnpb.SubmitApplicationResponseProto{})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- admin.Call(context.Background(), "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
		}()
		go func() {
			defer wg.Done()
			errs <- submit([]string{"default", "b"}[i%2])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	resp := mustCall(t, alice, "getApplications", &yarnpb.GetApplicationsRequestProto{}, &yarnpb.GetApplicationsResponseProto{})
	for _, r := range resp.GetApplications() {
		if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_ACCEPTED || !strings.HasPrefix(r.GetQueue(), "root.") {
			t.Errorf("%v in %s: %s", r.GetYarnApplicationState(), r.GetQueue(), r.GetDiagnostics())
		}
	}
}
