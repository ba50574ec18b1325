package rest

import (
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// appInfo is Hadoop's AppInfo, field for field in its order.
type appInfo struct {
	ID                          string          `json:"id"`
	User                        string          `json:"user"`
	Name                        string          `json:"name"`
	Queue                       string          `json:"queue"`
	State                       string          `json:"state"`
	FinalStatus                 string          `json:"finalStatus"`
	Progress                    JavaFloat       `json:"progress"`
	TrackingUI                  string          `json:"trackingUI"`
	TrackingURL                 string          `json:"trackingUrl,omitempty"`
	Diagnostics                 JavaString      `json:"diagnostics"`
	ClusterID                   int64           `json:"clusterId"`
	ApplicationType             string          `json:"applicationType"`
	ApplicationTags             JavaString      `json:"applicationTags"`
	Priority                    int32           `json:"priority"`
	StartedTime                 int64           `json:"startedTime"`
	LaunchTime                  int64           `json:"launchTime"`
	FinishedTime                int64           `json:"finishedTime"`
	ElapsedTime                 int64           `json:"elapsedTime"`
	AMContainerLogs             string          `json:"amContainerLogs,omitempty"`
	AMHostHTTPAddress           string          `json:"amHostHttpAddress,omitempty"`
	AMRPCAddress                string          `json:"amRPCAddress,omitempty"`
	MasterNodeID                JavaString      `json:"masterNodeId"`
	AllocatedMB                 int64           `json:"allocatedMB"`
	AllocatedVCores             int64           `json:"allocatedVCores"`
	ReservedMB                  int64           `json:"reservedMB"`
	ReservedVCores              int64           `json:"reservedVCores"`
	RunningContainers           int32           `json:"runningContainers"`
	MemorySeconds               int64           `json:"memorySeconds"`
	VcoreSeconds                int64           `json:"vcoreSeconds"`
	QueueUsagePercentage        JavaFloat       `json:"queueUsagePercentage"`
	ClusterUsagePercentage      JavaFloat       `json:"clusterUsagePercentage"`
	ResourceSecondsMap          entryMap        `json:"resourceSecondsMap"`
	PreemptedResourceMB         int64           `json:"preemptedResourceMB"`
	PreemptedResourceVCores     int64           `json:"preemptedResourceVCores"`
	NumNonAMContainerPreempted  int32           `json:"numNonAMContainerPreempted"`
	NumAMContainerPreempted     int32           `json:"numAMContainerPreempted"`
	PreemptedMemorySeconds      int64           `json:"preemptedMemorySeconds"`
	PreemptedVcoreSeconds       int64           `json:"preemptedVcoreSeconds"`
	PreemptedResourceSecondsMap entryMap        `json:"preemptedResourceSecondsMap"`
	LogAggregationStatus        string          `json:"logAggregationStatus"`
	UnmanagedApplication        bool            `json:"unmanagedApplication"`
	AppNodeLabelExpression      *JavaString     `json:"appNodeLabelExpression,omitempty"`
	AMNodeLabelExpression       *JavaString     `json:"amNodeLabelExpression,omitempty"`
	ResourceInfo                *resourcesInfo  `json:"resourceInfo,omitempty"`
	Timeouts                    *appTimeoutsOut `json:"timeouts,omitempty"`
}

type resourcesInfo struct {
	ResourceUsagesByPartition []partitionInfo `json:"resourceUsagesByPartition"`
}

type partitionInfo struct {
	PartitionName JavaString `json:"partitionName"`
	Used          Resource   `json:"used"`
	Reserved      Resource   `json:"reserved"`
	Pending       Resource   `json:"pending"`
	AMUsed        Resource   `json:"amUsed"`
	AMLimit       Resource   `json:"amLimit"`
	UserAMLimit   Resource   `json:"userAmLimit"`
}

type appTimeoutsOut struct {
	Timeout []appTimeoutOut `json:"timeout"`
}

type appTimeoutOut struct {
	Type                   string `json:"type"`
	ExpiryTime             string `json:"expiryTime"`
	RemainingTimeInSeconds int64  `json:"remainingTimeInSeconds"`
}

// deSelects are the parts of an appInfo a caller asked to leave out.
type deSelects struct {
	resourceRequests, appNodeLabelExpression, amNodeLabelExpression, resourceInfo, timeouts bool
}

// newAppInfo builds the REST view of an application as AppInfo does.
// clusterID is the RM's start time; now drives elapsedTime.
func newAppInfo(a App, clusterID int64, now time.Time, ds deSelects) appInfo {
	r := a.Report
	info := appInfo{
		ID:              appID(r.GetApplicationId()),
		User:            r.GetUser(),
		Name:            r.GetName(),
		Queue:           r.GetQueue(),
		State:           r.GetYarnApplicationState().String(),
		FinalStatus:     strings.TrimPrefix(r.GetFinalApplicationStatus().String(), "APP_"),
		Progress:        JavaFloat(r.GetProgress() * 100),
		ClusterID:       clusterID,
		ApplicationType: r.GetApplicationType(),
		ApplicationTags: JavaString(strings.Join(r.GetApplicationTags(), ",")),
		Priority:        r.GetPriority().GetPriority(),
		StartedTime:     r.GetStartTime(),
		LaunchTime:      r.GetLaunchTime(),
		FinishedTime:    r.GetFinishTime(),
		ElapsedTime:     elapsed(r.GetStartTime(), r.GetFinishTime(), now),
		LogAggregationStatus: strings.TrimPrefix(
			yarnpb.LogAggregationStatusProto(max(int32(r.GetLogAggregationStatus()), 1)).String(), "LOG_"),
		UnmanagedApplication: r.GetUnmanagedApplication(),
	}
	if r.Diagnostics != nil {
		info.Diagnostics = JavaString(r.GetDiagnostics())
	}
	tracking := r.GetTrackingUrl()
	switch {
	case tracking == "" || tracking == "N/A" || notReady(r.GetYarnApplicationState()):
		info.TrackingUI = "UNASSIGNED"
	default:
		if r.GetFinishTime() == 0 {
			info.TrackingUI = "ApplicationMaster"
		} else {
			info.TrackingUI = "History"
		}
		if !strings.Contains(tracking, "://") {
			tracking = "http://" + tracking
		}
		info.TrackingURL = tracking
	}
	if c := a.AMContainer; c != nil {
		info.AMContainerLogs = containerLogsURL(c, r.GetUser())
		info.AMHostHTTPAddress = c.GetNodeHttpAddress()
		info.MasterNodeID = JavaString(nodeID(c.GetNodeId()))
	}
	if h, p := r.GetHost(), r.GetRpcPort(); h != "" && h != "N/A" && p > 0 {
		info.AMRPCAddress = h + ":" + itoa(int64(p))
	}
	u := r.GetAppResource_Usage()
	info.AllocatedMB = resOrMinus(u.GetUsedResources(), u).GetMemory()
	info.AllocatedVCores = int64(resOrMinus(u.GetUsedResources(), u).GetVirtualCores())
	info.ReservedMB = resOrMinus(u.GetReservedResources(), u).GetMemory()
	info.ReservedVCores = int64(resOrMinus(u.GetReservedResources(), u).GetVirtualCores())
	info.RunningContainers = u.GetNumUsedContainers()
	if u == nil {
		info.RunningContainers = -1
	}
	info.MemorySeconds = u.GetMemorySeconds()
	info.VcoreSeconds = u.GetVcoreSeconds()
	info.QueueUsagePercentage = JavaFloat(u.GetQueueUsagePercentage())
	info.ClusterUsagePercentage = JavaFloat(u.GetClusterUsagePercentage())
	info.ResourceSecondsMap = longMap(u.GetApplicationResourceUsageMap())
	info.PreemptedMemorySeconds = u.GetPreemptedMemorySeconds()
	info.PreemptedVcoreSeconds = u.GetPreemptedVcoreSeconds()
	info.PreemptedResourceSecondsMap = longMap(u.GetApplicationPreemptedResourceUsageMap())
	info.PreemptedResourceMB = a.Preempted.MB
	info.PreemptedResourceVCores = a.Preempted.VCores
	info.NumNonAMContainerPreempted = a.Preempted.NonAMContainers
	info.NumAMContainerPreempted = a.Preempted.AMContainers

	if !ds.appNodeLabelExpression && r.AppNodeLabelExpression != nil {
		v := JavaString(r.GetAppNodeLabelExpression())
		info.AppNodeLabelExpression = &v
	}
	if !ds.amNodeLabelExpression && !r.GetUnmanagedApplication() {
		v := JavaString(r.GetAmNodeLabelExpression())
		info.AMNodeLabelExpression = &v
	}
	if !ds.resourceInfo && len(a.Partitions) > 0 {
		ri := &resourcesInfo{}
		for _, p := range a.Partitions {
			ri.ResourceUsagesByPartition = append(ri.ResourceUsagesByPartition, partitionInfo{
				PartitionName: JavaString(p.Partition),
				Used:          ResourceFromProto(p.Used),
				Reserved:      ResourceFromProto(p.Reserved),
				Pending:       ResourceFromProto(p.Pending),
				AMUsed:        ResourceFromProto(p.AMUsed),
				AMLimit:       ResourceFromProto(p.AMLimit),
				UserAMLimit:   ResourceFromProto(p.UserAMLimit),
			})
		}
		info.ResourceInfo = ri
	}
	if !ds.timeouts {
		info.Timeouts = timeouts(r.GetAppTimeouts())
	}
	return info
}

// resOrMinus gives the -1 resource Hadoop reports when there is no usage
// report (the scheduler does not hold the attempt).
func resOrMinus(p *yarnpb.ResourceProto, u *yarnpb.ApplicationResourceUsageReportProto) *yarnpb.ResourceProto {
	if u == nil {
		return &yarnpb.ResourceProto{Memory: ptr(int64(-1)), VirtualCores: ptr(int32(-1))}
	}
	return p
}

func timeouts(ts []*yarnpb.AppTimeoutsMapProto) *appTimeoutsOut {
	out := &appTimeoutsOut{}
	for _, t := range ts {
		to := t.GetApplicationTimeout()
		o := appTimeoutOut{
			Type:                   strings.TrimPrefix(t.GetApplicationTimeoutType().String(), "APP_TIMEOUT_"),
			ExpiryTime:             to.GetExpireTime(),
			RemainingTimeInSeconds: to.GetRemainingTime(),
		}
		if o.ExpiryTime == "" {
			o.ExpiryTime = "UNLIMITED"
		}
		out.Timeout = append(out.Timeout, o)
	}
	if len(out.Timeout) == 0 {
		out.Timeout = []appTimeoutOut{{Type: "LIFETIME", ExpiryTime: "UNLIMITED", RemainingTimeInSeconds: -1}}
	}
	return out
}

func notReady(s yarnpb.YarnApplicationStateProto) bool {
	switch s {
	case yarnpb.YarnApplicationStateProto_NEW, yarnpb.YarnApplicationStateProto_NEW_SAVING,
		yarnpb.YarnApplicationStateProto_SUBMITTED, yarnpb.YarnApplicationStateProto_ACCEPTED:
		return true
	}
	return false
}

// elapsed is Hadoop's Times.elapsed: until now while running.
func elapsed(start, finish int64, now time.Time) int64 {
	if start <= 0 {
		return 0
	}
	if finish <= 0 {
		finish = now.UnixMilli()
	}
	if finish < start {
		return -1
	}
	return finish - start
}

func containerLogsURL(c *yarnpb.ContainerProto, user string) string {
	return "http://" + c.GetNodeHttpAddress() + "/node/containerlogs/" + containerID(c.GetId()) + "/" + user
}

// appAttemptInfo is Hadoop's AppAttemptInfo.
type appAttemptInfo struct {
	ID                       int32       `json:"id"`
	StartTime                int64       `json:"startTime"`
	FinishedTime             int64       `json:"finishedTime"`
	ContainerID              string      `json:"containerId,omitempty"`
	NodeHTTPAddress          string      `json:"nodeHttpAddress,omitempty"`
	NodeID                   string      `json:"nodeId,omitempty"`
	LogsLink                 string      `json:"logsLink,omitempty"`
	BlacklistedNodes         *JavaString `json:"blacklistedNodes,omitempty"`
	NodesBlacklistedBySystem *JavaString `json:"nodesBlacklistedBySystem,omitempty"`
	AppAttemptID             string      `json:"appAttemptId"`
	ExportPorts              string      `json:"exportPorts,omitempty"`
	AppAttemptState          string      `json:"appAttemptState"`
}

func newAppAttemptInfo(a Attempt, user string) appAttemptInfo {
	r := a.Report
	id, _ := yarnid.AttemptIDFromProto(r.GetApplicationAttemptId())
	info := appAttemptInfo{
		ID:              id.ID,
		StartTime:       r.GetStartTime(),
		FinishedTime:    r.GetFinishTime(),
		AppAttemptID:    id.String(),
		AppAttemptState: strings.TrimPrefix(r.GetYarnApplicationAttemptState().String(), "APP_ATTEMPT_"),
	}
	if c := a.AMContainer; c != nil {
		info.ContainerID = containerID(c.GetId())
		info.NodeHTTPAddress = c.GetNodeHttpAddress()
		info.NodeID = nodeID(c.GetNodeId())
		info.LogsLink = containerLogsURL(c, user)
		b, s := JavaString(a.Blacklisted), JavaString(a.SystemBlacklisted)
		info.BlacklistedNodes, info.NodesBlacklistedBySystem = &b, &s
		info.ExportPorts = "null"
		if c.ExposedPorts != nil {
			info.ExportPorts = c.GetExposedPorts()
		}
	}
	return info
}

// nodeInfo is Hadoop's NodeInfo.
type nodeInfo struct {
	Rack                       string                  `json:"rack"`
	State                      string                  `json:"state"`
	ID                         string                  `json:"id"`
	NodeHostName               string                  `json:"nodeHostName"`
	NodeHTTPAddress            string                  `json:"nodeHTTPAddress"`
	LastHealthUpdate           int64                   `json:"lastHealthUpdate"`
	Version                    string                  `json:"version"`
	HealthReport               JavaString              `json:"healthReport"`
	NumContainers              int32                   `json:"numContainers"`
	UsedMemoryMB               int64                   `json:"usedMemoryMB"`
	AvailMemoryMB              int64                   `json:"availMemoryMB"`
	UsedVirtualCores           int64                   `json:"usedVirtualCores"`
	AvailableVirtualCores      int64                   `json:"availableVirtualCores"`
	MemUtilization             JavaFloat               `json:"memUtilization"`
	CPUUtilization             JavaFloat               `json:"cpuUtilization"`
	NumRunningOpportContainers int32                   `json:"numRunningOpportContainers"`
	UsedMemoryOpportGB         int64                   `json:"usedMemoryOpportGB"`
	UsedVirtualCoresOpport     int64                   `json:"usedVirtualCoresOpport"`
	NumQueuedContainers        int32                   `json:"numQueuedContainers"`
	NodeLabels                 []string                `json:"nodeLabels,omitempty"`
	AllocationTags             struct{}                `json:"allocationTags"`
	ResourceUtilization        resourceUtilizationInfo `json:"resourceUtilization"`
	DecommissioningTimeout     *int32                  `json:"decommissioningTimeout,omitempty"`
	NodeUpdateType             string                  `json:"nodeUpdateType,omitempty"`
	UsedResource               Resource                `json:"usedResource"`
	AvailableResource          Resource                `json:"availableResource"`
	NodeAttributesInfo         *nodeAttributes         `json:"nodeAttributesInfo"`
	TotalResource              Resource                `json:"totalResource"`
}

type resourceUtilizationInfo struct {
	NodePhysicalMemoryMB                 int32   `json:"nodePhysicalMemoryMB"`
	NodeVirtualMemoryMB                  int32   `json:"nodeVirtualMemoryMB"`
	NodeCPUUsage                         jdouble `json:"nodeCPUUsage"`
	AggregatedContainersPhysicalMemoryMB int32   `json:"aggregatedContainersPhysicalMemoryMB"`
	AggregatedContainersVirtualMemoryMB  int32   `json:"aggregatedContainersVirtualMemoryMB"`
	ContainersCPUUsage                   jdouble `json:"containersCPUUsage"`
}

type nodeAttributes struct {
	NodeAttributeInfo []nodeAttribute `json:"nodeAttributeInfo,omitempty"`
}

type nodeAttribute struct {
	Prefix string `json:"prefix"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Value  string `json:"value"`
}

func newNodeInfo(n Node) nodeInfo {
	r := n.Report
	used, total := r.GetUsed(), r.GetCapability()
	info := nodeInfo{
		Rack:                  r.GetRackName(),
		State:                 strings.TrimPrefix(r.GetNodeState().String(), "NS_"),
		ID:                    nodeID(r.GetNodeId()),
		NodeHostName:          r.GetNodeId().GetHost(),
		NodeHTTPAddress:       r.GetHttpAddress(),
		LastHealthUpdate:      r.GetLastHealthReportTime(),
		Version:               n.Version,
		HealthReport:          JavaString(r.GetHealthReport()),
		NumContainers:         r.GetNumContainers(),
		UsedMemoryMB:          used.GetMemory(),
		AvailMemoryMB:         total.GetMemory() - used.GetMemory(),
		UsedVirtualCores:      int64(used.GetVirtualCores()),
		AvailableVirtualCores: int64(total.GetVirtualCores() - used.GetVirtualCores()),
		MemUtilization:        JavaFloat(n.MemUtilization),
		CPUUtilization:        JavaFloat(n.CPUUtilization),
		NodeLabels:            r.GetNodeLabels(),
		ResourceUtilization: resourceUtilizationInfo{
			NodePhysicalMemoryMB:                 r.GetNodeUtilization().GetPmem(),
			NodeVirtualMemoryMB:                  r.GetNodeUtilization().GetVmem(),
			NodeCPUUsage:                         jdouble(r.GetNodeUtilization().GetCpu()),
			AggregatedContainersPhysicalMemoryMB: r.GetContainersUtilization().GetPmem(),
			AggregatedContainersVirtualMemoryMB:  r.GetContainersUtilization().GetVmem(),
			ContainersCPUUsage:                   jdouble(r.GetContainersUtilization().GetCpu()),
		},
		UsedResource:       ResourceFromProto(used),
		TotalResource:      ResourceFromProto(total),
		NodeAttributesInfo: &nodeAttributes{},
	}
	avail := ResourceFromProto(total)
	avail.MemoryMB -= used.GetMemory()
	avail.VCores -= int64(used.GetVirtualCores())
	u := ResourceFromProto(used)
	for i := range avail.Other {
		for _, o := range u.Other {
			if o.Name == avail.Other[i].Name {
				avail.Other[i].Value -= o.Value
			}
		}
	}
	info.AvailableResource = avail
	if r.DecommissioningTimeout != nil {
		t := int32(r.GetDecommissioningTimeout())
		info.DecommissioningTimeout = &t
	}
	if r.NodeUpdateType != nil {
		info.NodeUpdateType = r.GetNodeUpdateType().String()
	}
	for _, a := range r.GetNodeAttributes() {
		info.NodeAttributesInfo.NodeAttributeInfo = append(info.NodeAttributesInfo.NodeAttributeInfo, nodeAttribute{
			Prefix: a.GetAttributeKey().GetAttributePrefix(),
			Name:   a.GetAttributeKey().GetAttributeName(),
			Type:   a.GetAttributeType().String(),
			Value:  a.GetAttributeValue(),
		})
	}
	return info
}

// newApplication is Hadoop's NewApplication (unwrapped).
type newApplication struct {
	ApplicationID             string   `json:"application-id"`
	MaximumResourceCapability Resource `json:"maximum-resource-capability"`
}

func (newApplication) xmlRoot() string { return newApplicationRoot }

// appState is Hadoop's AppState, written unwrapped.
type appState struct {
	State       string `json:"state"`
	Diagnostics string `json:"diagnostics,omitempty"`
}

func (appState) xmlRoot() string { return appStateRoot }

func appID(p *yarnpb.ApplicationIdProto) string {
	id, _ := yarnid.ApplicationIDFromProto(p)
	return id.String()
}

func containerID(p *yarnpb.ContainerIdProto) string {
	id, _ := yarnid.ContainerIDFromProto(p)
	return id.String()
}

func nodeID(p *yarnpb.NodeIdProto) string {
	if p == nil {
		return ""
	}
	return p.GetHost() + ":" + itoa(int64(p.GetPort()))
}

func ptr[T any](v T) *T { return &v }
