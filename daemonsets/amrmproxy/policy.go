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

// headroomObserver is a policy that weighs sub-clusters by the headroom
// their answers report (YARN's notifyOfResponse).
type headroomObserver interface {
	observe(id string, resp *yarnpb.AllocateResponseProto)
}

// newAMRMPolicy is the AMRMProxy policy of a queue's policy, as YARN's
// managers pair them; params are the policy's WeightedPolicyInfo, resolver
// the node and rack map of the locality policy (nil: none known).
func newAMRMPolicy(manager string, params []byte, resolver *federation.MachineList) (amrmPolicy, error) {
	switch manager {
	case federation.UniformBroadcastPolicyManager:
		return broadcastPolicy{}, nil
	case federation.HomePolicyManager, federation.WeightedHomePolicyManager:
		return homePolicy{}, nil
	case federation.WeightedLocalityPolicyManager:
		return newLocalityPolicy(params, resolver)
	}
	return nil, fmt.Errorf("amrmproxy: policy manager %q has no AMRMProxy policy here (there are %s, %s, %s and %s)", manager,
		federation.UniformBroadcastPolicyManager, federation.HomePolicyManager, federation.WeightedHomePolicyManager, federation.WeightedLocalityPolicyManager)
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
