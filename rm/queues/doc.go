// Package queues is Knit's CapacityScheduler queue configuration: the queue
// hierarchy a YARN user writes in capacity-scheduler.xml, checked as the
// CapacityScheduler checks it, plus a Knit section that maps each queue to
// Kubernetes.
//
// # Configuration
//
//	yarn.scheduler.capacity.root.queues             a,b
//	yarn.scheduler.capacity.root.a.capacity         60        (percent of the parent)
//	yarn.scheduler.capacity.root.a.maximum-capacity 80
//	yarn.scheduler.capacity.root.a.state            RUNNING | STOPPED
//	yarn.scheduler.capacity.root.a.acl_submit_applications  "alice,bob analysts"
//	knit.queue.root.a.namespace                     team-a    (also scheduler-name,
//	                                                           priority-class, pod-template)
//
// Build reads a hadoopconf.Configuration into an immutable Tree. Children's
// capacities must add up to 100% (0.05% slack), absolute capacity must not
// exceed absolute maximum capacity, a running queue cannot sit under a
// stopped one; a refusal carries the CapacityScheduler's message. Leaf names
// may repeat under different parents: such a leaf is then found by its full
// path only. Every Knit setting a queue leaves unset is its parent's.
//
// # Decisions
//
// A Tree answers what the ResourceManager asks of the CapacityScheduler:
// Lookup (full path or unique short name), HasAccess (a user allowed on a
// queue or on any ancestor is allowed; root's ACLs default to "*", others'
// to " ", nobody), CheckSubmit (ACLs, queue state and application limits,
// with the exact Hadoop messages a YARN client shows), QueueInfo and
// UserACLs (getQueueInfo and getQueueUserAcls answers), and CheckAppAccess
// (who may view or modify an application). Live figures — applications per
// queue and user, queue usage — come from the caller (AppCounts, Stats).
//
// # Refresh
//
// Reload builds the next Tree and refuses a configuration that drops a
// queue which is not stopped or still has applications; the caller swaps
// the Tree atomically, so a refused refresh changes nothing. WithAdminACL
// gives refreshAdminAcls a Tree with a new yarn.admin.acl (IsAdmin).
//
// Package queues imports hadoopconf, protocols/ipc (exception classes) and
// protocols/yarnpb; it does no I/O.
package queues
