package amrmproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// localityPolicy is LocalityMulticastAMRMProxyPolicy: a host ask goes to
// the sub-cluster that owns the node, a rack ask to those that own the
// rack (either to the home when the resolver does not know it); an ANY
// ask tied to located asks by its allocation request id goes to their
// sub-clusters, in proportion to their located containers; any other ANY
// ask is split among the active sub-clusters of positive weight, by
// headroomAlpha × their share of the headroom last reported + (1 −
// headroomAlpha) × their share of the weights, rounded up. A zero ANY ask
// (a cancellation) also goes to every sub-cluster that reported headroom.
// Sub-clusters not active or without a positive weight get nothing.
type localityPolicy struct {
	weights  map[string]float64
	alpha    float64
	resolver *federation.MachineList
	// headroom is the memory each sub-cluster last reported free.
	headroom map[string]int64
}

// newLocalityPolicy reads the policy's WeightedPolicyInfo.
func newLocalityPolicy(params []byte, resolver *federation.MachineList) (*localityPolicy, error) {
	info, err := router.ParseWeightedPolicyInfo(params)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: locality policy: %w", err)
	}
	alpha, err := headroomAlpha(params)
	if err != nil {
		return nil, err
	}
	positive := false
	for _, w := range info.AMRMWeights {
		positive = positive || w > 0
	}
	if !positive {
		return nil, errors.New("amrmproxy: locality policy: the AMRMProxy weights are all zero or missing (no ask could be forwarded)")
	}
	return &localityPolicy{weights: info.AMRMWeights, alpha: alpha, resolver: resolver, headroom: map[string]int64{}}, nil
}

// headroomAlpha reads WeightedPolicyInfo's headroomAlpha, a number or a
// string as JAXB writes it; 0 when missing.
func headroomAlpha(params []byte) (float64, error) {
	var raw struct {
		Alpha json.RawMessage `json:"headroomAlpha"`
	}
	if len(bytes.TrimSpace(params)) == 0 {
		return 0, nil
	}
	if err := json.Unmarshal(params, &raw); err != nil || len(raw.Alpha) == 0 {
		return 0, nil // ParseWeightedPolicyInfo read it already
	}
	var s string
	if json.Unmarshal(raw.Alpha, &s) != nil {
		s = string(raw.Alpha)
	}
	a, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || a < 0 || a > 1 {
		return 0, fmt.Errorf("amrmproxy: locality policy: headroomAlpha %s is not a number from 0 to 1", raw.Alpha)
	}
	return a, nil
}

// observe keeps a sub-cluster's headroom from its answer.
func (p *localityPolicy) observe(id string, resp *yarnpb.AllocateResponseProto) {
	if l := resp.GetLimit(); l != nil {
		p.headroom[id] = l.GetMemory()
	}
}

func (p *localityPolicy) split(asks []*yarnpb.ResourceRequestProto, home string, active []string) map[string][]*yarnpb.ResourceRequestProto {
	out := map[string][]*yarnpb.ResourceRequestProto{}
	enabled := map[string]bool{}
	var totWeight float64
	for _, id := range active {
		if w := p.weights[id]; w > 0 {
			enabled[id] = true
			totWeight += w
		}
	}
	if len(enabled) == 0 {
		return out
	}
	// located[allocation id][sub-cluster] counts the containers of host
	// asks (and of the home's unresolved ones) per sub-cluster.
	located := map[int64]map[string]int64{}
	var anys []*yarnpb.ResourceRequestProto
	for _, a := range asks {
		name := a.GetResourceName()
		if name == "*" {
			anys = append(anys, a)
			continue
		}
		if id, ok := p.resolver.Node(name); ok && enabled[id] {
			p.addLocated(out, located, id, a)
			continue
		}
		if ids := p.resolver.Rack(name); len(ids) > 0 {
			for _, id := range ids {
				if enabled[id] {
					out[id] = append(out[id], a)
				}
			}
			continue
		}
		if enabled[home] {
			p.addLocated(out, located, home, a)
		}
	}
	var totHeadroom float64
	known := 0
	for id, h := range p.headroom {
		if enabled[id] {
			totHeadroom += float64(h)
			known++
		}
	}
	for _, a := range anys {
		targets := slices.Sorted(maps.Keys(enabled))
		byID := located[a.GetAllocationRequestId()]
		if byID != nil {
			targets = slices.Sorted(maps.Keys(byID))
		}
		var totLocated int64
		for _, n := range byID {
			totLocated += n
		}
		for _, id := range targets {
			n := float64(a.GetNumContainers())
			if n == 0 {
				if _, seen := p.headroom[id]; seen {
					out[id] = append(out[id], a)
				}
				continue
			}
			if byID != nil {
				n *= float64(byID[id]) / float64(totLocated)
			} else {
				hr := 1 / float64(len(enabled))
				if h, seen := p.headroom[id]; seen && totHeadroom > 0 {
					hr = float64(h) / totHeadroom * float64(known) / float64(len(enabled))
				}
				n *= p.alpha*hr + (1-p.alpha)*p.weights[id]/totWeight
			}
			if n <= 0 {
				continue
			}
			part := proto.Clone(a).(*yarnpb.ResourceRequestProto)
			part.NumContainers = proto.Int32(int32(math.Ceil(n)))
			out[id] = append(out[id], part)
		}
	}
	return out
}

func (p *localityPolicy) addLocated(out map[string][]*yarnpb.ResourceRequestProto, located map[int64]map[string]int64, id string, a *yarnpb.ResourceRequestProto) {
	byID := located[a.GetAllocationRequestId()]
	if byID == nil {
		byID = map[string]int64{}
		located[a.GetAllocationRequestId()] = byID
	}
	byID[id] += int64(a.GetNumContainers())
	out[id] = append(out[id], a)
}
