package rm

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/rest"
)

// hadoopCompatVersion is the Hadoop release whose wire protocols and REST
// answers Knit reproduces; clients read hadoopVersion to pick features.
const hadoopCompatVersion = "3.4.1"

// knitVersion is the module version the binary was built from ("devel"
// for a plain go build), shown as the RM's own version.
func knitVersion() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "knit-" + v
}

// REST returns the RM as the REST API's Cluster. Every method goes through
// the same exported per-RPC method a YarnClient reaches, with the REST
// caller put in the context as the RPC caller, so ACLs, messages and
// semantics are the RPC's. The cluster id and start time are taken when
// REST is called: call it once, when the RM starts serving.
func (rm *ResourceManager) REST() rest.Cluster {
	now := rm.now()
	return &restCluster{rm: rm, started: now.UnixMilli()}
}

type restCluster struct {
	rm      *ResourceManager
	started int64
}

// as is the context an RPC from user would carry.
func as(ctx context.Context, user string) context.Context {
	return WithCaller(ctx, Caller{User: user})
}

// internal is the caller for cluster-wide figures no ACL guards; only the
// counts of the answer are used, never the (possibly redacted) reports.
func internal(ctx context.Context) context.Context { return as(ctx, "") }

func (c *restCluster) Info(context.Context) (rest.ClusterInfo, error) {
	return clusterInfo(c.started, "ACTIVE", fmt.Sprintf("%T", c.rm.cfg.Store)), nil
}

// StandbyClusterInfo is what a standby RM started at startedMillis answers
// on /ws/v1/cluster/info: haState STANDBY, and no state store, which only
// the active RM opens.
func StandbyClusterInfo(startedMillis int64) rest.ClusterInfo {
	return clusterInfo(startedMillis, "STANDBY", "")
}

func clusterInfo(started int64, haState, storeName string) rest.ClusterInfo {
	v := knitVersion()
	return rest.ClusterInfo{
		ID: started, StartedOn: started, State: "STARTED", HAState: haState,
		RMStateStoreName:              storeName,
		ResourceManagerVersion:        v,
		ResourceManagerBuildVersion:   v,
		ResourceManagerVersionBuiltOn: "",
		HadoopVersion:                 hadoopCompatVersion,
		HadoopBuildVersion:            hadoopCompatVersion + " (" + v + ")",
		HadoopVersionBuiltOn:          "",
		// Knit elects through a Lease, not ZooKeeper; Hadoop's answer
		// without a ZooKeeper elector.
		HAZooKeeperConnectionState: "Could not find leader elector. Verify both HA and automatic failover are enabled.",
	}
}

func (c *restCluster) Metrics(ctx context.Context) (rest.ClusterMetrics, error) {
	ctx = internal(ctx)
	cm, err := c.rm.GetClusterMetrics(ctx, &yarnpb.GetClusterMetricsRequestProto{})
	if err != nil {
		return rest.ClusterMetrics{}, err
	}
	census, err := c.rm.census(ctx)
	if err != nil {
		return rest.ClusterMetrics{}, err
	}
	m := cm.GetClusterMetrics()
	out := rest.ClusterMetrics{
		TotalNodes: m.GetNumNodeManagers(), ActiveNodes: m.GetNumActiveNms(), LostNodes: m.GetNumLostNms(),
		UnhealthyNodes: m.GetNumUnhealthyNms(), DecommissioningNodes: m.GetNumDecommissioningNms(),
		DecommissionedNodes: m.GetNumDecommissionedNms(), RebootedNodes: m.GetNumRebootedNms(),
		ShutdownNodes: m.GetNumShutdownNms(),
	}
	// Read from the queue usage index: counting 10,000 applications on a
	// page load is what the RM must not do.
	tot := c.rm.usage.totals()
	out.AppsSubmitted = int32(tot.submitted())
	out.AppsRunning = int32(tot.count(yarnpb.YarnApplicationStateProto_RUNNING))
	out.AppsFailed = int32(tot.count(yarnpb.YarnApplicationStateProto_FAILED))
	out.AppsKilled = int32(tot.count(yarnpb.YarnApplicationStateProto_KILLED))
	// Hadoop counts failed and killed as completed too.
	out.AppsCompleted = int32(tot.count(yarnpb.YarnApplicationStateProto_FINISHED)) + out.AppsFailed + out.AppsKilled
	out.AppsPending = out.AppsSubmitted - out.AppsRunning - out.AppsCompleted
	// The scheduler's resources are those of the usable nodes: Hadoop
	// counts only nodes the scheduler holds (running ones).
	out.TotalMB, out.TotalVirtualCores = census.RunningCapabilityMB, census.RunningCapabilityVcores
	out.AllocatedMB, out.AllocatedVirtualCores = census.RunningUsedMB, census.RunningUsedVcores
	out.ContainersAllocated = census.RunningContainers
	out.AvailableMB = out.TotalMB - out.AllocatedMB
	out.AvailableVirtualCores = out.TotalVirtualCores - out.AllocatedVirtualCores
	out.UtilizedMB, out.UtilizedVirtualCores = out.AllocatedMB, out.AllocatedVirtualCores
	if out.TotalMB > 0 {
		out.UtilizedMBPercent = int32(out.AllocatedMB * 100 / out.TotalMB)
	}
	if out.TotalVirtualCores > 0 {
		out.UtilizedVirtualCoresPercent = int32(out.AllocatedVirtualCores * 100 / out.TotalVirtualCores)
	}
	out.TotalUsedResourcesAcrossPartition = rest.Resource{MemoryMB: out.AllocatedMB, VCores: out.AllocatedVirtualCores}
	out.TotalClusterResourcesAcrossPartition = rest.Resource{MemoryMB: out.TotalMB, VCores: out.TotalVirtualCores}
	out.TotalAllocatedContainersAcrossPartition = out.ContainersAllocated
	out.CrossPartitionMetricsAvailable = true
	return out, nil
}

