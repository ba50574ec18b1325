package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/renameio/v2"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// The tests in this file talk to one knit-rm on the shared cluster over
// Hadoop RPC, as a YarnClient and `yarn rmadmin` do. It runs with ACLs on
// and knitadmin as its only admin; its queues come from a
// capacity-scheduler.xml written after it started and loaded with
// refreshQueues, so every test here also rests on refreshQueues working end
// to end.
const (
	knitAdmin = "knitadmin"
	yarnError = string(yarnerr.YarnException)
	// aclError starts the message of every ACL refusal: YARN wraps the
	// AccessControlException in a YarnException (RPCUtil.getRemoteException).
	aclError = string(yarnerr.AccessControl) + ": "
)

// queueLayout is the capacity-scheduler.xml the tests share:
//
//	root ── default  40%  anyone submits
//	     ├─ alpha    20%  anyone submits
//	     ├─ locked   10%  alice submits, ops administers
//	     ├─ small    20%  anyone submits, at most one application
//	     └─ stopped  10%  STOPPED
//
// Root's ACLs allow nobody, so a queue's own ACLs decide.
func queueLayout() map[string]string {
	const cs = "yarn.scheduler.capacity.root."
	return map[string]string{
		cs + "queues":                          "default,alpha,locked,small,stopped",
		cs + "acl_submit_applications":         " ",
		cs + "acl_administer_queue":            " ",
		cs + "default.capacity":                "40",
		cs + "default.acl_submit_applications": "*",
		cs + "alpha.capacity":                  "20",
		cs + "alpha.acl_submit_applications":   "*",
		cs + "locked.capacity":                 "10",
		cs + "locked.acl_submit_applications":  "alice",
		cs + "locked.acl_administer_queue":     "ops",
		cs + "small.capacity":                  "20",
		cs + "small.acl_submit_applications":   "*",
		cs + "small.maximum-applications":      "1",
		cs + "stopped.capacity":                "10",
		cs + "stopped.state":                   "STOPPED",
		cs + "stopped.acl_submit_applications": "*",
	}
}

// sharedRM starts knit-rm on the shared cluster the first time a test asks
// for it, writes queueLayout and has knit-rm load it with refreshQueues.
var sharedRM = sync.OnceValues(func() (*rmClient, error) {
	if err := knitBinaries(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs, err := cluster.StartRM(ctx, []string{filepath.Join(binDir, "knit-rm")},
		hadoopconf.Property{Name: hadoopconf.KeyACLEnable, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyAdminACL, Value: knitAdmin},
		// Small containers, so that twenty distshell containers fit at once.
		hadoopconf.Property{Name: "yarn.scheduler.minimum-allocation-mb", Value: "128"})
	if err != nil {
		return nil, err
	}
	c := &rmClient{addrs: addrs}
	if err := c.writeQueues(queueLayout()); err != nil {
		return nil, err
	}
	if err := c.admin(knitAdmin, "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{}); err != nil {
		return nil, fmt.Errorf("loading the test queues: %w", err)
	}
	return c, nil
})

// knitRM is sharedRM for a test.
func knitRM(t *testing.T) *rmClient {
	t.Helper()
	c, err := sharedRM()
	if err != nil {
		t.Fatalf("knit-rm on the shared cluster: %v", err)
	}
	return c
}

// rmClient calls knit-rm as any user. Each call dials anew, as a short-lived
// Hadoop client does.
type rmClient struct {
	addrs localcluster.RMAddresses
}

func (c *rmClient) rpc(addr, protocol, user, method string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := ipc.Dial(ctx, addr, ipc.ClientConfig{Protocol: protocol, User: user})
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer client.Close()
	return client.Call(ctx, method, req, resp)
}

// call makes an ApplicationClientProtocol call.
func (c *rmClient) call(user, method string, req, resp proto.Message) error {
	return c.rpc(c.addrs.Client, yarnrpc.ApplicationClientProtocolName, user, method, req, resp)
}

// admin makes a ResourceManagerAdministrationProtocol call.
func (c *rmClient) admin(user, method string, req, resp proto.Message) error {
	return c.rpc(c.addrs.Admin, yarnrpc.ResourceManagerAdministrationProtocolName, user, method, req, resp)
}

// writeQueues replaces knit-rm's capacity-scheduler.xml.
func (c *rmClient) writeQueues(props map[string]string) error {
	var list []hadoopconf.Property
	for _, k := range slices.Sorted(maps.Keys(props)) {
		list = append(list, hadoopconf.Property{Name: k, Value: props[k]})
	}
	var buf bytes.Buffer
	if err := hadoopconf.Write(&buf, list); err != nil {
		return err
	}
	path := filepath.Join(localcluster.RMConfDir(cluster.ControlPlane.Dir), "capacity-scheduler.xml")
	return renameio.WriteFile(path, buf.Bytes(), 0o644)
}

// refreshQueues writes props as capacity-scheduler.xml and asks knit-rm,
// as its admin, to load it.
func (c *rmClient) refreshQueues(props map[string]string) error {
	if err := c.writeQueues(props); err != nil {
		return err
	}
	return c.admin(knitAdmin, "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
}

// submit submits an application as YarnClientImpl does and has it killed
// when the test ends, so that it holds no queue slot afterwards.
func (c *rmClient) submit(t *testing.T, user, queue string, acls ...*yarnpb.ApplicationACLMapProto) (*yarnpb.ApplicationIdProto, error) {
	t.Helper()
	var newApp yarnpb.GetNewApplicationResponseProto
	if err := c.call(user, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &newApp); err != nil {
		t.Fatal(err)
	}
	id := newApp.GetApplicationId()
	t.Cleanup(func() {
		_ = c.call(knitAdmin, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{})
	})
	sub := &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   id,
		ApplicationName: proto.String(t.Name()),
		Queue:           proto.String(queue),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 100"}, Application_ACLs: acls},
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}}
	return id, c.call(user, "submitApplication", sub, &yarnpb.SubmitApplicationResponseProto{})
}

