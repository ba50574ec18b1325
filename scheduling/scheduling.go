// Package scheduling is the contract between the ResourceManager and the
// backend that places its containers: the RM hands an attempt's asks to the
// backend and hears back of containers allocated, completed, preempted and
// updated. RGS (pods on Kubernetes) is the backend today; NodeManagers
// registering through ResourceTracker, or a federation sub-cluster, would be
// others. Nothing here knows how a backend places a container.
package scheduling

import (
	"context"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// AttemptSpec says whose asks they are.
type AttemptSpec struct {
	Attempt yarnid.AttemptID
	// Role is launch.RoleAM for the AM container's ask, launch.RoleTask for
	// the AM's own asks.
	Role  string
	Queue string
	User  string
	// NodeLabel is the application's node label expression, used by asks
	// that carry none.
	NodeLabel string
	// LogAggregation is the application's LogAggregationContext, nil if
	// it was submitted without one; every container's token carries it.
	LogAggregation *yarnpb.LogAggregationContextProto
}

// Allocation is a container the backend placed.
type Allocation struct {
	Role      string
	Container *yarnpb.ContainerProto
	// Created is when the backend made the container (a recovered
	// container's age counts from it).
	Created time.Time
	// Bound is when the container was placed on its node; zero if not
	// known.
	Bound time.Time
	// Partition is the node-label partition the container's ask named
	// ("" the default), the one admission counts it in.
	Partition string
}

// Completion is a container that ended or went away.
type Completion struct {
	Container   yarnid.ContainerID
	ExitStatus  int32
	Diagnostics string
	// Preempted is set when the cluster took the container back.
	Preempted bool
	// Vanished is set when the container went before it ended: released,
	// stopped, or removed by someone else.
	Vanished bool
}

// Current is what the RM checks a container update against.
type Current struct {
	Version       int32
	Resource      *yarnpb.ResourceProto
	ExecutionType yarnpb.ExecutionTypeProto
	// Increasing is set while an increase is outstanding.
	Increasing bool
}

// Update is a granted change to a running container.
type Update struct {
	Container yarnid.ContainerID
	Type      yarnpb.ContainerUpdateTypeProto
	// Capability is the target of an increase or decrease, normalised.
	Capability *yarnpb.ResourceProto
	// ExecutionType is the target of a promotion or demotion.
	ExecutionType yarnpb.ExecutionTypeProto
}

// UpdateResult is the end of an increase: the updated container, or why
// the node could not take it.
type UpdateResult struct {
	Container yarnid.ContainerID
	// Updated is the container at its new version, with a new token.
	Updated *yarnpb.ContainerProto
	// Reason is set instead when the increase failed.
	Reason string
}

// Preemption is a container the cluster is about to take back.
type Preemption struct {
	Container yarnid.ContainerID
	// Strict: the container goes whatever the AM does (Kubernetes evicts
	// it). Otherwise the queues take it back and the AM may give back
	// other containers of as much instead (the CapacityScheduler's
	// negotiable contract).
	Strict bool
	// Resource is the container's size.
	Resource *yarnpb.ResourceProto
}

// Sink is told what happens to containers; the ResourceManager implements
// it. A backend calls it one container at a time.
type Sink interface {
	// Allocated hands over a new container. An error makes the backend
	// take the container back: nobody will use it.
	Allocated(ctx context.Context, a Allocation) error
	// Completed reports a container that ended, once.
	Completed(ctx context.Context, c Completion)
	// Preempting warns that the cluster is about to take a container back.
	Preempting(ctx context.Context, p Preemption)
	// Updated reports how an increase ended, once.
	Updated(ctx context.Context, r UpdateResult)
}