func parseAppID(id string) (*yarnpb.ApplicationIdProto, error) {
	a, err := yarnid.ParseApplicationID(id)
	if err != nil {
		return nil, yarnerr.IllegalArgument.Errorf("Invalid ApplicationId: %s", id)
	}
	return a.Proto(), nil
}

// filterRequest is the getApplications request a Filter stands for (the
// inverse of apps.FilterFromRequest); the RM builds its own CanView.
func filterRequest(f apps.Filter) *yarnpb.GetApplicationsRequestProto {
	req := &yarnpb.GetApplicationsRequestProto{
		ApplicationTypes: f.Types, Users: f.Users, Queues: f.Queues, ApplicationTags: f.Tags,
		Scope: f.Scope.Enum(),
	}
	if f.Name != "" {
		req.Name = proto.String(f.Name)
	}
	if f.Limit > 0 {
		req.Limit = proto.Int64(f.Limit)
	}
	for _, s := range f.States {
		if v, ok := yarnpb.YarnApplicationStateProto_value[strings.ToUpper(s)]; ok {
			req.ApplicationStates = append(req.ApplicationStates, yarnpb.YarnApplicationStateProto(v))
		}
	}
	ms := func(t time.Time) *int64 {
		if t.IsZero() {
			return nil
		}
		return proto.Int64(t.UnixMilli())
	}
	req.StartBegin, req.StartEnd = ms(f.StartBegin), ms(f.StartEnd)
	req.FinishBegin, req.FinishEnd = ms(f.FinishBegin), ms(f.FinishEnd)
	return req
}

func (c *restCluster) Applications(ctx context.Context, user string, f apps.Filter) ([]rest.App, error) {
	if err := f.Validate(); err != nil {
		return nil, yarnerr.BadRequest.New(err.Error())
	}
	resp, err := c.rm.GetApplications(as(ctx, user), filterRequest(f))
	if err != nil {
		return nil, err
	}
	out := make([]rest.App, 0, len(resp.GetApplications()))
	for _, r := range resp.GetApplications() {
		out = append(out, rest.App{Report: r, AMContainer: c.amContainer(r, user)})
	}
	return out, nil
}

// amContainer is the current attempt's AM container, for a caller allowed
// to view the application (the report is not redacted otherwise). No RPC
// returns the ContainerProto, so it is read from the application itself.
func (c *restCluster) amContainer(r *yarnpb.ApplicationReportProto, user string) *yarnpb.ContainerProto {
	id, err := yarnid.ApplicationIDFromProto(r.GetApplicationId())
	if err != nil {
		return nil
	}
	e := c.rm.lookup(id)
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.app.Unmanaged() || !c.rm.canAccess(e, user, yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP) {
		return nil
	}
	if t := e.app.CurrentAttempt(); t != nil {
		return t.AMContainer()
	}
	return nil
}

