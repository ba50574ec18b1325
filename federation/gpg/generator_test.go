package gpg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
)

type fixedQueues map[string][]string

func (f fixedQueues) Queues(_ context.Context, sc store.SubClusterInfo) ([]string, error) {
	qs, ok := f[sc.ID]
	if !ok {
		return nil, errors.New("no scheduler")
	}
	return qs, nil
}

func seed(t *testing.T, pending map[string]string) *store.Memory {
	t.Helper()
	m := store.NewMemory(nil)
	ctx := t.Context()
	for id, p := range pending {
		info := store.SubClusterInfo{ID: id, AMRMServiceAddress: "h:1", ClientRMServiceAddress: "h:2", RMAdminServiceAddress: "h:3",
			RMWebServiceAddress: "h:4", State: store.StateRunning}
		if err := m.RegisterSubCluster(ctx, info); err != nil {
			t.Fatal(err)
		}
		capability := `{"clusterMetrics":{"availableMB":8192,"appsPending":` + p + `}}`
		if p == "" {
			capability = ""
		}
		if err := m.SubClusterHeartbeat(ctx, id, store.StateRunning, capability); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func routerWeights(t *testing.T, m *store.Memory, queue string) map[string]float64 {
	t.Helper()
	p, err := m.GetPolicyConfiguration(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	if p.Type != federation.WeightedLocalityPolicyManager {
		t.Fatalf("policy of %s is a %s", queue, p.Type)
	}
	info, err := router.ParseWeightedPolicyInfo(p.Params)
	if err != nil {
		t.Fatal(err)
	}
	return info.RouterWeights
}

func TestGenerateWritesEveryQueuesLoadBasedWeights(t *testing.T) {
	tests := []struct {
		name        string
		pending     map[string]string
		queues      fixedQueues
		blacklist   []string
		wantQueues  []string
		wantWeights map[string]float64
	}{
		{"the loaded sub-cluster weighs less", map[string]string{"sc1": "550", "sc2": "0"}, fixedQueues{"sc1": {"default"}, "sc2": {"default", "etl"}},
			nil, []string{"default", "etl"}, map[string]float64{"sc1": 0.5, "sc2": 1}},
		{"a blacklisted sub-cluster is not weighed", map[string]string{"sc1": "550", "sc2": "0"}, fixedQueues{"sc1": {"default"}},
			[]string{"sc1"}, []string{"default"}, map[string]float64{"sc2": 1}},
		{"a sub-cluster without metrics is not weighed", map[string]string{"sc1": "", "sc2": "0"}, fixedQueues{"sc2": {"default"}},
			nil, []string{"default"}, map[string]float64{"sc2": 1}},
		{"a sub-cluster without scheduler adds no queue", map[string]string{"sc1": "0", "sc2": "0"}, fixedQueues{"sc2": {"a"}},
			nil, []string{"a"}, map[string]float64{"sc1": 1, "sc2": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := seed(t, tt.pending)
			g, err := New(Config{Store: m, Queues: tt.queues, Blacklist: tt.blacklist, Interval: time.Hour,
				Policy: LoadBased{MinPending: 100, MaxPending: 1000, MaxEdit: 3, Scaling: federation.ScalingLinear}})
			if err != nil {
				t.Fatal(err)
			}
			written, err := g.Generate(t.Context())
			if err != nil || !slices.Equal(written, tt.wantQueues) {
				t.Fatalf("written %v, %v; want %v", written, err, tt.wantQueues)
			}
			for _, q := range tt.wantQueues {
				got := routerWeights(t, m, q)
				if len(got) != len(tt.wantWeights) {
					t.Fatalf("weights of %s %v, want %v", q, got, tt.wantWeights)
				}
				for id, w := range tt.wantWeights {
					if d := got[id] - w; d > 1e-6 || d < -1e-6 {
						t.Errorf("weight of %s in %s = %v, want %v", id, q, got[id], w)
					}
				}
			}
			// A second run with the same load rewrites nothing.
			if again, err := g.Generate(t.Context()); err != nil || len(again) != 0 {
				t.Errorf("second run wrote %v, %v", again, err)
			}
		})
	}
}

func TestGenerateKeepsAPolicyOfAnotherManager(t *testing.T) {
	m := seed(t, map[string]string{"sc1": "550", "sc2": "0"})
	mine := store.PolicyConfiguration{Queue: "default", Type: federation.RejectAllPolicyManager}
	if err := m.SetPolicyConfiguration(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Store: m, Queues: fixedQueues{"sc1": {"default"}}, Interval: time.Hour, Policy: LoadBased{MaxPending: 1000, MaxEdit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if written, err := g.Generate(t.Context()); err != nil || len(written) != 0 {
		t.Fatalf("written %v, %v", written, err)
	}
	if p, _ := m.GetPolicyConfiguration(t.Context(), "default"); p.Type != federation.RejectAllPolicyManager {
		t.Errorf("policy became %s", p.Type)
	}
}

func TestSchedulerQueuesAreEveryQueueBelowTheRoot(t *testing.T) {
	body := `{"scheduler":{"schedulerInfo":{"type":"capacityScheduler","queueName":"root","queues":{"queue":[
		{"queueName":"default"},{"queueName":"prod","queues":{"queue":[{"queueName":"etl"},{"queueName":"bi"}]}}]}}}}`
	got, err := parseSchedulerQueues(strings.NewReader(body))
	if want := []string{"default", "prod", "etl", "bi"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("queues %v, %v; want %v", got, err, want)
	}
	if _, err := parseSchedulerQueues(strings.NewReader(`{"scheduler":{"schedulerInfo":{"type":"fifoScheduler"}}}`)); err == nil {
		t.Error("a FIFO scheduler's queues were read")
	}
}
