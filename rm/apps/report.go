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
}

// Report builds the application report getApplicationReport and
// getApplications return, field for field as RMAppImpl's
// createAndGetApplicationReport fills it: "N/A" host and tracking URL and
// port -1 until the AM registers, attempt id -1 before the first attempt,
// UNDEFINED final status until the application ends, -1 resource figures
// while the scheduler does not hold the attempt. Tokens (client-to-AM, an
// unmanaged AM's AMRMToken) are the caller's to add.
func (a *Application) Report(o ReportOptions) *yarnpb.ApplicationReportProto {
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
		AppResource_Usage:           unknownUsage(),
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
		left := int64(0)
		if !a.state.completed() {
			left = max(int64(a.expiry.Sub(now)/time.Second), 0)
		}
		t.RemainingTime = proto.Int64(left)
	}
	return &yarnpb.AppTimeoutsMapProto{
		ApplicationTimeoutType: yarnpb.ApplicationTimeoutTypeProto_APP_TIMEOUT_LIFETIME.Enum(),
		ApplicationTimeout:     t,
	}
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
	r := &yarnpb.ContainerReportProto{
		ContainerId:         c.id.Proto(),
		Resource:            cloneResource(c.container.GetResource()),
		NodeId:              cloneNode(c.container.GetNodeId()),
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(c.container.GetPriority().GetPriority())},
		CreationTime:        proto.Int64(millis(c.created)),
		FinishTime:          proto.Int64(millis(c.finished)),
		ContainerExitStatus: proto.Int32(exit),
		ContainerState:      state.Enum(),
		ExecutionType:       c.container.GetExecutionType().Enum(),
	}
	if c.done {
		r.DiagnosticsInfo = proto.String(c.diag)
	}
	if h := c.container.GetNodeHttpAddress(); h != "" {
		r.NodeHttpAddress = proto.String("http://" + h)
		if c.user != "" {
			r.LogUrl = proto.String("http://" + strings.Join([]string{h, "node", "containerlogs", c.id.String(), c.user}, "/"))
		}
	}
	if c.container.ExposedPorts != nil {
		r.ExposedPorts = proto.String(c.container.GetExposedPorts())
	}
	return r
}

func cloneResource(r *yarnpb.ResourceProto) *yarnpb.ResourceProto {
	if r == nil {
		return nil
	}
	return proto.Clone(r).(*yarnpb.ResourceProto)
}

func cloneNode(n *yarnpb.NodeIdProto) *yarnpb.NodeIdProto {
	if n == nil {
		return nil
	}
	return proto.Clone(n).(*yarnpb.NodeIdProto)
}