func (c *restCluster) Application(ctx context.Context, user, id string) (rest.App, error) {
	p, err := parseAppID(id)
	if err != nil {
		return rest.App{}, err
	}
	resp, err := c.rm.GetApplicationReport(as(ctx, user), &yarnpb.GetApplicationReportRequestProto{ApplicationId: p})
	if err != nil {
		return rest.App{}, err
	}
	r := resp.GetApplicationReport()
	return rest.App{Report: r, AMContainer: c.amContainer(r, user)}, nil
}

func (c *restCluster) Attempts(ctx context.Context, user, id string) ([]rest.Attempt, error) {
	p, err := parseAppID(id)
	if err != nil {
		return nil, err
	}
	resp, err := c.rm.GetApplicationAttempts(as(ctx, user), &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: p})
	if err != nil {
		return nil, err
	}
	var out []rest.Attempt
	appID, _ := yarnid.ApplicationIDFromProto(p)
	e := c.rm.lookup(appID)
	for _, r := range resp.GetApplicationAttempts() {
		a := rest.Attempt{Report: r}
		if aid, err := yarnid.AttemptIDFromProto(r.GetApplicationAttemptId()); err == nil && e != nil {
			e.mu.Lock()
			if t := e.app.Attempt(aid); t != nil {
				a.AMContainer = t.AMContainer()
			}
			e.mu.Unlock()
		}
		out = append(out, a)
	}
	return out, nil
}

func (c *restCluster) Kill(ctx context.Context, user, id, diagnostics string) (bool, error) {
	p, err := parseAppID(id)
	if err != nil {
		return false, err
	}
	req := &yarnpb.KillApplicationRequestProto{ApplicationId: p}
	if diagnostics != "" {
		req.Diagnostics = proto.String(diagnostics)
	}
	resp, err := c.rm.ForceKillApplication(as(ctx, user), req)
	if err != nil {
		return false, err
	}
	return resp.GetIsKillCompleted(), nil
}

func (c *restCluster) NewApplication(ctx context.Context, user string) (*yarnpb.GetNewApplicationResponseProto, error) {
	return c.rm.GetNewApplication(as(ctx, user), &yarnpb.GetNewApplicationRequestProto{})
}

func (c *restCluster) Submit(ctx context.Context, user string, sc *yarnpb.ApplicationSubmissionContextProto) error {
	_, err := c.rm.SubmitApplication(as(ctx, user), &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc})
	return err
}

func (c *restCluster) Nodes(ctx context.Context, states []string) ([]rest.Node, error) {
	var want []yarnpb.NodeStateProto
	for _, s := range states {
		v, ok := yarnpb.NodeStateProto_value["NS_"+strings.ToUpper(s)]
		if !ok {
			return nil, yarnerr.IllegalArgument.Errorf(
				"No enum constant org.apache.hadoop.yarn.api.records.NodeState.%s", strings.ToUpper(s))
		}
		want = append(want, yarnpb.NodeStateProto(v))
	}
	// The nodes getClusterNodes reports, as Infos: the machine's physical
	// resource, which a NodeReport has no field for, is in them.
	nodes, err := c.rm.clusterNodes(internal(ctx), want)
	if err != nil {
		return nil, err
	}
	out := make([]rest.Node, 0, len(nodes))
	for _, n := range nodes {
		mem, cpu := physicalUtilization(n.Utilization)
		out = append(out, rest.Node{Report: n.SharedReport(), Version: hadoopCompatVersion, MemUtilization: mem, CPUUtilization: cpu})
	}
	return out, nil
}

// physicalUtilization is a node's memUtilization and cpuUtilization as
// Hadoop's NodeInfo DAO computes them: the node's physical memory in use
// and its processors busy, in percent of the machine's memory and
// processors (the NodeManager's physicalResource), in Java float
// arithmetic. Each is 0 when the machine's figure is 0 (unknown: an older
// knit-node publishes none), and both are when the node published no
// utilization.
func physicalUtilization(u launch.NodeUtilization) (mem, cpu float32) {
	// Java's int * 100F / long and float * 100F / int: each operation
	// rounds to a float, which the explicit conversions make sure of.
	if u.Physical.MemoryMB != 0 {
		mem = float32(float32(u.Node.PmemMB)*100) / float32(u.Physical.MemoryMB)
	}
	if u.Physical.Vcores != 0 {
		cpu = float32(u.Node.CPU*100) / float32(u.Physical.Vcores)
	}
	return mem, cpu
}

