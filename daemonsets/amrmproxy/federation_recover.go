package amrmproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Resume rebuilds the interceptor of an AM that registered with the node's
// earlier life, from what it kept, as YARN's FederationInterceptor.recover
// does: the home's registration answer (given again to a repeat register)
// and the queue's policy, read again; the home's heartbeater; and a
// heartbeater for each secondary whose unmanaged AM's token it kept,
// whose first work is to re-attach it (reattachUAM). A secondary that
// cannot be re-attached is dropped with its containers, and its token
// with it: the AM goes on with the others, and asks sent there later
// launch a new unmanaged AM, as for a secondary never used.
//
// The re-attaches run on the heartbeaters' goroutines, as launches do, so
// that a secondary that is down holds neither the node's start nor the
// AM's heartbeats; only a heartbeat that releases a container the map does
// not hold waits for them (awaitReattach). The home's containers need no
// entry in the map, since a release of a container it does not hold goes
// to the home (YARN, which drops such a release, asks the home RM for the
// attempt's containers instead).
func (f *FederationInterceptor) Resume(ctx context.Context, register *yarnpb.RegisterApplicationMasterRequestProto) error {
	b, ok := f.app.Kept[keptRegistration]
	if !ok {
		return errors.New("the federation interceptor kept no registration")
	}
	registered := &yarnpb.RegisterApplicationMasterResponseProto{}
	if err := proto.Unmarshal(b, registered); err != nil {
		return fmt.Errorf("kept registration: %w", err)
	}
	home, err := f.cfg.Store.GetApplicationHomeSubCluster(ctx, f.app.Attempt.App.String())
	if err != nil {
		return fmt.Errorf("home sub-cluster of %s: %w", f.app.Attempt.App, err)
	}
	policy, err := f.policyOf(ctx, registered.GetQueue())
	if err != nil {
		return err
	}
	kept := map[string]token.Token{}
	for key, b := range f.app.Kept {
		id, ok := strings.CutPrefix(key, keptSecondary)
		if !ok {
			continue
		}
		t := &commonpb.TokenProto{}
		if err := proto.Unmarshal(b, t); err != nil {
			f.log.Warn("unmanaged AM dropped", "sub_cluster", id, "err", fmt.Errorf("kept token: %w", err))
			f.app.keep(key, nil)
			continue
		}
		kept[id] = token.FromProto(t)
	}
	byID := map[string]store.SubClusterInfo{}
	if len(kept) > 0 {
		all, err := f.cfg.Store.GetSubClusters(ctx, false)
		if err != nil {
			return fmt.Errorf("sub-clusters: %w", err)
		}
		for _, sc := range all {
			byID[sc.ID] = sc
		}
	}

	f.home, f.policy, f.registered = home, policy, registered
	f.register = proto.Clone(register).(*yarnpb.RegisterApplicationMasterRequestProto)
	f.homeHB = startHeartbeater(ctx, &heartbeater{id: home, sink: f.sink, log: f.log, send: f.next.Allocate})
	for _, id := range slices.Sorted(maps.Keys(kept)) {
		sc, ok := byID[id]
		if !ok {
			f.log.Warn("unmanaged AM dropped: the federation no longer has its sub-cluster", "sub_cluster", id)
			f.app.keep(keptSecondary+id, nil)
			continue
		}
		f.secondaries[id] = f.resumeSecondary(ctx, sc, kept[id])
	}
	f.log.Info("federated AM recovered", "home", home, "queue", registered.GetQueue(), "secondaries", len(f.secondaries))
	return nil
}

// resumeSecondary is startSecondary for an unmanaged AM that registered
// before the node restarted: its heartbeater's first work is to re-attach
// it with tok. The sub-cluster counts as timed out until it answers, as a
// new one, so that the policy sends it asks only once it serves.
func (f *FederationInterceptor) resumeSecondary(ctx context.Context, sc store.SubClusterInfo, tok token.Token) *secondary {
	s := &secondary{sc: sc, resumed: true, submitted: true}
	f.sink.expectAt(sc.ID, f.cfg.Now().Add(-f.cfg.SubClusterTimeout))
	s.hb = startHeartbeater(ctx, &heartbeater{id: sc.ID, sink: f.sink, log: f.log,
		start: func(ctx context.Context) error {
			u, running, err := f.reattachUAM(ctx, sc, tok)
			if err != nil {
				f.log.Warn("unmanaged AM not re-attached: its sub-cluster is dropped", "sub_cluster", sc.ID, "err", err)
				return err
			}
			s.mu.Lock()
			s.uam, s.running = u, running
			s.mu.Unlock()
			return nil
		},
		send: f.sendUAM(s),
	})
	return s
}

