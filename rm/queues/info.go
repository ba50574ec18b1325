package queues

import (
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// schedulerType is what CSQueueInfoProvider reports.
const schedulerType = "CapacityScheduler"

// Stats are a queue's live figures, which the Tree does not know; the
// application and container counts and resources cover the queue and
// everything below it, as QueueMetrics do.
type Stats struct {
	// UsedCapacity is the used share of the queue's guaranteed capacity
	// (QueueInfo's currentCapacity; above 1 when the queue borrows).
	UsedCapacity float32

	AppsSubmitted, AppsRunning, AppsPending int64
	AppsCompleted, AppsKilled, AppsFailed   int64
	ActiveUsers                             int64
	AvailableMemoryMB, AllocatedMemoryMB    int64
	PendingMemoryMB, ReservedMemoryMB       int64
	AvailableVCores, AllocatedVCores        int64
	PendingVCores, ReservedVCores           int64
	AllocatedContainers, PendingContainers  int64
	ReservedContainers                      int64

	// ClusterMemoryMB and ClusterVCores, when set, give the effective
	// minimum and maximum resources (cluster times absolute capacity and
	// absolute maximum capacity) in the default partition.
	ClusterMemoryMB int64
	ClusterVCores   int32
	// Partitions are what the running nodes of each labelled partition
	// hold, the effective resources' base there.
	Partitions map[string]PartitionResource
	// UsedPartitions are the labelled partitions the queue's applications
	// hold resources in (see Queue.NodeLabels).
	UsedPartitions []string
}

// PartitionResource is what the running nodes of one node-label partition
// hold.
type PartitionResource struct {
	MemoryMB int64
	VCores   int32
}

// QueueInfo answers getQueueInfo as the CapacityScheduler does: capacities
// as fractions, the leaf name and the full path, the state (DRAINING while a
// stopped queue still has applications), statistics from stats (nil: all
// zero), whether preemption takes containers of the queue back, and, when
// includeChildren, the children (their own children too when recursive).
// Applications are left for the caller, which filters them by VIEW_APP. An
// unknown or ambiguous name fails as YARN does, with a YarnException
// "java.io.IOException: Unknown queue: <name>".
func (t *Tree) QueueInfo(name string, includeChildren, recursive bool, stats func(*Queue) Stats) (*yarnpb.QueueInfoProto, error) {
	q, err := t.Lookup(name)
	if err != nil {
		return nil, &Error{Class: yarnerr.YarnException, Message: string(yarnerr.IOException) + ": Unknown queue: " + name, Err: err}
	}
	if stats == nil {
		stats = func(*Queue) Stats { return Stats{} }
	}
	return queueInfo(q, includeChildren, recursive, stats), nil
}

func queueInfo(q *Queue, includeChildren, recursive bool, stats func(*Queue) Stats) *yarnpb.QueueInfoProto {
	st := stats(q)
	info := &yarnpb.QueueInfoProto{
		SchedulerType:                proto.String(schedulerType),
		QueueName:                    proto.String(q.Name),
		QueuePath:                    proto.String(q.Path),
		AccessibleNodeLabels:         append([]string{}, q.AccessibleNodeLabels...),
		Capacity:                     proto.Float32(q.Capacity),
		MaximumCapacity:              proto.Float32(q.MaximumCapacity),
		State:                        q.EffectiveState(int(st.AppsRunning + st.AppsPending)).Proto().Enum(),
		CurrentCapacity:              proto.Float32(st.UsedCapacity),
		QueueStatistics:              statistics(st),
		PreemptionDisabled:           proto.Bool(q.PreemptionDisabled),
		IntraQueuePreemptionDisabled: proto.Bool(q.IntraQueuePreemptionDisabled),
		QueueConfigurationsMap:       configurationsMap(q, st),
		Weight:                       proto.Float32(-1), // percentage mode: no weight
		MaxParallelApps:              proto.Int32(int32(q.MaxParallelApps)),
	}
	if q.DefaultNodeLabelExpression != "" {
		info.DefaultNodeLabelExpression = proto.String(q.DefaultNodeLabelExpression)
	}
	if includeChildren {
		for _, c := range q.Children {
			info.ChildQueues = append(info.ChildQueues, queueInfo(c, recursive, recursive, stats))
		}
	}
	return info
}

func statistics(st Stats) *yarnpb.QueueStatisticsProto {
	return &yarnpb.QueueStatisticsProto{
		NumAppsSubmitted:    proto.Int64(st.AppsSubmitted),
		NumAppsRunning:      proto.Int64(st.AppsRunning),
		NumAppsPending:      proto.Int64(st.AppsPending),
		NumAppsCompleted:    proto.Int64(st.AppsCompleted),
		NumAppsKilled:       proto.Int64(st.AppsKilled),
		NumAppsFailed:       proto.Int64(st.AppsFailed),
		NumActiveUsers:      proto.Int64(st.ActiveUsers),
		AvailableMemoryMB:   proto.Int64(st.AvailableMemoryMB),
		AllocatedMemoryMB:   proto.Int64(st.AllocatedMemoryMB),
		PendingMemoryMB:     proto.Int64(st.PendingMemoryMB),
		ReservedMemoryMB:    proto.Int64(st.ReservedMemoryMB),
		AvailableVCores:     proto.Int64(st.AvailableVCores),
		AllocatedVCores:     proto.Int64(st.AllocatedVCores),
		PendingVCores:       proto.Int64(st.PendingVCores),
		ReservedVCores:      proto.Int64(st.ReservedVCores),
		AllocatedContainers: proto.Int64(st.AllocatedContainers),
		PendingContainers:   proto.Int64(st.PendingContainers),
		ReservedContainers:  proto.Int64(st.ReservedContainers),
	}
}

// configurationsMap is the queue's QueueConfigurations in each partition
// NodeLabels names, as AbstractCSQueue.getQueueConfigurations gives them.
func configurationsMap(q *Queue, st Stats) []*yarnpb.QueueConfigurationsMapProto {
	labels := q.NodeLabels(st.UsedPartitions)
	out := make([]*yarnpb.QueueConfigurationsMapProto, 0, len(labels))
	for _, label := range labels {
		whole := PartitionResource{MemoryMB: st.ClusterMemoryMB, VCores: st.ClusterVCores}
		if label != "" {
			whole = st.Partitions[label]
		}
		out = append(out, &yarnpb.QueueConfigurationsMapProto{
			PartitionName:       proto.String(label),
			QueueConfigurations: configurations(q.partition(label), whole),
		})
	}
	return out
}

// configurations is a queue's QueueConfigurations in one partition whose
// nodes hold whole. Knit's capacities are percentages, so the configured
// resources are none (0/0) as the CapacityScheduler reports them in
// percentage mode.
func configurations(c PartitionCapacity, whole PartitionResource) *yarnpb.QueueConfigurationsProto {
	scaled := func(f float32) *yarnpb.ResourceProto {
		return resource(int64(float32(whole.MemoryMB)*f), int32(float32(whole.VCores)*f))
	}
	return &yarnpb.QueueConfigurationsProto{
		Capacity:              proto.Float32(c.Capacity),
		AbsoluteCapacity:      proto.Float32(c.AbsoluteCapacity),
		MaxCapacity:           proto.Float32(c.MaximumCapacity),
		AbsoluteMaxCapacity:   proto.Float32(c.AbsoluteMaximumCapacity),
		MaxAMPercentage:       proto.Float32(c.MaxAMResourcePercent),
		ConfiguredMinCapacity: resource(0, 0),
		ConfiguredMaxCapacity: resource(0, 0),
		EffectiveMinCapacity:  scaled(c.AbsoluteCapacity),
		EffectiveMaxCapacity:  scaled(c.AbsoluteMaximumCapacity),
	}
}

func resource(memoryMB int64, vcores int32) *yarnpb.ResourceProto {
	return &yarnpb.ResourceProto{Memory: proto.Int64(memoryMB), VirtualCores: proto.Int32(vcores)}
}

// UserACLs answers getQueueUserAcls as the CapacityScheduler does: every
// queue, depth first from root, named by its full path, with the operations
// the user may perform there (inherited from ancestors). groups nil means
// Options.Groups(user).
func (t *Tree) UserACLs(user string, groups []string) []*yarnpb.QueueUserACLInfoProto {
	groups = t.groups(user, groups)
	out := make([]*yarnpb.QueueUserACLInfoProto, 0, len(t.queues))
	for _, q := range t.queues {
		info := &yarnpb.QueueUserACLInfoProto{QueueName: proto.String(q.Path), UserAcls: []yarnpb.QueueACLProto{}}
		for _, a := range queueACLs() {
			if t.hasAccess(q, a, user, groups) {
				info.UserAcls = append(info.UserAcls, a.Proto())
			}
		}
		out = append(out, info)
	}
	return out
}