func (c *restCluster) Node(ctx context.Context, id string) (rest.Node, error) {
	list, err := c.Nodes(ctx, nil)
	if err != nil {
		return rest.Node{}, err
	}
	for _, n := range list {
		nid := n.Report.GetNodeId()
		if nid.GetHost()+":"+strconv.Itoa(int(nid.GetPort())) == id {
			return n, nil
		}
	}
	return rest.Node{}, rest.ErrNodeNotFound
}

// ---- scheduler ----

// field is one key and value of a rest.Object.
func field(key string, value any) rest.Field { return rest.Field{Key: key, Value: value} }

var emptyObj = rest.Object{}

// queueFigures are the live numbers of one queue, from the queue usage
// index.
type queueFigures struct {
	active, pending int
	users           map[string]*[2]int // user → active, pending
	userOrder       []string           // by name
}

func (c *restCluster) Scheduler(ctx context.Context) (json.RawMessage, error) {
	ctx = internal(ctx)
	tree := c.rm.queueTree()
	root := tree.Root()
	view := c.rm.queueView(ctx)
	info, err := c.rm.queueInfo(ctx, &yarnpb.GetQueueInfoRequestProto{
		QueueName: proto.String(root.Path), IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true),
	}, tree, view)
	if err != nil {
		return nil, err
	}
	if info.GetQueueInfo() == nil {
		return nil, fmt.Errorf("scheduler: no queue info for %s", root.Path)
	}
	// Each user's applications the leaf queue has activated (ACCEPTED,
	// RUNNING) and those still pending; ended ones the scheduler no longer
	// holds.
	figs := map[string]*queueFigures{}
	for _, u := range c.rm.usage.byUser() {
		active := int(u.count(yarnpb.YarnApplicationStateProto_ACCEPTED) + u.count(yarnpb.YarnApplicationStateProto_RUNNING))
		pending := int(u.count(yarnpb.YarnApplicationStateProto_NEW) + u.count(yarnpb.YarnApplicationStateProto_NEW_SAVING) +
			u.count(yarnpb.YarnApplicationStateProto_SUBMITTED))
		if active+pending == 0 {
			continue
		}
		f := figs[u.queue]
		if f == nil {
			f = &queueFigures{users: map[string]*[2]int{}}
			figs[u.queue] = f
		}
		f.active += active
		f.pending += pending
		f.users[u.user] = &[2]int{active, pending}
		f.userOrder = append(f.userOrder, u.user)
	}
	// The default partition's nodes, which the queues' effective
	// capacities are shares of, counted once for every queue.
	def := view.whole[""]
	s := &schedJSON{c: c, tree: tree, figs: figs, view: view, cluster: rest.Resource{MemoryMB: def.MemoryMB, VCores: int64(def.VCores)}}
	ri := info.GetQueueInfo()
	out := rest.Object{
		field("type", "capacityScheduler"),
		field("capacity", rest.JavaFloat(100)),
		field("usedCapacity", rest.JavaFloat(ri.GetCurrentCapacity()*100)),
		field("maxCapacity", rest.JavaFloat(100)),
		field("weight", rest.JavaFloat(-1)),
		field("normalizedWeight", rest.JavaFloat(0)),
		field("queueCapacityVectorInfo", capacityVector(100)),
		field("queueName", root.Name),
		field("queuePath", root.Path),
		field("maxParallelApps", root.MaxParallelApps),
		field("isAbsoluteResource", false),
		field("queues", s.children(ri)),
		field("capacities", s.capacities(root, false)),
		field("health", health()),
		field("maximumAllocation", c.maxAllocation()),
		field("queueAcls", queueACLs(root)),
		field("queuePriority", root.Priority),
		field("orderingPolicyInfo", root.OrderingPolicy),
		field("mode", "percentage"),
		field("queueType", "parent"),
		field("creationMethod", "static"),
		field("autoCreationEligibility", "off"),
		field("autoQueueTemplateProperties", emptyObj),
		field("autoQueueParentTemplateProperties", emptyObj),
		field("autoQueueLeafTemplateProperties", emptyObj),
	}
	b, err := out.MarshalJSON()
	return json.RawMessage(b), err
}

type schedJSON struct {
	c    *restCluster
	tree *queues.Tree
	figs map[string]*queueFigures
	// view is the queues' use in each partition; cluster what the default
	// partition's nodes hold.
	view    *queueView
	cluster rest.Resource
}

