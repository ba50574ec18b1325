package rest

import (
	"context"
	"encoding/json"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

// Cluster is what the REST API needs from the ResourceManager. Every method
// takes the calling user ("" never: anonymous callers arrive as
// Config.AnonymousUser) where YARN checks ACLs for it.
//
// Errors: the Java exception an error carries (a *yarnerr.Error, found with
// yarnerr.Find) chooses the answer —
// ApplicationNotFoundException → 404, AccessControlException → 403,
// InvalidResourceRequestException, InvalidApplicationSubmissionContext…,
// IllegalArgumentException, BadRequestException → 400 — and ErrNodeNotFound
// → 404; any other error is a 500.
type Cluster interface {
	// Info describes the RM (clusterInfo).
	Info(ctx context.Context) (ClusterInfo, error)
	// Metrics returns the cluster metrics (clusterMetrics).
	Metrics(ctx context.Context) (ClusterMetrics, error)
	// Scheduler returns the scheduler description already in Hadoop's JSON
	// shape: the object under {"scheduler":{"schedulerInfo":…}}, e.g.
	// {"type":"capacityScheduler",…}.
	Scheduler(ctx context.Context) (json.RawMessage, error)
	// Applications lists the applications the filter selects (Limit
	// included), in the RM's order.
	Applications(ctx context.Context, user string, f apps.Filter) ([]App, error)
	// Application returns one application.
	Application(ctx context.Context, user, id string) (App, error)
	// Attempts returns an application's attempts, oldest first.
	Attempts(ctx context.Context, user, id string) ([]Attempt, error)
	// Kill asks for the application to be killed, as forceKillApplication
	// does; killed reports whether it has already ended (isKillCompleted).
	Kill(ctx context.Context, user, id, diagnostics string) (killed bool, err error)
	// NewApplication reserves an application id (getNewApplication).
	NewApplication(ctx context.Context, user string) (*yarnpb.GetNewApplicationResponseProto, error)
	// Submit submits an application (submitApplication).
	Submit(ctx context.Context, user string, sc *yarnpb.ApplicationSubmissionContextProto) error
	// Nodes lists the nodes in the given states (NodeState names such as
	// "RUNNING"); no states means every node.
	Nodes(ctx context.Context, states []string) ([]Node, error)
	// Node returns one node by its id, host:port.
	Node(ctx context.Context, id string) (Node, error)

	// UpdatePriority sets an application's priority as
	// updateApplicationPriority does, and returns the priority it then
	// has (the cluster's maximum may lower it).
	UpdatePriority(ctx context.Context, user, id string, priority int32) (int32, error)
	// Move moves an application to another queue as
	// moveApplicationAcrossQueues does.
	Move(ctx context.Context, user, id, queue string) error
	// UpdateTimeout sets when an application's timeout of the type
	// (LIFETIME) expires, expiry in ISO 8601 as updateApplicationTimeouts
	// reads it.
	UpdateTimeout(ctx context.Context, user, id, timeoutType, expiry string) error
	// Attempt reports one attempt, by id (getApplicationAttemptReport).
	Attempt(ctx context.Context, user, attemptID string) (*yarnpb.ApplicationAttemptReportProto, error)
	// Containers reports an attempt's containers (getContainers).
	Containers(ctx context.Context, user, attemptID string) ([]*yarnpb.ContainerReportProto, error)
	// Container reports one container, by id (getContainerReport).
	Container(ctx context.Context, user, containerID string) (*yarnpb.ContainerReportProto, error)
	// CountApps counts the applications the RM holds in each of the
	// query's states, of its type (lower case; AnyType for every type),
	// whoever owns them.
	CountApps(ctx context.Context, q StatsQuery) (map[yarnpb.YarnApplicationStateProto]int64, error)
	// NodeLabels lists the cluster's node labels by name, each with its
	// nodes (host:port) in order, as the client protocol's
	// getClusterNodeLabels and getLabelsToNodes answer them.
	NodeLabels(ctx context.Context) ([]NodeLabel, error)

	// NewReservation, SubmitReservation, UpdateReservation,
	// DeleteReservation and ListReservations are the client protocol's
	// reservation calls (getNewReservation, submitReservation,
	// updateReservation, deleteReservation, listReservations), which
	// RMWebServices makes of ClientRMService. Knit's RM has no reservation
	// system and refuses each with yarnerr.ReservationDisabled, so they
	// return only that refusal: the REST API has no answer for a call an
	// RM took, and answers a nil error with a 500.
	NewReservation(ctx context.Context, user string) error
	SubmitReservation(ctx context.Context, user string, req *yarnpb.ReservationSubmissionRequestProto) error
	UpdateReservation(ctx context.Context, user string, req *yarnpb.ReservationUpdateRequestProto) error
	DeleteReservation(ctx context.Context, user string, req *yarnpb.ReservationDeleteRequestProto) error
	ListReservations(ctx context.Context, user string, req *yarnpb.ReservationListRequestProto) error
}

// ClusterInfo is the RM's description of itself (Hadoop's ClusterInfo).
type ClusterInfo struct {
	ID                            int64  `json:"id"`
	StartedOn                     int64  `json:"startedOn"`
	State                         string `json:"state"`
	HAState                       string `json:"haState"`
	RMStateStoreName              string `json:"rmStateStoreName"`
	ResourceManagerVersion        string `json:"resourceManagerVersion"`
	ResourceManagerBuildVersion   string `json:"resourceManagerBuildVersion"`
	ResourceManagerVersionBuiltOn string `json:"resourceManagerVersionBuiltOn"`
	HadoopVersion                 string `json:"hadoopVersion"`
	HadoopBuildVersion            string `json:"hadoopBuildVersion"`
	HadoopVersionBuiltOn          string `json:"hadoopVersionBuiltOn"`
	HAZooKeeperConnectionState    string `json:"haZooKeeperConnectionState"`
}

// ClusterMetrics are the cluster-wide figures (Hadoop's ClusterMetricsInfo),
// in Hadoop's field order. Percentages are whole numbers, as Hadoop's ints.
type ClusterMetrics struct {
	AppsSubmitted                           int32    `json:"appsSubmitted"`
	AppsCompleted                           int32    `json:"appsCompleted"`
	AppsPending                             int32    `json:"appsPending"`
	AppsRunning                             int32    `json:"appsRunning"`
	AppsFailed                              int32    `json:"appsFailed"`
	AppsKilled                              int32    `json:"appsKilled"`
	ReservedMB                              int64    `json:"reservedMB"`
	AvailableMB                             int64    `json:"availableMB"`
	AllocatedMB                             int64    `json:"allocatedMB"`
	PendingMB                               int64    `json:"pendingMB"`
	ReservedVirtualCores                    int64    `json:"reservedVirtualCores"`
	AvailableVirtualCores                   int64    `json:"availableVirtualCores"`
	AllocatedVirtualCores                   int64    `json:"allocatedVirtualCores"`
	PendingVirtualCores                     int64    `json:"pendingVirtualCores"`
	ContainersAllocated                     int32    `json:"containersAllocated"`
	ContainersReserved                      int32    `json:"containersReserved"`
	ContainersPending                       int32    `json:"containersPending"`
	TotalMB                                 int64    `json:"totalMB"`
	UtilizedMB                              int64    `json:"utilizedMB"`
	TotalVirtualCores                       int64    `json:"totalVirtualCores"`
	UtilizedVirtualCores                    int64    `json:"utilizedVirtualCores"`
	UtilizedMBPercent                       int32    `json:"utilizedMBPercent"`
	UtilizedVirtualCoresPercent             int32    `json:"utilizedVirtualCoresPercent"`
	RMSchedulerBusyPercent                  int32    `json:"rmSchedulerBusyPercent"`
	TotalNodes                              int32    `json:"totalNodes"`
	LostNodes                               int32    `json:"lostNodes"`
	UnhealthyNodes                          int32    `json:"unhealthyNodes"`
	DecommissioningNodes                    int32    `json:"decommissioningNodes"`
	DecommissionedNodes                     int32    `json:"decommissionedNodes"`
	RebootedNodes                           int32    `json:"rebootedNodes"`
	ActiveNodes                             int32    `json:"activeNodes"`
	ShutdownNodes                           int32    `json:"shutdownNodes"`
	ContainerAssignedPerSecond              int32    `json:"containerAssignedPerSecond"`
	TotalUsedResourcesAcrossPartition       Resource `json:"totalUsedResourcesAcrossPartition"`
	TotalClusterResourcesAcrossPartition    Resource `json:"totalClusterResourcesAcrossPartition"`
	TotalReservedResourcesAcrossPartition   Resource `json:"totalReservedResourcesAcrossPartition"`
	TotalAllocatedContainersAcrossPartition int32    `json:"totalAllocatedContainersAcrossPartition"`
	CrossPartitionMetricsAvailable          bool     `json:"crossPartitionMetricsAvailable"`
	RMEventQueueSize                        int32    `json:"rmEventQueueSize"`
	SchedulerEventQueueSize                 int32    `json:"schedulerEventQueueSize"`
}

// App is one application: the report getApplicationReport returns plus
// what the REST answer shows beyond it.
type App struct {
	Report *yarnpb.ApplicationReportProto
	// AMContainer is the current attempt's AM container; nil until one is
	// allocated (and always for an unmanaged AM).
	AMContainer *yarnpb.ContainerProto
	// Preempted counts what preemption took from the application.
	Preempted Preemption
	// Partitions is the usage per node partition while the scheduler holds
	// the current attempt (resourceInfo); nil otherwise.
	Partitions []PartitionUsage
}

// Preemption is what preemption took from an application (RMAppMetrics).
type Preemption struct {
	MB, VCores                    int64
	NonAMContainers, AMContainers int32
}

// PartitionUsage is an application's resource usage in one node partition
// ("" is the default partition). Nil resources are written as zero.
type PartitionUsage struct {
	Partition                                             string
	Used, Reserved, Pending, AMUsed, AMLimit, UserAMLimit *yarnpb.ResourceProto
}

// Attempt is one application attempt with its AM container.
type Attempt struct {
	Report *yarnpb.ApplicationAttemptReportProto
	// AMContainer is nil until the attempt has one.
	AMContainer *yarnpb.ContainerProto
	// Blacklisted and SystemBlacklisted are the nodes the AM and the
	// system blacklisted, comma separated.
	Blacklisted, SystemBlacklisted string
}

// Node is one node: its NodeReport plus what the REST answer shows beyond it.
type Node struct {
	Report *yarnpb.NodeReportProto
	// Version is the node's software version ("3.4.1").
	Version string
	// MemUtilization and CPUUtilization are the node's physical memory and
	// CPU use in percent of the machine's memory and processors, as
	// Hadoop's NodeInfo computes them; each 0 when the machine's figure is
	// unknown.
	MemUtilization, CPUUtilization float32
}
