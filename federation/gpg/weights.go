package gpg

import (
	"cmp"
	"math"
	"slices"

	"github.com/knitdev/knit/federation"
)

// LoadBased is LoadBasedGlobalPolicy's configuration.
type LoadBased struct {
	MinPending, MaxPending int
	MinWeight              float32
	MaxEdit                int
	Scaling                federation.Scaling
}

// TargetWeights is LoadBasedGlobalPolicy.getTargetWeights: every
// sub-cluster starts at weight 1; the MaxEdit with the most pending
// applications above MinPending are weighed down by Scaling, to MinWeight
// at MaxPending; were every weight 0, all go back to 1. Weights are
// float32 sums as Java's, so that YARN's and Knit's GPGs agree.
func (l LoadBased) TargetWeights(pending map[string]int) map[string]float64 {
	weights := make(map[string]float64, len(pending))
	ids := make([]string, 0, len(pending))
	for id := range pending {
		weights[id] = 1
		ids = append(ids, id)
	}
	// Most pending first; ties by id, where YARN's order is its HashMap's.
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(pending[b], pending[a]), cmp.Compare(a, b))
	})
	ids = ids[:min(max(l.MaxEdit, 0), len(ids))]
	for _, id := range ids {
		p := pending[id]
		switch {
		case p <= l.MinPending:
		case p < l.MaxPending:
			w := l.scaled(l.MaxPending-l.MinPending, p-l.MinPending)
			weights[id] = float64(w*(1-l.MinWeight) + l.MinWeight)
		default:
			weights[id] = float64(l.MinWeight)
		}
	}
	for _, w := range weights {
		if w > 0 {
			return weights
		}
	}
	for id := range weights {
		weights[id] = 1
	}
	return weights
}

// scaled is getWeightByScaling: 1 at no load, towards 0 at maxVal.
func (l LoadBased) scaled(maxVal, val int) float32 {
	switch l.Scaling {
	case federation.ScalingLinear:
		return float32(maxVal-val) / float32(maxVal)
	case federation.ScalingQuadratic:
		maxQ, q := math.Pow(float64(maxVal), 2), math.Pow(float64(val), 2)
		return float32(maxQ-q) / float32(maxQ)
	case federation.ScalingLog:
		maxL, l := math.Log(float64(maxVal)), math.Log(float64(val))
		return float32(maxL-l) / float32(maxL)
	}
	return 1
}
