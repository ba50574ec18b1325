package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// NoActiveSubCluster is FederationPolicyUtils.NO_ACTIVE_SUBCLUSTER_AVAILABLE,
// the message of a call no active sub-cluster can take.
const NoActiveSubCluster = "No active SubCluster available to submit the request."

// MaxPolicyParams bounds a policy's serialized parameters: a weight per
// sub-cluster is a few dozen bytes.
const MaxPolicyParams = 256 << 10

// routerPolicy picks an application's home among the active sub-clusters
// not in the blacklist (YARN's FederationRouterPolicy).
type routerPolicy interface {
	home(active []store.SubClusterInfo, blacklist map[string]bool, r Randomness) (string, error)
}

// Randomness is where the policies draw from; injected for tests.
type Randomness interface {
	// IntN returns a uniform int in [0, n).
	IntN(n int) int
	// Float64 returns a uniform float in [0, 1).
	Float64() float64
}

// newRouterPolicy builds the router policy of a policy configuration, by
// its policy manager's class, as AbstractPolicyManager does.
func newRouterPolicy(p store.PolicyConfiguration) (routerPolicy, error) {
	switch p.Type {
	case federation.UniformBroadcastPolicyManager, federation.HomePolicyManager:
		return uniformRandom{}, nil
	case federation.WeightedHomePolicyManager:
		info, err := ParseWeightedPolicyInfo(p.Params)
		if err != nil {
			return nil, yarnerr.FederationPolicyInitialization.Errorf("queue %s: %w", p.Queue, err)
		}
		if len(info.RouterWeights) == 0 {
			return nil, yarnerr.FederationPolicyInitialization.New("Weight vector cannot be null/empty.")
		}
		return weightedRandom{weights: info.RouterWeights}, nil
	}
	if policy, ok, err := newManagedRouterPolicy(p); ok {
		return policy, err
	}
	return nil, yarnerr.FederationPolicyInitialization.Errorf("queue %s: policy manager %s is not supported by knit-router (supported: %s)",
		p.Queue, p.Type, strings.Join([]string{federation.UniformBroadcastPolicyManager, federation.HomePolicyManager,
			federation.WeightedHomePolicyManager, federation.WeightedLocalityPolicyManager, federation.PriorityBroadcastPolicyManager,
			federation.HashBroadcastPolicyManager, federation.RejectAllPolicyManager, federation.LoadBasedPolicyManager}, ", "))
}

// candidates are the active sub-clusters not in the blacklist, refused as
// FederationPolicyUtils.validateSubClusterAvailability refuses none.
func candidates(active []store.SubClusterInfo, blacklist map[string]bool) ([]string, error) {
	var out []string
	for _, sc := range active {
		if !blacklist[sc.ID] {
			out = append(out, sc.ID)
		}
	}
	if len(out) == 0 {
		return nil, yarnerr.FederationPolicy.New(NoActiveSubCluster)
	}
	return out, nil
}

// uniformRandom is UniformRandomRouterPolicy.
type uniformRandom struct{}

func (uniformRandom) home(active []store.SubClusterInfo, blacklist map[string]bool, r Randomness) (string, error) {
	ids, err := candidates(active, blacklist)
	if err != nil {
		return "", err
	}
	return ids[r.IntN(len(ids))], nil
}

// weightedRandom is WeightedRandomRouterPolicy: a draw among the candidates
// by their router weights; one without a weight, or with none above zero,
// is never picked.
type weightedRandom struct {
	weights map[string]float64
}

func (w weightedRandom) home(active []store.SubClusterInfo, blacklist map[string]bool, r Randomness) (string, error) {
	ids, err := candidates(active, blacklist)
	if err != nil {
		return "", err
	}
	var total float64
	for _, id := range ids {
		if x := w.weights[id]; x > 0 {
			total += x
		}
	}
	if total <= 0 {
		return "", yarnerr.FederationPolicy.New("No positive weight found on active subclusters")
	}
	draw := r.Float64() * total
	last := ""
	for _, id := range ids {
		x := w.weights[id]
		if x <= 0 {
			continue
		}
		last = id
		if draw < x {
			return id, nil
		}
		draw -= x
	}
	return last, nil // rounding left the draw past the last weight
}

