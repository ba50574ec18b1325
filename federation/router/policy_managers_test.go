package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
)

func managed(manager string, weights map[string]string) store.PolicyConfiguration {
	p := weighted(weights)
	p.Type = manager
	return p
}

// withMemory is active sub-clusters whose heartbeats reported the
// available memory given, in MB.
func withMemory(mb map[string]string) []store.SubClusterInfo {
	var out []store.SubClusterInfo
	for _, id := range []string{"sc1", "sc2", "sc3"} {
		if m, ok := mb[id]; ok {
			out = append(out, store.SubClusterInfo{ID: id, State: store.StateRunning,
				Capability: `{"clusterMetrics":{"appsPending":0,"availableMB":` + m + `}}`})
		}
	}
	return out
}

func TestManagedRouterPoliciesRouteAsYARNsPoliciesOfTheSameName(t *testing.T) {
	prio := func(w map[string]string) store.PolicyConfiguration {
		return managed(federation.PriorityBroadcastPolicyManager, w)
	}
	load := func(w map[string]string) store.PolicyConfiguration {
		return managed(federation.LoadBasedPolicyManager, w)
	}
	hash := store.PolicyConfiguration{Queue: "*", Type: federation.HashBroadcastPolicyManager}
	locality := managed(federation.WeightedLocalityPolicyManager, map[string]string{"sc1": "0.25", "sc2": "0.75"})
	tests := []struct {
		name      string
		policy    store.PolicyConfiguration
		queue     string
		active    []store.SubClusterInfo
		blacklist map[string]bool
		rand      *seqRand
		want      string
		wantErr   error
	}{
		{"priority picks the highest weight", prio(map[string]string{"sc1": "0.2", "sc2": "0.7", "sc3": "0.1"}), "q", active("sc1", "sc2", "sc3"), nil, &seqRand{}, "sc2", nil},
		{"priority skips a blacklisted favourite", prio(map[string]string{"sc1": "0.2", "sc2": "0.7"}), "q", active("sc1", "sc2"), map[string]bool{"sc2": true}, &seqRand{}, "sc1", nil},
		{"priority skips an inactive favourite", prio(map[string]string{"sc1": "0.2", "sc3": "0.9"}), "q", active("sc1", "sc2"), nil, &seqRand{}, "sc1", nil},
		{"priority breaks a tie by id", prio(map[string]string{"sc2": "0.5", "sc1": "0.5"}), "q", active("sc1", "sc2"), nil, &seqRand{}, "sc1", nil},
		{"priority never picks a zero weight", prio(map[string]string{"sc1": "0", "sc2": "0"}), "q", active("sc1", "sc2"), nil, &seqRand{}, "", yarnerr.FederationPolicy},
		{"load picks the most available memory", load(map[string]string{"sc1": "1", "sc2": "1", "sc3": "1"}), "q", withMemory(map[string]string{"sc1": "2048", "sc2": "8192", "sc3": "4096"}), nil, &seqRand{}, "sc2", nil},
		{"load ignores a sub-cluster of weight 0", load(map[string]string{"sc1": "1", "sc2": "0"}), "q", withMemory(map[string]string{"sc1": "2048", "sc2": "8192"}), nil, &seqRand{}, "sc1", nil},
		{"load ignores a sub-cluster without a weight", load(map[string]string{"sc1": "1"}), "q", withMemory(map[string]string{"sc1": "0", "sc2": "8192"}), nil, &seqRand{}, "sc1", nil},
		{"load skips the blacklist", load(map[string]string{"sc1": "1", "sc2": "1"}), "q", withMemory(map[string]string{"sc1": "2048", "sc2": "8192"}), map[string]bool{"sc2": true}, &seqRand{}, "sc1", nil},
		{"load without a weight-1 candidate", load(map[string]string{"sc1": "0", "sc2": "1"}), "q", withMemory(map[string]string{"sc1": "2048", "sc2": "8192"}), map[string]bool{"sc2": true}, &seqRand{}, "", yarnerr.FederationPolicy},
		{"load of a sub-cluster that never heartbeat", load(map[string]string{"sc1": "1"}), "q", active("sc1"), nil, &seqRand{}, "", yarnerr.YarnException},
		{"hash of the default queue over three", hash, "default", active("sc3", "sc1", "sc2"), nil, &seqRand{}, "sc1", nil},
		{"hash of the default queue over two", hash, "default", active("sc1", "sc2"), nil, &seqRand{}, "sc2", nil},
		{"hash of a queue of negative Java hash", hash, "queue-😀", active("sc1", "sc2", "sc3"), nil, &seqRand{}, "sc2", nil},
		{"hash of Integer.MIN_VALUE", hash, "polygenelubricants", active("sc1", "sc2", "sc3"), nil, &seqRand{}, "sc3", nil},
		{"hash over the candidates left by the blacklist", hash, "default", active("sc1", "sc2", "sc3"), map[string]bool{"sc1": true}, &seqRand{}, "sc3", nil},
		{"hash with nothing left", hash, "default", active("sc1"), map[string]bool{"sc1": true}, &seqRand{}, "", yarnerr.FederationPolicy},
		{"reject refuses with sub-clusters to spare", store.PolicyConfiguration{Queue: "q", Type: federation.RejectAllPolicyManager}, "q", active("sc1", "sc2"), nil, &seqRand{}, "", yarnerr.FederationPolicy},
		{"locality without a machine list draws by weight, low", locality, "q", active("sc1", "sc2"), nil, &seqRand{floats: []float64{0.2}}, "sc1", nil},
		{"locality without a machine list draws by weight, high", locality, "q", active("sc1", "sc2"), nil, &seqRand{floats: []float64{0.3}}, "sc2", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newRouterPolicy(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			got, err := forSubmission(p, Submission{Application: "application_1_0001", Queue: tt.queue}, nil).home(tt.active, tt.blacklist, tt.rand)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("home = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRejectNamesTheQueueAndApplicationAsYARNDoes(t *testing.T) {
	p, err := newRouterPolicy(store.PolicyConfiguration{Queue: "*", Type: federation.RejectAllPolicyManager})
	if err != nil {
		t.Fatal(err)
	}
	_, err = forSubmission(p, Submission{Application: "application_1_0007", Queue: "etl"}, nil).home(active("sc1"), nil, &seqRand{})
	want := "The policy configured for this queue (etl) reject all routing requests by construction. Application application_1_0007 cannot be routed to any RM."
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want %q", err, want)
	}
}

func TestManagedPoliciesRefuseTheWeightsYARNRefuses(t *testing.T) {
	tests := []struct {
		name   string
		policy store.PolicyConfiguration
	}{
		{"priority without weights", managed(federation.PriorityBroadcastPolicyManager, nil)},
		{"locality without weights", managed(federation.WeightedLocalityPolicyManager, nil)},
		{"load without weights", managed(federation.LoadBasedPolicyManager, nil)},
		{"load with a weight neither 0 nor 1", managed(federation.LoadBasedPolicyManager, map[string]string{"sc1": "0.5"})},
		{"priority with unreadable weights", store.PolicyConfiguration{Queue: "a", Type: federation.PriorityBroadcastPolicyManager, Params: []byte("{")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newRouterPolicy(tt.policy); !errors.Is(err, yarnerr.FederationPolicyInitialization) {
				t.Errorf("err %v, want FederationPolicyInitializationException", err)
			}
		})
	}
}

func TestJavaStringHashMatchesStringHashCode(t *testing.T) {
	tests := []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"default", 1544803905},
		{"root.production", 63147333},
		{"queue-😀", -1162758241},
		{"polygenelubricants", -2147483648},
	}
	for _, tt := range tests {
		if got := javaStringHash(tt.s); got != tt.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// The Router hands a policy the submission's own queue and application,
// not the queue the store's policy is filed under.
func TestTheRouterRoutesHashAndRejectBySubmission(t *testing.T) {
	tests := []struct {
		name     string
		policy   store.PolicyConfiguration
		queue    string
		wantHome string
		wantErr  string
	}{
		{"a '*' hash policy hashes the submission's queue", store.PolicyConfiguration{Queue: "*", Type: federation.HashBroadcastPolicyManager}, "default", "sc2", ""},
		{"a queue without a name hashes as default", store.PolicyConfiguration{Queue: "*", Type: federation.HashBroadcastPolicyManager}, "", "sc2", ""},
		{"reject names the queue and the application", store.PolicyConfiguration{Queue: "etl", Type: federation.RejectAllPolicyManager}, "etl", "",
			"The policy configured for this queue (etl) reject all routing requests by construction. Application application_9_0001 cannot be routed to any RM."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := store.NewMemory(nil)
			rm1, rm2 := startRM(t, "sc1", 1), startRM(t, "sc2", 2)
			join(t, s, rm1, rm2)
			if err := s.SetPolicyConfiguration(t.Context(), tt.policy); err != nil {
				t.Fatal(err)
			}
			_, c := serveRouter(t, s, routerOptions{policy: store.PolicyConfiguration{Queue: "*", Type: federation.UniformBroadcastPolicyManager}})
			id := yarnid.ApplicationID{ClusterTimestamp: 9, ID: 1}
			err := c.SubmitApplication(t.Context(), submission(id.Proto(), tt.queue))
			if tt.wantErr != "" {
				if !errors.Is(err, yarnerr.FederationPolicy) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want FederationPolicyException %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if home, _ := s.GetApplicationHomeSubCluster(t.Context(), id.String()); home != tt.wantHome {
				t.Errorf("home %q, want %q", home, tt.wantHome)
			}
		})
	}
}

func TestLocalityRouterPolicyPlacesAnAMAskedOnANodeInTheNodesSubCluster(t *testing.T) {
	machines, err := federation.ReadMachineList(strings.NewReader("n1, sc1, r1\nn2, sc2, r2\nn3, sc3, r1\n"))
	if err != nil {
		t.Fatal(err)
	}
	policy := managed(federation.WeightedLocalityPolicyManager, map[string]string{"sc1": "0.5", "sc2": "0.5", "sc3": "0"})
	// A draw of 0.9 lands on sc2 by weight; a located AM that falls back
	// to the weights shows up as sc2.
	tests := []struct {
		name      string
		names     []string
		machines  *federation.MachineList
		active    []store.SubClusterInfo
		blacklist map[string]bool
		want      string
		wantErr   error
	}{
		{"an AM on a node goes to the node's sub-cluster", []string{"n1", "r1", "*"}, machines, active("sc1", "sc2", "sc3"), nil, "sc1", nil},
		{"the asks' order does not matter", []string{"*", "R1", "N1"}, machines, active("sc1", "sc2", "sc3"), nil, "sc1", nil},
		{"names are compared without case", []string{"N1", "r1", "*"}, machines, active("sc1", "sc2"), nil, "sc1", nil},
		{"an AM asking for ANY alone is placed by weight", []string{"*"}, machines, active("sc1", "sc2"), nil, "sc2", nil},
		{"an AM asking nothing is placed by weight", nil, machines, active("sc1", "sc2"), nil, "sc2", nil},
		{"a node the list does not know falls back to the weights", []string{"n9", "r1", "*"}, machines, active("sc1", "sc2"), nil, "sc2", nil},
		{"a rack the list does not know falls back to the weights", []string{"n1", "r9", "*"}, machines, active("sc1", "sc2"), nil, "sc2", nil},
		{"three asks without ANY fall back to the weights", []string{"n1", "r1", "n1"}, machines, active("sc1", "sc2"), nil, "sc2", nil},
		{"a node in a blacklisted sub-cluster falls back to the weights", []string{"n1", "r1", "*"}, machines, active("sc1", "sc2"), map[string]bool{"sc1": true}, "sc2", nil},
		{"a node in an inactive sub-cluster falls back to the weights", []string{"n1", "r1", "*"}, machines, active("sc2"), nil, "sc2", nil},
		{"a node in a sub-cluster of weight zero falls back to the weights", []string{"n3", "r1", "*"}, machines, active("sc1", "sc2", "sc3"), nil, "sc2", nil},
		{"without a machine list every node falls back to the weights", []string{"n1", "r1", "*"}, nil, active("sc1", "sc2"), nil, "sc2", nil},
		{"one located ask is refused", []string{"n1"}, machines, active("sc1", "sc2"), nil, "", yarnerr.FederationPolicy},
		{"two asks are refused", []string{"n1", "*"}, machines, active("sc1", "sc2"), nil, "", yarnerr.FederationPolicy},
		{"no candidate is refused", []string{"n1", "r1", "*"}, machines, active("sc1"), map[string]bool{"sc1": true}, "", yarnerr.FederationPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newRouterPolicy(policy)
			if err != nil {
				t.Fatal(err)
			}
			sub := Submission{Application: "application_1_0001", Queue: "q", AMResourceNames: tt.names}
			got, err := forSubmission(p, sub, tt.machines).home(tt.active, tt.blacklist, &seqRand{floats: []float64{0.9}})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("home %q, want %q", got, tt.want)
			}
		})
	}
}