func (c *restCluster) maxAllocation() rest.Resource {
	st := c.rm.cfg.Settings
	return rest.Resource{MemoryMB: int64(st.MaxAllocationMB), VCores: int64(st.MaxAllocationVcores)}
}

func capacityVector(pct float32) rest.Object {
	p := strconv.FormatFloat(float64(pct), 'f', 1, 32) + "%"
	return rest.Object{
		field("configuredCapacityVector", "[memory-mb="+p+",vcores="+p+"]"),
		field("capacityVectorEntries", []rest.Object{
			{field("resourceName", "memory-mb"), field("resourceValue", p)},
			{field("resourceName", "vcores"), field("resourceValue", p)},
		}),
	}
}

// health is the CapacitySchedulerHealthInfo of a scheduler that has never
// run an allocation cycle: Knit leaves placement to Kubernetes.
func health() rest.Object {
	op := func(name string) rest.Object {
		return rest.Object{field("operation", name), field("nodeId", "N/A"), field("containerId", "N/A"), field("queue", "N/A")}
	}
	run := func(name string) rest.Object {
		return rest.Object{field("operation", name), field("count", 0), field("resources", rest.Resource{})}
	}
	return rest.Object{
		field("lastrun", 0),
		field("operationsInfo", []rest.Object{op("last-allocation"), op("last-release"), op("last-preemption"), op("last-reservation")}),
		field("lastRunDetails", []rest.Object{run("releases"), run("allocations"), run("reservations")}),
	}
}

func queueACLs(q *queues.Queue) rest.Object {
	entry := func(t string, a acl.ACL) rest.Object {
		return rest.Object{field("accessType", t), field("accessControlList", a.String())}
	}
	return rest.Object{field("queueAcl", []rest.Object{
		entry("ADMINISTER_QUEUE", q.AdministerACL),
		entry("APPLICATION_MAX_PRIORITY", acl.AllowAll()),
		entry("SUBMIT_APP", q.SubmitACL),
	})}
}

func (s *schedJSON) children(info *yarnpb.QueueInfoProto) rest.Object {
	var qs []rest.Object
	for _, ch := range info.GetChildQueues() {
		q, err := s.tree.Lookup(ch.GetQueuePath())
		if err != nil {
			continue
		}
		qs = append(qs, s.queue(q, ch))
	}
	if len(qs) == 0 {
		return emptyObj
	}
	return rest.Object{field("queue", qs)}
}

// clusterResource is the capacity of the usable nodes, which the queues'
// effective capacities are shares of.
func (s *schedJSON) clusterResource() rest.Resource { return s.cluster }

func scale(r rest.Resource, f float32) rest.Resource {
	return rest.Resource{MemoryMB: int64(float64(r.MemoryMB) * float64(f)), VCores: int64(float64(r.VCores) * float64(f))}
}

// capacities is a queue's QueueCapacitiesInfo: its capacities and use in
// each partition it reports (PartitionQueueCapacitiesInfo), the AM share
// only for a leaf (considerAMUsage), figures capped as YARN caps them.
func (s *schedJSON) capacities(q *queues.Queue, leaf bool) rest.Object {
	parts := s.view.partitions(q)
	out := make([]rest.Object, 0, len(parts))
	for _, p := range parts {
		c := p.capacity
		maxCapacity := c.MaximumCapacity
		if maxCapacity < capEpsilon || maxCapacity > 1 {
			maxCapacity = 1
		}
		var am float32
		if leaf {
			am = c.MaxAMResourcePercent * 100
		}
		out = append(out, rest.Object{
			field("partitionName", rest.JavaString(p.label)),
			field("queueCapacityVectorInfo", capacityVector(c.Capacity*100)),
			field("capacity", rest.JavaFloat(c.Capacity*100)),
			field("usedCapacity", rest.JavaFloat(p.usedCapacity*100)),
			field("maxCapacity", rest.JavaFloat(maxCapacity*100)),
			field("absoluteCapacity", rest.JavaFloat(unit(c.AbsoluteCapacity)*100)),
			field("absoluteUsedCapacity", rest.JavaFloat(unit(p.absoluteUsed)*100)),
			field("absoluteMaxCapacity", rest.JavaFloat(unit(c.AbsoluteMaximumCapacity)*100)),
			field("maxAMLimitPercentage", rest.JavaFloat(am)),
			field("weight", rest.JavaFloat(-1)),
			field("normalizedWeight", rest.JavaFloat(0)),
			field("configuredMinResource", rest.Resource{}),
			field("configuredMaxResource", rest.Resource{}),
			field("effectiveMinResource", restResource(p.effectiveMin)),
			field("effectiveMaxResource", restResource(p.effectiveMax)),
		})
	}
	return rest.Object{field("queueCapacitiesByPartition", out)}
}

