package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/rmtest"
	"github.com/knitdev/knit/scheduling"
)

// Sizes of BenchmarkQueueInfoAndHeadroomFlatInApps.
const (
	qiFewApps   = 100
	qiManyApps  = 10_000
	qiParents   = 4 // root.p0 … root.p3, each with qiLeaves leaves
	qiLeaves    = 4
	qiUsers     = 50
	qiNodes     = 100
	qiRound     = 500 * time.Millisecond
	qiMinCalls  = 20
	qiTasksEach = 2 // task containers of each running application
)

// queueRM is a ResourceManager holding apps applications of qiUsers users
// round qiParents × qiLeaves leaf queues: a third killed, a third running
// an unmanaged AM with qiTasksEach task containers, a third accepted and
// waiting for their AM; and the AM whose allocate is measured, running in
// root.p0.l0.
type queueRM struct {
	rm      *rm.ResourceManager
	clock   *testingclock.FakeClock // the RM's; the benchmark moves it
	amCtx   context.Context
	nextID  int32
	caller  context.Context
	request *yarnpb.GetQueueInfoRequestProto
}

func startQueueRM(b *testing.B, apps int) *queueRM {
	b.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	var parents []string
	for p := range qiParents {
		parents = append(parents, fmt.Sprintf("p%d", p))
		c.Set(fmt.Sprintf("yarn.scheduler.capacity.root.p%d.capacity", p), fmt.Sprint(100/qiParents))
		var leaves []string
		for l := range qiLeaves {
			leaves = append(leaves, fmt.Sprintf("l%d", l))
			c.Set(fmt.Sprintf("yarn.scheduler.capacity.root.p%d.l%d.capacity", p, l), fmt.Sprint(100/qiLeaves))
			c.Set(fmt.Sprintf("yarn.scheduler.capacity.root.p%d.l%d.minimum-user-limit-percent", p, l), "10")
		}
		c.Set(fmt.Sprintf("yarn.scheduler.capacity.root.p%d.queues", p), strings.Join(leaves, ","))
	}
	c.Set("yarn.scheduler.capacity.root.queues", strings.Join(parents, ","))
	c.Set("yarn.scheduler.capacity.maximum-applications", "100000")
	c.Set(hadoopconf.KeyRMMaxCompletedApplications, fmt.Sprint(apps)) // the RM keeps every killed one
	var nodes rmtest.NodeList
	for i := range qiNodes {
		nodes = append(nodes, rm.NodeInfo{
			Name: fmt.Sprintf("n%d", i), Host: fmt.Sprintf("node%d", i), NMPort: 8041,
			HTTPAddress: fmt.Sprintf("node%d:8042", i), Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 262144, CapabilityVcores: 64,
		})
	}
	clock := testingclock.NewFakeClock(time.UnixMilli(clusterTimestamp + 60_000))
	r := newRM(b, c, queues.Options{AdminACL: acl.Parse("*")}, rm.Config{
		Nodes: nodes, Scheduler: noopScheduler{}, // rgs_test.go's
		Clock: clock.Now,
	})
	q := &queueRM{rm: r, clock: clock, caller: asUser(context.Background(), "admin"),
		request: &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("root"), IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true)}}
	for i := range apps {
		user := fmt.Sprintf("user%d", i%qiUsers)
		queue := fmt.Sprintf("root.p%d.l%d", i%qiParents, (i/qiParents)%qiLeaves)
		switch i % 3 {
		case 0:
			id := submitUnmanaged(b, q.rm, user, queue)
			if _, err := r.ForceKillApplication(asUser(context.Background(), user), &yarnpb.KillApplicationRequestProto{ApplicationId: id.Proto()}); err != nil {
				b.Fatal(err)
			}
		case 1:
			q.runAM(b, user, queue, qiTasksEach)
		default:
			submitUnmanaged(b, q.rm, user, queue)
		}
	}
	q.amCtx = q.runAM(b, "bench", "root.p0.l0", qiTasksEach)
	return q
}

func asUser(ctx context.Context, user string) context.Context {
	return ipc.WithCaller(ctx, ipc.Caller{User: user})
}

