package router

import (
	"errors"
	"testing"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
)

func active(ids ...string) []store.SubClusterInfo {
	var out []store.SubClusterInfo
	for _, id := range ids {
		out = append(out, store.SubClusterInfo{ID: id, State: store.StateRunning})
	}
	return out
}

func TestRouterPoliciesPickAmongTheActiveSubClustersNotBlacklisted(t *testing.T) {
	uniform := store.PolicyConfiguration{Queue: "*", Type: federation.UniformBroadcastPolicyManager}
	home := store.PolicyConfiguration{Queue: "*", Type: federation.HomePolicyManager}
	tests := []struct {
		name      string
		policy    store.PolicyConfiguration
		active    []store.SubClusterInfo
		blacklist map[string]bool
		rand      *seqRand
		want      string
		wantErr   error
	}{
		{"uniform draws by index", uniform, active("sc1", "sc2", "sc3"), nil, &seqRand{ints: []int{2}}, "sc3", nil},
		{"uniform skips the blacklist", uniform, active("sc1", "sc2"), map[string]bool{"sc1": true}, &seqRand{}, "sc2", nil},
		{"HomePolicyManager routes uniformly", home, active("sc1", "sc2"), nil, &seqRand{ints: []int{1}}, "sc2", nil},
		{"uniform with nothing left", uniform, active("sc1"), map[string]bool{"sc1": true}, &seqRand{}, "", yarnerr.FederationPolicy},
		{"weighted low draw", weighted(map[string]string{"sc1": "0.25", "sc2": "0.75"}), active("sc1", "sc2"), nil, &seqRand{floats: []float64{0.2}}, "sc1", nil},
		{"weighted high draw", weighted(map[string]string{"sc1": "0.25", "sc2": "0.75"}), active("sc1", "sc2"), nil, &seqRand{floats: []float64{0.3}}, "sc2", nil},
		{"weighted ignores inactive sub-clusters' weight", weighted(map[string]string{"sc1": "0.9", "sc2": "0.1"}), active("sc2"), nil, &seqRand{floats: []float64{0.95}}, "sc2", nil},
		{"weighted never picks a zero weight", weighted(map[string]string{"sc1": "0", "sc2": "1"}), active("sc1", "sc2"), nil, &seqRand{floats: []float64{0}}, "sc2", nil},
		{"weighted without a positive weight", weighted(map[string]string{"sc1": "0", "sc3": "1"}), active("sc1", "sc2"), nil, &seqRand{}, "", yarnerr.FederationPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newRouterPolicy(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.home(tt.active, tt.blacklist, tt.rand)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("home = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPoliciesKnitRouterCannotRouteAreRefusedAsInitializationErrors(t *testing.T) {
	for _, p := range []store.PolicyConfiguration{
		{Queue: "a", Type: "org.apache.hadoop.yarn.server.federation.policies.manager.PriorityBroadcastPolicyManager"},
		{Queue: "a", Type: federation.WeightedHomePolicyManager, Params: []byte(`{"routerPolicyWeights":{"entry":[]}}`)},
		{Queue: "a", Type: federation.WeightedHomePolicyManager, Params: []byte(`not json`)},
	} {
		if _, err := newRouterPolicy(p); !errors.Is(err, yarnerr.FederationPolicyInitialization) {
			t.Errorf("%s %s: err %v, want FederationPolicyInitializationException", p.Type, p.Params, err)
		}
	}
}

func TestWeightedPolicyInfoReadsYARNsJSON(t *testing.T) {
	tests := []struct {
		name string
		json string
		want map[string]float64
	}{
		{"YARN's documented example", `{"routerPolicyWeights":{"entry":[{"key":{"id":"SC-2"},"value":"0.3"},{"key":{"id":"SC-1"},"value":"0.7"}]},"amrmPolicyWeights":{"entry":[{"key":{"id":"SC-2"},"value":"0.4"}]},"headroomAlpha":"1.0"}`,
			map[string]float64{"SC-1": 0.7, "SC-2": 0.3}},
		{"one entry as an object, the weight a number", `{"routerPolicyWeights":{"entry":{"key":{"id":"SC-1"},"value":1}}}`, map[string]float64{"SC-1": 1}},
		{"no router weights", `{"headroomAlpha":"1.0"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWeightedPolicyInfo([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.RouterWeights) != len(tt.want) {
				t.Fatalf("weights %v, want %v", got.RouterWeights, tt.want)
			}
			for id, w := range tt.want {
				if d := got.RouterWeights[id] - w; d > 1e-6 || d < -1e-6 {
					t.Errorf("weight of %s = %v, want %v", id, got.RouterWeights[id], w)
				}
			}
		})
	}
	for _, bad := range []string{`{"routerPolicyWeights":{"entry":[{"key":{},"value":"1"}]}}`, `{"routerPolicyWeights":{"entry":[{"key":{"id":"a"},"value":"x"}]}}`, `[`} {
		if _, err := ParseWeightedPolicyInfo([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	if _, err := ParseWeightedPolicyInfo(make([]byte, MaxPolicyParams+1)); err == nil {
		t.Error("parameters over the limit were read")
	}
}

// Policy parameters are read from the store, where anyone allowed to set
// a policy (the Router admin protocol, kubectl) writes them.
func FuzzParseWeightedPolicyInfo(f *testing.F) {
	f.Add([]byte(`{"routerPolicyWeights":{"entry":[{"key":{"id":"SC-2"},"value":"0.3"}]},"headroomAlpha":"1.0"}`))
	f.Add([]byte(`{"routerPolicyWeights":{"entry":{"key":{"id":"a"},"value":1e308}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseWeightedPolicyInfo(b)
		if err != nil {
			return
		}
		p, err := newRouterPolicy(store.PolicyConfiguration{Queue: "q", Type: federation.WeightedHomePolicyManager, Params: b})
		if err != nil {
			return
		}
		ids := make([]string, 0, len(info.RouterWeights))
		for id := range info.RouterWeights {
			ids = append(ids, id)
		}
		got, err := p.home(active(ids...), nil, &seqRand{floats: []float64{0.999999}})
		if err == nil && info.RouterWeights[got] <= 0 {
			t.Fatalf("picked %q of weight %v", got, info.RouterWeights[got])
		}
	})
}