// capEpsilon is CapacitySchedulerQueueInfo.EPSILON: a maximum capacity
// below it is shown as 100%.
const capEpsilon = 1e-8

// unit caps a fraction to [0, 1], as CapacitySchedulerQueueInfo.cap does.
func unit(f float32) float32 { return min(max(f, 0), 1) }

func restResource(r queues.PartitionResource) rest.Resource {
	return rest.Resource{MemoryMB: r.MemoryMB, VCores: int64(r.VCores)}
}

func holdingResource(h apps.Holding) rest.Resource {
	return rest.Resource{MemoryMB: h.MemoryMB, VCores: int64(h.VCores)}
}

// resources is a queue's ResourcesInfo: what it uses, reserves and waits
// for (RGS's pending pods) in each partition it reports
// (PartitionResourcesInfo), its AMs' use and limit only for a leaf
// (considerAMUsage; a parent's are null, so absent).
func (s *schedJSON) resources(q *queues.Queue, leaf bool) rest.Object {
	parts := s.view.partitions(q)
	out := make([]rest.Object, 0, len(parts))
	for _, p := range parts {
		o := rest.Object{
			field("partitionName", rest.JavaString(p.label)),
			field("used", holdingResource(p.used)),
			field("reserved", holdingResource(p.reserved)),
			field("pending", rest.Resource{MemoryMB: p.pending.memoryMB, VCores: p.pending.vcores}),
		}
		if leaf {
			o = append(o,
				field("amUsed", holdingResource(p.am)),
				field("amLimit", restResource(p.amLimit)),
				field("userAmLimit", restResource(p.userAMLimit)),
			)
		}
		out = append(out, o)
	}
	return rest.Object{field("resourceUsagesByPartition", out)}
}

// userResources is a user's ResourcesInfo: the default partition's row,
// its figures not kept per user.
func userResources() rest.Object {
	return rest.Object{field("resourceUsagesByPartition", []rest.Object{{
		field("partitionName", rest.JavaString("")),
		field("used", rest.Resource{}),
		field("reserved", rest.Resource{}),
		field("pending", rest.Resource{}),
		field("amUsed", rest.Resource{}),
		field("amLimit", rest.Resource{}),
		field("userAmLimit", rest.Resource{}),
	}})}
}

// userAMLimit is a leaf's userAMResourceLimit: one user's part of its AM
// limit in the default partition of the cluster cl.
func (s *schedJSON) userAMLimit(q *queues.Queue, cl rest.Resource) rest.Resource {
	c, _ := q.Partition("")
	part := func(r rest.Resource) queues.PartitionResource {
		return queues.PartitionResource{MemoryMB: r.MemoryMB, VCores: int32(r.VCores)}
	}
	return restResource(s.view.userAMLimit(q, c, part(scale(cl, q.AbsoluteCapacity)), part(scale(cl, q.AbsoluteCapacity*q.MaxAMResourcePercent))))
}