// mustSubmit submits and fails the test if the RPC fails.
func (c *rmClient) mustSubmit(t *testing.T, user, queue string, acls ...*yarnpb.ApplicationACLMapProto) *yarnpb.ApplicationIdProto {
	t.Helper()
	id, err := c.submit(t, user, queue, acls...)
	if err != nil {
		t.Fatalf("submit to %s as %s: %v", queue, user, err)
	}
	return id
}

func (c *rmClient) report(t *testing.T, user string, id *yarnpb.ApplicationIdProto) *yarnpb.ApplicationReportProto {
	t.Helper()
	var r yarnpb.GetApplicationReportResponseProto
	if err := c.call(user, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: id}, &r); err != nil {
		t.Fatal(err)
	}
	return r.GetApplicationReport()
}

// settled waits until the application has left the states an application
// passes through on submission, and reports it.
func (c *rmClient) settled(t *testing.T, id *yarnpb.ApplicationIdProto) *yarnpb.ApplicationReportProto {
	t.Helper()
	var r *yarnpb.ApplicationReportProto
	eventually.WithinEvery(t, time.Minute, 50*time.Millisecond, func(context.Context) error {
		r = c.report(t, knitAdmin, id)
		switch r.GetYarnApplicationState() {
		case yarnpb.YarnApplicationStateProto_NEW, yarnpb.YarnApplicationStateProto_NEW_SAVING, yarnpb.YarnApplicationStateProto_SUBMITTED:
			return fmt.Errorf("%s still %v", idString(t, id), r.GetYarnApplicationState())
		}
		return nil
	})
	return r
}

func idString(t *testing.T, id *yarnpb.ApplicationIdProto) string {
	t.Helper()
	s, err := yarnid.ApplicationIDFromProto(id)
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}

// wantRemote checks that err is the Java exception class with the message.
func wantRemote(t *testing.T, err error, class, msg string) {
	t.Helper()
	var re *ipc.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v, want %s: %s", err, class, msg)
	}
	if re.ClassName != class || re.Message != msg {
		t.Errorf("got  %s: %s\nwant %s: %s", re.ClassName, re.Message, class, msg)
	}
}

