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
// and the queue's policy, read again; the home's heartbeater; and each
// secondary's unmanaged AM, re-attached with its kept token. A secondary
// that cannot be re-attached is dropped with its containers, and its entry
// with it: the AM goes on with the others, and asks sent there later
// launch a new unmanaged AM, as for a secondary never used.
//
// The containers of each re-attached secondary come back into the map
// releases are routed by; the home's need no entry, since a release of a
// container the map does not hold goes to the home (YARN, which drops such
// a release, asks the home RM for the attempt's containers instead).
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
	f.home, f.policy, f.registered = home, policy, registered
	f.register = proto.Clone(register).(*yarnpb.RegisterApplicationMasterRequestProto)
	f.homeHB = startHeartbeater(ctx, &heartbeater{id: home, sink: f.sink, log: f.log, send: f.next.Allocate})

	kept := map[string]token.Token{}
	for key, b := range f.app.Kept {
		id, ok := strings.CutPrefix(key, keptSecondary)
		if !ok {
			continue
		}
		t := &commonpb.TokenProto{}
		if err := proto.Unmarshal(b, t); err != nil {
			f.log.Warn("unmanaged AM not re-attached", "sub_cluster", id, "err", fmt.Errorf("kept token: %w", err))
			f.app.keep(key, nil)
			continue
		}
		kept[id] = token.FromProto(t)
	}
	if len(kept) == 0 {
		f.log.Info("federated AM recovered", "home", home, "queue", registered.GetQueue())
		return nil
	}
	all, err := f.cfg.Store.GetSubClusters(ctx, false)
	if err != nil {
		return fmt.Errorf("sub-clusters: %w", err)
	}
	byID := map[string]store.SubClusterInfo{}
	for _, sc := range all {
		byID[sc.ID] = sc
	}
	containers := 0
	for _, id := range slices.Sorted(maps.Keys(kept)) {
		n, err := f.reattach(ctx, byID, id, kept[id])
		if err != nil {
			f.log.Warn("unmanaged AM not re-attached: its sub-cluster is dropped", "sub_cluster", id, "err", err)
			f.app.keep(keptSecondary+id, nil)
			continue
		}
		containers += n
	}
	f.log.Info("federated AM recovered", "home", home, "queue", registered.GetQueue(),
		"secondaries", len(f.secondaries), "secondary_containers", containers)
	return nil
}

// reattach re-attaches the unmanaged AM of sub-cluster id, which registered
// with tok, as YARN's UnmanagedAMPoolManager.reAttachUAM: it registers
// again (an RM that says the AM registered already is as good, the client
// then takes its response id from the first heartbeat), maps the
// sub-cluster's running containers of the application to it, and starts
// its heartbeater. The sub-cluster counts as timed out until it answers,
// as a new one, so that the policy sends it asks only once it serves. It
// reports how many containers it mapped.
func (f *FederationInterceptor) reattach(ctx context.Context, byID map[string]store.SubClusterInfo, id string, tok token.Token) (int, error) {
	sc, ok := byID[id]
	if !ok {
		return 0, errors.New("the federation no longer has the sub-cluster")
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.LaunchTimeout)
	defer cancel()
	rm, err := f.uamClient(sc, tok)
	if err != nil {
		return 0, err
	}
	resp, err := rm.Register(ctx, f.register.GetHost(), f.register.GetRpcPort(), f.register.GetTrackingUrl())
	switch {
	case yarnerr.IsAlreadyRegistered(err):
		rm.Resume(f.register)
	case err != nil:
		rm.Close()
		return 0, fmt.Errorf("register again: %w", err)
	}
	running, err := f.uamContainers(ctx, sc)
	if err != nil {
		rm.Close()
		return 0, err
	}
	for _, c := range resp.GetContainersFromPreviousAttempts() {
		running = append(running, c.GetId())
	}
	for _, c := range running {
		f.owner[containerKey(c)] = id
	}
	s := &secondary{sc: sc, uam: &uam{rm: rm, token: tok}, submitted: true}
	f.sink.expectAt(id, f.cfg.Now().Add(-f.cfg.SubClusterTimeout))
	s.hb = startHeartbeater(ctx, &heartbeater{id: id, sink: f.sink, log: f.log, send: f.sendUAM(s)})
	f.secondaries[id] = s
	f.log.Info("unmanaged AM re-attached in a secondary sub-cluster", "sub_cluster", id, "containers", len(running))
	return len(running), nil
}

// uamContainers lists the running containers of the unmanaged AM's
// attempt in sc, from the sub-cluster's client protocol. A register
// answer lists only containers of earlier attempts, so the attempt's own,
// which a re-attach needs to route their releases, are asked for.
func (f *FederationInterceptor) uamContainers(ctx context.Context, sc store.SubClusterInfo) ([]*yarnpb.ContainerIdProto, error) {
	rmc, err := client.NewRMClient(sc.ClientRMServiceAddress, client.RMConfig{User: f.app.User, Logger: f.log})
	if err != nil {
		return nil, err
	}
	defer rmc.Close()
	report, err := rmc.GetApplicationReport(ctx, f.app.Attempt.App.Proto())
	if err != nil {
		return nil, fmt.Errorf("report of the unmanaged AM: %w", err)
	}
	attempt := report.GetCurrentApplicationAttemptId()
	if attempt == nil {
		return nil, errors.New("the unmanaged AM's report names no attempt")
	}
	reports, err := rmc.GetContainers(ctx, attempt)
	if err != nil {
		return nil, fmt.Errorf("containers of the unmanaged AM: %w", err)
	}
	out := make([]*yarnpb.ContainerIdProto, 0, len(reports))
	for _, r := range reports {
		out = append(out, r.GetContainerId())
	}
	return out, nil
}