// queue writes a CapacitySchedulerQueueInfo, or its leaf subclass, in
// Hadoop's field order.
func (s *schedJSON) queue(q *queues.Queue, info *yarnpb.QueueInfoProto) rest.Object {
	stats := info.GetQueueStatistics()
	leaf := len(q.Children) == 0
	f := s.figs[q.Path]
	if f == nil {
		f = &queueFigures{}
	}
	// A parent's figures are its leaves'.
	active, pending := f.active, f.pending
	if !leaf {
		active, pending = 0, 0
		for path, g := range s.figs {
			if inQueue(path, q.Path) {
				active += g.active
				pending += g.pending
			}
		}
	}
	used := info.GetCurrentCapacity() * 100
	cl := s.clusterResource()
	usedRes := rest.Resource{MemoryMB: stats.GetAllocatedMemoryMB(), VCores: stats.GetAllocatedVCores()}
	o := rest.Object{}
	if leaf {
		o = append(o, field("type", "capacitySchedulerLeafQueueInfo"))
	}
	o = append(o,
		field("queuePath", q.Path),
		field("capacity", rest.JavaFloat(q.Capacity*100)),
		field("usedCapacity", rest.JavaFloat(used)),
		field("maxCapacity", rest.JavaFloat(q.MaximumCapacity*100)),
		field("absoluteCapacity", rest.JavaFloat(q.AbsoluteCapacity*100)),
		field("absoluteMaxCapacity", rest.JavaFloat(q.AbsoluteMaximumCapacity*100)),
		field("absoluteUsedCapacity", rest.JavaFloat(used*q.AbsoluteCapacity)),
		field("weight", rest.JavaFloat(-1)),
		field("normalizedWeight", rest.JavaFloat(0)),
		field("numApplications", active+pending),
		field("maxParallelApps", q.MaxParallelApps),
		field("queueName", q.Name),
		field("isAbsoluteResource", false),
		field("state", info.GetState().String()[len("Q_"):]),
	)
	if !leaf {
		o = append(o, field("queues", s.children(info)))
	}
	labels := q.AccessibleNodeLabels
	if labels == nil {
		labels = []string{}
	}
	queueType := "parent"
	if leaf {
		queueType = "leaf"
	}
	o = append(o,
		field("resourcesUsed", usedRes),
		field("hideReservationQueues", false),
		field("nodeLabels", labels),
		field("allocatedContainers", stats.GetAllocatedContainers()),
		field("reservedContainers", stats.GetReservedContainers()),
		field("pendingContainers", stats.GetPendingContainers()),
		field("capacities", s.capacities(q, leaf)),
		field("resources", s.resources(q, leaf)),
		field("minEffectiveCapacity", scale(cl, q.AbsoluteCapacity)),
		field("maxEffectiveCapacity", scale(cl, q.AbsoluteMaximumCapacity)),
		field("maximumAllocation", s.c.maxAllocation()),
		field("queueAcls", queueACLs(q)),
		field("queuePriority", q.Priority),
		field("orderingPolicyInfo", q.OrderingPolicy),
		field("autoCreateChildQueueEnabled", false),
		field("leafQueueTemplate", emptyObj),
		field("mode", "percentage"),
		field("queueType", queueType),
		field("creationMethod", "static"),
		field("autoCreationEligibility", "off"),
		field("autoQueueTemplateProperties", emptyObj),
		field("autoQueueParentTemplateProperties", emptyObj),
		field("autoQueueLeafTemplateProperties", emptyObj),
	)
	if !leaf {
		return o
	}
	var users []rest.Object
	for _, u := range f.userOrder {
		n := f.users[u]
		users = append(users, rest.Object{
			field("username", u),
			field("resourcesUsed", rest.Resource{}),
			field("numPendingApplications", n[1]),
			field("numActiveApplications", n[0]),
			field("AMResourceUsed", rest.Resource{}),
			field("userResourceLimit", rest.Resource{}),
			field("resources", userResources()),
			field("userWeight", rest.JavaFloat(1)),
			field("isActive", n[0] > 0),
		})
	}
	usersObj := emptyObj
	if len(users) > 0 {
		usersObj = rest.Object{field("user", users)}
	}
	return append(o,
		field("numActiveApplications", active),
		field("numPendingApplications", pending),
		field("numContainers", stats.GetAllocatedContainers()),
		field("maxApplications", q.MaxApplications),
		field("maxApplicationsPerUser", q.MaxApplicationsPerUser),
		field("userLimit", rest.JavaFloat(q.MinimumUserLimitPercent)),
		field("users", usersObj),
		field("userLimitFactor", rest.JavaFloat(q.UserLimitFactor)),
		field("configuredMaxAMResourceLimit", rest.JavaFloat(q.MaxAMResourcePercent)),
		field("AMResourceLimit", scale(cl, q.AbsoluteCapacity*q.MaxAMResourcePercent)),
		field("usedAMResource", holdingResource(s.view.inPartition(q, "").am)),
		field("userAMResourceLimit", s.userAMLimit(q, cl)),
		field("preemptionDisabled", info.GetPreemptionDisabled()),
		field("intraQueuePreemptionDisabled", info.GetIntraQueuePreemptionDisabled()),
		field("defaultPriority", q.DefaultApplicationPriority),
		field("isAutoCreatedLeafQueue", false),
		field("maxApplicationLifetime", -1),
		field("defaultApplicationLifetime", -1),
	)
}