func TestRefreshQueuesReloadsCapacitySchedulerWithoutARestart(t *testing.T) {
	c := knitRM(t)
	t.Cleanup(func() {
		if err := c.refreshQueues(queueLayout()); err != nil {
			t.Errorf("restoring the shared queues: %v", err)
		}
	})
	with := func(changes map[string]string) map[string]string {
		props := queueLayout()
		maps.Copy(props, changes)
		return props
	}
	const cs = "yarn.scheduler.capacity.root."
	withExtra := with(map[string]string{cs + "queues": "default,alpha,locked,small,stopped,extra", cs + "default.capacity": "30",
		cs + "extra.capacity": "10", cs + "extra.acl_submit_applications": "*"})
	extraStopped := maps.Clone(withExtra)
	extraStopped[cs+"extra.state"] = "STOPPED"

	queueState := func(name string) string {
		var resp yarnpb.GetQueueInfoResponseProto
		if err := c.call("alice", "getQueueInfo", &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String(name)}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.QueueInfo == nil {
			return "absent"
		}
		return resp.GetQueueInfo().GetState().String()
	}
	steps := []struct {
		name  string
		files map[string]string
		user  string
		// class and msg are the refusal; empty means the refresh succeeds.
		class, msg string
		// The state getQueueInfo then gives the queue extra.
		extra string
	}{
		{name: "a new queue appears", files: withExtra, user: knitAdmin, extra: "Q_RUNNING"},
		{name: "a queue is stopped", files: extraStopped, user: knitAdmin, extra: "Q_STOPPED"},
		{name: "a stopped, empty queue is removed", files: queueLayout(), user: knitAdmin, extra: "absent"},
		{name: "a user not on yarn.admin.acl is refused", files: withExtra, user: "bob",
			class: yarnError, msg: aclError + "User bob doesn't have permission to call 'refreshQueues'", extra: "absent"},
		{name: "an invalid file changes nothing", files: with(map[string]string{cs + "default.capacity": "50"}), user: knitAdmin,
			class: yarnError, msg: "java.io.IOException: Failed to re-init queues : Illegal capacity sum of 1.1 for children of queue root for label=. It should be either 0 or 1.0",
			extra: "absent"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := c.writeQueues(s.files); err != nil {
				t.Fatal(err)
			}
			err := c.admin(s.user, "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
			if s.class != "" {
				wantRemote(t, err, s.class, s.msg)
			} else if err != nil {
				t.Fatalf("refreshQueues: %v", err)
			}
			if got := queueState("extra"); got != s.extra {
				t.Errorf("queue extra: %s, want %s", got, s.extra)
			}
		})
	}
	t.Run("a queue holding applications is not removed", func(t *testing.T) {
		if err := c.refreshQueues(withExtra); err != nil {
			t.Fatal(err)
		}
		id := c.mustSubmit(t, "alice", "extra")
		err := c.refreshQueues(queueLayout())
		wantRemote(t, err, yarnError, "java.io.IOException: Failed to re-init queues : root.extra cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : RUNNING")
		if q := c.report(t, "alice", id).GetQueue(); q != "root.extra" {
			t.Errorf("the application is in %q", q)
		}
		// Once it is gone the queue can be stopped and dropped.
		killAndWait(t, c, id)
		if err := c.refreshQueues(extraStopped); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("knit rmadmin -refreshQueues answers as yarn rmadmin, then says what the RM read", func(t *testing.T) {
		tests := []struct {
			user, out string
			code      int
		}{
			{user: knitAdmin, out: "capacity-scheduler.xml in this client's configuration: " +
				filepath.Join(localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "capacity-scheduler.xml") + "\n" +
				"the ResourceManager's queues: root, root.default, root.alpha, root.locked, root.small, root.stopped, root.extra\n"},
			{user: "bob", code: 255, out: "refreshQueues: " + aclError + "User bob doesn't have permission to call 'refreshQueues'\n"},
		}
		for _, tt := range tests {
			cmd := exec.Command(filepath.Join(binDir, "knit"), "rmadmin", "-refreshQueues")
			cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "HADOOP_USER_NAME="+tt.user)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tt.code || string(out) != tt.out {
				t.Errorf("as %s: exit %d, output %q; want %d, %q", tt.user, code, out, tt.code, tt.out)
			}
		}
	})
}

// killAndWait kills an application as its admin and waits until it is
// KILLED, so that it no longer counts in its queue.
func killAndWait(t *testing.T, c *rmClient, id *yarnpb.ApplicationIdProto) {
	t.Helper()
	if err := c.call(knitAdmin, "forceKillApplication", &yarnpb.KillApplicationRequestProto{ApplicationId: id}, &yarnpb.KillApplicationResponseProto{}); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 50*time.Millisecond, func(context.Context) error {
		if s := c.report(t, knitAdmin, id).GetYarnApplicationState(); s != yarnpb.YarnApplicationStateProto_KILLED {
			return fmt.Errorf("%s %v, want KILLED", idString(t, id), s)
		}
		return nil
	})
}

