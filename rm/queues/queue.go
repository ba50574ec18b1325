package queues

import (
	"strconv"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// State is a queue's state, numbered as Hadoop's QueueStateProto.
type State int

// The queue states. Only Running and Stopped can be configured; a stopped
// queue that still has applications is Draining until they finish.
const (
	// Stopped queues take no new applications.
	Stopped State = 1
	// Running queues take applications.
	Running State = 2
	// Draining is a stopped queue whose applications have not all finished.
	Draining State = 3
)

// String returns Hadoop's name.
func (s State) String() string {
	switch s {
	case Stopped:
		return "STOPPED"
	case Running:
		return "RUNNING"
	case Draining:
		return "DRAINING"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Proto returns the wire enum.
func (s State) Proto() yarnpb.QueueStateProto { return yarnpb.QueueStateProto(s) }

// KubeMapping says where and how a queue's pods run. Every field a queue
// leaves unset is its parent's.
type KubeMapping struct {
	// Namespace holds the queue's pods (knit.queue.<path>.namespace; root's
	// default is Options.DefaultNamespace).
	Namespace string
	// SchedulerName is the pods' schedulerName; empty means the cluster's
	// default scheduler.
	SchedulerName string
	// PriorityClass is the pods' priorityClassName; empty means none.
	PriorityClass string
	// PodTemplate is the path of a YAML or JSON pod template the pods start
	// from; empty means none. It is kept as written, never read here.
	PodTemplate string
	// Delegate names the Kubernetes batch scheduler that queues this
	// queue's pods itself (DelegateYuniKorn, DelegateVolcano,
	// DelegateKueue): Knit then admits nothing and labels each pod with
	// DelegateQueue, that scheduler's queue. Empty: Knit admits.
	Delegate      string
	DelegateQueue string
}

// The batch schedulers a queue may delegate its admission to.
const (
	DelegateYuniKorn = "yunikorn"
	DelegateVolcano  = "volcano"
	DelegateKueue    = "kueue"
)

// Queue is one CapacityScheduler queue as configured. Queues belong to the
// Tree that built them and are never modified; callers must not modify them
// AnyNodeLabel among a queue's accessible-node-labels lets it use every
// partition (RMNodeLabelsManager.ANY).
const AnyNodeLabel = "*"

// either.
type Queue struct {
	// Name is the queue's short name ("b" for root.a.b).
	Name string
	// Path is the full path ("root.a.b").
	Path string
	// Parent is nil for root.
	Parent *Queue
	// Children are in the order of the parent's queues property; a queue
	// without children is a leaf, which alone takes applications.
	Children []*Queue
	// State is the configured state, inherited from the parent when unset.
	State State

	// Capacity and MaximumCapacity are fractions of the parent's (0..1), as
	// the CapacityScheduler keeps and reports them.
	Capacity, MaximumCapacity float32
	// AbsoluteCapacity and AbsoluteMaximumCapacity are fractions of the
	// cluster.
	AbsoluteCapacity, AbsoluteMaximumCapacity float32

	// SubmitACL and AdministerACL are the queue's own ACLs; a user allowed
	// on any ancestor is allowed here too (Tree.HasAccess).
	SubmitACL, AdministerACL acl.ACL

	// MaxApplications caps the leaf's unfinished applications: its own
	// maximum-applications, else global-queue-max-application, else the
	// system maximum-applications times the absolute capacity.
	MaxApplications int
	// MaxApplicationsPerUser caps one user's unfinished applications in the
	// leaf: MaxApplications times minimum-user-limit-percent times
	// user-limit-factor, at most MaxApplications.
	MaxApplicationsPerUser int
	// MaxAMResourcePercent is the share of the queue AMs may use (0..1).
	MaxAMResourcePercent float32
	// UserLimitFactor is how many times the queue's capacity one user may
	// take; -1 means no limit.
	UserLimitFactor float32
	// MinimumUserLimitPercent is the least share (0..100) a user gets when
	// users compete.
	MinimumUserLimitPercent float32
	// DefaultApplicationPriority is given to applications that ask none.
	DefaultApplicationPriority int
	// Priority orders the queue among its siblings.
	Priority int
	// MaxParallelApps caps the queue's running applications.
	MaxParallelApps int
	// OrderingPolicy is the queue's ordering-policy by YARN's name of it,
	// as the REST scheduler reports it (getConfigName): a leaf's of its
	// applications, "fifo" (the default: by priority, then submission),
	// "fair", "fifo-with-partitions" or "fifo-for-pending-apps"; a
	// parent's of its children, "utilization" (the default) or
	// "priority-utilization", inherited from its parent when unset.
	OrderingPolicy string
	// PreemptionDisabled is disable_preemption, inherited from the parent
	// when unset, or true while the scheduler monitor does not preempt
	// (Options.Preemption): no container of the queue is taken back for
	// another queue.
	PreemptionDisabled bool
	// IntraQueuePreemptionDisabled: no container of the leaf is taken back
	// for its own applications; true with PreemptionDisabled, while
	// intra-queue preemption is off (Options.IntraQueuePreemption), or
	// when intra-queue-preemption.disable_preemption (inherited from the
	// parent when unset) says so.
	IntraQueuePreemptionDisabled bool
	// intraDisabledInHierarchy is the queue's
	// intra-queue-preemption.disable_preemption as its children inherit
	// it: without PreemptionDisabled's part.
	intraDisabledInHierarchy bool

	// AccessibleNodeLabels are the node labels the queue may use; root's
	// are always AnyNodeLabel, other queues inherit their parent's unless
	// set.
	AccessibleNodeLabels []string
	// DefaultNodeLabelExpression is given to asks that name none; empty
	// when unset here and on every ancestor.
	DefaultNodeLabelExpression string
	// Partitions are the queue's capacities in the node-label partitions
	// its configuration names (accessible-node-labels.<label>.*), root's in
	// every partition any queue names; Partition answers for the others.
	Partitions map[string]PartitionCapacity

	// Kube maps the queue to Kubernetes.
	Kube KubeMapping
}

// IsLeaf reports whether the queue takes applications.
func (q *Queue) IsLeaf() bool { return len(q.Children) == 0 }

// FairOrdering reports whether the leaf orders its applications by their
// use (FairOrderingPolicy) rather than by priority, then submission.
func (q *Queue) FairOrdering() bool { return q.OrderingPolicy == OrderingFair }

// PriorityOrdering reports whether the parent offers its children below
// their guarantee by their priority first (priority-utilization); under
// utilization their priorities are not read.
func (q *Queue) PriorityOrdering() bool { return q.OrderingPolicy == OrderingPriorityUtilization }

// ACL returns the queue's own ACL for an operation.
func (q *Queue) ACL(a QueueACL) acl.ACL {
	if a == AdministerQueue {
		return q.AdministerACL
	}
	return q.SubmitACL
}

// EffectiveState is the state the CapacityScheduler would report with the
// given number of unfinished applications in the queue and below it: a
// stopped queue drains until its applications finish.
func (q *Queue) EffectiveState(apps int) State {
	if q.State == Stopped && apps > 0 {
		return Draining
	}
	return q.State
}