// reattachUAM re-attaches the unmanaged AM in sc that registered with tok,
// as YARN's UnmanagedAMPoolManager.reAttachUAM: it registers again (an RM
// that says the AM registered already is as good, the client then takes
// its response id from the first heartbeat) and lists the application's
// running containers there.
func (f *FederationInterceptor) reattachUAM(ctx context.Context, sc store.SubClusterInfo, tok token.Token) (*uam, []*yarnpb.ContainerIdProto, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.LaunchTimeout)
	defer cancel()
	rm, err := f.uamClient(sc, tok)
	if err != nil {
		return nil, nil, err
	}
	resp, err := rm.Register(ctx, f.register.GetHost(), f.register.GetRpcPort(), f.register.GetTrackingUrl())
	switch {
	case yarnerr.IsAlreadyRegistered(err):
		rm.Resume(f.register)
	case err != nil:
		rm.Close()
		return nil, nil, fmt.Errorf("amrmproxy: register the unmanaged AM in %s again: %w", sc.ID, err)
	}
	running, err := f.uamContainers(ctx, sc)
	if err != nil {
		rm.Close()
		return nil, nil, err
	}
	for _, c := range resp.GetContainersFromPreviousAttempts() {
		running = append(running, c.GetId())
	}
	f.log.Info("unmanaged AM re-attached in a secondary sub-cluster", "sub_cluster", sc.ID, "containers", len(running))
	return &uam{rm: rm, token: tok}, running, nil
}

// uamContainers lists the running containers of the unmanaged AM's
// attempt in sc, from the sub-cluster's client protocol. A register
// answer lists only containers of earlier attempts, so the attempt's own,
// whose releases must go there, are asked for.
func (f *FederationInterceptor) uamContainers(ctx context.Context, sc store.SubClusterInfo) ([]*yarnpb.ContainerIdProto, error) {
	rmc, err := client.NewRMClient(sc.ClientRMServiceAddress, client.RMConfig{User: f.app.User, Logger: f.log})
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: sub-cluster %s: %w", sc.ID, err)
	}
	defer rmc.Close()
	report, err := rmc.GetApplicationReport(ctx, f.app.Attempt.App.Proto())
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: report of the unmanaged AM in %s: %w", sc.ID, err)
	}
	attempt := report.GetCurrentApplicationAttemptId()
	if attempt == nil {
		return nil, fmt.Errorf("amrmproxy: the report of the unmanaged AM in %s names no attempt", sc.ID)
	}
	reports, err := rmc.GetContainers(ctx, attempt)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: containers of the unmanaged AM in %s: %w", sc.ID, err)
	}
	out := make([]*yarnpb.ContainerIdProto, 0, len(reports))
	for _, r := range reports {
		out = append(out, r.GetContainerId())
	}
	return out, nil
}

// awaitReattach waits for the unmanaged AMs still being re-attached when
// req releases a container the map does not hold: it may be one of theirs,
// which the map holds once they are. A re-attach ends within LaunchTimeout.
func (f *FederationInterceptor) awaitReattach(ctx context.Context, req *yarnpb.AllocateRequestProto) error {
	unknown := slices.ContainsFunc(req.GetRelease(), func(c *yarnpb.ContainerIdProto) bool {
		_, ok := f.owner[containerKey(c)]
		return !ok
	})
	if !unknown {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(f.secondaries)) {
		s := f.secondaries[id]
		if !s.resumed {
			continue
		}
		select {
		case <-s.hb.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// mapReattached maps the containers of the unmanaged AMs re-attached since
// the last allocate to their sub-clusters.
func (f *FederationInterceptor) mapReattached() {
	for id, s := range f.secondaries {
		s.mu.Lock()
		running := s.running
		s.running = nil
		s.mu.Unlock()
		for _, c := range running {
			f.owner[containerKey(c)] = id
		}
	}
}