func TestMoveApplicationAcrossQueuesChecksTheTargetAsASubmission(t *testing.T) {
	c := knitRM(t)
	id := c.mustSubmit(t, "carol", "default")
	app := idString(t, id)
	// One application, moved (or not) row after row.
	tests := []struct {
		name, user, target string
		// msg is the YarnException's message; empty means the move
		// succeeds and the application then reports queue.
		msg, queue string
	}{
		{name: "to an unknown queue", user: "carol", target: "nosuch",
			msg: aclError + "User carol cannot submit applications to target queue or the target queue doesn't exist: nosuch while moving " + app},
		{name: "to a queue the owner may not submit to", user: "carol", target: "locked",
			msg: aclError + "User carol cannot submit applications to target queue or the target queue doesn't exist: locked while moving " + app},
		{name: "to a stopped queue", user: "carol", target: "stopped",
			msg: aclError + "Queue root.stopped is STOPPED. Cannot accept submission of application: " + app},
		{name: "by a user without MODIFY_APP", user: "bob", target: "alpha",
			msg: aclError + "User bob cannot perform operation MODIFY_APP on " + app},
		{name: "by its owner to another leaf queue", user: "carol", target: "alpha", queue: "root.alpha"},
		{name: "to the queue it is in", user: "carol", target: "root.alpha",
			msg: "App " + app + " is already present in queue root.alpha"},
		{name: "by an admin, back by short name", user: knitAdmin, target: "default", queue: "root.default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.call(tt.user, "moveApplicationAcrossQueues", &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id, TargetQueue: proto.String(tt.target)},
				&yarnpb.MoveApplicationAcrossQueuesResponseProto{})
			if tt.msg != "" {
				wantRemote(t, err, yarnError, tt.msg)
				return
			}
			if err != nil {
				t.Fatalf("move: %v", err)
			}
			if q := c.report(t, "carol", id).GetQueue(); q != tt.queue {
				t.Errorf("queue after the move = %q, want %q", q, tt.queue)
			}
		})
	}
}