// submitUnmanaged submits an application with an unmanaged AM to r as
// user, straight to its methods.
func submitUnmanaged(b *testing.B, r *rm.ResourceManager, user, queue string) yarnid.ApplicationID {
	ctx := asUser(context.Background(), user)
	na, err := r.GetNewApplication(ctx, &yarnpb.GetNewApplicationRequestProto{})
	if err != nil {
		b.Fatal(err)
	}
	sc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: na.GetApplicationId(), Queue: proto.String(queue), UnmanagedAm: proto.Bool(true),
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: yarnpb.NewResource(1024, 1),
	}
	if _, err := r.SubmitApplication(ctx, &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}); err != nil {
		b.Fatal(err)
	}
	id, err := yarnid.ApplicationIDFromProto(na.GetApplicationId())
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// runAM submits an application, registers its AM and hands it tasks task
// containers; it returns the AM's context (its AMRMToken identity).
func (q *queueRM) runAM(b *testing.B, user, queue string, tasks int) context.Context {
	id := submitUnmanaged(b, q.rm, user, queue)
	attempt := yarnid.AttemptID{App: id, ID: 1}
	ctx := ipc.WithCaller(context.Background(), ipc.Caller{
		User: attempt.String(), Auth: ipc.AuthToken,
		TokenIdentity: &yarnpb.AMRMTokenIdentifierProto{AppAttemptId: attempt.Proto(), KeyId: proto.Int32(1)},
	})
	if _, err := q.rm.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am"), RpcPort: proto.Int32(-1)}); err != nil {
		b.Fatal(err)
	}
	giveTasks(b, q.rm, attempt, tasks, "node1")
	return ctx
}

// giveTasks hands attempt tasks task containers of 2 GiB and a vcore on
// node, as RGS does once their pods are bound.
func giveTasks(b *testing.B, r *rm.ResourceManager, attempt yarnid.AttemptID, tasks int, node string) {
	for t := range tasks {
		cid := yarnid.ContainerID{Attempt: attempt, Sequence: int64(2 + t)}
		c := &yarnpb.ContainerProto{Id: cid.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String(node), Port: proto.Int32(8041)},
			Resource: yarnpb.NewResource(2048, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
		if err := r.SchedulerSink().Allocated(context.Background(), scheduling.Allocation{Role: launch.RoleTask, Container: c}); err != nil {
			b.Fatal(err)
		}
	}
}

// queueInfo is one getQueueInfo of root, its children recursively.
func (q *queueRM) queueInfo(b *testing.B) {
	resp, err := q.rm.GetQueueInfo(q.caller, q.request)
	if err != nil || len(resp.GetQueueInfo().GetChildQueues()) != qiParents {
		b.Fatalf("getQueueInfo: %v, %d children", err, len(resp.GetQueueInfo().GetChildQueues()))
	}
}

// allocate is one heartbeat of the measured AM, with nothing asked, a
// second after the last: the allocate that refreshes the cluster view and
// computes the headroom, the first of each second for every AM.
func (q *queueRM) allocate(b *testing.B) {
	q.clock.Step(time.Second)
	resp, err := q.rm.Allocate(q.amCtx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(q.nextID)})
	if err != nil || resp.GetLimit().GetMemory() <= 0 {
		b.Fatalf("allocate: %v, headroom %v", err, resp.GetLimit())
	}
	q.nextID = resp.GetResponseId()
}

// BenchmarkQueueInfoAndHeadroomFlatInApps measures getQueueInfo of root
// with its children recursively (4 parents of 4 leaves) and an AM's
// allocate heartbeat, which answers the CapacityScheduler's headroom (the
// clock moved a second before each, so every one refreshes the cluster
// view), against two RMs in the same run: one holding 100 applications,
// one 10,000 (a third killed, a third running with two task containers, a
// third accepted). The calls go straight to the RM's methods, one at a
// time, in rounds of qiRound alternating ABBA. It reports µs per call for
// each and the ratios 10,000/100: flat is 1.
func BenchmarkQueueInfoAndHeadroomFlatInApps(b *testing.B) {
	rms := [2]*queueRM{startQueueRM(b, qiFewApps), startQueueRM(b, qiManyApps)}
	type total struct {
		calls int
		wall  time.Duration
	}
	var info, alloc [2]total
	round := func(t *total, call func()) {
		runtime.GC()
		start := time.Now()
		n := 0
		for ; n < qiMinCalls || time.Since(start) < qiRound; n++ {
			call()
		}
		t.calls += n
		t.wall += time.Since(start)
	}
	b.ResetTimer()
	for range b.N {
		for _, k := range []int{0, 1, 1, 0} {
			q := rms[k]
			round(&info[k], func() { q.queueInfo(b) })
			round(&alloc[k], func() { q.allocate(b) })
		}
	}
	per := func(t total) float64 { return micros(t.wall) / float64(t.calls) }
	b.ReportMetric(per(info[0]), "100apps-queueinfo-µs/call")
	b.ReportMetric(per(info[1]), "10kapps-queueinfo-µs/call")
	b.ReportMetric(per(info[1])/per(info[0]), "queueinfo-10k/100")
	b.ReportMetric(per(alloc[0]), "100apps-allocate-µs/call")
	b.ReportMetric(per(alloc[1]), "10kapps-allocate-µs/call")
	b.ReportMetric(per(alloc[1])/per(alloc[0]), "allocate-10k/100")
	b.ReportMetric(0, "ns/op")
}
