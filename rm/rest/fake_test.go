package rest

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/test/recordings"
)

const clusterTS = 1795333013199

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(recordings.Path(t, "hadoop-rest", name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// fakeCluster holds what the real RM of the recordings held.
type fakeCluster struct {
	mu        sync.Mutex
	info      ClusterInfo
	scheduler json.RawMessage
	apps      []App
	attempts  map[string][]Attempt
	nodes     []Node
	// labels are the cluster's node labels.
	labels []NodeLabel
	// containers are the live containers' reports.
	containers []*yarnpb.ContainerReportProto
	owner      map[string]string // app id → user allowed to kill
	killNow    bool              // Kill completes at once
	submitted  []*yarnpb.ApplicationSubmissionContextProto
	killed     []string
	// reservationErr is every reservation call's answer, the RM's
	// refusal unless a test changes it; reservationCalls the calls made.
	reservationErr   error
	reservationCalls []reservationCall
}

// reservationCall is one reservation call the fake got.
type reservationCall struct {
	name, user string
	req        proto.Message
}

func i64(v int64) *int64     { return &v }
func i32(v int32) *int32     { return &v }
func str(v string) *string   { return &v }
func f32(v float32) *float32 { return &v }

func res(mem int64, vc int32) *yarnpb.ResourceProto {
	return &yarnpb.ResourceProto{Memory: &mem, VirtualCores: &vc}
}

func amContainer(app int32) *yarnpb.ContainerProto {
	id := apps.ContainerID{Attempt: apps.AttemptID{App: apps.ApplicationID{ClusterTimestamp: clusterTS, ID: app}, ID: 1}, Sequence: 1}
	return &yarnpb.ContainerProto{
		Id:              id.Proto(),
		NodeId:          &yarnpb.NodeIdProto{Host: str("localhost"), Port: i32(8141)},
		NodeHttpAddress: str("localhost:8142"),
	}
}

func report(id int32, state yarnpb.YarnApplicationStateProto, final yarnpb.FinalApplicationStatusProto) *yarnpb.ApplicationReportProto {
	return &yarnpb.ApplicationReportProto{
		ApplicationId:          apps.ApplicationID{ClusterTimestamp: clusterTS, ID: id}.Proto(),
		User:                   str("root"),
		Queue:                  str("root.default"),
		Name:                   str("DistributedShell"),
		Host:                   str("N/A"),
		RpcPort:                i32(-1),
		YarnApplicationState:   state.Enum(),
		FinalApplicationStatus: final.Enum(),
		ApplicationType:        str("YARN"),
		Priority:               &yarnpb.PriorityProto{Priority: i32(0)},
		LogAggregationStatus:   yarnpb.LogAggregationStatusProto_LOG_DISABLED.Enum(),
		AmNodeLabelExpression:  str(""),
		Progress:               f32(0),
	}
}

func newFake(t testing.TB) *fakeCluster {
	f := &fakeCluster{attempts: map[string][]Attempt{}, owner: map[string]string{}, reservationErr: yarnerr.ReservationDisabled()}
	var ci struct{ ClusterInfo ClusterInfo }
	if err := json.Unmarshal(fixture(t, "cluster_info.json"), &ci); err != nil {
		t.Fatal(err)
	}
	f.info = ci.ClusterInfo
	var sch struct {
		Scheduler struct{ SchedulerInfo json.RawMessage }
	}
	if err := json.Unmarshal(fixture(t, "cluster_scheduler.json"), &sch); err != nil {
		t.Fatal(err)
	}
	f.scheduler = sch.Scheduler.SchedulerInfo

	// _0001: killed while ACCEPTED.
	r1 := report(1, yarnpb.YarnApplicationStateProto_KILLED, yarnpb.FinalApplicationStatusProto_APP_KILLED)
	r1.Name = str("wire-capture-app")
	r1.TrackingUrl = str("http://localhost:8188/cluster/app/application_1795333013199_0001")
	r1.Diagnostics = str("Application application_1795333013199_0001 was killed by user root at 127.0.0.1")
	r1.ApplicationTags = []string{"wire-capture"}
	r1.StartTime, r1.LaunchTime, r1.FinishTime = i64(1795333020043), i64(0), i64(1795333020674)

	// _0002: finished.
	r2 := report(2, yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.FinalApplicationStatusProto_APP_SUCCEEDED)
	r2.Progress = f32(1)
	r2.TrackingUrl = str("http://localhost:8188/proxy/application_1795333013199_0002/")
	r2.StartTime, r2.LaunchTime, r2.FinishTime = i64(1795333034629), i64(1795333035847), i64(1795333043707)
	r2.AppResource_Usage = &yarnpb.ApplicationResourceUsageReportProto{
		NumUsedContainers: i32(-1), NumReservedContainers: i32(-1),
		UsedResources: res(-1, -1), ReservedResources: res(-1, -1), NeededResources: res(-1, -1),
		MemorySeconds: i64(12053), VcoreSeconds: i64(9),
		QueueUsagePercentage: f32(0), ClusterUsagePercentage: f32(0),
		ApplicationResourceUsageMap: []*yarnpb.StringLongMapProto{{Key: str("memory-mb"), Value: i64(12053)}, {Key: str("vcores"), Value: i64(9)}},
	}

	// _0003: running.
	r3 := report(3, yarnpb.YarnApplicationStateProto_RUNNING, yarnpb.FinalApplicationStatusProto_APP_UNDEFINED)
	r3.Host = str("localhost")
	r3.TrackingUrl = str("http://localhost:8188/proxy/application_1795333013199_0003/")
	r3.StartTime, r3.LaunchTime, r3.FinishTime = i64(1795333080841), i64(1795333081444), i64(0)
	r3.AppResource_Usage = &yarnpb.ApplicationResourceUsageReportProto{
		NumUsedContainers: i32(2), NumReservedContainers: i32(0),
		UsedResources: res(2048, 2), ReservedResources: res(0, 0), NeededResources: res(2048, 2),
		MemorySeconds: i64(87671), VcoreSeconds: i64(84),
		QueueUsagePercentage: f32(25), ClusterUsagePercentage: f32(25),
		ApplicationResourceUsageMap: []*yarnpb.StringLongMapProto{{Key: str("memory-mb"), Value: i64(87671)}, {Key: str("vcores"), Value: i64(84)}},
	}
	f.apps = []App{
		{Report: r1},
		{Report: r2, AMContainer: amContainer(2)},
		{Report: r3, AMContainer: amContainer(3), Partitions: []PartitionUsage{{
			Used: res(2048, 2), AMUsed: res(1024, 1),
		}}},
	}
	for _, a := range []struct {
		app           int32
		start, finish int64
		state         yarnpb.YarnApplicationAttemptStateProto
	}{
		{2, 1795333034636, 1795333043706, yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_FINISHED},
		{3, 1795333080848, 0, yarnpb.YarnApplicationAttemptStateProto_APP_ATTEMPT_RUNNING},
	} {
		aid := apps.AttemptID{App: apps.ApplicationID{ClusterTimestamp: clusterTS, ID: a.app}, ID: 1}
		f.attempts[aid.App.String()] = []Attempt{{
			Report: &yarnpb.ApplicationAttemptReportProto{
				ApplicationAttemptId: aid.Proto(), StartTime: i64(a.start), FinishTime: i64(a.finish),
				YarnApplicationAttemptState: a.state.Enum(),
			},
			AMContainer: amContainer(a.app),
		}}
	}
	f.nodes = []Node{{
		Report: &yarnpb.NodeReportProto{
			NodeId:                &yarnpb.NodeIdProto{Host: str("localhost"), Port: i32(8141)},
			HttpAddress:           str("localhost:8142"),
			RackName:              str("/default-rack"),
			Used:                  res(2048, 2),
			Capability:            res(8192, 8),
			NumContainers:         i32(2),
			NodeState:             yarnpb.NodeStateProto_NS_RUNNING.Enum(),
			HealthReport:          str(""),
			LastHealthReportTime:  i64(1795333008583),
			NodeUtilization:       &yarnpb.ResourceUtilizationProto{Pmem: i32(3626), Vmem: i32(3626), Cpu: f32(0.1332889050245285)},
			ContainersUtilization: &yarnpb.ResourceUtilizationProto{Pmem: i32(121), Vmem: i32(2636), Cpu: f32(0.026000000536441803)},
		},
		Version:        "3.4.1",
		MemUtilization: 15.043771,
		CPUUtilization: 6.6644454,
	}}
	for _, a := range f.apps {
		f.owner[appID(a.Report.GetApplicationId())] = "root"
	}
	// _0003's AM container and its shell container, both running.
	for seq, mem := range map[int64]int64{1: 1024, 2: 1024} {
		c := amContainer(3)
		c.Id.Id = i64(seq)
		f.containers = append(f.containers, &yarnpb.ContainerReportProto{
			ContainerId: c.Id, Resource: res(mem, 1), NodeId: c.NodeId, Priority: &yarnpb.PriorityProto{Priority: i32(int32(seq - 1))},
			CreationTime: i64(1795333081000 + seq), DiagnosticsInfo: str(""),
			LogUrl:              str("http://localhost:8142/node/containerlogs/" + containerID(c.Id) + "/root"),
			ContainerExitStatus: i32(-1000), ContainerState: yarnpb.ContainerStateProto_C_RUNNING.Enum(),
			NodeHttpAddress: str("http://localhost:8142"),
		})
	}
	f.labels = []NodeLabel{
		{Name: "fpga", Exclusive: true},
		{Name: "gpu", Exclusive: true, Nodes: []string{"g1:8041", "g2:8041"}},
		{Name: "ssd", Exclusive: false, Nodes: []string{"g1:8041"}},
	}
	slices.SortFunc(f.containers, func(a, b *yarnpb.ContainerReportProto) int {
		return int(a.GetContainerId().GetId() - b.GetContainerId().GetId())
	})
	return f
}

// now is the recordings' clock: _0003's elapsedTime of 47795 ms.
var now = time.UnixMilli(1795333080841 + 47795)

func (f *fakeCluster) Info(context.Context) (ClusterInfo, error) { return f.info, nil }

func (f *fakeCluster) Metrics(context.Context) (ClusterMetrics, error) {
	return ClusterMetrics{
		AppsSubmitted: 3, AppsCompleted: 1, AppsRunning: 1, AppsKilled: 1,
		AvailableMB: 6144, AllocatedMB: 2048, AvailableVirtualCores: 6, AllocatedVirtualCores: 2,
		ContainersAllocated: 2, TotalMB: 8192, TotalVirtualCores: 8, UtilizedMBPercent: 15,
		TotalNodes: 1, ActiveNodes: 1,
		TotalUsedResourcesAcrossPartition:       Resource{MemoryMB: 2048, VCores: 2},
		TotalClusterResourcesAcrossPartition:    Resource{MemoryMB: 8192, VCores: 8},
		TotalAllocatedContainersAcrossPartition: 2,
		CrossPartitionMetricsAvailable:          true,
	}, nil
}

func (f *fakeCluster) Scheduler(context.Context) (json.RawMessage, error) { return f.scheduler, nil }

func (f *fakeCluster) Applications(_ context.Context, _ string, fl apps.Filter) ([]App, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []App
	for _, a := range f.apps {
		if len(fl.States) > 0 {
			ok := false
			for _, s := range fl.States {
				ok = ok || strings.EqualFold(s, a.Report.GetYarnApplicationState().String())
			}
			if !ok {
				continue
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func notFoundErr(id string) error {
	return yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", id)
}

func (f *fakeCluster) Application(_ context.Context, _, id string) (App, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.apps {
		if appID(a.Report.GetApplicationId()) == id {
			return a, nil
		}
	}
	return App{}, notFoundErr(id)
}

func (f *fakeCluster) Attempts(_ context.Context, _, id string) ([]Attempt, error) {
	return f.attempts[id], nil
}

func (f *fakeCluster) Kill(_ context.Context, user, id, _ string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner[id] != user {
		return false, yarnerr.AccessControl.Errorf("User %s cannot perform operation MODIFY_APP on %s", user, id)
	}
	f.killed = append(f.killed, id)
	if f.killNow {
		for _, a := range f.apps {
			if appID(a.Report.GetApplicationId()) == id {
				a.Report.YarnApplicationState = yarnpb.YarnApplicationStateProto_KILLED.Enum()
			}
		}
	}
	return f.killNow, nil
}

func (f *fakeCluster) NewApplication(context.Context, string) (*yarnpb.GetNewApplicationResponseProto, error) {
	return &yarnpb.GetNewApplicationResponseProto{
		ApplicationId:     apps.ApplicationID{ClusterTimestamp: clusterTS, ID: 4}.Proto(),
		MaximumCapability: res(8192, 4),
	}, nil
}

func (f *fakeCluster) Submit(_ context.Context, _ string, sc *yarnpb.ApplicationSubmissionContextProto) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sc.GetResource().GetMemory() > 8192 {
		return yarnerr.InvalidResourceRequest.New("Invalid resource request, requested memory > max")
	}
	f.submitted = append(f.submitted, sc)
	return nil
}

func (f *fakeCluster) Nodes(_ context.Context, states []string) ([]Node, error) {
	var out []Node
	for _, n := range f.nodes {
		ok := len(states) == 0
		for _, s := range states {
			ok = ok || "NS_"+s == n.Report.GetNodeState().String()
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *fakeCluster) Node(_ context.Context, id string) (Node, error) {
	for _, n := range f.nodes {
		if nodeID(n.Report.GetNodeId()) == id {
			return n, nil
		}
	}
	return Node{}, ErrNodeNotFound
}

func (f *fakeCluster) find(id string) *App {
	for i := range f.apps {
		if appID(f.apps[i].Report.GetApplicationId()) == id {
			return &f.apps[i]
		}
	}
	return nil
}

// modify checks MODIFY_APP as ClientRMService does: the YarnException
// wrapping the AccessControlException.
func (f *fakeCluster) modify(user, id string) (*App, error) {
	a := f.find(id)
	if a == nil {
		return nil, notFoundErr(id)
	}
	if f.owner[id] != user {
		return nil, yarnerr.YarnException.Errorf("%s: User %s cannot perform operation MODIFY_APP on %s", yarnerr.AccessControl, user, id)
	}
	return a, nil
}

func (f *fakeCluster) UpdatePriority(_ context.Context, user, id string, p int32) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.modify(user, id)
	if err != nil {
		return 0, err
	}
	if a.Report.GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_KILLED {
		return a.Report.GetPriority().GetPriority(), nil
	}
	p = min(p, 10) // the cluster's maximum
	a.Report.Priority = &yarnpb.PriorityProto{Priority: &p}
	return p, nil
}

func (f *fakeCluster) Move(_ context.Context, user, id, queue string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.modify(user, id)
	if err != nil {
		return err
	}
	if st := a.Report.GetYarnApplicationState(); st != yarnpb.YarnApplicationStateProto_RUNNING {
		return yarnerr.YarnException.Errorf("App in %s state cannot be moved.", st)
	}
	a.Report.Queue = str("root." + strings.TrimPrefix(queue, "root."))
	return nil
}

func (f *fakeCluster) UpdateTimeout(_ context.Context, user, id, typ, expiry string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.modify(user, id)
	if err != nil {
		return err
	}
	at, err := time.Parse("2006-01-02T15:04:05.000-0700", expiry)
	if err != nil {
		return yarnerr.YarnException.Errorf("Expire time is not in ISO8601 format. ISO8601 supported format is yyyy-MM-dd'T'HH:mm:ss.SSSZ")
	}
	a.Report.AppTimeouts = []*yarnpb.AppTimeoutsMapProto{{
		ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
		ApplicationTimeout: &yarnpb.ApplicationTimeoutProto{
			ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
			ExpireTime:             str(expiry),
			RemainingTime:          i64(int64(at.Sub(now) / time.Second)),
		},
	}}
	return nil
}

// viewable is ClientRMService's VIEW_APP check of the attempt and
// container reports.
func (f *fakeCluster) viewable(user, id string) error {
	if f.find(id) == nil {
		return notFoundErr(id)
	}
	if f.owner[id] != user {
		return yarnerr.YarnException.Errorf("User %s does not have privilage to see this application %s", user, id)
	}
	return nil
}

func (f *fakeCluster) Attempt(_ context.Context, user, attemptID string) (*yarnpb.ApplicationAttemptReportProto, error) {
	aid, err := yarnid.ParseAttemptID(attemptID)
	if err != nil {
		return nil, err
	}
	if err := f.viewable(user, aid.App.String()); err != nil {
		return nil, err
	}
	for _, a := range f.attempts[aid.App.String()] {
		if r := a.Report; r.GetApplicationAttemptId().GetAttemptId() == aid.ID {
			return r, nil
		}
	}
	return nil, yarnerr.ApplicationAttemptNotFound.Errorf("ApplicationAttempt with id '%s' doesn't exist in RM.", attemptID)
}

func (f *fakeCluster) Containers(ctx context.Context, user, attemptID string) ([]*yarnpb.ContainerReportProto, error) {
	if _, err := f.Attempt(ctx, user, attemptID); err != nil {
		return nil, err
	}
	var out []*yarnpb.ContainerReportProto
	for _, c := range f.containers {
		if id, _ := yarnid.ContainerIDFromProto(c.GetContainerId()); id.Attempt.String() == attemptID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeCluster) Container(ctx context.Context, user, containerID string) (*yarnpb.ContainerReportProto, error) {
	cid, err := yarnid.ParseContainerID(containerID)
	if err != nil {
		return nil, err
	}
	list, err := f.Containers(ctx, user, cid.Attempt.String())
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		if id, _ := yarnid.ContainerIDFromProto(c.GetContainerId()); id == cid {
			return c, nil
		}
	}
	return nil, yarnerr.ContainerNotFound.Errorf("Container with id '%s' doesn't exist in RM.", containerID)
}

func (f *fakeCluster) CountApps(_ context.Context, q StatsQuery) (map[yarnpb.YarnApplicationStateProto]int64, error) {
	out := map[yarnpb.YarnApplicationStateProto]int64{}
	for _, a := range f.apps {
		st := a.Report.GetYarnApplicationState()
		if slices.Contains(q.States, st) && (q.Type == AnyType || strings.ToLower(a.Report.GetApplicationType()) == q.Type) {
			out[st]++
		}
	}
	return out, nil
}

func (f *fakeCluster) NodeLabels(context.Context) ([]NodeLabel, error) { return f.labels, nil }

func (f *fakeCluster) reservation(name, user string, req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reservationCalls = append(f.reservationCalls, reservationCall{name: name, user: user, req: req})
	return f.reservationErr
}

func (f *fakeCluster) NewReservation(_ context.Context, user string) error {
	return f.reservation("getNewReservation", user, nil)
}

func (f *fakeCluster) SubmitReservation(_ context.Context, user string, req *yarnpb.ReservationSubmissionRequestProto) error {
	return f.reservation("submitReservation", user, req)
}

func (f *fakeCluster) UpdateReservation(_ context.Context, user string, req *yarnpb.ReservationUpdateRequestProto) error {
	return f.reservation("updateReservation", user, req)
}

func (f *fakeCluster) DeleteReservation(_ context.Context, user string, req *yarnpb.ReservationDeleteRequestProto) error {
	return f.reservation("deleteReservation", user, req)
}

func (f *fakeCluster) ListReservations(_ context.Context, user string, req *yarnpb.ReservationListRequestProto) error {
	return f.reservation("listReservations", user, req)
}
