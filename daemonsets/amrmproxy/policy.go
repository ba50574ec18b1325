package amrmproxy

import (
	"fmt"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// amrmPolicy is an AMRMProxy policy (YARN's FederationAMRMProxyPolicy):
// how one heartbeat's asks divide among the active sub-clusters.
type amrmPolicy interface {
	// split maps each sub-cluster id to its asks; home is the
	// application's home, active the active sub-clusters, sorted.
	split(asks []*yarnpb.ResourceRequestProto, home string, active []string) map[string][]*yarnpb.ResourceRequestProto
}

// newAMRMPolicy is the AMRMProxy policy of a policy manager, as YARN's
// managers pair them. The weighted managers' LocalityMulticastAMRMProxyPolicy
// is not here: a queue under one is refused rather than served by another
// policy.
func newAMRMPolicy(manager string) (amrmPolicy, error) {
	switch manager {
	case federation.UniformBroadcastPolicyManager:
		return broadcastPolicy{}, nil
	case federation.HomePolicyManager:
		return homePolicy{}, nil
	}
	return nil, fmt.Errorf("amrmproxy: policy manager %q has no AMRMProxy policy here (there are %s and %s)",
		manager, federation.UniformBroadcastPolicyManager, federation.HomePolicyManager)
}

// broadcastPolicy is BroadcastAMRMProxyPolicy: every ask to every active
// sub-cluster.
type broadcastPolicy struct{}

func (broadcastPolicy) split(asks []*yarnpb.ResourceRequestProto, _ string, active []string) map[string][]*yarnpb.ResourceRequestProto {
	out := make(map[string][]*yarnpb.ResourceRequestProto, len(active))
	if len(asks) == 0 {
		return out
	}
	for _, id := range active {
		out[id] = asks
	}
	return out
}

// homePolicy is HomeAMRMProxyPolicy: every ask to the home sub-cluster.
type homePolicy struct{}

func (homePolicy) split(asks []*yarnpb.ResourceRequestProto, home string, _ []string) map[string][]*yarnpb.ResourceRequestProto {
	if len(asks) == 0 {
		return map[string][]*yarnpb.ResourceRequestProto{}
	}
	return map[string][]*yarnpb.ResourceRequestProto{home: asks}
}
