package router

import (
	"slices"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// The router policies of the policy managers beyond the uniform and
// weighted-home ones, each as YARN's class of the same name routes.

// submissionPolicy is a router policy that routes by the submission itself
// (its queue, its application), not only by the sub-clusters.
type submissionPolicy interface {
	forSubmission(queue, application string) routerPolicy
}

// forSubmission binds p to a submission when p routes by one.
func forSubmission(p routerPolicy, queue, application string) routerPolicy {
	if s, ok := p.(submissionPolicy); ok {
		return s.forSubmission(queue, application)
	}
	return p
}

// newManagedRouterPolicy builds the router policies of the managers that
// newRouterPolicy leaves to it; ok is false for a manager it does not know.
func newManagedRouterPolicy(p store.PolicyConfiguration) (policy routerPolicy, ok bool, err error) {
	switch p.Type {
	case federation.HashBroadcastPolicyManager:
		return hashByQueue{}, true, nil
	case federation.RejectAllPolicyManager:
		return rejectAll{}, true, nil
	case federation.PriorityBroadcastPolicyManager, federation.LoadBasedPolicyManager, federation.WeightedLocalityPolicyManager:
	default:
		return nil, false, nil
	}
	info, err := ParseWeightedPolicyInfo(p.Params)
	if err != nil {
		return nil, true, yarnerr.FederationPolicyInitialization.Errorf("queue %s: %w", p.Queue, err)
	}
	// AbstractRouterPolicy.validate: every weighted router policy needs
	// router weights.
	if len(info.RouterWeights) == 0 {
		return nil, true, yarnerr.FederationPolicyInitialization.New("Weight vector cannot be null/empty.")
	}
	switch p.Type {
	case federation.PriorityBroadcastPolicyManager:
		return priority{weights: info.RouterWeights}, true, nil
	case federation.LoadBasedPolicyManager:
		for _, w := range info.RouterWeights {
			if w != 0 && w != 1 {
				return nil, true, yarnerr.FederationPolicyInitialization.New(
					"org.apache.hadoop.yarn.server.federation.policies.router.LoadBasedRouterPolicy policy expects all weights to be either \"0\" or \"1\"")
			}
		}
		return loadBased{weights: info.RouterWeights}, true, nil
	default:
		// LocalityRouterPolicy routes an AM asking for no node by
		// WeightedRandomRouterPolicy, and one asking for a node by the
		// sub-cluster its machine list puts the node in, falling back to
		// the weighted draw for a node it cannot resolve. Knit has no
		// machine list (yarn.federation.machine-list), so every node is
		// unresolved and the weighted draw decides, as in YARN with an
		// empty list.
		return weightedRandom{weights: info.RouterWeights}, true, nil
	}
}

// priority is PriorityRouterPolicy: the candidate of the highest positive
// weight; of equal weights, the first by id.
type priority struct {
	weights map[string]float64
}

func (p priority) home(active []store.SubClusterInfo, blacklist map[string]bool, _ Randomness) (string, error) {
	ids, err := candidates(active, blacklist)
	if err != nil {
		return "", err
	}
	chosen, best := "", 0.0
	for _, id := range sortedIDs(ids) {
		if w, ok := p.weights[id]; ok && w > best {
			chosen, best = id, w
		}
	}
	if chosen == "" {
		return "", yarnerr.FederationPolicy.New("No Active Subcluster with weight vector greater than zero")
	}
	return chosen, nil
}

// loadBased is LoadBasedRouterPolicy: among the candidates of weight 1,
// the one whose last heartbeat reported the most available memory.
type loadBased struct {
	weights map[string]float64
}

func (l loadBased) home(active []store.SubClusterInfo, blacklist map[string]bool, _ Randomness) (string, error) {
	if _, err := candidates(active, blacklist); err != nil {
		return "", err
	}
	chosen, best := "", int64(-1)
	for _, sc := range active {
		if blacklist[sc.ID] || l.weights[sc.ID] <= 0 {
			continue
		}
		m, err := store.ParseCapability(sc.Capability)
		if err != nil {
			return "", yarnerr.YarnException.Errorf("FederationSubCluserInfo cannot be parsed: %s: %w", sc.ID, err)
		}
		if m.AvailableMB > best {
			chosen, best = sc.ID, m.AvailableMB
		}
	}
	if chosen == "" {
		return "", yarnerr.FederationPolicy.New("Zero Active Subcluster with weight 1.")
	}
	return chosen, nil
}

// hashByQueue is HashBasedRouterPolicy: the candidates sorted by id,
// indexed by the Java hash of the submission's queue, so that a queue's
// applications go to one sub-cluster while the candidates stay the same.
type hashByQueue struct {
	queue string
}

func (h hashByQueue) forSubmission(queue, _ string) routerPolicy { return hashByQueue{queue: queue} }

func (h hashByQueue) home(active []store.SubClusterInfo, blacklist map[string]bool, _ Randomness) (string, error) {
	ids, err := candidates(active, blacklist)
	if err != nil {
		return "", err
	}
	i := javaStringHash(h.queue) % int32(len(ids))
	if i < 0 {
		i = -i
	}
	return sortedIDs(ids)[i], nil
}

// javaStringHash is java.lang.String.hashCode, over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// rejectAll is RejectRouterPolicy: the queue runs nowhere.
type rejectAll struct {
	queue, application string
}

func (r rejectAll) forSubmission(queue, application string) routerPolicy {
	return rejectAll{queue: queue, application: application}
}

func (r rejectAll) home([]store.SubClusterInfo, map[string]bool, Randomness) (string, error) {
	return "", yarnerr.FederationPolicy.Errorf("The policy configured for this queue (%s) reject all routing requests by construction. Application %s cannot be routed to any RM.",
		r.queue, r.application)
}

func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
