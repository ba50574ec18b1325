package rm

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/scheduling"
)

// The reasons of UpdateContainerError, as RMServerUtils gives them.
const (
	reasonInvalidContainer = "INVALID_CONTAINER_ID"
	reasonIncorrectVersion = "INCORRECT_CONTAINER_VERSION_ERROR"
)

// updateAnswer is what one allocate answers to the AM's update requests.
type updateAnswer struct {
	updated []*yarnpb.UpdatedContainerProto
	errors  []*yarnpb.UpdateContainerErrorProto
}

// updateError is an UpdateContainerError. The version is the container's
// current one: -1 for a container not found, nil (unset) for the
// scheduler's own refusals, as YARN sets them.
func updateError(reason string, req *yarnpb.UpdateContainerRequestProto, current *int32) *yarnpb.UpdateContainerErrorProto {
	return &yarnpb.UpdateContainerErrorProto{Reason: proto.String(reason), UpdateRequest: req, CurrentContainerVersion: current}
}

// updates checks the AM's update requests as RMServerUtils does (an update
// never fails the allocate: each bad one becomes an UpdateContainerError)
// and carries out the good ones through RGS. A decrease and an execution
// type change are answered in this allocate; an increase in a later one,
// once the node resized the pod (schedulerSink.Updated).
func (s *amService) updates(ctx context.Context, st *amState, attempt apps.AttemptID, reqs []*yarnpb.UpdateContainerRequestProto) updateAnswer {
	var out updateAnswer
	// Every request is checked before any is carried out, as RMServerUtils
	// splits them before the scheduler sees them.
	type granted struct {
		req *yarnpb.UpdateContainerRequestProto
		u   scheduling.Update
		cur scheduling.Current
	}
	var todo []granted
	seen := map[yarnid.ContainerID]bool{}
	for _, req := range reqs {
		id, err := yarnid.ContainerIDFromProto(req.GetContainerId())
		var cur scheduling.Current
		ok := err == nil && id.Attempt.App == attempt.App
		if ok {
			cur, ok = s.scheduler.CurrentContainer(id)
		}
		version := proto.Int32(cur.Version)
		switch {
		case !ok:
			out.errors = append(out.errors, updateError(reasonInvalidContainer, req, proto.Int32(-1)))
			continue
		case req.GetContainerVersion() != cur.Version:
			out.errors = append(out.errors, updateError(reasonIncorrectVersion, req, version))
			continue
		case seen[id]:
			out.errors = append(out.errors, updateError(rgs.ReasonOutstanding, req, version))
			continue
		}
		seen[id] = true
		u, reason := s.checkUpdate(req, id, cur)
		if reason != "" {
			out.errors = append(out.errors, updateError(reason, req, version))
			continue
		}
		if u != nil {
			todo = append(todo, granted{req, *u, cur})
		}
	}
	for _, g := range todo {
		id := g.u.Container
		if g.u.Type == yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE {
			// The pod's mark may not be in the informer's cache yet: the
			// attempt's own record counts too. The scheduler's refusal
			// leaves the version unset.
			st.qmu.Lock()
			outstanding := g.cur.Increasing || st.increasing[id] != nil
			if !outstanding {
				st.increasing[id] = g.req
			}
			st.qmu.Unlock()
			if outstanding {
				out.errors = append(out.errors, updateError(rgs.ReasonOutstanding, g.req, nil))
				continue
			}
		}
		updated, err := s.scheduler.UpdateContainer(ctx, g.u)
		if err != nil {
			s.rm.log.WarnContext(ctx, "container update", "container", id.String(), "type", g.u.Type.String(), "err", err)
			st.qmu.Lock()
			delete(st.increasing, id)
			st.qmu.Unlock()
			out.errors = append(out.errors, updateError(err.Error(), g.req, proto.Int32(g.cur.Version)))
			continue
		}
		if updated != nil {
			out.updated = append(out.updated, &yarnpb.UpdatedContainerProto{UpdateType: g.u.Type.Enum(), Container: updated})
		}
	}
	return out
}

// checkUpdate turns a request whose container and version were checked into
// the update RGS carries out: nil when there is nothing to change, or the
// reason it is refused.
func (s *amService) checkUpdate(req *yarnpb.UpdateContainerRequestProto, id yarnid.ContainerID, cur scheduling.Current) (*scheduling.Update, string) {
	u := &scheduling.Update{Container: id, Type: req.GetUpdateType()}
	switch req.GetUpdateType() {
	case yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE:
		set := s.rm.cfg.Settings
		mem, vc := yarnpb.MemoryAndVcores(req.GetCapability())
		if req.GetCapability() == nil || mem < 0 || vc < 0 || mem > int64(set.MaxAllocationMB) || vc > int32(set.MaxAllocationVcores) {
			return nil, rgs.ReasonOutsideRange
		}
		mem, vc = s.normalizeMemoryAndVcores(mem, vc)
		curMem, curVC := yarnpb.MemoryAndVcores(cur.Resource)
		// An increase grows each resource to at least what it has, a
		// decrease shrinks each to at most (ContainerUpdateContext).
		if u.Type == yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE {
			mem, vc = max(mem, curMem), max(vc, curVC)
			if mem == curMem && vc == curVC {
				return nil, ""
			}
		} else {
			mem, vc = min(mem, curMem), min(vc, curVC)
		}
		u.Capability = yarnpb.NewResource(mem, vc)
		return u, ""
	default:
		// Promotion or demotion follows the target, not the update type.
		target := req.GetExecutionType()
		if req.ExecutionType == nil || target == cur.ExecutionType {
			return nil, ""
		}
		u.ExecutionType = target
		u.Type = yarnpb.ContainerUpdateTypeProto_DEMOTE_EXECUTION_TYPE
		if target == yarnpb.ExecutionTypeProto_GUARANTEED {
			u.Type = yarnpb.ContainerUpdateTypeProto_PROMOTE_EXECUTION_TYPE
		}
		return u, ""
	}
}

