package gpg

import (
	"math"
	"testing"

	"github.com/knitdev/knit/federation"
)

func TestTargetWeightsScaleDownTheMostPendingAsLoadBasedGlobalPolicyDoes(t *testing.T) {
	policy := func(s federation.Scaling) LoadBased {
		return LoadBased{MinPending: 100, MaxPending: 1000, MinWeight: 0, MaxEdit: 3, Scaling: s}
	}
	tests := []struct {
		name    string
		policy  LoadBased
		pending map[string]int
		want    map[string]float64
	}{
		{"under the minimum keeps weight 1", policy(federation.ScalingLinear), map[string]int{"sc1": 100, "sc2": 0}, map[string]float64{"sc1": 1, "sc2": 1}},
		{"linear halfway", policy(federation.ScalingLinear), map[string]int{"sc1": 550, "sc2": 0}, map[string]float64{"sc1": 0.5, "sc2": 1}},
		{"at the maximum the minimum weight", LoadBased{MinPending: 100, MaxPending: 1000, MinWeight: 0.2, MaxEdit: 3, Scaling: federation.ScalingLinear}, map[string]int{"sc1": 5000, "sc2": 0}, map[string]float64{"sc1": 0.2, "sc2": 1}},
		{"linear respects the minimum weight", LoadBased{MinPending: 100, MaxPending: 1000, MinWeight: 0.2, MaxEdit: 3, Scaling: federation.ScalingLinear}, map[string]int{"sc1": 550}, map[string]float64{"sc1": 0.6}},
		{"quadratic", policy(federation.ScalingQuadratic), map[string]int{"sc1": 550}, map[string]float64{"sc1": 0.75}},
		{"log", policy(federation.ScalingLog), map[string]int{"sc1": 130}, map[string]float64{"sc1": (math.Log(900) - math.Log(30)) / math.Log(900)}},
		{"none", policy(federation.ScalingNone), map[string]int{"sc1": 550, "sc2": 0}, map[string]float64{"sc1": 1, "sc2": 1}},
		{"only the most loaded are edited", LoadBased{MinPending: 0, MaxPending: 10, MaxEdit: 1, Scaling: federation.ScalingLinear}, map[string]int{"sc1": 5, "sc2": 8}, map[string]float64{"sc1": 1, "sc2": 0.2}},
		{"all zero goes back to one", policy(federation.ScalingLinear), map[string]int{"sc1": 1000, "sc2": 2000}, map[string]float64{"sc1": 1, "sc2": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.TargetWeights(tt.pending)
			if len(got) != len(tt.want) {
				t.Fatalf("weights %v, want %v", got, tt.want)
			}
			for id, w := range tt.want {
				if math.Abs(got[id]-w) > 1e-6 {
					t.Errorf("weight of %s = %v, want %v", id, got[id], w)
				}
			}
		})
	}
}