func TestACLsRefuseUsersWithoutTheRightOnTheApplicationOrQueue(t *testing.T) {
	c := knitRM(t)
	viewers := &yarnpb.ApplicationACLMapProto{AccessType: yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP.Enum(), Acl: proto.String("viewer")}
	inDefault := c.mustSubmit(t, "alice", "default", viewers)
	inLocked := c.mustSubmit(t, "alice", "locked")
	app := idString(t, inDefault)
	priority := func(id *yarnpb.ApplicationIdProto) proto.Message {
		return &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id, ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(0)}}
	}
	kill := func(id *yarnpb.ApplicationIdProto) proto.Message {
		return &yarnpb.KillApplicationRequestProto{ApplicationId: id}
	}
	attempts := &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: inDefault}
	tests := []struct {
		name, user, method string
		req, resp          proto.Message
		// msg is the YarnException's message; empty means allowed.
		msg string
	}{
		{"another user cannot kill", "bob", "forceKillApplication", kill(inDefault), &yarnpb.KillApplicationResponseProto{},
			aclError + "User bob cannot perform operation MODIFY_APP on " + app},
		{"another user cannot change the priority", "bob", "updateApplicationPriority", priority(inDefault), &yarnpb.UpdateApplicationPriorityResponseProto{},
			aclError + "User bob cannot perform operation MODIFY_APP on " + app},
		{"a viewer cannot kill either", "viewer", "forceKillApplication", kill(inDefault), &yarnpb.KillApplicationResponseProto{},
			aclError + "User viewer cannot perform operation MODIFY_APP on " + app},
		{"another user cannot list the attempts", "bob", "getApplicationAttempts", attempts, &yarnpb.GetApplicationAttemptsResponseProto{},
			"User bob does not have privilage to see this application " + app},
		{"a user on the VIEW_APP ACL lists them", "viewer", "getApplicationAttempts", attempts, &yarnpb.GetApplicationAttemptsResponseProto{}, ""},
		{"the queue's administrator changes the priority", "ops", "updateApplicationPriority", priority(inLocked), &yarnpb.UpdateApplicationPriorityResponseProto{}, ""},
		{"yarn.admin.acl changes the priority", knitAdmin, "updateApplicationPriority", priority(inDefault), &yarnpb.UpdateApplicationPriorityResponseProto{}, ""},
		{"the owner changes the priority", "alice", "updateApplicationPriority", priority(inDefault), &yarnpb.UpdateApplicationPriorityResponseProto{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.call(tt.user, tt.method, tt.req, tt.resp)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("%s as %s: %v", tt.method, tt.user, err)
				}
				return
			}
			wantRemote(t, err, yarnError, tt.msg)
		})
	}
	t.Run("another user's report hides what VIEW_APP guards", func(t *testing.T) {
		// ClientRMService fills what the caller may not see with "N/A" and
		// attempt -1.
		mine, theirs := c.report(t, "alice", inDefault), c.report(t, "bob", inDefault)
		if mine.GetDiagnostics() == "N/A" || theirs.GetDiagnostics() != "N/A" || theirs.GetCurrentApplicationAttemptId().GetAttemptId() != -1 {
			t.Errorf("alice sees diagnostics %q; bob sees diagnostics %q and attempt %v", mine.GetDiagnostics(), theirs.GetDiagnostics(), theirs.GetCurrentApplicationAttemptId())
		}
		if theirs.GetYarnApplicationState() != mine.GetYarnApplicationState() || theirs.GetUser() != "alice" {
			t.Errorf("bob's report: %v by %q", theirs.GetYarnApplicationState(), theirs.GetUser())
		}
	})
	t.Run("a user without SUBMIT_APPLICATIONS cannot submit to the queue", func(t *testing.T) {
		id, err := c.submit(t, "bob", "locked")
		wantRemote(t, err, yarnError, aclError+"User bob does not have permission to submit "+idString(t, id)+" to queue locked")
		var r yarnpb.GetApplicationReportResponseProto
		err = c.call(knitAdmin, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: id}, &r)
		if !errors.Is(err, yarnerr.ApplicationNotFound) {
			t.Errorf("the refused application is known to the RM: %v %v", err, r.GetApplicationReport())
		}
	})
	t.Run("a user not on yarn.admin.acl cannot administer the RM", func(t *testing.T) {
		err := c.admin("alice", "refreshAdminAcls", &yarnpb.RefreshAdminAclsRequestProto{}, &yarnpb.RefreshAdminAclsResponseProto{})
		wantRemote(t, err, yarnError, aclError+"User alice doesn't have permission to call 'refreshAdminAcls'")
	})
}

func TestQueueLimitsRejectTheApplicationAsYARNDoes(t *testing.T) {
	c := knitRM(t)
	// The RPC succeeds; the scheduler then rejects the application, which
	// ends FAILED with the scheduler's reason as its diagnostics (a
	// YarnClient throws "Failed to submit ... to YARN" with them).
	tests := []struct {
		name, queue string
		// before are submitted to the queue first, and accepted.
		before int
		diag   string // %s is the application id
	}{
		{name: "maximum-applications reached", queue: "small", before: 1,
			diag: aclError + "Queue root.small already has 1 applications, cannot accept submission of application: %s"},
		{name: "a stopped queue", queue: "stopped",
			diag: aclError + "Queue root.stopped is STOPPED. Cannot accept submission of application: %s"},
		{name: "an unknown queue", queue: "nosuch",
			diag: "Application %s submitted by user alice to unknown queue: nosuch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range tt.before {
				if r := c.settled(t, c.mustSubmit(t, "alice", tt.queue)); r.GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_FAILED {
					t.Fatalf("a submission below the limit failed: %s", r.GetDiagnostics())
				}
			}
			id := c.mustSubmit(t, "alice", tt.queue)
			r := c.settled(t, id)
			want := fmt.Sprintf(tt.diag, idString(t, id))
			if r.GetYarnApplicationState() != yarnpb.YarnApplicationStateProto_FAILED ||
				r.GetFinalApplicationStatus() != yarnpb.FinalApplicationStatusProto_APP_FAILED || r.GetDiagnostics() != want {
				t.Errorf("got %v/%v %q\nwant FAILED/FAILED %q", r.GetYarnApplicationState(), r.GetFinalApplicationStatus(), r.GetDiagnostics(), want)
			}
		})
	}
}
