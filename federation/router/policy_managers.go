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
// (its queue, its application, its AM's resource requests), not only by
// the sub-clusters.
type submissionPolicy interface {
	forSubmission(sub Submission, machines *federation.MachineList) routerPolicy
}

// forSubmission binds p to a submission when p routes by one; sub's queue
// is the one the policy was read for.
func forSubmission(p routerPolicy, sub Submission, machines *federation.MachineList) routerPolicy {
	if s, ok := p.(submissionPolicy); ok {
		return s.forSubmission(sub, machines)
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
		return locality{weights: info.RouterWeights}, true, nil
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

func (h hashByQueue) forSubmission(sub Submission, _ *federation.MachineList) routerPolicy {
	return hashByQueue{queue: sub.Queue}
}

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

func (r rejectAll) forSubmission(sub Submission, _ *federation.MachineList) routerPolicy {
	return rejectAll{queue: sub.Queue, application: sub.Application}
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

// anyLocation is ResourceRequest.ANY, the resource name of an ask for any
// node.
const anyLocation = "*"

// locality is LocalityRouterPolicy: a submission whose AM asks for a node
// (its three resource requests naming the node, its rack and ANY, as YARN's
// clients write a located AM ask) goes to the sub-cluster the machine list
// puts the node in, when that one is active, not blacklisted and of
// positive weight; any other is placed by WeightedRandomRouterPolicy, as
// YARN falls back to it. An AM ask of another shape than none, ANY alone,
// or node, rack and ANY is refused.
type locality struct {
	weights map[string]float64
	// names are the resource names of the AM's requests, in order.
	names    []string
	machines *federation.MachineList
}

func (l locality) forSubmission(sub Submission, machines *federation.MachineList) routerPolicy {
	return locality{weights: l.weights, names: sub.AMResourceNames, machines: machines}
}

func (l locality) home(active []store.SubClusterInfo, blacklist map[string]bool, r Randomness) (string, error) {
	fallback := weightedRandom{weights: l.weights}
	if len(l.names) == 0 || (len(l.names) == 1 && l.names[0] == anyLocation) {
		return fallback.home(active, blacklist, r)
	}
	if len(l.names) != 3 {
		return "", yarnerr.FederationPolicy.Errorf("Invalid number of resource requests: %d", len(l.names))
	}
	ids, err := candidates(active, blacklist)
	if err != nil {
		return "", err
	}
	// As YARN reads the three asks: the last name the list knows as a
	// node names the target; a name it knows as a rack and ANY must be
	// there too.
	target, node, rack, anyAsk := "", false, false, false
	for _, name := range l.names {
		if id, ok := l.machines.Node(name); ok {
			target, node = id, true
		}
		rack = rack || len(l.machines.Rack(name)) > 0
		anyAsk = anyAsk || name == anyLocation
	}
	if node && rack && anyAsk && slices.Contains(ids, target) && l.weights[target] > 0 {
		return target, nil
	}
	return fallback.home(active, blacklist, r)
}