// WeightedPolicyInfo is YARN's WeightedPolicyInfo: the router and
// AMRMProxy weight of each sub-cluster, and headroomAlpha; the Router reads
// the router weights.
type WeightedPolicyInfo struct {
	RouterWeights map[string]float64
	AMRMWeights   map[string]float64
	HeadroomAlpha float64
}

// MarshalWeightedPolicyInfo writes info as YARN's WeightedPolicyInfo JSON,
// which ParseWeightedPolicyInfo and YARN's policies read.
func MarshalWeightedPolicyInfo(info WeightedPolicyInfo) ([]byte, error) {
	type entry struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Value string `json:"value"`
	}
	type weights struct {
		Entry []entry `json:"entry"`
	}
	list := func(m map[string]float64) weights {
		w := weights{Entry: []entry{}}
		for _, id := range slices.Sorted(maps.Keys(m)) {
			e := entry{Value: strconv.FormatFloat(m[id], 'f', -1, 32)}
			e.Key.ID = id
			w.Entry = append(w.Entry, e)
		}
		return w
	}
	return json.Marshal(struct {
		Router weights `json:"routerPolicyWeights"`
		AMRM   weights `json:"amrmPolicyWeights"`
		Alpha  string  `json:"headroomAlpha"`
	}{list(info.RouterWeights), list(info.AMRMWeights), strconv.FormatFloat(info.HeadroomAlpha, 'f', -1, 32)})
}

// ParseWeightedPolicyInfo reads the JSON YARN writes for a
// WeightedPolicyInfo, {"routerPolicyWeights":{"entry":[{"key":{"id":"SC-1"},
// "value":"0.7"},…]},"amrmPolicyWeights":{…},"headroomAlpha":"1.0"}: an
// "entry" may be one object rather than a list, and a weight a string or
// a number, as JAXB writes them.
func ParseWeightedPolicyInfo(b []byte) (WeightedPolicyInfo, error) {
	if len(b) > MaxPolicyParams {
		return WeightedPolicyInfo{}, fmt.Errorf("policy parameters of %d bytes, over %d", len(b), MaxPolicyParams)
	}
	var raw struct {
		Router json.RawMessage `json:"routerPolicyWeights"`
		AMRM   json.RawMessage `json:"amrmPolicyWeights"`
		Alpha  json.RawMessage `json:"headroomAlpha"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return WeightedPolicyInfo{}, nil
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return WeightedPolicyInfo{}, fmt.Errorf("WeightedPolicyInfo: %w", err)
	}
	router, err := parseWeights(raw.Router)
	if err != nil {
		return WeightedPolicyInfo{}, fmt.Errorf("routerPolicyWeights: %w", err)
	}
	amrm, err := parseWeights(raw.AMRM)
	if err != nil {
		return WeightedPolicyInfo{}, fmt.Errorf("amrmPolicyWeights: %w", err)
	}
	info := WeightedPolicyInfo{RouterWeights: router, AMRMWeights: amrm}
	if len(raw.Alpha) > 0 && string(raw.Alpha) != "null" {
		if info.HeadroomAlpha, err = weightValue(raw.Alpha); err != nil {
			return WeightedPolicyInfo{}, fmt.Errorf("headroomAlpha: %w", err)
		}
	}
	return info, nil
}

type weightEntry struct {
	Key struct {
		ID string `json:"id"`
	} `json:"key"`
	Value json.RawMessage `json:"value"`
}

func parseWeights(raw json.RawMessage) (map[string]float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var entries []weightEntry
	switch t := bytes.TrimSpace(m.Entry); {
	case len(t) == 0 || string(t) == "null":
	case t[0] == '[':
		if err := json.Unmarshal(t, &entries); err != nil {
			return nil, err
		}
	default:
		var one weightEntry
		if err := json.Unmarshal(t, &one); err != nil {
			return nil, err
		}
		entries = []weightEntry{one}
	}
	out := make(map[string]float64, len(entries))
	for _, e := range entries {
		if e.Key.ID == "" {
			return nil, fmt.Errorf("an entry without a sub-cluster id")
		}
		w, err := weightValue(e.Value)
		if err != nil {
			return nil, fmt.Errorf("weight of %s: %w", e.Key.ID, err)
		}
		out[e.Key.ID] = w
	}
	return out, nil
}

func weightValue(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strconv.ParseFloat(s, 32)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("not a number: %s", raw)
	}
	return f, nil
}