// takeUpdates hands the AM the updates waiting for it: those of this
// allocate and the increases the nodes answered since the last one, each
// recorded on the RM's container.
func (rm *ResourceManager) takeUpdates(ctx context.Context, e *entry, st *amState, now updateAnswer) updateAnswer {
	st.qmu.Lock()
	out := updateAnswer{updated: append(st.updated, now.updated...), errors: append(st.updateErrors, now.errors...)}
	st.updated, st.updateErrors = nil, nil
	st.qmu.Unlock()
	for _, u := range out.updated {
		c := u.GetContainer()
		id, err := yarnid.ContainerIDFromProto(c.GetId())
		if err != nil {
			continue
		}
		e.mu.Lock()
		var from *yarnpb.ResourceProto
		if rc := e.app.Container(id); rc != nil {
			from = rc.Proto().GetResource()
		}
		e.mu.Unlock()
		if err := rm.handle(ctx, e, apps.ContainerUpdated{Container: c}); err != nil {
			rm.log.InfoContext(ctx, "updated container not recorded", "err", err)
		}
		if u.GetUpdateType() == yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE && from != nil {
			rm.am.mon.mu.Lock()
			rm.am.mon.increases[id] = increaseWatch{
				deadline: rm.now().Add(rm.cfg.Settings.ContainerAllocationExpiry), version: c.GetVersion(), from: from}
			rm.am.mon.mu.Unlock()
		}
	}
	return out
}

// ContainerUpdated records that the AM brought a container's update to its
// node (updateContainer): an increase it confirms is kept.
func (rm *ResourceManager) ContainerUpdated(_ context.Context, id yarnid.ContainerID, version int32) {
	rm.am.mon.mu.Lock()
	defer rm.am.mon.mu.Unlock()
	if w, ok := rm.am.mon.increases[id]; ok && version >= w.version {
		delete(rm.am.mon.increases, id)
	}
}

// rollBack decreases a container whose increase the AM never brought to its
// node back to its size before, as YARN's RM does when the allocation
// expiry passes; the AM hears of it as a DECREASE.
func (s *amService) rollBack(ctx context.Context, id yarnid.ContainerID, w increaseWatch) {
	s.rm.log.InfoContext(ctx, "increase not brought to the node in time, rolled back", "container", id.String())
	cur, ok := s.scheduler.CurrentContainer(id)
	if !ok || cur.Version != w.version {
		return // ended, or updated again since
	}
	updated, err := s.scheduler.UpdateContainer(ctx, scheduling.Update{Container: id,
		Type: yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE, Capability: w.from})
	if err != nil {
		// RGS tries each write once: the watch goes back, and the
		// monitor's next round tries again while the container stands at
		// this version.
		s.rm.log.WarnContext(ctx, "increase roll back, to be tried again", "container", id.String(), "err", err)
		s.mon.mu.Lock()
		if _, rearmed := s.mon.increases[id]; !rearmed {
			s.mon.increases[id] = w
		}
		s.mon.mu.Unlock()
		return
	}
	if updated == nil {
		s.rm.log.WarnContext(ctx, "increase roll back", "container", id.String())
		return
	}
	if st := s.rm.currentAMState(id.Attempt.App); st != nil {
		st.qmu.Lock()
		st.updated = append(st.updated, &yarnpb.UpdatedContainerProto{
			UpdateType: yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE.Enum(), Container: updated})
		st.qmu.Unlock()
	}
}

// Updated implements scheduling.Sink: an increase the node took, or could not.
func (k schedulerSink) Updated(_ context.Context, r scheduling.UpdateResult) {
	st := k.rm.currentAMState(r.Container.Attempt.App)
	if st == nil {
		return
	}
	st.qmu.Lock()
	defer st.qmu.Unlock()
	req := st.increasing[r.Container]
	delete(st.increasing, r.Container)
	if r.Updated != nil {
		st.updated = append(st.updated, &yarnpb.UpdatedContainerProto{
			UpdateType: yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE.Enum(), Container: r.Updated})
		return
	}
	if req == nil {
		req = &yarnpb.UpdateContainerRequestProto{ContainerId: r.Container.Proto(),
			UpdateType: yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE.Enum()}
	}
	st.updateErrors = append(st.updateErrors, updateError(r.Reason, req, nil))
}
