package apps

import (
	"fmt"
	"time"
	"unique"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Container is the RM's record of one container and its state machine
// (YARN's RMContainerImpl). An Application owns the containers of its
// attempts; a Container can also be driven alone with Handle. It is not safe
// for concurrent use.
type Container struct {
	id    ContainerID
	state ContainerState
	// encoded is the container message as allocated (node, resource,
	// priority, token, ...), kept marshalled: a few hundred bytes against
	// about 1.5 KB decoded, for every container the RM holds. What is read
	// often is kept decoded beside it.
	encoded   []byte
	node      *yarnpb.NodeIdProto
	memoryMB  int64
	vcores    int32
	user      string
	am        bool
	holder    AttemptID // the attempt using it; a kept container moves to the next attempt
	partition string    // the node-label partition it runs in ("" the default)
	created   time.Time
	finished  time.Time
	done      bool // a completed status exists (YARN's finishedStatus != null)
	exit      int32
	diag      string
}

// NewContainer returns a container in state NEW, created at now, of the
// given user (for its log URL). The message is copied.
func NewContainer(c *yarnpb.ContainerProto, user string, now time.Time) (*Container, error) {
	id, err := containerIDOf(c)
	if err != nil {
		return nil, fmt.Errorf("new container: %w", err)
	}
	out := &Container{
		id:      id,
		state:   ContainerStateNew,
		user:    user,
		holder:  id.Attempt,
		created: now,
		exit:    ExitInvalid,
	}
	if err := out.take(c); err != nil {
		return nil, fmt.Errorf("new container %s: %w", id, err)
	}
	return out, nil
}

// ID returns the container's id.
func (c *Container) ID() ContainerID { return c.id }

// State returns the RM state.
func (c *Container) State() ContainerState { return c.state }

// Live reports whether the container is allocated, acquired or running:
// its pod still counts.
func (c *Container) Live() bool { return c.state.live() }

// IsAM reports whether this is an attempt's AM container.
func (c *Container) IsAM() bool { return c.am }

// Attempt returns the attempt now using the container: the one that
// allocated it, or a later one that kept it.
func (c *Container) Attempt() AttemptID { return c.holder }

// Node returns the node the container is on (nil while only reserved
// without a node).
func (c *Container) Node() *yarnpb.NodeIdProto { return c.node }

// Resource returns the allocated memory (MB) and vcores.
func (c *Container) Resource() (memoryMB int64, vcores int32) {
	return c.memoryMB, c.vcores
}

// Partition is the node-label partition the container runs in ("" the
// default), as its pod's ask named it.
func (c *Container) Partition() string { return c.partition }

// Proto returns a copy of the container message as allocated.
func (c *Container) Proto() *yarnpb.ContainerProto {
	m := &yarnpb.ContainerProto{}
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(c.encoded, m); err != nil {
		// The bytes are take's own marshalling; were they ever not to
		// decode, what is kept decoded still names the container.
		return &yarnpb.ContainerProto{Id: c.id.Proto(), NodeId: cloneNode(c.node),
			Resource: &yarnpb.ResourceProto{Memory: proto.Int64(c.memoryMB), VirtualCores: proto.Int32(c.vcores)}}
	}
	return m
}

// take keeps p as the container's message.
func (c *Container) take(p *yarnpb.ContainerProto) error {
	b, err := (proto.MarshalOptions{AllowPartial: true, Deterministic: true}).Marshal(p)
	if err != nil {
		return fmt.Errorf("encode container: %w", err)
	}
	c.encoded = b
	c.node = nil
	if n := p.GetNodeId(); n != nil {
		// Every container of a node names the same host.
		c.node = &yarnpb.NodeIdProto{Host: internedHost(n.Host)}
		if n.Port != nil {
			c.node.Port = proto.Int32(n.GetPort())
		}
	}
	r := p.GetResource()
	c.memoryMB, c.vcores = r.GetMemory(), r.GetVirtualCores()
	return nil
}

// CreationTime is when the container was allocated (or reserved).
func (c *Container) CreationTime() time.Time { return c.created }

// FinishTime is when the container ended; zero before.
func (c *Container) FinishTime() time.Time { return c.finished }

// ExitStatus returns the exit status and diagnostics once the container has
// completed; ok is false before.
func (c *Container) ExitStatus() (status int32, diagnostics string, ok bool) {
	return c.exit, c.diag, c.done
}

// Status returns the completed-container status the AM receives, or nil
// before the container has completed.
func (c *Container) Status() *yarnpb.ContainerStatusProto {
	if !c.done {
		return nil
	}
	return &yarnpb.ContainerStatusProto{
		ContainerId: c.id.Proto(),
		State:       yarnpb.ContainerStateProto_C_COMPLETE.Enum(),
		Diagnostics: proto.String(c.diag),
		ExitStatus:  proto.Int32(c.exit),
	}
}

// Usage returns the container's resource use up to now: from allocation to
// end, or to now while it still holds its node. Like YARN, each container's
// MB-seconds are rounded down on their own.
func (c *Container) Usage(now time.Time) Usage {
	var end time.Time
	switch {
	case c.done:
		end = c.finished
	case c.state.live():
		end = now
	default:
		return Usage{}
	}
	ms := end.Sub(c.created).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	mem, vc := c.Resource()
	u := Usage{MemorySeconds: mem * ms / 1000, VcoreSeconds: int64(vc) * ms / 1000}
	if c.done && c.exit == ExitPreempted {
		u.PreemptedMemorySeconds, u.PreemptedVcoreSeconds = u.MemorySeconds, u.VcoreSeconds
	}
	return u
}

// Handle applies one event at time now and returns the effects due. An event
// the current state does not take returns *InvalidTransitionError and
// changes nothing; events YARN ignores in a state (a kill of a completed
// container) return no effects and no error.
func (c *Container) Handle(ev ContainerEvent, now time.Time) ([]Effect, error) {
	if ev.ContainerID() != c.id {
		return nil, fmt.Errorf("%w: event for %s sent to %s", ErrUnknownContainer, ev.ContainerID(), c.id)
	}
	_, fx, err := c.step(ev, now)
	return fx, err
}

// step runs one transition. ended reports that the container has just
// completed (YARN's FinishedTransition ran): the owner then accounts its
// usage and, for an AM container, tells the attempt.
func (c *Container) step(ev ContainerEvent, now time.Time) (ended bool, fx []Effect, err error) {
	switch c.state {
	case ContainerStateNew:
		switch e := ev.(type) {
		case ContainerAllocated:
			c.update(e.Container)
			c.state = ContainerStateAllocated
			return false, nil, nil
		case ContainerReserved:
			c.update(e.Container)
			c.state = ContainerStateReserved
			return false, nil, nil
		case ContainerAcquired:
			// Opportunistic containers skip ALLOCATED.
			c.state = ContainerStateAcquired
			return false, []Effect{WatchAllocation{Container: c.id}}, nil
		case ContainerKilled:
			c.state = ContainerStateKilled
			return false, nil, nil
		}
	case ContainerStateReserved:
		switch e := ev.(type) {
		case ContainerReserved:
			c.update(e.Container)
			return false, nil, nil
		case ContainerAllocated:
			c.update(e.Container)
			c.state = ContainerStateAllocated
			return false, nil, nil
		case ContainerKilled:
			// A reservation holds nothing on the node: nothing to report.
			c.state = ContainerStateKilled
			return false, nil, nil
		case ContainerReleased:
			c.state = ContainerStateReleased
			return false, nil, nil
		}
	case ContainerStateAllocated:
		switch e := ev.(type) {
		case ContainerAcquired:
			c.state = ContainerStateAcquired
			return false, []Effect{WatchAllocation{Container: c.id}}, nil
		case ContainerExpired:
			return true, c.end(ContainerStateExpired, ExitAborted, DiagExpiredContainer, true, now), nil
		case ContainerKilled:
			return true, c.end(ContainerStateKilled, e.ExitStatus, e.Diagnostics, true, now), nil
		}
	case ContainerStateAcquired:
		switch e := ev.(type) {
		case ContainerLaunched:
			c.state = ContainerStateRunning
			return false, []Effect{UnwatchAllocation{Container: c.id}}, nil
		case ContainerAcquired:
			return false, nil, nil
		case ContainerUpdated:
			c.update(e.Container)
			return false, nil, nil
		case ContainerFinished:
			fx := []Effect{UnwatchAllocation{Container: c.id}}
			return true, append(fx, c.end(ContainerStateCompleted, e.ExitStatus, e.Diagnostics, false, now)...), nil
		case ContainerReleased:
			fx := []Effect{UnwatchAllocation{Container: c.id}}
			return true, append(fx, c.end(ContainerStateReleased, ExitAborted, DiagReleasedContainer, true, now)...), nil
		case ContainerExpired:
			fx := []Effect{UnwatchAllocation{Container: c.id}}
			return true, append(fx, c.end(ContainerStateExpired, ExitAborted, DiagExpiredContainer, true, now)...), nil
		case ContainerKilled:
			fx := []Effect{UnwatchAllocation{Container: c.id}}
			return true, append(fx, c.end(ContainerStateKilled, e.ExitStatus, e.Diagnostics, true, now)...), nil
		}
	case ContainerStateRunning:
		switch e := ev.(type) {
		case ContainerFinished:
			return true, c.end(ContainerStateCompleted, e.ExitStatus, e.Diagnostics, false, now), nil
		case ContainerKilled:
			return true, c.end(ContainerStateKilled, e.ExitStatus, e.Diagnostics, true, now), nil
		case ContainerReleased:
			return true, c.end(ContainerStateReleased, ExitAborted, DiagReleasedContainer, true, now), nil
		case ContainerAcquired, ContainerReserved:
			// A repeated pull, or a reservation to grow the container:
			// neither changes what clients see.
			return false, nil, nil
		case ContainerUpdated:
			c.update(e.Container)
			return false, nil, nil
		}
	case ContainerStateCompleted:
		switch ev.(type) {
		case ContainerExpired, ContainerReleased, ContainerKilled, ContainerUpdated:
			return false, nil, nil
		}
	case ContainerStateExpired:
		switch ev.(type) {
		case ContainerReleased, ContainerKilled:
			return false, nil, nil
		}
	case ContainerStateReleased:
		switch ev.(type) {
		case ContainerExpired, ContainerReleased, ContainerKilled, ContainerFinished:
			return false, nil, nil
		}
	case ContainerStateKilled:
		switch ev.(type) {
		case ContainerExpired, ContainerReleased, ContainerKilled, ContainerAcquired, ContainerFinished:
			return false, nil, nil
		}
	}
	return false, nil, &InvalidTransitionError{Object: c.id.String(), State: c.state.String(), Event: ev.Name()}
}

// end records the completed status (YARN's FinishedTransition). stop is set
// when the RM ends a container whose process may still run: its pod must go
// (YARN's KillTransition cleans it on the node; in Knit an allocated but
// unstarted container has a bound pod too).
func (c *Container) end(state ContainerState, exit int32, diag string, stop bool, now time.Time) []Effect {
	c.state = state
	c.done = true
	c.exit = exit
	c.diag = diag
	c.finished = now
	var fx []Effect
	if stop {
		fx = append(fx, StopContainer{Container: c.id, Node: c.Node()})
	}
	return append(fx, ContainerCompleted{Attempt: c.holder, Status: c.Status()})
}

// update takes the node, resource and token of an allocation or reservation.
func (c *Container) update(p *yarnpb.ContainerProto) {
	if p == nil {
		return
	}
	// Marshalling without the required-field check fails on no message
	// the RM builds; were it to, the container keeps what it had.
	_ = c.take(p)
}

// internedHost shares one copy of a host's name among the containers on
// it.
func internedHost(h *string) *string {
	if h == nil {
		return nil
	}
	v := unique.Make(*h).Value()
	return &v
}
