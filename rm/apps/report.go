package apps

import (
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// unlimited is the expiry YARN reports for an application without a lifetime.
const unlimited = "UNLIMITED"

// ReportOptions says who asks for a report and when.
type ReportOptions struct {
	Now time.Time
	// Access is whether the caller may view the application (VIEW_APP).
	// Without it, as in YARN, the report hides the AM's address, tracking
	// URLs, diagnostics, progress and resource use.
	Access bool
	// Keep keeps the report Report builds for the calls after, until the
	// application changes: for getApplicationReport, which clients poll.
	// Without it a kept report is used but none is made, so a listing of
	// every application leaves nothing behind (some 3 KB an application).
	Keep bool
}

// Report is the application report getApplicationReport and
// getApplications return, field for field as RMAppImpl's
// createAndGetApplicationReport fills it: "N/A" host and tracking URL and
// port -1 until the AM registers, attempt id -1 before the first attempt,
// UNDEFINED final status until the application ends, -1 resource figures
// while the scheduler does not hold the attempt. Tokens (client-to-AM, an
// unmanaged AM's AMRMToken) are the caller's to add.
//
// Clients poll their applications' reports many times a second between
// changes, so each kind of caller's report is built once (buildReport) and,
// if asked to (Keep), kept until the application next changes (Handle); a
// call copies its top level and makes anew only what moves with the clock:
// the lifetime's time left and, for a caller with access, the seconds the
// live containers used. The top level is the caller's own to set fields of; the messages
// below it are shared with other reports and must not be changed.
func (a *Application) Report(o ReportOptions) *yarnpb.ApplicationReportProto {
	k := 0
	if o.Access {
		k = 1
	}
	c := a.reports[k]
	if c == nil || c.at != a.changes {
		if !o.Keep {
			a.reports[k] = nil
			return a.buildReport(o)
		}
		c = a.cacheReport(o.Access)
		a.reports[k] = c
	}
	r := shareReport(c.report)
	if c.lifetimeTicks {
		r.AppTimeouts = ticking(c.report.AppTimeouts, a.secondsLeft(o.Now))
	}
	if c.usageAccrues {
		u := c.ended
		for _, ct := range c.live {
			u.add(ct.Usage(o.Now))
		}
		r.AppResource_Usage = accrued(c.report.AppResource_Usage, u)
	}
	return r
}

// cachedReport is one kind of caller's report of an application as it was
// after its at-th change, and which of its figures move with the clock.
type cachedReport struct {
	at     uint64
	report *yarnpb.ApplicationReportProto
	// lifetimeTicks: the application has a lifetime and has not
	// completed, so its time left falls each second.
	lifetimeTicks bool
	// usageAccrues: the report shows usage and a container is live, so
	// its memory and vcore seconds grow. Usage(now) is then ended and
	// what the live containers used until now: a walk of a short list,
	// not of the map of every container the application had.
	usageAccrues bool
	ended        Usage
	live         []*Container
}

func (a *Application) cacheReport(access bool) *cachedReport {
	c := &cachedReport{
		at: a.changes,
		// The clock's figures are made at each call; the zero time here
		// stands for none.
		report:        a.buildReport(ReportOptions{Access: access}),
		lifetimeTicks: !a.expiry.IsZero() && !a.state.completed(),
	}
	if access {
		for _, ct := range a.containers {
			if ct.state.live() {
				c.live = append(c.live, ct)
			}
		}
		c.usageAccrues, c.ended = len(c.live) > 0, a.usage
	}
	return c
}

// buildReport builds Report's answer from scratch.
func (a *Application) buildReport(o ReportOptions) *yarnpb.ApplicationReportProto {
	r := &yarnpb.ApplicationReportProto{
		ApplicationId:               a.id.Proto(),
		User:                        proto.String(a.user),
		Queue:                       proto.String(a.queue),
		Name:                        proto.String(a.name),
		Host:                        proto.String(notAvailable),
		RpcPort:                     proto.Int32(-1),
		YarnApplicationState:        a.ClientState().Enum(),
		TrackingUrl:                 proto.String(notAvailable),
		Diagnostics:                 proto.String(notAvailable),
		StartTime:                   proto.Int64(millis(a.startTime)),
		FinishTime:                  proto.Int64(millis(a.finishTime)),
		FinalApplicationStatus:      a.FinalStatus().Enum(),
		OriginalTrackingUrl:         proto.String(notAvailable),
		CurrentApplicationAttemptId: AttemptID{App: a.id, ID: -1}.Proto(),
		Progress:                    proto.Float32(0),
		ApplicationType:             proto.String(a.appType),
		ApplicationTags:             a.Tags(),
		UnmanagedApplication:        proto.Bool(a.unmanaged),
		Priority:                    &yarnpb.PriorityProto{Priority: proto.Int32(a.priority)},
		AppNodeLabelExpression:      proto.String(a.AppNodeLabelExpression()),
		AppTimeouts:                 []*yarnpb.AppTimeoutsMapProto{a.lifetimeReport(o.Now)},
		LaunchTime:                  proto.Int64(millis(a.launchTime)),
	}
	if l, ok := a.AMNodeLabelExpression(); ok {
		r.AmNodeLabelExpression = proto.String(l)
	}
	if !o.Access {
		r.AppResource_Usage = unknownUsage()
		return r
	}
	r.TrackingUrl = proto.String(a.proxyURL())
	if t := a.CurrentAttempt(); t != nil {
		r.CurrentApplicationAttemptId = t.id.Proto()
		r.TrackingUrl = proto.String(t.TrackingURL())
		r.OriginalTrackingUrl = proto.String(t.originalURL)
		r.Host = proto.String(t.host)
		r.RpcPort = proto.Int32(t.rpcPort)
		r.Progress = proto.Float32(t.progress)
		if t.inScheduler() {
			r.AppResource_Usage = a.liveUsage(t)
		}
		// DISABLED, as YARN reports without log aggregation once there
		// is an attempt; with it on, the RM's services put the nodes'
		// status here (rm/logaggregation.go).
		r.LogAggregationStatus = yarnpb.LogAggregationStatusProto_LOG_DISABLED.Enum()
	}
	if r.AppResource_Usage == nil {
		r.AppResource_Usage = unknownUsage()
	}
	r.Diagnostics = proto.String(a.Diagnostics())
	u := a.Usage(o.Now)
	ru := r.AppResource_Usage
	ru.MemorySeconds = proto.Int64(u.MemorySeconds)
	ru.VcoreSeconds = proto.Int64(u.VcoreSeconds)
	ru.PreemptedMemorySeconds = proto.Int64(u.PreemptedMemorySeconds)
	ru.PreemptedVcoreSeconds = proto.Int64(u.PreemptedVcoreSeconds)
	ru.ApplicationResourceUsageMap = usageMap(u.MemorySeconds, u.VcoreSeconds)
	ru.ApplicationPreemptedResourceUsageMap = usageMap(u.PreemptedMemorySeconds, u.PreemptedVcoreSeconds)
	return r
}

// lifetimeReport is the LIFETIME entry every report carries.
func (a *Application) lifetimeReport(now time.Time) *yarnpb.AppTimeoutsMapProto {
	t := &yarnpb.ApplicationTimeoutProto{
		ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
		ExpireTime:             proto.String(unlimited),
		RemainingTime:          proto.Int64(-1),
	}
	if !a.expiry.IsZero() {
		t.ExpireTime = proto.String(formatISO8601(a.expiry))
		t.RemainingTime = proto.Int64(a.secondsLeft(now))
	}
	return &yarnpb.AppTimeoutsMapProto{
		ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
		ApplicationTimeout:     t,
	}
}

// secondsLeft is the lifetime's remaining time the report shows: none
// once the application has completed.
func (a *Application) secondsLeft(now time.Time) int64 {
	if a.state.completed() {
		return 0
	}
	return max(int64(a.expiry.Sub(now)/time.Second), 0)
}

// tickingLifetime is a report's lifetime entry with the time left now,
// made in one allocation.
type tickingLifetime struct {
	list    [1]*yarnpb.AppTimeoutsMapProto
	entry   yarnpb.AppTimeoutsMapProto
	timeout yarnpb.ApplicationTimeoutProto
	left    int64
}

// ticking is the entries ts (a cached report's, of one LIFETIME entry)
// with left as the time left; the rest is ts's, shared.
func ticking(ts []*yarnpb.AppTimeoutsMapProto, left int64) []*yarnpb.AppTimeoutsMapProto {
	t := ts[0]
	x := &tickingLifetime{left: left}
	x.timeout.ApplicationTimeoutType = t.ApplicationTimeout.ApplicationTimeoutType
	x.timeout.ExpireTime = t.ApplicationTimeout.ExpireTime
	x.timeout.RemainingTime = &x.left
	x.entry.ApplicationTimeoutType, x.entry.ApplicationTimeout = t.ApplicationTimeoutType, &x.timeout
	x.list[0] = &x.entry
	return x.list[:]
}

// liveUsage is the scheduler's view of the attempt: the containers it holds
// and reserves now. Knit has no queue or cluster share to report.
// Used is what the application's live containers hold, over all its
// attempts (the scheduler's consumption of the application); Held().Live.
func (a *Application) Used() (memoryMB int64, vcores int32) {
	return a.live.MemoryMB, a.live.VCores
}

// LiveUsage is what the scheduler holds and reserves for the current
// attempt now, as Report's AppResource_Usage has it for a caller with
// access, without the rest of the report; nil when the scheduler holds no
// attempt of the application.
func (a *Application) LiveUsage() *yarnpb.ApplicationResourceUsageReportProto {
	t := a.CurrentAttempt()
	if t == nil || !t.inScheduler() {
		return nil
	}
	return a.liveUsage(t)
}

func (a *Application) liveUsage(t *Attempt) *yarnpb.ApplicationResourceUsageReportProto {
	var used, reserved int32
	var usedMem, resMem int64
	var usedVC, resVC int32
	for _, c := range a.containers {
		if c.holder != t.id {
			continue
		}
		mem, vc := c.Resource()
		switch {
		case c.state.live():
			used++
			usedMem += mem
			usedVC += vc
		case c.state == ContainerStateReserved:
			reserved++
			resMem += mem
			resVC += vc
		}
	}
	return &yarnpb.ApplicationResourceUsageReportProto{
		NumUsedContainers:      proto.Int32(used),
		NumReservedContainers:  proto.Int32(reserved),
		UsedResources:          yarnpb.NewResource(usedMem, usedVC),
		ReservedResources:      yarnpb.NewResource(resMem, resVC),
		NeededResources:        yarnpb.NewResource(usedMem+resMem, usedVC+resVC),
		QueueUsagePercentage:   proto.Float32(0),
		ClusterUsagePercentage: proto.Float32(0),
	}
}

// unknownUsage is RMServerUtils.DUMMY_APPLICATION_RESOURCE_USAGE_REPORT.
func unknownUsage() *yarnpb.ApplicationResourceUsageReportProto {
	return &yarnpb.ApplicationResourceUsageReportProto{
		NumUsedContainers:      proto.Int32(-1),
		NumReservedContainers:  proto.Int32(-1),
		UsedResources:          yarnpb.NewResource(-1, -1),
		ReservedResources:      yarnpb.NewResource(-1, -1),
		NeededResources:        yarnpb.NewResource(-1, -1),
		MemorySeconds:          proto.Int64(0),
		VcoreSeconds:           proto.Int64(0),
		PreemptedMemorySeconds: proto.Int64(0),
		PreemptedVcoreSeconds:  proto.Int64(0),
	}
}

func usageMap(mem, vcores int64) []*yarnpb.StringLongMapProto {
	return []*yarnpb.StringLongMapProto{
		{Key: proto.String("memory-mb"), Value: proto.Int64(mem)},
		{Key: proto.String("vcores"), Value: proto.Int64(vcores)},
	}
}

// shareReport is a new top level over t's fields: what Report hands out,
// t's messages shared. TestShareReportCarriesEveryField holds it to every
// field of the message.
func shareReport(t *yarnpb.ApplicationReportProto) *yarnpb.ApplicationReportProto {
	return &yarnpb.ApplicationReportProto{
		ApplicationId:               t.ApplicationId,
		User:                        t.User,
		Queue:                       t.Queue,
		Name:                        t.Name,
		Host:                        t.Host,
		RpcPort:                     t.RpcPort,
		ClientToAmToken:             t.ClientToAmToken,
		YarnApplicationState:        t.YarnApplicationState,
		TrackingUrl:                 t.TrackingUrl,
		Diagnostics:                 t.Diagnostics,
		StartTime:                   t.StartTime,
		FinishTime:                  t.FinishTime,
		FinalApplicationStatus:      t.FinalApplicationStatus,
		AppResource_Usage:           t.AppResource_Usage,
		OriginalTrackingUrl:         t.OriginalTrackingUrl,
		CurrentApplicationAttemptId: t.CurrentApplicationAttemptId,
		Progress:                    t.Progress,
		ApplicationType:             t.ApplicationType,
		AmRmToken:                   t.AmRmToken,
		ApplicationTags:             t.ApplicationTags,
		LogAggregationStatus:        t.LogAggregationStatus,
		UnmanagedApplication:        t.UnmanagedApplication,
		Priority:                    t.Priority,
		AppNodeLabelExpression:      t.AppNodeLabelExpression,
		AmNodeLabelExpression:       t.AmNodeLabelExpression,
		AppTimeouts:                 t.AppTimeouts,
		LaunchTime:                  t.LaunchTime,
		SubmitTime:                  t.SubmitTime,
		RmClusterId:                 t.RmClusterId,
	}
}

// accruedUsage is a usage report whose seconds are now's, made in one
// allocation (a report is polled thousands of times a second): the message,
// the seconds its fields and its maps' entries point to, and the maps.
type accruedUsage struct {
	report  yarnpb.ApplicationResourceUsageReportProto
	seconds [4]int64 // memory, vcores, preempted memory, preempted vcores
	entries [4]yarnpb.StringLongMapProto
	maps    [4]*yarnpb.StringLongMapProto
}

// accrued is t with u's seconds; the rest (containers, resources, the
// maps' keys) is t's, shared.
func accrued(t *yarnpb.ApplicationResourceUsageReportProto, u Usage) *yarnpb.ApplicationResourceUsageReportProto {
	x := &accruedUsage{seconds: [4]int64{u.MemorySeconds, u.VcoreSeconds, u.PreemptedMemorySeconds, u.PreemptedVcoreSeconds}}
	keys := [4]*string{
		t.ApplicationResourceUsageMap[0].Key, t.ApplicationResourceUsageMap[1].Key,
		t.ApplicationPreemptedResourceUsageMap[0].Key, t.ApplicationPreemptedResourceUsageMap[1].Key,
	}
	for i := range x.entries {
		x.entries[i].Key, x.entries[i].Value = keys[i], &x.seconds[i]
		x.maps[i] = &x.entries[i]
	}
	r := &x.report
	r.NumUsedContainers, r.NumReservedContainers = t.NumUsedContainers, t.NumReservedContainers
	r.UsedResources, r.ReservedResources, r.NeededResources = t.UsedResources, t.ReservedResources, t.NeededResources
	r.QueueUsagePercentage, r.ClusterUsagePercentage = t.QueueUsagePercentage, t.ClusterUsagePercentage
	r.MemorySeconds, r.VcoreSeconds = &x.seconds[0], &x.seconds[1]
	r.PreemptedMemorySeconds, r.PreemptedVcoreSeconds = &x.seconds[2], &x.seconds[3]
	r.ApplicationResourceUsageMap, r.ApplicationPreemptedResourceUsageMap = x.maps[0:2:2], x.maps[2:4:4]
	return r
}

// Report builds the container report getContainerReport returns, as
// RMContainerImpl.createContainerReport fills it: state RUNNING until the
// container has completed (YARN shows no other), exit status 0 and no
// diagnostics before; the log URL and node HTTP address with an http scheme.
func (c *Container) Report() *yarnpb.ContainerReportProto {
	state := yarnpb.ContainerStateProto_C_RUNNING
	exit := int32(0)
	if c.done {
		state = yarnpb.ContainerStateProto_C_COMPLETE
		exit = c.exit
	}
	m := c.Proto()
	r := &yarnpb.ContainerReportProto{
		ContainerId:         c.id.Proto(),
		Resource:            m.GetResource(),
		NodeId:              m.GetNodeId(),
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(m.GetPriority().GetPriority())},
		CreationTime:        proto.Int64(millis(c.created)),
		FinishTime:          proto.Int64(millis(c.finished)),
		ContainerExitStatus: proto.Int32(exit),
		ContainerState:      state.Enum(),
		ExecutionType:       m.GetExecutionType().Enum(),
	}
	if c.done {
		r.DiagnosticsInfo = proto.String(c.diag)
	}
	if h := m.GetNodeHttpAddress(); h != "" {
		r.NodeHttpAddress = proto.String("http://" + h)
		if c.user != "" {
			r.LogUrl = proto.String("http://" + strings.Join([]string{h, "node", "containerlogs", c.id.String(), c.user}, "/"))
		}
	}
	if m.ExposedPorts != nil {
		r.ExposedPorts = m.ExposedPorts
	}
	return r
}

func cloneNode(n *yarnpb.NodeIdProto) *yarnpb.NodeIdProto {
	if n == nil {
		return nil
	}
	return proto.Clone(n).(*yarnpb.NodeIdProto)
}
